"""The verdict plan (issue 76): the family-wise error rate, the looks a claim may have and the per-metric margins,
second metrics and kinds, read from ``configs/verdict_plan.yaml`` (frozen before the board's second edition ran).

* :func:`alpha`: the family-wise error rate per paper; every claim is tested two-sided (each direction at
  alpha / 2) inside Holm (:func:`umlkit.experiments.claims.verdicts.holm_adjust`).
* :func:`planned_looks`: the looks a claim is tested for from its first look on (Bonferroni over the looks): the
  plan's ``max`` for a claim that may get more seeds (a table with runs of its own), more where it was looked at
  more often already, one for a claim of a table computed from other tables' records.
* :func:`metric_rule`: per metric (glob patterns, first match wins) the equivalence margin of "no effect", the
  second metric an R@k claim is decided on at the ceiling and the kind (``test`` or ``timing``), each with its
  reason.

Why by hand: a small declaration of the book's own rules; the tests themselves are scipy's.
"""
from __future__ import annotations

import fnmatch
from functools import lru_cache
from pathlib import Path

from umlkit._paths import repo_folder
from umlkit._yaml import read_yaml

__all__ = ["PLAN_FILE", "plan_path", "verdict_plan", "alpha", "max_looks", "planned_looks", "metric_rule",
           "margin_of", "KINDS"]

PLAN_FILE = "verdict_plan.yaml"
KINDS = ("test", "timing")


def plan_path() -> Path:
    return repo_folder("configs", what="the verdict plan") / PLAN_FILE


@lru_cache(maxsize=4)
def _read(path: str) -> dict:
    raw = read_yaml(Path(path), default=None)
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: the verdict plan must be a mapping with alpha, looks and metrics")
    a = raw.get("alpha")
    if not isinstance(a, (int, float)) or not 0 < a < 0.5:
        raise ValueError(f"{path}: alpha must be a number in (0, 0.5), got {a!r}")
    looks = raw.get("looks") or {}
    if not isinstance(looks.get("max"), int) or looks["max"] < 1 or looks.get("spending") != "bonferroni":
        raise ValueError(f"{path}: looks needs max (a whole number >= 1) and spending: bonferroni, got {looks!r}")
    rules = raw.get("metrics")
    if not isinstance(rules, list) or not rules:
        raise ValueError(f"{path}: metrics must be a list of rules (match, margin or kind, reason)")
    for i, r in enumerate(rules):
        _check_rule(path, i, r)
    return raw


def _check_rule(path: str, i: int, r) -> None:
    where = f"{path}: metrics[{i}]"
    if not isinstance(r, dict) or not isinstance(r.get("match"), list) or not r["match"]:
        raise ValueError(f"{where}: a rule needs match (a list of metric names or glob patterns)")
    kind = r.get("kind", "test")
    if kind not in KINDS:
        raise ValueError(f"{where}: kind must be one of {KINDS}, got {kind!r}")
    if kind == "test" and not (isinstance(r.get("margin"), (int, float)) and r["margin"] > 0):
        raise ValueError(f"{where}: a tested metric needs margin > 0 (points of the metric), got {r.get('margin')!r}")
    if not str(r.get("reason", "")).strip():
        raise ValueError(f"{where}: every rule says why (reason)")


def verdict_plan(path: Path | None = None) -> dict:
    """The plan file, checked (a malformed one is refused naming the file and the entry)."""
    return _read(str(path or plan_path()))


def alpha() -> float:
    return float(verdict_plan()["alpha"])


def max_looks() -> int:
    return int(verdict_plan()["looks"]["max"])


def planned_looks(looks_taken: int, extendable: bool) -> int:
    """The looks a claim's p-value is multiplied by: one for a claim that can never get more seeds, else the plan's
    maximum, or the looks it had already where those are more."""
    taken = max(1, int(looks_taken))
    return max(max_looks(), taken) if extendable else taken


@lru_cache(maxsize=256)
def metric_rule(metric: str) -> dict:
    """``{"margin", "second", "kind", "reason", "match"}`` of the first rule that matches ``metric``."""
    for r in verdict_plan()["metrics"]:
        if any(fnmatch.fnmatchcase(metric, pat) for pat in r["match"]):
            return {"margin": float(r.get("margin", float("nan"))), "second": tuple(r.get("second") or ()),
                    "kind": r.get("kind", "test"), "reason": " ".join(str(r["reason"]).split()),
                    "match": tuple(r["match"])}
    raise KeyError(f"metric {metric!r} has no rule in {plan_path()} (add one with match, margin and reason)")


def margin_of(metric: str) -> float:
    """The equivalence margin of ``metric`` (NaN for a timing)."""
    return metric_rule(metric)["margin"]
