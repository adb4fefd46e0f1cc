"""PUMA (Kim, Kim, Kwak, WACV 2025). The paper's package: tables.yaml (declarations), config.py (runs, scores, job lists), chapter.py
(facts and views of its chapter); this module registers it and gives both modules one namespace."""
from __future__ import annotations

from functools import partial

from umlkit.experiments.papers._namespace import chapter_attribute
from umlkit.experiments.papers.puma import config
from umlkit.experiments.registry import Paper, register_paper

ENTRY = register_paper(Paper(name="puma", title="PUMA (Kim, Kim, Kwak, WACV 2025)", claim_tables=config.claim_tables,
              chapters=("puma", "puma_ablations"), headline="PUMA beats unified full fine-tuning (Harmonic)",
              job_lists={n: partial(config.job_list, n) for n in ("tuning", "few_shot_tuning", "few_shot", "tables",
                                                                  "second_tables", "budget")}))


def __getattr__(name: str):
    """A name of config.py, else of chapter.py (imported on first use)."""
    return chapter_attribute(__name__, config, name)
