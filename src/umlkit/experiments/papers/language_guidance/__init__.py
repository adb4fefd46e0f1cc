"""Language guidance (Roth, Vinyals, Akata, CVPR 2022). The paper's package: tables.yaml (declarations), config.py
(runs, scores, row builders), language_store.py (its language files), wordnet_names.py (WordNet similarities of class
names for the word-hierarchy rows), chapter.py (facts and views of its chapter), ceiling_probe.py (the hard-world
probe of issue 61, run by tools/ceiling_probe.py, outside the book's records); this module registers it, with its job
lists, and gives the modules one namespace."""
from __future__ import annotations

from umlkit.experiments.papers._namespace import chapter_attribute
from umlkit.experiments.papers.language_guidance import config, wordnet_names  # noqa: F401
from umlkit.experiments.tables.registry import Paper, register_paper

ENTRY = register_paper(Paper(
    name="language_guidance", link="https://arxiv.org/abs/2203.08543",
    title="Language guidance (Roth, Vinyals, Akata, CVPR 2022)",
    claim_tables=config.TABLES, chapters=("language_guidance",),
    headline="Multisimilarity + ELG beats Multisimilarity (CUB)",
    job_lists={"omega_sweep": config.omega_jobs, "tables": config.table_jobs, "semantic": config.semantic_jobs,
               "unified_sweep": config.unified_sweep_jobs, "unified": config.unified_jobs}))


def __getattr__(name: str):
    """A name of config.py, else of chapter.py (imported on first use)."""
    return chapter_attribute(__name__, config, name)
