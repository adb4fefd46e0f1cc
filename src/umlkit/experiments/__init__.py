"""umlkit.experiments: the runs behind each table. One package per paper under ``papers/`` and the services they share,
in rooms each of which may import only the rooms below it (``MAY_IMPORT`` in its ``__init__``, tested by
``tests/test_architecture.py``):

========== ============================================================ ==========================================
room       what it holds                                                may import
========== ============================================================ ==========================================
splits     committed class splits; making splits from features          (nothing above the library)
runs       runners, records, fingerprints, record checks                splits
recipes    single-source and unified recipes, configs, tuned values    runs, splits
claims     verdicts, evidence, seed plans                               runs
tables     declared tables, paper cells, labels, floors, the registry   claims, recipes, runs, splits
views      prose, figures, scoreboard, report card, chapter helper      tables and below
ops        training jobs in workers and on Slurm, budgets, preflight    tables and below
pages      modules one non-paper chapter uses                           tables, recipes, runs, splits
papers     one package per paper (imports any room, never another paper)
========== ============================================================ ==========================================

A new function goes to the lowest room whose imports it needs.
"""
