"""A paper chapter's reproducibility summary, in the shape of the ML Reproducibility Challenge's one-page summary:
the scope of the claims tested, the methodology, what reproduced, what did not and what cannot be tested here. The
counts come from the paper's family on the board (:func:`umlkit.experiments.views.scoreboard.family_board`) and are
glued
into the chapter's box; what was easy and what was hard stays the chapter's own prose.
"""
from __future__ import annotations

import pandas as pd

from umlkit.experiments.claims.evidence import MAX_SEEDS
from umlkit.experiments.claims.verdicts import (
    AT_CEILING,
    CONTRADICTED,
    EXCLUDED,
    INCONCLUSIVE,
    MISSING,
    NO_EFFECT,
    NO_EFFECT_INSIDE,
    NOT_A_TEST,
    NOT_COMPARABLE,
    REPRODUCED,
    SESOI,
    SMALLER,
    STALE,
    TIMING,
    VERDICTS,
    verdict_group,
)

__all__ = ["summary_facts"]


def _n(counts: pd.Series, key: str) -> int:
    return int(counts.get(key, 0))


def summary_facts(board: pd.DataFrame) -> dict[str, str]:
    """Glue for a chapter's summary box from one paper's rows of the board: ``rs_scope`` (claims and the tables
    they come from), ``rs_method`` (profile, seeds, tests), and ``rs_yes`` (reproduced, smaller than the paper's),
    ``rs_no`` (contradicted, paper's gap excluded, no effect), ``rs_untestable`` (at ceiling, not comparable,
    inconclusive with the seeds beyond the plan, not tests, missing records)."""
    if board.empty:
        empty = "no claims on the board yet"
        return {k: empty for k in ("rs_scope", "rs_method", "rs_yes", "rs_no", "rs_untestable")}
    counts = board["verdict"].map(verdict_group).value_counts()
    tables = list(dict.fromkeys(board["table"]))
    tested = board[board["raw verdict"].isin(VERDICTS)] if "raw verdict" in board else board.iloc[:0]
    seeds = tested["seeds"].astype(int) if len(tested) else pd.Series([0])
    open_ = board[board["verdict"] == INCONCLUSIVE]
    need = open_["seeds needed"].dropna() if "seeds needed" in open_ else pd.Series(dtype=float)
    beyond = int(open_["beyond"].fillna(False).astype(bool).sum()) if "beyond" in open_ else 0
    lo, hi = (int(need.min()), int(need.max())) if len(need) else (0, 0)
    need_text = ((f", needing {lo} seeds per side" if lo == hi else f", needing {lo}–{hi} seeds per side")
                 + (f" where a number exists and over {MAX_SEEDS} for {beyond}" if beyond else "")
                 if len(need) else (f", needing over {MAX_SEEDS} seeds per side" if beyond else ""))
    return {
        "rs_scope": f"{len(board)} claims declared from {len(tables)} tables ({', '.join(tables)}); "
                    f"{len(tested)} have two measured cells and a test",
        "rs_method": f"the quick profile (UML-Mini, the shipped tiny ViT, CPU); {seeds.min()}–{seeds.max()} seeds "
                     f"per compared cell; two-sided Welch or paired t-tests with 95 % intervals, Holm over the "
                     f"paper's {len(tested)} tested claims at the verdict plan's looks, a ±{SESOI:g}-point margin "
                     f"for 'no effect' on R@k",
        "rs_yes": f"{_n(counts, REPRODUCED)} reproduced, {_n(counts, SMALLER)} smaller than the paper's (a gain "
                  f"shown)",
        "rs_no": (f"{_n(counts, CONTRADICTED)} contradicted, {_n(counts, EXCLUDED)} with the paper's gap excluded and "
                  f"no gain shown, {_n(counts, NO_EFFECT) + _n(counts, NO_EFFECT_INSIDE)} no effect"),
        "rs_untestable": (f"{_n(counts, AT_CEILING)} at the R@1 ceiling without a second metric, "
                          f"{_n(counts, NOT_COMPARABLE)} not comparable (a compared cell below, or never off, its "
                          f"frozen backbone), {_n(counts, INCONCLUSIVE)} inconclusive{need_text}, "
                          f"{_n(counts, TIMING) + _n(counts, NOT_A_TEST)} not tests (timings, identical cells), "
                          f"{_n(counts, MISSING)} missing records, {_n(counts, STALE)} on stale records (trained "
                          f"before the second edition's fixes)"),
    }
