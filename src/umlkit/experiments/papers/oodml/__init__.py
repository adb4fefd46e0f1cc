"""ooDML (Milbich, Roth et al., NeurIPS 2021). The paper's package: tables.yaml (declarations), config.py (runs, scores, job lists), chapter.py
(facts and views of its chapter); this module registers it and gives both modules one namespace."""
from __future__ import annotations

from functools import partial

from umlkit.experiments.papers._namespace import chapter_attribute
from umlkit.experiments.papers.oodml import config
from umlkit.experiments.registry import Paper, register_paper

ENTRY = register_paper(Paper(name="oodml", title="ooDML (Milbich, Roth et al., NeurIPS 2021)", claim_tables=config.TABLES,
              chapters=("oodml",), headline="Margin (D): R@1 falls from the default split to the hardest (CUB)",
              job_lists={n: partial(config.job_list, n) for n in ("lr_sweep", "lr_sweep_cars", "lr_sweep_sop", "tables")}))


def __getattr__(name: str):
    """A name of config.py, else of chapter.py (imported on first use)."""
    return chapter_attribute(__name__, config, name)
