"""The error rate the board promises, by simulation (issue 76): families of claims decided by the board's own rule
(:func:`umlkit.experiments.claims.verdicts.decide`: two-sided tests, Holm, the effect-size questions) under the
verdict plan's sequential design (:mod:`umlkit.experiments.claims.plan`: a first look at the planned seeds, more
seeds for an open claim whose gap exceeds its seed spread, a second look, each at alpha / looks).

:func:`simulate` draws ``reps`` families of ``m`` claims, each comparing two cells of ``seeds`` per-seed values
(Welch, or paired: per-seed differences), all with the same true gap ``effect`` (0: every claim's null is true)
and the same paper gap; it returns the probability that a family gets at least one false verdict at either look
(for ``effect`` 0: reproduced, contradicted or smaller than the paper's; for a true gap equal to the paper's:
contradicted, smaller, no effect or paper's gap excluded) with its Monte-Carlo standard error, and the share of
claims given the right verdict (the power the rule keeps).

Why by hand: the rule simulated is the book's own; numpy draws the seeds and scipy's t distribution gives the
p-values, as :func:`umlkit.experiments.claims.verdicts.claim_test` does one claim at a time.
"""
from __future__ import annotations

import numpy as np

from umlkit.experiments.claims import plan as verdict_plan
from umlkit.experiments.claims.verdicts import (
    CODES,
    CONTRADICTED,
    EXCLUDED,
    INCONCLUSIVE,
    NO_EFFECT,
    NO_EFFECT_INSIDE,
    REPRODUCED,
    SMALLER,
    decide,
)

__all__ = ["simulate", "stats_of", "EXTRA_SEEDS"]

EXTRA_SEEDS = 2   # what the first edition's plan gave an open claim (seeds 3 and 4)
_CODE = {v: i for i, v in enumerate(CODES)}


def stats_of(a: np.ndarray, b: np.ndarray, paired: bool) -> dict:
    """Per-claim test statistics over the last axis (seeds) of ``a`` and ``b``: gap, se, df, the one-sided p of A >
    B and of B > A, and the larger of the two cells' seed spreads; Welch's t with Welch-Satterthwaite degrees of
    freedom, or the paired t on the differences."""
    from scipy import stats
    n = a.shape[-1]
    if paired:
        d = a - b
        gap, se2, df = d.mean(-1), d.var(-1, ddof=1) / n, np.full(d.shape[:-1], n - 1.0)
    else:
        va, vb = a.var(-1, ddof=1) / n, b.var(-1, ddof=1) / n
        gap, se2 = a.mean(-1) - b.mean(-1), va + vb
        df = se2 ** 2 / (va ** 2 / (n - 1) + vb ** 2 / (n - 1))
    se = np.sqrt(se2)
    t = gap / se
    spread = np.maximum(a.std(-1, ddof=1), b.std(-1, ddof=1))
    return {"gap": gap, "se": se, "df": df, "p": stats.t.sf(t, df), "against": stats.t.cdf(t, df), "spread": spread}


def _decide(s: dict, margin: float, paper_gap: float, looks: int) -> np.ndarray:
    return decide(s["p"], s["against"], looks, s["gap"], s["se"], s["df"], margin, paper_gap)["code"]


def _wrong(codes: np.ndarray, effect: float, margin: float) -> np.ndarray:
    """Which verdicts are false for a true gap ``effect`` (0, or the paper's gap)."""
    if effect == 0:
        bad = [REPRODUCED, CONTRADICTED, SMALLER]
    else:
        bad = [CONTRADICTED, SMALLER, EXCLUDED] + ([NO_EFFECT, NO_EFFECT_INSIDE] if abs(effect) >= margin else [])
    return np.isin(codes, [_CODE[v] for v in bad])


def simulate(m: int, seeds: int = 3, paired: bool = False, reps: int = 10_000, effect: float = 0.0,
             paper_gap: float = 3.0, sd: float = 1.2, margin: float = 1.0, extend: bool = True,
             rng: int | np.random.Generator = 0) -> dict:
    """See the module docstring. ``sd``: one seed's spread (the board's median R@1 seed spread is 1.2 points);
    ``margin``: the "no effect" margin; ``extend``: the sequential design (False: one look at ``seeds``)."""
    rng = np.random.default_rng(rng)
    n = seeds + (EXTRA_SEEDS if extend else 0)
    shared = rng.normal(0.0, sd, (reps, m, n)) if paired else 0.0   # a paired claim's runs share their seed's draw
    noise = sd if not paired else sd / np.sqrt(2)
    a = shared + effect + rng.normal(0.0, noise, (reps, m, n))
    b = shared + rng.normal(0.0, noise, (reps, m, n))
    looks = verdict_plan.max_looks() if extend else 1
    first = stats_of(a[..., :seeds], b[..., :seeds], paired)
    codes = _decide(first, margin, paper_gap, looks)
    wrong = _wrong(codes, effect, margin).any(-1)
    if extend:
        more = (codes == _CODE[INCONCLUSIVE]) & (np.abs(first["gap"]) > first["spread"])
        full = stats_of(a, b, paired)
        second = {k: np.where(more, full[k], first[k]) for k in first}
        codes = _decide(second, margin, paper_gap, looks)
        wrong |= _wrong(codes, effect, margin).any(-1)
    rate = float(wrong.mean())
    right = _CODE[REPRODUCED] if effect > 0 else _CODE[NO_EFFECT]
    return {"m": m, "seeds": seeds, "paired": paired, "reps": reps, "effect": effect,
            "family error": rate, "mc se": float(np.sqrt(rate * (1 - rate) / reps)),
            "power": float((codes == right).mean())}
