"""The regime map (this book's own experiment, on PUMA's configuration). The package: ``tables.yaml``
(declarations), ``config.py`` (runs, scores, job lists), ``chapter.py`` (facts and views of its chapter); this module
registers it and gives both modules one namespace."""
from __future__ import annotations

from functools import partial

from umlkit.experiments.papers._namespace import chapter_attribute
from umlkit.experiments.papers.regime import config
from umlkit.experiments.registry import Paper

ENTRY = Paper(name="regime", title="Regime map (this book, on PUMA's configuration)", claim_tables=config.claim_tables,
              records="puma", chapters=("regime_map",),
              headline="combinations, k=all: PUMA beats full fine-tuning (Harmonic R@1)",
              job_lists={"map": partial(config.job_list, "map")})


def __getattr__(name: str):
    """A name of config.py, else of chapter.py (imported on first use)."""
    return chapter_attribute(__name__, config, name)
