"""PUMA (Kim, Kim, Kwak, WACV 2025). The paper's package: tables.yaml (declarations), config.py (runs, scores, row
builders), chapter.py (facts and views of its chapter); this module registers it, with its job lists, and gives both
modules one namespace."""
from __future__ import annotations

from umlkit.experiments.papers._namespace import chapter_attribute
from umlkit.experiments.papers.puma import config
from umlkit.experiments.tables.registry import Paper, register_paper

ENTRY = register_paper(Paper(
    name="puma", link="https://arxiv.org/abs/2309.08944",
    title="PUMA (Kim, Kim, Kwak, WACV 2025)", claim_tables=config.claim_tables,
    chapters=("puma", "puma_ablations"), headline="PUMA beats unified full fine-tuning (Harmonic)",
    job_lists={"tuning": config.sweep_jobs, "few_shot_tuning": config.few_shot_tuning_jobs,
               "few_shot": config.few_shot_jobs, "tables": config.table_jobs,
               "second_tables": config.second_table_jobs, "budget": config.budget_jobs}))


def __getattr__(name: str):
    """A name of config.py, else of chapter.py (imported on first use)."""
    return chapter_attribute(__name__, config, name)
