"""The verdict rules the book applies to every declared claim, in one place: the one-sided Welch and paired t-tests of
"A beats B", the TOST of "A matches B within d", the preliminary verdicts below three seeds, and Holm's step-down
adjustment over a paper's claims (Holm 1979). :mod:`umlkit.experiments.tables` applies them to a table's cells; the
scoreboard, the chapters' prose and the plan of extra seeds (:mod:`umlkit.experiments.more_seeds`) read the same
constants from here.

The t statistics follow scipy (``stats.t``); Holm is written out (:func:`holm`) for the reason its docstring gives.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

__all__ = ["ALPHA", "MIN_SEEDS", "VERDICTS", "VERDICT_RULE", "VERDICT_SUMMARY", "HOLM_RULE", "MISSING",
           "NOT_COMPARABLE", "claim_test", "verdict_group", "is_final", "holm", "holm_adjust", "dof_text"]

ALPHA = 0.05     # one-sided significance level of the claim test
MIN_SEEDS = 3    # seeds per compared cell before a claim gets a verdict
VERDICTS = ("supported", "inconclusive", "contradicted")
VERDICT_RULE = (
    f"A claim 'A beats B' gets a verdict once both cells have at least {MIN_SEEDS} seeds: a one-sided Welch t-test "
    f"(unequal variances, Welch-Satterthwaite degrees of freedom) on the per-seed values, or, where both numbers come "
    f"from the same runs, a one-sided paired t-test on the per-seed differences (then at least {MIN_SEEDS} common "
    f"seeds). The verdict is 'supported' when A > B at p < {ALPHA}, 'contradicted' when B > A at p < {ALPHA}, and "
    f"'inconclusive' otherwise. A cell whose value does not depend on the seed (a frozen pretrained backbone) counts "
    f"as exact; when the standard error is zero the sign of the gap decides. With fewer seeds the verdict is "
    f"preliminary and only gives the sign of the measured gap: 'holds, n seed(s)' or 'not reproduced, n seed(s)'. "
    f"A claim 'A matches B within d' (an equivalence) uses two one-sided tests of the same kind (TOST): 'supported' "
    f"when both the test of gap > -d and the test of gap < +d reject at p < {ALPHA} (p is the larger of the two), "
    f"'contradicted' when the gap lies beyond +d or -d at p < {ALPHA}, 'inconclusive' otherwise; preliminary: "
    f"'holds' when |gap| < d. "
    f"A spread beside a mean is the sample standard deviation over seeds.")
VERDICT_SUMMARY = (   # what a chapter prints beside its claims table (the Every-claim page holds the rules in full)
    f"Each claim is tested on the per-seed values of its two cells (a one-sided Welch t-test, or a paired t-test "
    f"where both numbers come from the same runs; at least {MIN_SEEDS} seeds each), and its p-value is then "
    f"Holm-adjusted over all of the paper's claims: 'supported' or 'contradicted' when the adjusted p-value is below "
    f"{ALPHA}, 'inconclusive' otherwise (a claims table shows the test's own p-value and the adjusted one).")
HOLM_RULE = (
    f"The claims of one paper are one family: the p-value of each tested claim's verdict (of A > B when the measured "
    f"gap is positive, of B > A otherwise; for an equivalence, of the TOST or of the gap lying outside the margin, "
    f"whichever is smaller) is adjusted by Holm's step-down method (Holm 1979) over the "
    f"family's tested claims, and the reported verdict is 'supported' or 'contradicted' only when the adjusted "
    f"p-value is below {ALPHA}; otherwise 'inconclusive'. The unadjusted p-value and verdict stay beside it. Holm "
    f"controls the probability of any false verdict in a family at {ALPHA} without assuming the tests independent "
    f"(claims on one table share runs). A claim given more seeds after an inconclusive first look counts as "
    f"tested twice: its p-value is doubled before the adjustment.")

MISSING = "missing records"   # the verdict of a declared claim a cell of which has no stored record
NOT_COMPARABLE = "not comparable"   # the verdict (prefix) of a claim a compared cell of which is below its floor


def dof_text(df: float) -> str:
    """Degrees of freedom as printed: a paired test's whole number as one ("2"), Welch's fraction to one decimal."""
    return f"{df:.0f}" if float(df).is_integer() else f"{df:.1f}"


def claim_test(a: Sequence[float] | Mapping[int, float], b: Sequence[float] | Mapping[int, float],
               paired: bool = False, exact_a: bool = False, exact_b: bool = False,
               margin: float | None = None) -> dict:
    """The test of "A beats B" on per-seed values (see :data:`VERDICT_RULE`): ``t``, ``df``, ``se`` (the standard
    error of the gap), the one-sided p-value
    of A > B (``p``), ``n`` (the seeds the test used: the fewer of the two cells', the common seeds when paired,
    0 when both cells are exact), the verdict and a short description (``test``).

    Welch: t = (mean_A - mean_B) / sqrt(s_A²/n_A + s_B²/n_B) with the Welch-Satterthwaite degrees of freedom; an
    exact cell (``exact_*``: seed-free) contributes no variance, which makes it the one-sample t-test against that
    value. Paired (``a`` and ``b`` as ``{seed: value}``): the one-sample t-test of the differences over the common
    seeds. Non-finite values are dropped first. A gap or a standard error below 1e-9 of the values' scale counts
    as zero (float noise); a zero standard error with a nonzero gap is decided by the gap's sign.

    With ``margin`` d the claim is "A matches B within d": two one-sided tests (TOST) with the same standard error and
    degrees of freedom, of gap > -d (t = (gap + d) / se) and of gap < d (t = (gap - d) / se); ``p`` is the larger of
    their p-values."""
    from scipy import stats
    if margin is not None and not margin > 0:
        raise ValueError(f"an equivalence margin must be > 0, got {margin!r}")

    def finite(x):
        if isinstance(x, Mapping):
            return {k: float(v) for k, v in x.items() if np.isfinite(v)}
        return [float(v) for v in x if np.isfinite(v)]
    a, b = finite(a), finite(b)
    if paired:
        if not (isinstance(a, Mapping) and isinstance(b, Mapping)):
            raise TypeError("a paired claim test needs {seed: value} for both cells")
        common = sorted(set(a) & set(b))
        d = np.array([a[s] - b[s] for s in common], dtype=float)
        n, gap = len(d), float(d.mean()) if len(d) else float("nan")
        scale = max([abs(a[s]) for s in common] + [abs(b[s]) for s in common] + [1.0])
        se2, df = (d.var(ddof=1) / n, n - 1) if n > 1 else (float("nan"), 0)
        kind, final = "paired t", n >= MIN_SEEDS
    else:
        va = np.array(list(a.values() if isinstance(a, Mapping) else a), dtype=float)
        vb = np.array(list(b.values() if isinstance(b, Mapping) else b), dtype=float)
        if not len(va) or not len(vb):
            raise ValueError("claim_test needs at least one finite value in each cell")
        n = min(len(va) if not exact_a else np.inf, len(vb) if not exact_b else np.inf)
        gap = float(va.mean() - vb.mean())
        scale = max(float(np.abs(va).max()), float(np.abs(vb).max()), 1.0)
        parts = [x.var(ddof=1) / len(x) if len(x) > 1 else float("nan")
                 for x, exact in ((va, exact_a), (vb, exact_b)) if not exact]
        dofs = [len(x) - 1 for x, exact in ((va, exact_a), (vb, exact_b)) if not exact]
        se2 = float(sum(parts)) if parts else 0.0
        num = sum((p * p) / k for p, k in zip(parts, dofs) if k > 0 and p > 0)
        df = se2 * se2 / num if num > 0 else float(sum(dofs))
        kind, final = "Welch t", n >= MIN_SEEDS
    n = int(n) if np.isfinite(n) else 0
    if abs(gap) < 1e-9 * scale:
        gap = 0.0
    if not final:
        shown = max(n, 1)
        holds = abs(gap) < margin if margin is not None else gap > 0
        verdict = ("holds" if holds else "not reproduced") + f", {shown} seed{'s' if shown != 1 else ''}"
        return {"t": float("nan"), "df": float("nan"), "se": float("nan"), "p": float("nan"),
                "p_against": float("nan"), "n": n, "verdict": verdict,
                "test": f"none (fewer than {MIN_SEEDS} {'common ' if paired else ''}seeds)"}
    if margin is not None:
        return _equivalence(gap, se2, df, n, margin, kind, scale)
    if se2 > (1e-9 * scale) ** 2:
        t = gap / np.sqrt(se2)
        p = float(stats.t.sf(t, df))
    else:
        t = float(np.sign(gap)) * np.inf if gap else 0.0
        p = 0.0 if gap > 0 else (1.0 if gap < 0 else 0.5)
    verdict = "supported" if p < ALPHA else ("contradicted" if 1 - p < ALPHA else "inconclusive")
    return {"t": float(t), "df": float(df), "se": float(np.sqrt(max(se2, 0.0))), "p": p, "p_against": 1.0 - p,
            "n": n, "verdict": verdict,
            "test": f"{kind}: t={t:.2f}, df={dof_text(df)}, p={p:.3g}" if n else "exact values: the sign of the gap"}


def _equivalence(gap: float, se2: float, df: float, n: int, margin: float, kind: str, scale: float) -> dict:
    """TOST of |gap| < margin (see :func:`claim_test`)."""
    from scipy import stats
    if se2 > (1e-9 * scale) ** 2:
        se = float(np.sqrt(se2))
        t_low, t_up = (gap + margin) / se, (gap - margin) / se
        p_low, p_up = float(stats.t.sf(t_low, df)), float(stats.t.cdf(t_up, df))   # H0: gap <= -d; H0: gap >= d
        p_out = min(float(stats.t.cdf(t_low, df)), float(stats.t.sf(t_up, df)))   # evidence that |gap| > d
        t = t_low if p_low >= p_up else t_up
    else:   # exact values: the gap itself decides
        inside = abs(gap) < margin
        p_low = p_up = 0.0 if inside else 1.0
        p_out = 1.0 if inside else 0.0
        t = float("inf") if inside else float("-inf")
    p = max(p_low, p_up)
    verdict = "supported" if p < ALPHA else ("contradicted" if p_out < ALPHA else "inconclusive")
    return {"t": float(t), "df": float(df), "se": float(np.sqrt(max(se2, 0.0))), "p": p, "p_against": p_out, "n": n,
            "verdict": verdict, "test": f"TOST ({kind}, margin {margin:g}): t={t:.2f}, df={dof_text(df)}, p={p:.3g}"}


def verdict_group(verdict: str) -> str:
    """A verdict for counting: the three final verdicts (and :data:`MISSING`) as they are, every preliminary one
    as "holds (< 3 seeds)" or "not reproduced (< 3 seeds)"."""
    if is_final(verdict) or verdict == MISSING:
        return verdict
    if verdict.startswith(NOT_COMPARABLE):
        return NOT_COMPARABLE
    return f"{verdict.split(',')[0]} (< {MIN_SEEDS} seeds)"


def is_final(verdict: str) -> bool:
    """Whether a verdict came from the test (enough seeds), not from the sign of a preliminary gap."""
    return verdict in VERDICTS


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (Holm 1979): sorted ascending, the i-th (0-based) of m is multiplied by
    m - i, made non-decreasing by a running maximum and capped at 1, then returned in the input order. The same
    numbers as statsmodels' ``multipletests(p, method="holm")[1]`` (a test compares them), written out because that
    function runs a full ``gc.collect()`` on every call (0.13 s in a fresh process, about 0.8 s inside the test
    suite, measured)."""
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate(p[order] * np.arange(len(p), 0, -1)))
    out = np.empty_like(adjusted)
    out[order] = adjusted
    return out


