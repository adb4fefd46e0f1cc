"""The verdict rules the book applies to every declared claim, in one place: the Welch and paired t-tests of "A
beats B", the TOST of "A matches B within d", the preliminary verdicts below three seeds, and the family rule
(:func:`decide`): each claim tested two-sided inside Holm's step-down adjustment over a paper's claims (Holm 1979),
at the looks the verdict plan allows (:mod:`umlkit.experiments.claims.plan`), then the effect-size questions ("no
effect" within the metric's margin by TOST; the gap below the paper's). :mod:`umlkit.experiments.tables.table`
applies the tests to a table's cells; the scoreboard, the chapters' prose and the seed plans read the same
constants from here; the error rate the rule keeps is simulated in :mod:`umlkit.experiments.claims.simulation`.

The t statistics follow scipy (``stats.t``); Holm is written out (:func:`holm`) for the reason its docstring gives.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from umlkit.experiments.claims import plan as verdict_plan

__all__ = ["ALPHA", "MIN_SEEDS", "VERDICTS", "VERDICT_RULE", "VERDICT_SUMMARY", "HOLM_RULE", "MISSING",
           "NOT_COMPARABLE", "REPRODUCED", "CONTRADICTED", "SMALLER", "NO_EFFECT", "NO_EFFECT_INSIDE", "EXCLUDED",
           "INCONCLUSIVE", "AT_CEILING", "TIMING", "NOT_A_TEST", "SESOI", "SESOI_RULE", "CEILING", "DECIDED",
           "CODES", "claim_test", "ruled_out", "verdict_group", "is_final", "holm", "decide", "holm_adjust", "dof_text",
           "interval_text", "signed"]

ALPHA = verdict_plan.alpha()   # the family-wise error rate per paper; each claim two-sided, each direction at ALPHA/2
MIN_SEEDS = 3    # seeds per compared cell before a claim gets a verdict
REPRODUCED, CONTRADICTED, INCONCLUSIVE = "reproduced", "contradicted", "inconclusive"
SMALLER = "smaller than the paper's"           # a gain shown, and shown below the paper's gap
NO_EFFECT = "no effect"                        # the gap shown within the metric's margin
NO_EFFECT_INSIDE = "no effect (paper's gap inside the margin)"   # ... where the paper's own gap lies inside it too
EXCLUDED = "paper's gap excluded, no gain shown"   # open on the sign, but the gap shown below the paper's
AT_CEILING = "at ceiling"   # both compared cells at the metric's ceiling (see CEILING) and no second metric measured
TIMING = "timing (not a test)"   # a measured step-time ratio with its repeat spread: repeats are not seeds
NOT_A_TEST = "not a test: the two cells hold the same numbers"
STALE = "stale records"   # a compared cell read from records trained before a change of its code or options
VERDICTS = (REPRODUCED, SMALLER, NO_EFFECT, NO_EFFECT_INSIDE, EXCLUDED, INCONCLUSIVE, CONTRADICTED)   # tested claims
DECIDED = (REPRODUCED, SMALLER, NO_EFFECT, NO_EFFECT_INSIDE, EXCLUDED, CONTRADICTED)   # those that answer the claim
SESOI = verdict_plan.margin_of("R@1")   # R@k points: the "no effect" margin of the R@k metrics (others: the plan)
CEILING = 95.0   # R@k points: a comparison of two cells both at or above this cannot show a gain
VERDICT_RULE = (
    f"A claim 'A beats B' gets a verdict once both cells have at least {MIN_SEEDS} seeds: a Welch t-test "
    f"(unequal variances, Welch-Satterthwaite degrees of freedom) on the per-seed values, or, where both numbers come "
    f"from the same runs, a paired t-test on the per-seed differences (then at least {MIN_SEEDS} common seeds). Its "
    f"gap gets a 95 % t interval (gap ± t(0.975, df) × standard error). The test is two-sided: its raw verdict is "
    f"'reproduced' when A > B at one-sided p < {ALPHA / 2:g}, 'contradicted' when B > A at p < {ALPHA / 2:g}, and "
    f"'inconclusive' otherwise; the final verdict comes from the family rule (see the Holm rule). A cell whose value "
    f"does not depend on the seed (a frozen pretrained backbone) counts as exact; when the standard error is zero the "
    f"sign of the gap decides, and two cells holding the same numbers are '{NOT_A_TEST}'. With fewer seeds the "
    f"verdict is preliminary and only gives the sign of the measured gap: 'holds, n seed(s)' or 'not reproduced, n "
    f"seed(s)'. A claim 'A matches B within d' (an equivalence) uses two one-sided tests of the same kind (TOST): "
    f"'reproduced' when both the test of gap > -d and the test of gap < +d reject, 'contradicted' when the gap lies "
    f"beyond +d or -d, each side at {ALPHA / 2:g}; preliminary: 'holds' when |gap| < d. Where both cells of an R@k "
    f"claim sit at or above {CEILING:g} the metric leaves no room for the gain, and the claim is decided on its "
    f"declared second metric (MAP@R, or mAP@1000 where the table measures that), marked 'on MAP@R'; without one "
    f"measured it is '{AT_CEILING}'. A step-time claim is a '{TIMING}': its ratio and repeat spread are shown, "
    f"repeated timings are not independent runs. A spread beside a mean is the sample standard deviation over seeds.")
SESOI_RULE = (
    "The 'no effect' margin is declared per metric in configs/verdict_plan.yaml with its reason (R@k and MAP@R: 1 "
    "point, below the lower quartile of the papers' own gaps on that metric), frozen on 2026-12-03 before the board's "
    "second edition ran; the first margin (1 point for every metric) had been chosen after two looks at the board. The "
    "sensitivity table beside it gives the verdict counts at half and twice each margin.")
VERDICT_SUMMARY = (   # what a chapter prints beside its claims table (the Every-claim page holds the rules in full)
    f"Each claim is tested two-sided on the per-seed values of its two cells (a Welch t-test, or a paired t-test "
    f"where both numbers come from the same runs; at least {MIN_SEEDS} seeds each) and its gap shown with a 95 % "
    f"interval; p-values are Holm-adjusted over the paper's claims at a family-wise error of {ALPHA:g}. "
    f"'Reproduced' or 'contradicted': the gap's sign is shown; 'smaller than the paper's': a gain is shown and shown "
    f"below the paper's gap. Otherwise 'no effect' when the gap is shown within the metric's margin, 'paper's gap "
    f"excluded, no gain shown' when only the paper's gap is ruled out, and 'inconclusive' (with the seeds per side "
    f"that would decide it) when none of these holds.")
HOLM_RULE = (
    f"The claims of one paper are one family, at a family-wise error of {ALPHA:g}. Each tested claim's p-value is "
    f"two-sided (twice the smaller one-sided p-value: each direction at {ALPHA / 2:g}; for an equivalence, of the "
    f"TOST or of the gap lying outside the margin) and multiplied by the looks the verdict plan allows it "
    f"(configs/verdict_plan.yaml: Bonferroni over at most {verdict_plan.max_looks()} looks for a claim that may get "
    f"more seeds, from its first look on, or over the looks it had where it had more); these are adjusted by Holm's "
    f"step-down method (Holm 1979) over the family's tested claims, and the sign is decided ('reproduced' or "
    f"'contradicted') when the adjusted p-value is below {ALPHA:g}. Two more questions, each Holm-adjusted over the "
    f"claims of the family it is asked of, with the same looks: is the gap below the paper's own (one-sided t-test, "
    f"asked where the paper reports a positive gap and the sign was not shown reversed), which turns a reproduced "
    f"claim into 'smaller than the paper's' and an open one into 'paper's gap excluded, no gain shown'; and, for a "
    f"claim whose sign stays open, is the gap within ± the metric's margin (TOST; 'no effect', or 'no effect (paper's "
    f"gap inside the margin)' where the paper's own gap lies inside it too, which then agrees with the paper rather "
    f"than contradicting it). A claim none of these decides is 'inconclusive'. The unadjusted p-value and raw "
    f"verdict stay beside it. Holm controls the probability of any false verdict in a family without assuming the "
    f"tests independent (claims on one table share runs); the simulation on the Every-claim page shows the rate "
    f"this rule keeps on null families of the board's shapes.")

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
    error of the gap), the one-sided p-values of A > B (``p``) and of B > A (``p_against``; the family rule makes
    them two-sided), ``n`` (the seeds the test used: the fewer of the two cells', the common seeds when paired,
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
    elif gap == 0:   # the same numbers on both sides (a claim reading one run twice): nothing to test
        return {"t": float("nan"), "df": float(df), "se": 0.0, "p": float("nan"), "p_against": float("nan"), "n": n,
                "verdict": NOT_A_TEST, "gap": 0.0, "low": 0.0, "high": 0.0, "test": "none (identical values)"}
    else:
        t = float(np.sign(gap)) * np.inf
        p = 0.0 if gap > 0 else 1.0
    verdict = REPRODUCED if p < ALPHA / 2 else (CONTRADICTED if 1 - p < ALPHA / 2 else INCONCLUSIVE)
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
    verdict = REPRODUCED if p < ALPHA / 2 else (CONTRADICTED if p_out < ALPHA / 2 else INCONCLUSIVE)
    return {"t": float(t), "df": float(df), "se": float(np.sqrt(max(se2, 0.0))), "p": p, "p_against": p_out, "n": n,
            "verdict": verdict, **_interval(gap, se2, df),
            "test": f"TOST ({kind}, margin {margin:g}): t={t:.2f}, df={dof_text(df)}, p={p:.3g}"}


def verdict_group(verdict: str) -> str:
    """A verdict for counting: the final verdicts (and :data:`MISSING`, :data:`AT_CEILING`, :data:`TIMING`,
    :data:`NOT_A_TEST`, :data:`STALE`) as they are, every preliminary one as "holds (< 3 seeds)" or "not reproduced
    (< 3 seeds)"."""
    if is_final(verdict) or verdict in (MISSING, AT_CEILING, TIMING, NOT_A_TEST, STALE):
        return verdict
    if verdict.startswith(NOT_COMPARABLE):
        return NOT_COMPARABLE
    return f"{verdict.split(',')[0]} (< {MIN_SEEDS} seeds)"


