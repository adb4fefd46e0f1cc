"""ooDML (Milbich, Roth et al., NeurIPS 2021). The paper's package: tables.yaml (declarations), config.py (runs,
scores, row builders), chapter.py (facts and views of its chapter); this module registers it, with its job lists,
and gives both modules one namespace."""
from __future__ import annotations

from umlkit.experiments.papers._namespace import chapter_attribute
from umlkit.experiments.papers.oodml import config
from umlkit.experiments.tables.registry import Paper, register_paper

ENTRY = register_paper(Paper(
    name="oodml", link="https://arxiv.org/abs/2107.09562",
    title="ooDML (Milbich, Roth et al., NeurIPS 2021)", claim_tables=config.TABLES,
    chapters=("oodml",), headline="Margin (D): R@1 falls from the default split to the hardest (CUB)",
    job_lists={"lr_sweep": config.sweep_jobs, "lr_sweep_cars": config.cars_sweep_jobs,
               "lr_sweep_sop": config.sop_sweep_jobs, "tables": config.table_jobs}))


def __getattr__(name: str):
    """A name of config.py, else of chapter.py (imported on first use)."""
    return chapter_attribute(__name__, config, name)
