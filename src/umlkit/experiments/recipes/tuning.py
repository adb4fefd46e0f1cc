"""Reading a tuned value back: the learning rates, omegas and other hyperparameters that a paper's sweep chose and
its YAML configuration stores, for every paper alike.

Each paper keeps its choices as nested mappings in ``configs/<paper>/*.yaml`` (e.g. ``lr.quick.cars.VPT (B)``, or a
per-profile default). :func:`chosen` walks the candidate key paths in order - the most specific first, the
fallbacks after - and returns the first number found; when none is there it raises one error that names the file,
every path it tried and the sweep that makes the value. Written by hand: it is a lookup in this project's own
configuration layout. A sweep's validation scores are read back from its records by :func:`lr_sweep_frame`, and
:func:`mark_choice` marks each row's best and whether it lies inside the grid (which grid, on which validation
classes, is each paper's). A :class:`Sweep` declares one sweep - its units, each unit's grid, how a (unit, value,
seed) becomes a record key - and derives its jobs; every paper's sweep is one.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from umlkit.experiments.runs.records import cached_record, stored_record

__all__ = ["chosen", "NotTuned", "mark_choice", "lr_sweep_frame", "Sweep", "validation_beside"]


class NotTuned(KeyError):
    """No tuned value is configured for what a row needs (its sweep has not been run or not entered)."""


def _walk(block: Mapping, path: Sequence[str]):
    node = block
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def chosen(block: Mapping | None, paths: Sequence[Sequence[str]], *, file: str, what: str, sweep: str) -> float:
    """The first number found at one of ``paths`` (key sequences) in ``block``; ``file`` and ``what`` name where
    and what was looked for, ``sweep`` how to make it. A path that ends on a mapping does not count."""
    for path in paths:
        node = _walk(block or {}, path)
        if isinstance(node, (int, float)) and not isinstance(node, bool):
            return float(node)
    tried = " or ".join(".".join(map(str, p)) for p in paths) or "(no path)"
    raise NotTuned(f"{file} has no {what} (looked for {tried}): {sweep}")


def mark_choice(frame: pd.DataFrame, name: str, score: str) -> pd.DataFrame:
    """A sweep's selection in place: ``chosen`` marks each ``name`` group's best ``score`` (the first on a tie),
    ``interior`` says whether that best lies strictly inside the rates (``lr``) the group tried and no edge rate of
    the grid ties it (a tie with the edge is an edge: the grid is extended there; issue 76), None on the other
    lines; ``tied edge`` names the edge ("low" / "high") a chosen interior rate ties, else ""."""
    best = frame.loc[frame.groupby(name, sort=False)[score].idxmax()]
    frame["chosen"] = frame.index.isin(best.index)
    grid = frame.groupby(name, sort=False)["lr"].agg(["min", "max"])
    top = frame.groupby(name, sort=False)[score].max()
    tied = {}
    for unit, g in frame.groupby(name, sort=False):
        at = g.loc[g[score] >= top[unit], "lr"]
        tied[unit] = "high" if (at == grid.loc[unit, "max"]).any() else ("low" if (at == grid.loc[unit, "min"]).any()
                                                                         else "")
    frame["interior"] = [bool(grid.loc[r, "min"] < lr < grid.loc[r, "max"] and not tied[r]) if c else None
                         for r, lr, c in zip(frame[name], frame["lr"], frame["chosen"])]
    frame["tied edge"] = [tied[r] if c and grid.loc[r, "min"] < lr < grid.loc[r, "max"] else ""
                          for r, lr, c in zip(frame[name], frame["lr"], frame["chosen"])]
    return frame


def lr_sweep_frame(paper: str, jobs, profile: str = "quick", train: bool = False, *, name: str = "method",
                   metrics: Sequence[str] = ("R@1", "MAP@R"), dataset: str = "CUB", select_on: str = "MAP@R",
                   runner: str = "train_analysis") -> pd.DataFrame:
    """A learning-rate sweep's validation scores from its records: one line per job ``(folder, "<row>-lr<x>-...",
    key)`` with the row (column ``name``), ``lr``, ``val <metric>`` on ``dataset`` and the record's seconds;
    ``chosen`` marks each row's best by ``val <select_on>`` and ``interior`` says whether that best lies strictly
    inside the rates the row tried (None on the other lines). Missing records are skipped unless ``train``."""
    lines = []
    for table, label, key in jobs:
        rec = (cached_record(paper, table, label, key, runner, profile, log=None) if train
               else stored_record(key, profile))
        if rec is None:
            continue
        lines.append({name: label.rsplit("-lr", 1)[0], "lr": key["config"]["optimizer"]["lr"],
                      **{f"val {m}": v[dataset] for m, v in rec["result"]["test"].items() if m in metrics},
                      "seconds": rec["seconds"]})
    out = pd.DataFrame(lines)
    return out if out.empty else mark_choice(out, name, f"val {select_on}")


@dataclass(frozen=True)
class Sweep:
    """One tuning sweep as a declaration, the same for every paper: ``units(profile)`` lists what one value is chosen
    for (a method, a row, a (backbone, method) pair), in the order they train; ``grid(unit)`` the values a unit
    tries (``None``: a reference run without a value, e.g. a method without guidance); ``key(unit, value, profile,
    seed)`` the record key of one validation run; ``label`` the record label (``{unit}``, ``{value}``, ``{seed}``
    and ``name(unit)`` as ``{name}``). :meth:`jobs` derives the job list; the choice and its edge check are
    :func:`mark_choice` on the records' validation scores (:func:`lr_sweep_frame`)."""
    folder: str
    units: Callable[[str], Sequence]
    grid: Callable[..., Sequence[float] | None]
    key: Callable[..., dict]
    label: str | Callable[..., str] = "{name}-lr{value:g}-seed{seed}"   # or label(unit, value, seed)
    reference_label: str = "{name}-seed{seed}"   # a unit without a grid: one run, no value
    name: Callable[..., str] = str
    runner: Callable[..., str | None] = lambda unit: None   # None: the job list's default runner (3-tuples)

    def jobs(self, profile: str = "quick", seed: int = 0, units: Sequence | None = None) -> list[tuple]:
        """(folder, label, key[, runner]) of every validation run: each unit (those in ``units``, default all) x
        each value of its grid, seed ``seed``."""
        out = []
        for unit in self.units(profile):
            if units is not None and unit not in units:
                continue
            runner, name, grid = self.runner(unit), self.name(unit), self.grid(unit)
            for value in (grid if grid is not None else [None]):
                if callable(self.label) and value is not None:
                    label = self.label(unit, value, seed)
                else:
                    label = (self.reference_label if value is None else self.label).format(
                        name=name, unit=unit, value=value, seed=seed)
                key = self.key(unit, value, profile, seed)
                out.append((self.folder, label, key) if runner is None else (self.folder, label, key, runner))
        return out


