"""Recipes: how a paper-independent protocol becomes run configurations. The single-source recipe (:mod:`.source`), the
unified eight-source recipe (:mod:`.unified`), the papers' configuration files (:mod:`.paper_configs`) and the tuned
values their sweeps chose (:mod:`.tuning`).

May import: ``runs`` (a tuned value is read from its sweep's records), ``splits``.
"""
MAY_IMPORT: tuple[str, ...] = ("runs", "splits")
