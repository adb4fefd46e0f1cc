"""Sanity floors: where a trained cell stands against the frozen pretrained backbone (and random initialisation) of
its own table, and which claims therefore get no verdict.

A table declares its floor once (``floor:`` in its ``tables.yaml``, a :class:`Floor`): the row holding the frozen
backbone's cells, optionally the one holding random initialisation's, and which part of a trained cell's
``setting`` must agree with the floor cell's (all of it, none, or named keys of ``key=value;...`` settings). A
table without a frozen backbone of its own declares ``floor: {exempt: <why>}`` and its page prints the reason.

The marks (:func:`mark_floors`), in the order they are checked; ``noise`` is :func:`floor_noise`, max(1 point, the
standard error of the cell's mean over seeds):

* *collapsed* (⊥): within noise of random initialisation, or under it;
* *below floor* (↓): more than noise below the frozen backbone;
* *collapsed seed* (‡): the mean escapes, but a seed lies more than 1 point below the frozen backbone and below the
  median of the cell's seeds by more than max(1 point, three times their scaled median absolute deviation, 1.4826 x
  MAD) - a run that failed on that seed. The median and MAD are robust: two collapsed seeds of five cannot hide each
  other (ooDML's ProxyAnchor on the SOP-like default split: 25.3, 11.5, 15.2, 26.1, 25.8 against a frozen 23.5, where
  a rule on the other seeds' spread found neither);
* *≈ frozen* (≈): the cell lies within noise of its own frozen backbone - it did not move from it, so a comparison
  won or lost on it describes the backbone (judged per cell: PUMA's few-shot cells at 8 and 16 images per class,
  53.9 and 55.4 against a frozen 54.9, where the same method moved at fewer images).

A claim comparing such a cell reads "not comparable: ..." (:func:`floor_verdict`), unless it pairs a run with
itself or compares with the floor row, where the fall is the finding. Why by hand: the rule is the book's own
(the Metric Learning Reality Check's point that a trained number means little without its untrained baseline),
and no library marks table cells against a baseline row.
"""
from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from umlkit.experiments.claims.verdicts import NOT_COMPARABLE
from umlkit.experiments.tables.labels import readable

__all__ = ["Floor", "FLOOR_NOISE", "BELOW", "COLLAPSED", "SEED_COLLAPSE", "FROZEN_LIKE", "MARKS", "floor_noise",
           "mark_floors", "floor_note", "floor_verdict", "setting_keys", "cell_mark"]

FLOOR_NOISE = 1.0   # R@1 points: a trained cell counts as below its floor only beyond max(this, its standard error)
BELOW, COLLAPSED, SEED_COLLAPSE, FROZEN_LIKE = "below floor", "collapsed", "collapsed seed", "≈ frozen"
MARKS = {COLLAPSED: "⊥", BELOW: "↓", SEED_COLLAPSE: "‡", FROZEN_LIKE: "≈"}   # the symbol a table cell carries
_WORDS = {COLLAPSED: "collapsed", BELOW: "below its frozen backbone",
          SEED_COLLAPSE: "has a collapsed seed", FROZEN_LIKE: "did not move from its frozen backbone"}


@dataclass(frozen=True)
class Floor:
    """``frozen``: the method cell of the row holding the frozen pretrained backbone's values; ``random``: the one
    holding random initialisation's (optional); ``per_setting``: a trained cell is compared with the floor cell of
    the same ``setting`` (False: of any setting, one floor cell per dataset); ``match``: instead, only these keys of
    a ``key=value;...`` setting must agree (e.g. ``[shift]``: the zero-shot cell of the same shift, whatever the
    shots); ``metrics``: the metrics it judges (default: all; a probe of what the feature forgot is not judged
    against the frozen backbone, falling below it is that table's finding); ``exempt``: the table has no frozen
    backbone of its own, and this says why (no marks)."""
    frozen: str = ""
    random: str | None = None
    per_setting: bool = True
    match: Sequence[str] | None = None
    metrics: Sequence[str] | None = None
    exempt: str = ""

    def __post_init__(self):
        if bool(self.frozen) == bool(self.exempt):
            raise ValueError(f"a floor names its frozen row or says why the table is exempt, not both or neither: "
                             f"frozen={self.frozen!r}, exempt={self.exempt!r}")
        for name in ("match", "metrics"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, tuple(getattr(self, name)))

    @property
    def rows(self) -> set[str]:
        return {x for x in (self.frozen, self.random) if x}


