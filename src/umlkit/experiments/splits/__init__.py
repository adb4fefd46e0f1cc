"""Class splits, shared by every paper that trains on a split: the committed train/test class splits of the
single-source
benchmarks (:mod:`.committed`) and the service that makes splits from features or attributes (:mod:`.features`).

The lowest room: it imports no other room of ``umlkit.experiments`` (the library below it only).
"""
MAY_IMPORT: tuple[str, ...] = ()
