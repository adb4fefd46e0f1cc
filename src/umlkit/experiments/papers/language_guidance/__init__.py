"""Language guidance (Roth, Vinyals, Akata, CVPR 2022). The paper's package: tables.yaml (declarations), config.py (runs, scores, job lists), chapter.py
(facts and views of its chapter); this module registers it and gives both modules one namespace."""
from __future__ import annotations

from functools import partial

from umlkit.experiments.papers._namespace import chapter_attribute
from umlkit.experiments.papers.language_guidance import config
from umlkit.experiments.registry import Paper, register_paper

ENTRY = register_paper(Paper(name="language_guidance", title="Language guidance (Roth, Vinyals, Akata, CVPR 2022)",
              claim_tables=config.TABLES, chapters=("language_guidance",),
              headline="Multisimilarity + ELG beats Multisimilarity (CUB)",
              job_lists={n: partial(config.job_list, n)
                         for n in ("omega_sweep", "tables", "semantic", "unified_sweep", "unified")}))


def __getattr__(name: str):
    """A name of config.py, else of chapter.py (imported on first use)."""
    return chapter_attribute(__name__, config, name)
