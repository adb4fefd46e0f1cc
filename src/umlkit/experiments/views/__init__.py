"""Views: what a reader sees of tables and claims. Glued prose (:mod:`.prose`), figures (:mod:`.plots`,
:mod:`.forest`), the scoreboard (:mod:`.scoreboard`), a chapter's report card (:mod:`.report_card`) and the chapter
helper every paper chapter uses (:mod:`.chapter`).

May import: ``tables``, ``claims``, ``recipes``, ``runs``. Not ``ops``: a view reads stored records, it starts no job.
"""
MAY_IMPORT: tuple[str, ...] = ("tables", "claims", "recipes", "runs", "splits")