def setting_keys(setting: str) -> dict[str, str]:
    """``"shift=families;shots=1"`` -> ``{"shift": "families", "shots": "1"}`` (a part without "=" keys itself)."""
    out = {}
    for part in filter(None, str(setting).split(";")):
        k, _, v = part.partition("=")
        out[k] = v
    return out


def _floor_key(f: Floor, r) -> tuple:
    if f.match is not None:
        s = setting_keys(r["setting"])
        return r["dataset"], r["metric"], tuple(s.get(k, "") for k in f.match)
    return (r["dataset"], r["metric"]) + ((r["setting"],) if f.per_setting else ())


def floor_noise(spread, seeds) -> float:
    """How far below its floor a cell must lie to be marked: max(:data:`FLOOR_NOISE`, the standard error of its
    mean, spread / sqrt(seeds)). The standard error, not the spread: a run whose seeds scatter widely can sit several
    points below the frozen backbone on average and still within one seed spread of it; withholding a verdict is
    the safe side when the run's mean is below the floor beyond its own uncertainty."""
    if pd.isna(spread):
        return FLOOR_NOISE
    n = float(seeds) if seeds is not None and pd.notna(seeds) and seeds else 1.0   # seeds unknown: the spread itself
    return max(FLOOR_NOISE, float(spread) / np.sqrt(n))


def _collapsed_seed(values, frozen: float) -> bool:
    """Whether a seed fell where the others did not: below ``frozen`` by more than :data:`FLOOR_NOISE` and below
    the median of the cell's seeds by more than max(:data:`FLOOR_NOISE`, three scaled MADs) (three seeds or more;
    the scaled MAD is 1.4826 x the median absolute deviation, the normal spread's robust estimate)."""
    if not isinstance(values, Mapping) or len(values) < 3:
        return False
    v = np.array(list(values.values()), dtype=float)
    median = float(np.median(v))
    mad = 1.4826 * float(np.median(np.abs(v - median)))
    return bool(np.any((v < frozen - FLOOR_NOISE) & (v < median - max(FLOOR_NOISE, 3 * mad))))


def _floor_values(f: Floor, out: pd.DataFrame, method: str, table: str) -> dict:
    sub = out[out["method"] == method]
    keys = [_floor_key(f, r) for _, r in sub.iterrows()]
    if len(set(keys)) < len(keys):
        raise ValueError(f"{table}: floor row {method!r} has several cells per dataset and metric for the floor's "
                         f"setting rule (per_setting={f.per_setting}, match={f.match}); set per_setting or match")
    return dict(zip(keys, sub["measured"]))


def _judged(f: Floor, metric: str) -> bool:
    """Whether the floor judges ``metric``: the floor's ``metrics``, or every metric but a parameter count."""
    return metric in f.metrics if f.metrics is not None else "params" not in metric.lower()


