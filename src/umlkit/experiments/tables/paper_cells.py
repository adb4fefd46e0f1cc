"""The papers' numbers: every table of the four papers as tidy CSV in ``data/paper_tables/`` (one row per cell:
table, section, method, setting, dataset, metric, value, std, note), carried over from the papers with the errata
listed in that folder's README. Chapters compare what they measure against these rows; nothing here is a result.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from umlkit._paths import repo_folder

__all__ = ["paper_names", "paper_tables_dir", "paper_table_file", "paper_table"]

# Cells a table's text lost that another table of the same paper prints for the same runs: (paper, table) ->
# (the table that has them, the metrics to take). Language guidance: Table S1 is Table 2 with two more metrics
# (the same runs, identical R@1 wherever both print one); Table 2's text lacks Margin on CUB and SOP and
# MS + S2SD + ELG on CUB and SOP.
FILL_FROM = {("language_guidance", "Table 2"): ("Table S1", ("R@1",))}
# (paper, table) -> (metric, baseline method, derived metric): cells derived from the table's own printed values, each
# a row's value divided by the baseline's at the same setting (VPTSP Table 10: step time as a multiple of full
# fine-tuning's, the number that compares across machines)
RATIO_OF = {("vptsp", "Table 10"): ("Latency(ms)", "Full Fine-tuning (PA)", "Latency (x full)")}


def paper_tables_dir() -> Path:
    return repo_folder("data", "paper_tables", what="the papers' tables")


def _outside_files() -> dict[str, Path]:
    """``{paper: its paper_table.csv}`` of the paper packages outside the source tree (``UMLKIT_PAPERS``, found by
    the registry's :func:`~umlkit.experiments.tables.registry.paper_packages`)."""
    from umlkit.experiments.tables.registry import paper_packages
    return {folder.name: folder / "paper_table.csv" for module, folder in paper_packages()
            if "." not in module and (folder / "paper_table.csv").is_file()}


def paper_names() -> list[str]:
    """Every paper with a table file: ``data/paper_tables/<paper>.csv``, then the outside packages' own."""
    return [*sorted(p.stem for p in paper_tables_dir().glob("*.csv")), *_outside_files()]


def paper_table_file(paper: str) -> Path:
    """The CSV of ``paper``'s tables; an unknown paper is an error naming the known ones."""
    path = paper_tables_dir() / f"{paper}.csv"
    if path.is_file():
        return path
    if paper in _outside_files():
        return _outside_files()[paper]
    raise ValueError(f"paper must be one of {paper_names()} (a file data/paper_tables/<paper>.csv, or paper_table.csv "
                     f"in a UMLKIT_PAPERS package), got {paper!r}")


CELL_KEYS = ["table", "section", "method", "setting", "dataset", "metric"]   # what names one paper cell


def _read_checked(path: Path) -> pd.DataFrame:
    """A paper-table CSV, refused (file, lines, cell) when a cell is given twice or a value is not a number: a doubled
    row would be measured and judged twice, a text value silently read as missing."""
    df = pd.read_csv(path, dtype={"setting": str, "section": str, "note": str})
    missing = [c for c in [*CELL_KEYS, "value"] if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: column(s) {missing} missing; a paper table has {[*CELL_KEYS, 'value']}")
    doubled = df[df.duplicated(CELL_KEYS, keep=False)]
    if len(doubled):
        first = doubled.iloc[0]
        lines = [int(i) + 2 for i in doubled.index[(doubled[CELL_KEYS].fillna("") ==
                                                     first[CELL_KEYS].fillna("")).all(axis=1)]]
        cell = ", ".join(f"{k}={first[k]}" for k in CELL_KEYS if pd.notna(first[k]))
        raise ValueError(f"{path}: lines {lines} give the same cell twice ({cell}); keep one")
    values = pd.to_numeric(df["value"], errors="coerce")
    bad = df.index[values.isna() & df["value"].notna()]
    if len(bad):
        raise ValueError(f"{path}: line {int(bad[0]) + 2}: value {df['value'][bad[0]]!r} is not a number")
    return df.assign(value=values)


def paper_table(paper: str, table: str | None = None, missing_ok: bool = False) -> pd.DataFrame:
    """Rows of one paper (optionally one table, e.g. ``"Table 2"``). A table the paper does not have is an error,
    or, with ``missing_ok`` (the book's own tables beyond the paper, e.g. controls), an empty frame."""
    df = _read_checked(paper_table_file(paper))
    if table is not None:
        df = df[df["table"] == table]
        if df.empty and not missing_ok:
            raise ValueError(f"{paper} has no rows for {table!r}")
        if (paper, table) in FILL_FROM:
            df = _fill(df, paper, table)
        if (paper, table) in RATIO_OF:
            df = _ratio(df, paper, table)
    return df.reset_index(drop=True)


def _ratio(df: pd.DataFrame, paper: str, table: str) -> pd.DataFrame:
    """``df`` plus :data:`RATIO_OF`'s derived cells (noted as derived, never typed)."""
    metric, base, derived = RATIO_OF[(paper, table)]
    src = df[df["metric"] == metric]
    ref = src[src["method"] == base].set_index(["setting", "dataset"])["value"]
    add = src.assign(metric=derived, std=float("nan"),
                     value=src["value"].to_numpy() / ref.reindex(list(zip(src["setting"], src["dataset"]))).to_numpy(),
                     note=f"derived: {metric} divided by {base}'s at the same setting")
    return pd.concat([df, add], ignore_index=True)


def _fill(df: pd.DataFrame, paper: str, table: str) -> pd.DataFrame:
    """``df`` (one table) plus the cells :data:`FILL_FROM` names that it lacks, noted as taken from the other table."""
    other, metrics = FILL_FROM[(paper, table)]
    keys = ["section", "method", "setting", "dataset", "metric"]
    src = paper_table(paper, other)
    src = src[src["metric"].isin(metrics)]
    have = set(map(tuple, df[keys].fillna("").astype(str).to_numpy()))
    add = src[[tuple(r) not in have for r in src[keys].fillna("").astype(str).to_numpy()]]
    add = add.assign(table=table, note=f"missing in {table}'s text; the same runs' value from {other}")
    return pd.concat([df, add], ignore_index=True)