def is_final(verdict: str) -> bool:
    """Whether a verdict came from the test (enough seeds), not from the sign of a preliminary gap."""
    return verdict in VERDICTS


CODES = (INCONCLUSIVE, REPRODUCED, CONTRADICTED, SMALLER, NO_EFFECT, NO_EFFECT_INSIDE, EXCLUDED)


def holm(p) -> np.ndarray:
    """Holm's step-down adjusted p-values (Holm 1979) along the last axis: sorted ascending, the i-th (0-based) of
    the m finite ones is multiplied by m - i, made non-decreasing by a running maximum and capped at 1, then put
    back in the input order; NaN (a question not asked) stays NaN and does not count in m. The same numbers as
    statsmodels' ``multipletests(p, method="holm")[1]`` on the finite ones (a test compares them), written out
    because that function runs a full ``gc.collect()`` on every call (0.13 s in a fresh process, about 0.8 s
    inside the test suite, measured) and takes one family at a time, where the error simulation adjusts 10,000."""
    p = np.asarray(p, dtype=float)
    valid = np.isfinite(p)
    m = valid.sum(axis=-1, keepdims=True)
    filled = np.where(valid, p, np.inf)
    order = np.argsort(filled, axis=-1, kind="stable")
    factor = np.maximum(m - np.arange(p.shape[-1]), 1)
    adjusted = np.minimum(1.0, np.maximum.accumulate(np.take_along_axis(filled, order, -1) * factor, axis=-1))
    out = np.empty_like(adjusted)
    np.put_along_axis(out, order, adjusted, -1)
    return np.where(valid, out, np.nan)


