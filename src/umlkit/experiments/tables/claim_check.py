"""A table's declared claims against its measured cells: each claim's test (:func:`check_claims`), its second
metric where R@k sits at the ceiling, a timing shown as a measured ratio, the floor marks that withhold a verdict,
and the looks its p-value is adjusted for (:func:`table_claims`); the family rule itself is
:func:`umlkit.experiments.claims.verdicts.holm_adjust`.

* A claim's cells are selected by their section, method, setting and dataset; a ``metric`` in a selector is the
  claim's own and is dropped when the same cells are read on another metric (the VPTSP claims of Tables 1-5 name
  ``metric: R@1`` in their selectors, which hid their MAP@R comparison at the ceiling).
* Where both cells of an R@k claim sit at or above :data:`umlkit.experiments.claims.verdicts.CEILING`, the claim is
  tested on the first second metric its rule declares (``configs/verdict_plan.yaml``: MAP@R, else mAP@1000) that
  the table measures for both cells, and says so (``decided on``); without one it reads ``at ceiling`` and
  ``second metric`` says "not measured".
* A claim on a timing metric (the plan's ``kind: timing``) shows its gap and spread and reads
  :data:`umlkit.experiments.claims.verdicts.TIMING`: repeated timings are not independent runs.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from umlkit.experiments.claims import plan as verdict_plan
from umlkit.experiments.claims.more_seeds import looks_of
from umlkit.experiments.claims.verdicts import (
    AT_CEILING,
    CEILING,
    MISSING,
    STALE,
    TIMING,
    VERDICTS,
    claim_test,
)
from umlkit.experiments.tables.floors import cell_mark, floor_verdict, mark_floors

__all__ = ["table_claims", "check_claims", "at_ceiling", "cell_name", "CELL_KEYS"]

CELL_KEYS = ("section", "method", "setting", "dataset")


def cell_name(sel: Mapping) -> str:
    row = " / ".join(x for x in (sel.get("section", ""), sel.get("method", ""), sel.get("setting", "")) if x)
    return f"{row} ({sel['dataset']})"


def table_claims(spec, cmp: pd.DataFrame, missing: bool = True) -> pd.DataFrame:
    """The table's declared claims with verdicts (:func:`check_claims`), floor marks, looks taken (``looks``) and
    the looks the verdict plan tests each for (``planned looks``: a table with runs of its own may extend a claim).
    A claim a cell of which was not measured (no stored record, or a side file its key needs is missing) is kept
    with the verdict :data:`MISSING` and the unmeasured cells named in ``missing`` - a declared claim never vanishes
    (``missing=False``: measured ones only)."""
    have = set() if cmp.empty else {tuple(r) for r in cmp[list(CELL_KEYS)].to_numpy()}

    def absent(c) -> list[str]:
        return [cell_name(s) for s in (c.a, c.b) if tuple(s[k] for k in CELL_KEYS) not in have]
    usable = [c for c in spec.claims if not absent(c)]
    checked = check_claims(cmp, usable) if usable else pd.DataFrame()
    if usable and spec.floor is not None:
        marked = mark_floors(spec, cmp)
        for i, c in enumerate(usable):
            why = floor_verdict(spec, c, marked)
            if why:
                checked.at[i, "verdict"] = why
        # each side's floor mark, shown to the reader and checked over the whole board
        checked["mark A"] = [cell_mark(c.a, c.metric, marked) for c in usable]
        checked["mark B"] = [cell_mark(c.b, c.metric, marked) for c in usable]
    if not checked.empty:
        # no test verdict rests on a record trained before a change of its code or options (issue 78): the gap is
        # shown; a claim undecided for another reason (a floor, the ceiling, a timing) keeps that reason
        stale = (checked["stale"] != "") & checked["verdict"].isin(VERDICTS)
        checked["verdict on stale records"] = checked["verdict"].where(stale, "")
        checked.loc[stale, "verdict"] = STALE
        checked["looks"] = [looks_of(spec, t, n) for t, n in zip(checked["claim"], checked["seeds"])]
        checked["planned looks"] = [verdict_plan.planned_looks(k, bool(spec.rows)) for k in checked["looks"]]
        checked.insert(0, "table", spec.table)   # which table a claim is on, for a chapter with several
    if not missing:
        return checked
    lost = [{"table": spec.table, "claim": c.text, "verdict": MISSING, "missing": "; ".join(absent(c)), "seeds": 0,
             "looks": 1, "metric": c.metric} for c in spec.claims if absent(c)]
    if not lost:
        return checked
    out = pd.concat([checked, pd.DataFrame(lost)], ignore_index=True) if not checked.empty else pd.DataFrame(lost)
    order = {c.text: i for i, c in enumerate(spec.claims)}
    return out.sort_values("claim", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)


def _claim_cell(sub: pd.DataFrame, sel: Mapping):
    mask = np.ones(len(sub), dtype=bool)
    for k, v in sel.items():
        if k != "metric":   # the claim's own metric: the caller has chosen the metric already
            mask &= (sub[k] == v).to_numpy()
    if mask.sum() != 1:
        raise KeyError(f"claim cell {dict(sel)} matches {int(mask.sum())} rows, expected exactly 1")
    return sub[mask].iloc[0]


def _claim_values(x) -> Mapping:
    v = x.get("values")
    return v if isinstance(v, Mapping) and v else {0: float(x["measured"])}


def _test_claim(cmp: pd.DataFrame, c, metric: str) -> tuple:
    """(cell A, cell B, :func:`claim_test` result) of claim ``c`` on ``metric``."""
    sub = cmp[cmp["metric"] == metric]
    ca, cb = _claim_cell(sub, c.a), _claim_cell(sub, c.b)
    res = claim_test(_claim_values(ca), _claim_values(cb), paired=c.paired, exact_a=bool(ca.get("seed_free", False)),
                     exact_b=bool(cb.get("seed_free", False)), margin=c.margin)
    return ca, cb, res


def at_ceiling(metric: str, a: float, b: float) -> bool:
    """Whether two cells of an R@k metric both sit at or above :data:`CEILING` (no room left for a gain)."""
    return metric.startswith("R@") and min(a, b) >= CEILING


def _second(cmp: pd.DataFrame, c) -> tuple[str, tuple] | None:
    """(metric, (cell A, cell B, test)) of the first declared second metric of ``c`` the table measures for both
    cells, or None."""
    for metric in verdict_plan.metric_rule(c.metric)["second"]:   # an equivalence keeps its margin, in points
        try:
            return metric, _test_claim(cmp, c, metric)
        except KeyError:
            continue
    return None


def _row(c, ca, cb, res: dict, metric: str) -> dict:
    both = pd.notna(ca["paper"]) and pd.notna(cb["paper"])
    in_paper = (abs(ca["paper"] - cb["paper"]) < c.margin if c.margin is not None else ca["paper"] > cb["paper"])
    return {"claim": c.text, "paper A": ca["paper"], "paper B": cb["paper"],
            "holds in paper": bool(in_paper) if both else None,
            "paper gap": float(ca["paper"] - cb["paper"]) if both and c.margin is None else float("nan"),
            "measured A": round(ca["measured"], 1), "measured B": round(cb["measured"], 1),
            "gap": round(ca["measured"] - cb["measured"], 1), "test gap": res["gap"], "low": res["low"],
            "high": res["high"], "seeds": res["n"], "seed spread": round(max(ca["spread"], cb["spread"]), 1),
            "p": res["p"], "p against": res["p_against"], "se": res["se"], "df": res["df"], "test": res["test"],
            "metric": metric, "margin": c.margin if c.margin is not None else float("nan"),
            "verdict": res["verdict"], "stale": _stale_of(ca, cb)}


def _stale_of(ca, cb) -> str:
    """The stale parts of either compared cell's records (\"\" when both are current)."""
    parts = {p for x in (ca, cb) for p in str(x.get("stale", "") or "").split(",") if p and p != "nan"}
    return ",".join(sorted(parts))


