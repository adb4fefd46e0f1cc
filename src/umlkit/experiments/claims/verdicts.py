"""The verdict rules the book applies to every declared claim, in one place: the one-sided Welch and paired t-tests of
"A beats B", the TOST of "A matches B within d", the preliminary verdicts below three seeds, and Holm's step-down
adjustment over a paper's claims (Holm 1979). :mod:`umlkit.experiments.tables.table` applies them to a table's cells;
the
scoreboard, the chapters' prose and the plan of extra seeds (:mod:`umlkit.experiments.claims.more_seeds`) read the same
constants from here.

The t statistics follow scipy (``stats.t``); Holm is written out (:func:`holm`) for the reason its docstring gives.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

__all__ = ["ALPHA", "MIN_SEEDS", "VERDICTS", "VERDICT_RULE", "VERDICT_SUMMARY", "HOLM_RULE", "MISSING",
           "NOT_COMPARABLE", "REPRODUCED", "CONTRADICTED", "SMALLER", "NO_EFFECT", "INCONCLUSIVE", "AT_CEILING",
           "SESOI", "SESOI_RULE", "CEILING", "DECIDED", "claim_test", "verdict_group", "is_final", "holm",
           "holm_adjust", "dof_text", "interval_text", "signed"]

ALPHA = 0.05     # one-sided significance level of the claim test
MIN_SEEDS = 3    # seeds per compared cell before a claim gets a verdict
REPRODUCED, CONTRADICTED, INCONCLUSIVE = "reproduced", "contradicted", "inconclusive"
SMALLER, NO_EFFECT = "smaller than the paper's", "no effect"
AT_CEILING = "at ceiling"   # both compared cells at the metric's ceiling (see CEILING)
VERDICTS = (REPRODUCED, SMALLER, NO_EFFECT, INCONCLUSIVE, CONTRADICTED)   # the verdicts of a tested claim
DECIDED = (REPRODUCED, SMALLER, NO_EFFECT, CONTRADICTED)                  # those that answer the claim
SESOI = 1.0      # points: the smallest effect size of interest (R@1, MAP@R, accuracy), declared once for all claims
CEILING = 95.0   # R@k points: a comparison of two cells both at or above this cannot show a gain
VERDICT_RULE = (
    f"A claim 'A beats B' gets a verdict once both cells have at least {MIN_SEEDS} seeds: a one-sided Welch t-test "
    f"(unequal variances, Welch-Satterthwaite degrees of freedom) on the per-seed values, or, where both numbers come "
    f"from the same runs, a one-sided paired t-test on the per-seed differences (then at least {MIN_SEEDS} common "
    f"seeds). Its gap gets a 95 % t interval (gap ± t(0.975, df) × standard error). The test's raw verdict is "
    f"'reproduced' when A > B at p < {ALPHA}, 'contradicted' when B > A at p < {ALPHA}, and 'inconclusive' otherwise; "
    f"the final verdict adds two answers about the size of the effect (see the Holm rule): 'no effect' (two one-sided "
    f"tests put the gap within ±{SESOI:g} point) and 'smaller than the paper's' (the gap lies below the paper's own "
    f"gap, one-sided). A cell whose value does not depend on the seed (a frozen pretrained backbone) counts "
    f"as exact; when the standard error is zero the sign of the gap decides. With fewer seeds the verdict is "
    f"preliminary and only gives the sign of the measured gap: 'holds, n seed(s)' or 'not reproduced, n seed(s)'. "
    f"A claim 'A matches B within d' (an equivalence) uses two one-sided tests of the same kind (TOST): 'reproduced' "
    f"when both the test of gap > -d and the test of gap < +d reject at p < {ALPHA} (p is the larger of the two), "
    f"'contradicted' when the gap lies beyond +d or -d at p < {ALPHA}, 'inconclusive' otherwise; preliminary: "
    f"'holds' when |gap| < d. Two cells both at or above {CEILING:g} R@k are 'at ceiling': the metric leaves no room "
    f"for the gain, so the claim gets no verdict and shows the same comparison on MAP@R beside it. "
    f"A spread beside a mean is the sample standard deviation over seeds.")
SESOI_RULE = (
    f"The smallest effect size of interest is {SESOI:g} point of the claim's metric for every claim. It was declared "
    f"after a first look at the three-seed scoreboard, so the sensitivity table beside it gives the verdict counts "
    f"at half and twice that margin.")
VERDICT_SUMMARY = (   # what a chapter prints beside its claims table (the Every-claim page holds the rules in full)
    f"Each claim is tested on the per-seed values of its two cells (a one-sided Welch t-test, or a paired t-test "
    f"where both numbers come from the same runs; at least {MIN_SEEDS} seeds each) and its gap shown with a 95 % "
    f"interval; p-values are Holm-adjusted over the paper's claims. 'Reproduced' or 'contradicted': the gap's sign "
    f"is significant; otherwise 'no effect' when the gap is shown to lie within ±{SESOI:g} point, 'smaller than the "
    f"paper's' when it is shown to lie below the paper's gap, and 'inconclusive' (with the seeds per side that would "
    f"decide it) when none of these holds.")
HOLM_RULE = (
    f"The claims of one paper are one family: the p-value of each tested claim's direction (of A > B when the "
    f"measured gap is positive, of B > A otherwise; for an equivalence, of the TOST or of the gap lying outside the "
    f"margin, whichever is smaller) is adjusted by Holm's step-down method (Holm 1979) over the family's tested "
    f"claims, and the verdict is 'reproduced' or 'contradicted' only when the adjusted p-value is below {ALPHA}. "
    f"The claims this leaves open are asked two more questions, each Holm-adjusted over those claims of the family: "
    f"is the gap within ±{SESOI:g} point (TOST; 'no effect'), and, where the paper reports a positive gap, is the gap "
    f"below it (one-sided t-test; 'smaller than the paper's'). A claim none of the three decides is "
    f"'inconclusive'. The unadjusted p-value and verdict stay beside it. Holm controls the probability of any false "
    f"verdict in a family at {ALPHA} without assuming the tests independent (claims on one table share runs). A "
    f"claim given more seeds after an inconclusive first look counts as tested twice: its p-values are doubled "
    f"before the adjustment.")

MISSING = "missing records"   # the verdict of a declared claim a cell of which has no stored record
NOT_COMPARABLE = "not comparable"   # the verdict (prefix) of a claim a compared cell of which is below its floor


def signed(value: float, digits: int = 1) -> str:
    """``+1.2`` / ``-0.3``; a value that rounds to zero is written without a sign ("0.0", never "-0.0")."""
    text = f"{value:+.{digits}f}"
    return text[1:] if float(text) == 0 else text


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
                "p_against": float("nan"), "n": n, "verdict": verdict, "gap": gap, "low": float("nan"),
                "high": float("nan"),
                "test": f"none (fewer than {MIN_SEEDS} {'common ' if paired else ''}seeds)"}
    if margin is not None:
        return _equivalence(gap, se2, df, n, margin, kind, scale)
    if se2 > (1e-9 * scale) ** 2:
        t = gap / np.sqrt(se2)
        p = float(stats.t.sf(t, df))
    else:
        t = float(np.sign(gap)) * np.inf if gap else 0.0
        p = 0.0 if gap > 0 else (1.0 if gap < 0 else 0.5)
    verdict = REPRODUCED if p < ALPHA else (CONTRADICTED if 1 - p < ALPHA else INCONCLUSIVE)
    return {"t": float(t), "df": float(df), "se": float(np.sqrt(max(se2, 0.0))), "p": p, "p_against": 1.0 - p,
            "n": n, "verdict": verdict, **_interval(gap, se2, df),
            "test": f"{kind}: t={t:.2f}, df={dof_text(df)}, p={p:.3g}" if n else "exact values: the sign of the gap"}


def _interval(gap: float, se2: float, df: float) -> dict:
    """The test's gap and its 95 % two-sided t interval (the point itself when the standard error is zero)."""
    from scipy import stats
    se = float(np.sqrt(max(se2, 0.0))) if np.isfinite(se2) else float("nan")
    half = float(stats.t.ppf(0.975, df)) * se if se > 0 and df > 0 else 0.0
    return {"gap": float(gap), "low": float(gap - half), "high": float(gap + half)}