def holm_adjust(claims: pd.DataFrame, family: str | None = "paper") -> pd.DataFrame:
    """Claims with the multiple-comparison adjustment of :data:`HOLM_RULE`: per ``family`` (a column, e.g. the
    paper; None: one family) the decision p-value of every tested claim (final verdict), Holm-adjusted; adds
    ``p decision``, ``p adjusted`` and ``raw verdict`` and sets ``verdict`` to the adjusted one. Claims without a
    test (preliminary, missing records) keep their verdict and get NaN. A claim tested at two looks (``looks``
    column, :mod:`umlkit.experiments.more_seeds`) enters with its decision p-value times its looks (at most 1)."""
    out = claims.copy()
    out["raw verdict"] = out["verdict"]
    p, against = (out.get(c, pd.Series(np.nan, index=out.index)).astype(float) for c in ("p", "p against"))
    looks = out.get("looks", pd.Series(1, index=out.index)).fillna(1).astype(float)   # a second look doubles p
    out["p decision"] = np.where(out["verdict"].map(is_final), np.fmin(1.0, looks * np.fmin(p, against)), np.nan)
    out["p adjusted"] = np.nan
    groups = out.groupby(family, sort=False).groups.values() if family else [out.index]
    for idx in groups:
        tested = [i for i in idx if np.isfinite(out.at[i, "p decision"])]
        if not tested:
            continue
        out.loc[tested, "p adjusted"] = holm(out.loc[tested, "p decision"].to_numpy())
    for i in out.index[np.isfinite(out["p adjusted"])]:
        if out.at[i, "p adjusted"] >= ALPHA:
            out.at[i, "verdict"] = "inconclusive"
        else:   # the direction the decision p-value tested
            out.at[i, "verdict"] = "supported" if p[i] <= against[i] else "contradicted"
    return out