def decide(p, against, looks, gap, se, df, sesoi, paper_gap, margin=None, tested=None) -> dict:
    """The family rule of :data:`HOLM_RULE` on arrays whose last axis is one family's claims (any leading axes:
    families decided side by side, as the error simulation does): ``p`` and ``against`` the one-sided p-values
    of A > B and of B > A (for an equivalence claim, of the TOST and of the gap lying outside its ``margin``),
    ``looks`` the looks each claim is tested for (:func:`umlkit.experiments.claims.plan.planned_looks`), ``sesoi``
    each claim's "no effect" margin, ``paper_gap`` the paper's gap (NaN: none), ``tested`` which claims have a
    final raw verdict. Returns ``code`` (an index into :data:`CODES`) and the p-values it rests on: ``p decision``
    (two-sided, times the looks), ``p adjusted``, ``p no effect`` and ``p below`` (Holm-adjusted)."""
    p, against, looks, gap, se, df, sesoi, paper_gap = np.broadcast_arrays(
        *(np.asarray(x, dtype=float) for x in (p, against, looks, gap, se, df, sesoi, paper_gap)))
    margin = np.full(p.shape, np.nan) if margin is None else np.broadcast_to(np.asarray(margin, float), p.shape)
    tested = np.isfinite(p) if tested is None else np.broadcast_to(np.asarray(tested, bool), p.shape)
    equivalence = np.isfinite(margin)
    p_dec = np.where(tested, np.minimum(1.0, looks * np.minimum(1.0, 2 * np.fmin(p, against))), np.nan)
    adjusted = holm(p_dec)
    decided = adjusted < ALPHA
    positive = p <= against
    # np.minimum keeps a NaN (a question not asked) out of the family, where np.fmin would make it 1
    asks_null = tested & ~decided & ~equivalence
    asks_below = tested & ~equivalence & (~decided | positive) & np.isfinite(paper_gap) & (paper_gap > 0)
    p_null = holm(np.where(asks_null, np.minimum(1.0, looks * tost_p(gap, se, df, sesoi)), np.nan))
    p_below = holm(np.where(asks_below, np.minimum(1.0, looks * below_p(gap, se, df, paper_gap)), np.nan))
    below, null = p_below < ALPHA, p_null < ALPHA
    inside = np.abs(np.nan_to_num(paper_gap, nan=np.inf)) < sesoi
    first = [(~tested, -1), (decided & positive & below, SMALLER), (decided & positive, REPRODUCED),
             (decided, CONTRADICTED), (null & inside, NO_EFFECT_INSIDE), (null, NO_EFFECT), (below, EXCLUDED)]
    code = np.select([cond for cond, _ in first], [v if v == -1 else CODES.index(v) for _, v in first],
                     default=CODES.index(INCONCLUSIVE))
    return {"code": code, "p decision": p_dec, "p adjusted": adjusted, "p no effect": p_null, "p below": p_below}


