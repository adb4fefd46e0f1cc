"""Runs and their records: a configuration trained by a runner (:mod:`.runners`), stored as a fingerprinted record
(:mod:`.records`, :mod:`.fingerprint`, :mod:`.code_reach`) and retrained to check it (:mod:`.record_check`).

May import: ``splits`` (a runner reads the committed class split its configuration names).
"""
MAY_IMPORT: tuple[str, ...] = ("splits",)
