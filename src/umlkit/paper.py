"""The papers' numbers: every table of the four papers as tidy CSV in ``data/paper_tables/`` (one row per cell:
table, section, method, setting, dataset, metric, value, std, note), carried over from the papers with the errata
listed in that folder's README. Chapters compare what they measure against these rows; nothing here is a result.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from umlkit._paths import repo_folder

__all__ = ["PAPERS", "paper_tables_dir", "paper_table"]

PAPERS = ("puma", "oodml", "vptsp", "language_guidance")


def paper_tables_dir() -> Path:
    return repo_folder("data", "paper_tables", what="the papers' tables")


def paper_table(paper: str, table: str | None = None, missing_ok: bool = False) -> pd.DataFrame:
    """Rows of one paper (optionally one table, e.g. ``"Table 2"``). A table the paper does not have is an error,
    or, with ``missing_ok`` (the book's own tables beyond the paper, e.g. controls), an empty frame."""
    if paper not in PAPERS:
        raise ValueError(f"paper must be one of {PAPERS}, got {paper!r}")
    df = pd.read_csv(paper_tables_dir() / f"{paper}.csv", dtype={"setting": str, "section": str, "note": str})
    if table is not None:
        df = df[df["table"] == table]
        if df.empty and not missing_ok:
            raise ValueError(f"{paper} has no rows for {table!r}")
    return df.reset_index(drop=True)