def _col(frame: pd.DataFrame, name: str, default: float = np.nan) -> np.ndarray:
    return frame.get(name, pd.Series(default, index=frame.index)).astype(float).to_numpy()


def tost_p(gap, se, df, d) -> np.ndarray:
    """p of "|gap| < d" by two one-sided t-tests (the larger of the two p-values); a zero standard error: 0 when
    the gap lies inside, 1 outside."""
    from scipy import stats
    gap, se, df, d = (np.asarray(x, dtype=float) for x in (gap, se, df, d))
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


def _margins(out: pd.DataFrame, scale: float) -> np.ndarray:
    """Each claim's "no effect" margin: its metric's (the verdict plan) times ``scale``; :data:`SESOI` without a
    metric column."""
    if "metric" not in out:
        return np.full(len(out), SESOI * scale)
    return np.array([verdict_plan.margin_of(m) * scale if isinstance(m, str) else SESOI * scale
                     for m in out["metric"]])


def holm_adjust(claims: pd.DataFrame, family: str | None = "paper", margin_scale: float = 1.0) -> pd.DataFrame:
    """Claims with the verdicts of :data:`HOLM_RULE` (:func:`decide` per ``family``, a column such as the paper;
    None: one family), each claim's looks from ``planned looks`` (else ``looks``, else 1) and its margin from its
    metric's rule times ``margin_scale``. Adds ``raw verdict``, ``p decision``, ``p adjusted``, ``p no effect``,
    ``p smaller`` (the Holm-adjusted p of the gap lying below the paper's) and ``margin used``. Claims without a test
    keep their verdict."""
    out = claims.copy()
    out["raw verdict"] = out["verdict"]
    looks = _col(out, "planned looks")
    looks = np.where(np.isfinite(looks), looks, np.nan_to_num(_col(out, "looks"), nan=1.0))
    tested = out["verdict"].map(is_final).to_numpy(dtype=bool)
    sesoi = _margins(out, margin_scale)
    cols = {"p": _col(out, "p"), "against": _col(out, "p against"), "gap": _col(out, "test gap"),
            "se": _col(out, "se"), "df": _col(out, "df"), "paper_gap": _col(out, "paper gap"),
            "margin": _col(out, "margin")}
    res = {k: np.full(len(out), np.nan) for k in ("p decision", "p adjusted", "p no effect", "p below")}
    code = np.full(len(out), -1)
    groups = list(out.groupby(family, sort=False).indices.values()) if family else [np.arange(len(out))]
    for idx in groups:
        got = decide(**{k: v[idx] for k, v in cols.items()}, looks=looks[idx], sesoi=sesoi[idx], tested=tested[idx])
        code[idx] = got.pop("code")
        for k, v in got.items():
            res[k][idx] = v
    for k, v in res.items():
        out[k if k != "p below" else "p smaller"] = v
    out["margin used"] = np.where(np.isfinite(cols["margin"]), cols["margin"], sesoi)
    out["verdict"] = [CODES[c] if c >= 0 else v for c, v in zip(code, out["verdict"])]
    out["rules out"] = [ruled_out(v, *t) for v, t in zip(out["verdict"], zip(cols["gap"], cols["se"], cols["df"]))]
    return out


def ruled_out(verdict: str, gap: float, se: float, df: float) -> str:
    """What the data rule out, unadjusted, beside a decided verdict (issue 76): for 'no effect', the smallest margin
    the TOST at :data:`ALPHA` would still accept ("|gap| >= 0.6": the 90 % interval's farther end); for a gain shown
    ('reproduced', 'smaller than the paper's'), the gaps below the two-sided 95 % interval's lower end; "" else."""
    from scipy import stats
    if not (np.isfinite(gap) and np.isfinite(se) and np.isfinite(df) and df > 0):
        return ""
    if verdict in (NO_EFFECT, NO_EFFECT_INSIDE):
        return f"|gap| >= {abs(gap) + float(stats.t.ppf(1 - ALPHA, df)) * se:.1f}"
    if verdict in (REPRODUCED, SMALLER):
        return f"gap < {signed(gap - float(stats.t.ppf(1 - ALPHA / 2, df)) * se)}"
    return ""
