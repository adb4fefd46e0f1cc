"""Modules that one non-paper chapter uses: the benchmark's statistics and example figure (:mod:`.benchmark`, UML-Mini),
the zero-shot check of the shipped ViT (:mod:`.zero_shot`), parameter budgets (:mod:`.budgets`) and benchmark files
(:mod:`.bench_results`, the evaluation chapter).

May import: ``tables`` (a page sets its numbers beside the paper's cells), ``runs``, ``recipes``, ``splits``.
"""
MAY_IMPORT: tuple[str, ...] = ("tables", "recipes", "runs", "splits")
