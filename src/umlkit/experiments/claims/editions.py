"""The board's editions: the first edition's verdicts, shown beside a claim whose records are stale.

``data/boards/first_edition.csv`` is the board as the first edition's records gave it (computed once, at commit
e98598cf0, under the verdict plan of 2026-12-03, before the faithful-methods changes staled most records): paper, table,
claim, verdict, gap and 95 % interval, seeds, metric. While a claim reads stale records its verdict is "stale
records" (no verdict rests on them); the first edition's verdict stands beside it, labelled as such, so a reader
still sees what the previous records said.
"""
from __future__ import annotations

import functools

import pandas as pd

from umlkit._paths import repo_root
from umlkit.experiments.claims.verdicts import STALE

__all__ = ["effective_verdicts", "first_edition", "retrain_reason", "with_first_edition"]


@functools.lru_cache(maxsize=1)
def first_edition() -> pd.DataFrame:
    """The first edition's board (empty when the file is absent)."""
    path = repo_root() / "data" / "boards" / "first_edition.csv"
    if not path.is_file():
        return pd.DataFrame(columns=["paper", "table", "claim", "verdict"])
    return pd.read_csv(path, keep_default_na=False)


def with_first_edition(claims: pd.DataFrame, paper: str | None = None) -> pd.DataFrame:
    """``claims`` with ``first edition``: the first edition's verdict of each stale claim ("" for the others), matched
    on paper (the frame's column, else ``paper``), table and claim."""
    if claims.empty or "verdict" not in claims:
        return claims
    old = first_edition()
    papers = claims["paper"] if "paper" in claims else pd.Series(paper, index=claims.index)
    tables = claims["table"] if "table" in claims else pd.Series("", index=claims.index)
    lookup = {(p, t, c): v for p, t, c, v in zip(old["paper"], old["table"], old["claim"], old["verdict"])}
    found = [lookup.get((p, t, c), "") for p, t, c in zip(papers, tables, claims["claim"])]
    return claims.assign(**{"first edition": [f if v == STALE else "" for f, v in zip(found, claims["verdict"])]})


def effective_verdicts(claims: pd.DataFrame) -> pd.Series:
    """Each claim's verdict, where the current one is "stale records" the first edition's (the board's, Holm-adjusted)
    or else the one its stale records give (``verdict on stale records``, unadjusted): what a chapter's prose, written
    on the first edition's records, describes until the retrain."""
    empty = pd.Series("", index=claims.index)
    first = claims["first edition"].fillna("") if "first edition" in claims else empty
    raw = claims["verdict on stale records"].fillna("") if "verdict on stale records" in claims else empty
    old = first.where(first != "", raw)
    return claims["verdict"].where(~((claims["verdict"] == STALE) & (old != "")), old)


@functools.lru_cache(maxsize=1)
def _retraining() -> dict:
    from umlkit._yaml import read_yaml
    return read_yaml(repo_root() / "configs" / "second_edition.yaml").get("in_progress") or {}


def retrain_reason(paper: str, table: str, whole_paper: bool = True) -> str:
    """Why a table's missing records are expected while the second edition retrains (``configs/second_edition.yaml``
    ``in_progress``: per registered paper, a table name or ``"*"`` for every table of it; ``whole_paper=False``
    reads the table's own entry only, as a sweep's choice does); "" where none is."""
    entry = _retraining().get(paper) or {}
    return str(entry.get(table) or (entry.get("*") if whole_paper else "") or "")
