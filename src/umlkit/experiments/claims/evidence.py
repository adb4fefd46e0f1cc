"""What the board's verdicts rest on, beyond the verdict: the seeds that would decide an open claim, how the counts
move with the smallest effect size of interest, and what each interval says about the paper's own gap.

* Seeds needed (:func:`needed_seeds`): for an inconclusive claim, the seeds per side that give 80 % power after
  Holm in its family, from the claim's observed noise. Two routes, whichever needs fewer: detect the paper's gap
  (one-sided t-test at the level the claim would face) or show "no effect" within the margin (TOST at a true gap
  of zero, which needs 90 % power on each one-sided test). The level is alpha / (m - r): Holm's threshold for
  the first claim after the r the family has already decided among its m tested (the evidence standard's
  "plan against the level the claim will actually face"), divided by the look the extra seeds would give: a claim
  tested at k looks enters Holm with its p-value times k (:func:`umlkit.experiments.claims.verdicts.holm_adjust`), so
  its
  next look faces alpha / ((m - r) (k + 1)). The noise is the observed one: the standard error
  times the square root of the seeds, so the plan scales the present design (Welch two-sample: statsmodels'
  ``TTestIndPower``; a paired test or one exact cell: ``TTestPower``).
* Sensitivity (:func:`sensitivity`): the verdict counts with the margin halved and doubled.
* Paper effect (:func:`effect_answer`): where the paper's gap falls against the measured interval.

Why not by hand: the power equations are statsmodels'; what is ours is which effect, level and noise they get.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from umlkit.experiments.claims import plan as verdict_plan
from umlkit.experiments.claims.verdicts import ALPHA, DECIDED, INCONCLUSIVE, SESOI, VERDICTS, holm_adjust

__all__ = ["POWER", "MAX_SEEDS", "needed_seeds", "with_needed_seeds", "sensitivity", "effect_answer",
           "with_effect_answers"]

POWER = 0.8
MAX_SEEDS = 1000   # beyond this the answer is "more than 1000"


def _solve(effect_size: float, level: float, power: float, two_sample: bool) -> float:
    from statsmodels.stats.power import TTestIndPower, TTestPower
    if not effect_size > 0:
        return math.inf
    solver = TTestIndPower() if two_sample else TTestPower()
    try:
        n = float(solver.solve_power(effect_size=effect_size, alpha=level, power=power, alternative="larger"))
    except (ValueError, RuntimeError):
        return math.inf
    return n if np.isfinite(n) else math.inf


def needed_seeds(se: float, n: int, df: float, level: float, paper_gap: float = float("nan"),
                 sesoi: float = SESOI, power: float = POWER) -> int | None:
    """Seeds per side (rounded up, at least 3) that decide a claim whose test had standard error ``se`` over ``n``
    seeds, at one-sided ``level``: the fewer of the route to the paper's gap ``paper_gap`` (when positive) and the
    route to "no effect" within ``sesoi``. None when no route gets there within :data:`MAX_SEEDS` (or without
    noise to scale)."""
    if not (np.isfinite(se) and se > 0 and n and n > 1):
        return None
    noise = se * math.sqrt(n)   # the spread of one seed's contribution to the gap
    two_sample = not float(df).is_integer()   # Welch's fractional df; a paired or one-exact-cell test has n - 1
    if two_sample:   # se = sqrt(2 s^2 / n) for two sides of n seeds with spread s: the effect size is d / s
        noise /= math.sqrt(2)
    routes = [_solve(sesoi / noise, level, 1 - (1 - power) / 2, two_sample)]   # TOST: each one-sided test at 90 %
    if np.isfinite(paper_gap) and paper_gap > 0:
        routes.append(_solve(paper_gap / noise, level, power, two_sample))
    best = min(routes)
    return None if not np.isfinite(best) or best > MAX_SEEDS else max(3, math.ceil(best))


def with_needed_seeds(board: pd.DataFrame, family: str = "paper") -> pd.DataFrame:
    """``board`` (after :func:`umlkit.experiments.claims.verdicts.holm_adjust`) with ``seeds needed`` for each
    inconclusive claim, planned for the level of its next look (NaN for the others, and where no route gets there
    within :data:`MAX_SEEDS`:
    ``seeds needed`` NaN and ``beyond`` True)."""
    out = board.copy()
    out["seeds needed"], out["beyond"] = np.nan, False
    for _, idx in out.groupby(family, sort=False).groups.items():
        sub = out.loc[idx]
        m = int(sub["raw verdict"].isin(VERDICTS).sum())
        r = int((sub["verdict"].isin(DECIDED)).sum())
        for i in sub.index[sub["verdict"] == INCONCLUSIVE]:
            row = out.loc[i]
            looks = row.get("looks", 1)
            looks = 1 if pd.isna(looks) else int(looks)
            # two-sided (each direction at alpha / 2), at the looks its next look would be tested for
            level = ALPHA / 2 / max(1, m - r) / verdict_plan.planned_looks(looks + 1, True)
            n = needed_seeds(float(row.get("se", np.nan)), int(row.get("seeds", 0) or 0),
                             float(row.get("df", np.nan)), level, float(row.get("paper gap", np.nan)))
            out.at[i, "seeds needed"] = n if n is not None else np.nan
            out.at[i, "beyond"] = n is None
    return out


def sensitivity(board: pd.DataFrame, scales: Sequence[float] = (0.5, 1.0, 2.0), family: str = "paper"
                ) -> pd.DataFrame:
    """Verdict counts (rows: verdicts; columns: "margin x s") of ``board`` re-adjusted with every metric's margin
    times each scale."""
    raw = board.assign(verdict=board["raw verdict"]) if "raw verdict" in board else board
    cols = {}
    for s in scales:
        counts = holm_adjust(raw, family=family, margin_scale=s)["verdict"].value_counts()
        cols[f"margin x {s:g}"] = counts
    out = pd.DataFrame(cols).fillna(0).astype(int)
    order = [v for v in VERDICTS if v in out.index] + sorted(v for v in out.index if v not in VERDICTS)
    return out.loc[order]


def effect_answer(paper_gap: float, low: float, high: float) -> str:
    """Where the paper's gap lies against the measured 95 % interval: "paper +4.6 inside", "above" or "below";
    "" without a paper gap or an interval."""
    if not (np.isfinite(paper_gap) and np.isfinite(low) and np.isfinite(high)):
        return ""
    where = "above" if paper_gap > high else ("below" if paper_gap < low else "inside")
    return f"paper {paper_gap:+.1f} {where}"


def with_effect_answers(board: pd.DataFrame) -> pd.DataFrame:
    """``board`` with ``paper effect``: :func:`effect_answer` of each claim."""
    out = board.copy()
    cols = [out.get(c, pd.Series(np.nan, index=out.index)).astype(float) for c in ("paper gap", "low", "high")]
    out["paper effect"] = [effect_answer(*t) for t in zip(*cols)]
    return out
