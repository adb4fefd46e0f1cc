"""The regime map (this book's own experiment, on PUMA's configuration). The package: ``tables.yaml``
(declarations), ``config.py`` (runs, scores, job lists), ``chapter.py`` (facts and views of its chapter); this module
registers it and gives both modules one namespace."""
from __future__ import annotations

from umlkit.experiments.papers._namespace import chapter_attribute
from umlkit.experiments.papers.regime import config, edition2, edition3, edition3_views  # noqa: F401 - the views
from umlkit.experiments.tables.registry import Paper, register_paper


def claim_tables(profile: str = "quick") -> dict:
    """The three editions' tables (quick profile only: their shifted splits are UML-Mini's)."""
    later = {edition2.TABLE_NAME: edition2.MAP2(), edition3.TABLE_NAME: edition3.MAP3()} if profile == "quick" else {}
    return {**config.claim_tables(profile), **later}


ENTRY = register_paper(Paper(
    name="regime", title="Regime map (this book, on PUMA's configuration)", claim_tables=claim_tables,
    records="puma", chapters=("regime_map",), own=True,
    headline="combinations, k=all: PUMA beats full fine-tuning (Harmonic R@1)",
    job_lists={"map": config.map_jobs, "map2": edition2.map2_jobs, "map2-tuning": edition2.tuning_jobs,
               "map3": edition3.map3_jobs, "map3-tuning": edition3.tuning_jobs}))


def __getattr__(name: str):
    """A name of config.py, else of chapter.py (imported on first use)."""
    return chapter_attribute(__name__, config, name)
