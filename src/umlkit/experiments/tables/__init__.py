"""Tables: a paper's declared table (:mod:`.table`: rows, claims, measuring and comparing with the paper; its claims
against the measured cells, :mod:`.claim_check`), read from
its ``tables.yaml`` (:mod:`.declarations`, :mod:`.builder`), the paper's own cells (:mod:`.paper_cells`), readable
labels (:mod:`.labels`), sanity floors (:mod:`.floors`) and the paper registry (:mod:`.registry`).

May import: ``claims`` (a table checks its claims), ``recipes`` (a row's tuned rate), ``runs`` (its records),
``splits``.
"""
MAY_IMPORT: tuple[str, ...] = ("claims", "recipes", "runs", "splits")
