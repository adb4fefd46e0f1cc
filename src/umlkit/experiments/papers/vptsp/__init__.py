"""VPTSP (Ren et al., ICLR 2024). The paper's package: tables.yaml (declarations), config.py (runs, scores, job lists), chapter.py
(facts and views of its chapter); this module registers it and gives both modules one namespace."""
from __future__ import annotations

from functools import partial

from umlkit.experiments.papers._namespace import chapter_attribute
from umlkit.experiments.papers.vptsp import config
from umlkit.experiments.registry import Paper, register_paper

ENTRY = register_paper(Paper(name="vptsp", title="VPTSP (Ren et al., ICLR 2024)", claim_tables=config.TABLES, chapters=("vptsp",),
              headline="VPTSP-G beats Hyp-ViT (beats full fine-tuning) (CUB, R@1)",
              job_lists={n: partial(config.job_list, n) for n in ("lr_sweep", "table8_tuning", "tables")}))


def __getattr__(name: str):
    """A name of config.py, else of chapter.py (imported on first use)."""
    return chapter_attribute(__name__, config, name)