def check_claims(cmp: pd.DataFrame, claims: Sequence) -> pd.DataFrame:
    """Each claim on the paper's numbers and on the measured ones, with the test of :func:`claim_test` on the
    cells' per-seed values (``values`` of :func:`umlkit.experiments.tables.table.compare`), its 95 % interval, the
    paper's gap and the raw verdict; at the ceiling, the same on its second metric (see the module docstring)."""
    rows = []
    for c in claims:
        ca, cb, res = _test_claim(cmp, c, c.metric)
        row = _row(c, ca, cb, res, c.metric)
        row["claim metric"], row["decided on"], row["second metric"] = c.metric, "", ""
        if verdict_plan.metric_rule(c.metric)["kind"] == "timing":
            row["verdict"] = TIMING
        elif res["verdict"] in VERDICTS and at_ceiling(c.metric, ca["measured"], cb["measured"]):
            second = _second(cmp, c)
            if second is None:
                row.update(verdict=AT_CEILING, **{"second metric": "not measured"})
            else:
                metric, (sa, sb, sres) = second
                row = {**_row(c, sa, sb, sres, metric), "claim metric": c.metric, "decided on": metric,
                       "second metric": metric, "ceiling A": round(ca["measured"], 1),
                       "ceiling B": round(cb["measured"], 1)}
        rows.append(row)
    return pd.DataFrame(rows)