def interval_text(low: float, high: float, digits: int = 1) -> str:
    """"[-1.2, +3.4]" (signed ends), "" without an interval."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return ""
    return f"[{low:+.{digits}f}, {high:+.{digits}f}]"


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
    verdict = REPRODUCED if p < ALPHA else (CONTRADICTED if p_out < ALPHA else INCONCLUSIVE)
    return {"t": float(t), "df": float(df), "se": float(np.sqrt(max(se2, 0.0))), "p": p, "p_against": p_out, "n": n,
            "verdict": verdict, **_interval(gap, se2, df),
            "test": f"TOST ({kind}, margin {margin:g}): t={t:.2f}, df={dof_text(df)}, p={p:.3g}"}


def verdict_group(verdict: str) -> str:
    """A verdict for counting: the final verdicts (and :data:`MISSING`, :data:`AT_CEILING`) as they are, every
    preliminary one as "holds (< 3 seeds)" or "not reproduced (< 3 seeds)"."""
    if is_final(verdict) or verdict in (MISSING, AT_CEILING):
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


def _col(frame: pd.DataFrame, name: str) -> np.ndarray:
    return frame.get(name, pd.Series(np.nan, index=frame.index)).astype(float).to_numpy()


def tost_p(gap, se, df, d: float) -> np.ndarray:
    """p of "|gap| < d" by two one-sided t-tests (the larger of the two p-values); a zero standard error: 0 when
    the gap lies inside, 1 outside."""
    from scipy import stats
    gap, se, df = (np.asarray(x, dtype=float) for x in (gap, se, df))
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.maximum(stats.t.sf((gap + d) / se, df), stats.t.cdf((gap - d) / se, df))
    return np.where(se > 0, p, np.where(np.abs(gap) < d, 0.0, 1.0))


def below_p(gap, se, df, effect) -> np.ndarray:
    """p of "the gap is below ``effect``" (one-sided t-test of H0: gap >= effect); NaN where ``effect`` is not a
    positive number (no paper gap to fall short of)."""
    from scipy import stats
    gap, se, df, effect = (np.asarray(x, dtype=float) for x in (gap, se, df, effect))
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(se > 0, stats.t.cdf((gap - effect) / se, df), np.where(gap < effect, 0.0, 1.0))
    return np.where(np.isfinite(effect) & (effect > 0), p, np.nan)


def _holm_over(values: pd.Series, groups) -> pd.Series:
    """Holm-adjusted ``values`` per group (NaN stays NaN and is not counted)."""
    out = pd.Series(np.nan, index=values.index)
    for idx in groups:
        tested = [i for i in idx if np.isfinite(values[i])]
        if tested:
            out[tested] = holm(values[tested].to_numpy())
    return out


def holm_adjust(claims: pd.DataFrame, family: str | None = "paper", sesoi: float = SESOI) -> pd.DataFrame:
    """Claims with the verdicts of :data:`HOLM_RULE`: per ``family`` (a column, e.g. the paper; None: one family)
    the direction p-value of every tested claim (final raw verdict), Holm-adjusted ('reproduced'/'contradicted');
    then, for the claims that leaves open, the TOST p-value within ±``sesoi`` ('no effect') and the p-value of the
    gap lying below the paper's (``paper gap`` > 0; 'smaller than the paper's'), each Holm-adjusted over the open
    claims of the family. Adds ``p decision``, ``p adjusted``, ``p no effect``, ``p smaller`` (adjusted) and ``raw
    verdict``. Claims without a test keep their verdict. A claim tested at two looks (``looks`` column,
    :mod:`umlkit.experiments.claims.more_seeds`) enters each question with its p-value times its looks (at most 1)."""
    out = claims.copy()
    out["raw verdict"] = out["verdict"]
    p, against = _col(out, "p"), _col(out, "p against")
    looks = out.get("looks", pd.Series(1, index=out.index)).fillna(1).astype(float).to_numpy()
    tested = out["verdict"].map(is_final).to_numpy(dtype=bool)
    out["p decision"] = np.where(tested, np.fmin(1.0, looks * np.fmin(p, against)), np.nan)
    groups = list(out.groupby(family, sort=False).groups.values()) if family else [out.index]
    out["p adjusted"] = _holm_over(out["p decision"], groups)
    decided = np.isfinite(out["p adjusted"].to_numpy()) & (out["p adjusted"].to_numpy() < ALPHA)
    open_ = tested & ~decided & ~np.isfinite(_col(out, "margin"))   # an equivalence claim has no further question
    gap, se, df = _col(out, "test gap"), _col(out, "se"), _col(out, "df")
    # np.minimum keeps a NaN (a question not asked) out of the family, where np.fmin would make it 1
    raw_null = np.where(open_, np.minimum(1.0, looks * tost_p(gap, se, df, sesoi)), np.nan)
    raw_small = np.where(open_, np.minimum(1.0, looks * below_p(gap, se, df, _col(out, "paper gap"))), np.nan)
    out["p no effect"] = _holm_over(pd.Series(raw_null, index=out.index), groups)
    out["p smaller"] = _holm_over(pd.Series(raw_small, index=out.index), groups)
    for i, k in enumerate(out.index):
        if not tested[i]:
            continue
        if decided[i]:   # the direction the decision p-value tested
            out.at[k, "verdict"] = REPRODUCED if p[i] <= against[i] else CONTRADICTED
        elif out.at[k, "p no effect"] < ALPHA:
            out.at[k, "verdict"] = NO_EFFECT
        elif out.at[k, "p smaller"] < ALPHA:
            out.at[k, "verdict"] = SMALLER
        else:
            out.at[k, "verdict"] = INCONCLUSIVE
    return out
