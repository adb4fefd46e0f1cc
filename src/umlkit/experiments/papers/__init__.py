"""One package per paper (and one for the book's own regime map), all of the same shape:

* ``tables.yaml``: what the paper declares - its rows, claims, reasons a cell is not measured, sweep grids (data);
* ``config.py``: the paper's own logic - how a row becomes a run configuration, how a record becomes table cells,
  which runs a job list trains;
* ``chapter.py``: the facts and views its chapter shows (imported on first use: nothing else needs it);
* ``__init__.py``: the registry entry (:class:`umlkit.experiments.tables.registry.Paper`) and one namespace over both
  modules, so a chapter writes ``from umlkit.experiments.papers import puma`` and ``puma.<name>``.

No paper package imports another: what two papers share (class splits, the single-source and unified recipes, tuned
values) lives in the shared rooms of ``umlkit.experiments`` (``splits``, ``recipes``, ...); what is one paper's alone
stays in its package (ooDML's split making, language guidance's language file store).
"""