def validation_beside(spec, cmp: pd.DataFrame, chosen: Mapping[tuple, tuple[float, float]],
                      unit_of: Callable, dataset_of: Callable, metric: str = "MAP@R",
                      value: str = "chosen rate") -> pd.DataFrame:
    """The validation number behind each tuned row's test number (the NAACL reproducibility checklist's ask): one
    line per row of ``spec`` whose unit (``unit_of(row)``, None for an untuned row) has a choice in ``chosen``
    (``{unit: (chosen value, its validation score)}``), with the chosen value, the validation ``metric`` it won with
    and the row's test ``metric`` on ``dataset_of(row)`` in ``cmp``."""
    lines = []
    for row in spec.rows:
        unit = unit_of(row)
        if unit is None or unit not in chosen:
            continue
        sel = ((cmp["method"] == row.method) & (cmp["setting"] == row.setting) & (cmp["section"] == row.section)
               & (cmp["dataset"] == dataset_of(row)) & (cmp["metric"] == metric)) if not cmp.empty else []
        test = cmp.loc[sel, "measured"] if len(sel) else pd.Series(dtype=float)
        v, score = chosen[unit]
        lines.append({"row": row.title, "source": dataset_of(row), value: f"{v:g}",
                      f"validation {metric}": round(float(score), 1),
                      f"test {metric}": round(float(test.iloc[0]), 1) if len(test) == 1 else float("nan")})
    return pd.DataFrame(lines).set_index(["row", "source"]) if lines else pd.DataFrame()
