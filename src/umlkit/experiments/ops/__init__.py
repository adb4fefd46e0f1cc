"""Operations: training a table's missing records in workers (:mod:`.table_runs`), on Slurm (:mod:`.cluster`), with
GPU-time
estimates (:mod:`.gpu_budget`), checks before a long run (:mod:`.preflight`) and the identity of pinned weights
(:mod:`.weights_identity`).

May import: ``tables``, ``claims``, ``recipes``, ``runs``, ``splits``. Not ``views``: a job plan shows nothing.
"""
MAY_IMPORT: tuple[str, ...] = ("tables", "claims", "recipes", "runs", "splits")
