"""VPTSP (Ren et al., ICLR 2024). The paper's package: tables.yaml (declarations), config.py (runs, scores, row
builders), chapter.py (facts and views of its chapter); this module registers it, with its job lists, and gives both
modules one namespace."""
from __future__ import annotations

from umlkit.experiments.papers._namespace import chapter_attribute
from umlkit.experiments.papers.vptsp import config
from umlkit.experiments.tables.registry import Paper, register_paper

ENTRY = register_paper(Paper(
    name="vptsp", link="https://arxiv.org/abs/2402.02340",
    title="VPTSP (Ren et al., ICLR 2024)", claim_tables=config.TABLES, chapters=("vptsp",),
    headline="VPTSP-G beats Hyp-ViT (beats full fine-tuning) (CUB, R@1)",
    job_lists={"lr_sweep": config.sweep_jobs, "table8_tuning": config.table8_sweep_jobs,
               "tables": config.table_jobs}))


def __getattr__(name: str):
    """A name of config.py, else of chapter.py (imported on first use)."""
    return chapter_attribute(__name__, config, name)
