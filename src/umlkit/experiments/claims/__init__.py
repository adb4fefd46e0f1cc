"""Claims and their verdicts: the tests and the family rule (:mod:`.verdicts`), the frozen verdict plan its alpha,
looks and margins come from (:mod:`.plan`), the simulation of the error rate it keeps (:mod:`.simulation`), what a
verdict rests on (:mod:`.evidence`), and the extra seeds planned for open claims (:mod:`.more_seeds`,
:mod:`.seed_plan`).

May import: ``runs`` (the seed plans count stored records). Not ``tables``: a verdict is computed from numbers, whatever
table they came from.
"""
MAY_IMPORT: tuple[str, ...] = ("runs",)