def mark_floors(spec, cmp: pd.DataFrame) -> pd.DataFrame:
    """``cmp`` with ``frozen`` (the frozen backbone's value for the cell, NaN without one) and ``floor`` ("" or one
    of :data:`MARKS`) per cell, by the table's :class:`Floor` (no marks without one, or when it is exempt)."""
    out = cmp.copy()
    out["frozen"], out["floor"] = np.nan, ""
    f = spec.floor
    if f is None or f.exempt or cmp.empty:
        return out
    frozen = _floor_values(f, out, f.frozen, spec.table)
    random = _floor_values(f, out, f.random, spec.table) if f.random else {}
    for i, r in out.iterrows():
        key = _floor_key(f, r)
        if r["method"] in f.rows or key not in frozen or not _judged(f, r["metric"]):
            continue
        noise = floor_noise(r["spread"], r.get("seeds"))
        out.at[i, "frozen"] = frozen[key]
        if key in random and r["measured"] < random[key] + noise:
            out.at[i, "floor"] = COLLAPSED
        elif r["measured"] < frozen[key] - noise:
            out.at[i, "floor"] = BELOW
        elif _collapsed_seed(r.get("values"), frozen[key]):
            out.at[i, "floor"] = SEED_COLLAPSE
    return _mark_unmoved(out)


def _mark_unmoved(out: pd.DataFrame) -> pd.DataFrame:
    """:data:`FROZEN_LIKE` on every cell with a floor that lies within noise of it and carries no other mark."""
    has = out["frozen"].notna()
    if not has.any():
        return out
    noise = [floor_noise(s, n) for s, n in zip(out["spread"], out.get("seeds", pd.Series(1, index=out.index)))]
    near = (out["measured"] - out["frozen"]).abs() <= pd.Series(noise, index=out.index)
    out.loc[has & near & ~out["floor"].astype(bool), "floor"] = FROZEN_LIKE
    return out


def floor_note(cmp: pd.DataFrame) -> str:
    """A sentence for under a table: which rows carry which floor mark, or ""."""
    if "floor" not in cmp or not cmp["floor"].astype(bool).any():
        return ""
    marked = cmp[cmp["floor"].astype(bool)]
    parts = []
    for kind, sym in MARKS.items():
        rows = sorted(set(marked.loc[marked["floor"] == kind, "row"]))
        if rows:
            parts.append(f"{sym} {kind} ({len(rows)} row(s): {', '.join(rows)})")
    text = ("Sanity floors: " + "; ".join(parts) + f". ⊥: at or near random initialisation; ↓: more than max("
            f"{FLOOR_NOISE:g}, the standard error of its mean over seeds) below the frozen pretrained backbone on the "
            f"same split and source - the training failed to keep what the backbone knew; ‡: a seed below the "
            f"backbone and more than max({FLOOR_NOISE:g}, three scaled median absolute deviations) below the "
            f"median of its seeds; ≈: the cell within that noise of its backbone - it did not move from it. No "
            f"claim's verdict rests on such a cell (it reads "
            f"'{NOT_COMPARABLE}').")
    return textwrap.fill(text, 100)   # printed under a table: lines a page shows without a scroll bar (1400 px)


def floor_verdict(spec, claim, marked: pd.DataFrame) -> str | None:
    """"not comparable: X (where) <why>" when a compared cell carries a floor mark - unless the claim compares a
    run with itself (paired) or with a floor row, where a fall below the floor is the finding."""
    f = spec.floor
    if f is None or f.exempt or claim.paired or "floor" not in marked:
        return None
    if {claim.a["method"], claim.b["method"]} & f.rows:
        return None
    for side in (claim.a, claim.b):
        mark = cell_mark(side, claim.metric, marked)
        if mark:
            setting = readable(side["setting"]) if side["setting"] else ""
            where = setting if f.per_setting and setting else ", ".join(x for x in (setting, side["dataset"]) if x)
            return f"{NOT_COMPARABLE}: {side['method']} ({where}) {_WORDS[mark]}"
    return None


def cell_mark(side: Mapping, metric: str, marked: pd.DataFrame) -> str:
    """The floor mark of a claim's cell (``side``: its section/method/setting/dataset) in ``marked``, "" without."""
    if "floor" not in marked or marked.empty:
        return ""
    m = np.ones(len(marked), dtype=bool)
    for k, v in {**side, "metric": metric}.items():
        m &= (marked[k] == v).to_numpy()
    hit = marked[m]
    return str(hit["floor"].iloc[0]) if len(hit) == 1 else ""
