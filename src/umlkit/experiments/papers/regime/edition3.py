"""The regime map, third edition: the cheap remedies on ooDML's FID axis x images per class.

Declared in ``configs/regime/edition3.yaml`` before any of its runs. On ooDML's quick recipe for the CUB-like source
(:mod:`umlkit.experiments.recipes.source`: the tiny ViT v2, Margin (D), 10 epochs), every cell - one of three
FID-ordered splits (default, middle, hardest) x 2, 4 or all (12) training images per class - trains seven rows:
the linear probe, LayerNorm tuning (Basu et al., AAAI 2024), BitFit (Ben Zaken et al., ACL 2022), LoRA (Hu et al.,
ICLR 2022), PUMA, full fine-tuning and LP-FT (Kumar et al., ICLR 2022, the head first: the engine's
``train.warmup_epochs``). Full fine-tuning's runs also evaluate WiSE-FT (Wortsman et al., CVPR 2022, Eq. 1: the
weights mixed between the run's start and end at ``wise_ft``; :mod:`umlkit.train.wise_ft`), an analysis of the same
run; the WiSE-FT row reports the mixture whose coefficient won on the cell's validation classes. The frozen backbone
of each split is the floor.

Protocol: every row's rate is chosen per cell on the split's validation classes (ooDML's last 30 % of the training
classes, seed 0), by validation R@1 over its grid, extended until interior or the cap (:func:`tuning_frame`); the
choices are entered under ``lr`` in the file and a test checks them against the records. Records live under PUMA's
folder like the other editions (``results/<profile>/records/puma/regimemapthirdedition/``); job lists
``umlkit records train regime map3-tuning`` and ``... map3``. Quick profile only.
"""
from __future__ import annotations

import copy
import sys
from functools import lru_cache

import pandas as pd

from umlkit.experiments.papers.regime import config as first
from umlkit.experiments.recipes import paper_configs
from umlkit.experiments.recipes import source as source_recipe
from umlkit.experiments.recipes.tuning import NotTuned, Sweep, chosen, mark_choice
from umlkit.experiments.tables.builder import build_tables
from umlkit.experiments.tables.table import Row, Table

PAPER = "puma"
DECLARED = first.DECLARED["edition3"]
TABLE_NAME = DECLARED["table"]
TUNING_FOLDER = "regime map 3 tuning"
FILE = "configs/regime/edition3.yaml"
WISE = "WiSE-FT"   # the row computed from full fine-tuning's runs


@lru_cache(maxsize=1)
def settings() -> dict:
    """``configs/regime/edition3.yaml``: methods, splits, data levels, recipe and the tuning's choices."""
    return paper_configs.read_yaml("regime", "edition3.yaml")


def cells() -> list[dict]:
    """Every cell, split-major: ``{split: name, data: 4 | 16 | "all"}``."""
    return [{"split": s, "data": d} for s in settings()["splits"] for d in settings()["data"]]


def setting(cell: dict) -> str:
    """A cell's ``setting`` key, ``split=<name>;data=<k>``; the floor's is ``split=<name>``."""
    return f"split={cell['split']}" + (f";data={cell['data']}" if cell.get("data") is not None else "")


# ------------------------------------------------------------------------------------------------ runs
def rate(cell: dict, method: str) -> float:
    """The rate ``method`` trains with in ``cell``: the file's ``lr.<split>.<data>.<method>``."""
    return chosen(settings().get("lr"), [(cell["split"], str(cell["data"]), method)], file=FILE,
                  what=f"rate for {method} at {setting(cell)}",
                  sweep=f"train `umlkit records train regime map3-tuning`, then enter regime.edition3.tuning_frame()'s "
                        f"choice under lr.{cell['split']}.{cell['data']}.{method}")


def run_config(cell: dict, method: str, seed: int = 0, lr: float | None = None, validation: bool = False,
               profile: str = "quick") -> dict:
    """The resolved ``fit`` configuration of one run of ``method`` (a ``methods`` value of the file, or
    ``zero_shot``) in ``cell``, at ``lr`` (default: :func:`rate`); ``validation`` trains on the split's validation
    protocol (the tuning runs)."""
    s = settings()
    if profile != "quick":
        raise ValueError("the regime map is the quick profile's (its runs are declared on UML-Mini)")
    if method not in (*s["methods"].values(), "zero_shot"):
        raise ValueError(f"method must be one of {(*s['methods'].values(), 'zero_shot')}, got {method!r}")
    split = int(s["splits"][cell["split"]])
    if method == "zero_shot":
        return source_recipe.run_config(profile, method="zero_shot", source=s["source"], split=split)
    lr = rate(cell, method) if lr is None else float(lr)
    cfg = copy.deepcopy(source_recipe.run_config(profile, method=s["loss"], source=s["source"], split=split,
                                                 seed=seed, lr=lr, validation=validation))
    cfg["model"]["method"] = "full" if method == "lpft" else method
    cfg["model"]["options"] = dict((s.get("options") or {}).get(method, {}))
    cfg["objective"] = [*cfg["objective"], {"name": "model_regularizer", "weight": 1.0, "options": {}}]
    cfg["data"]["few_shot"] = None if cell["data"] == "all" else int(cell["data"])
    # a batch holds at most the images there are and the classes the sampler can fill it with (the hardest split's
    # 48 validation-protocol training classes: 96 = 48 x 2 images per class)
    classes, per_class = len(cfg["data"]["splits"][s["source"]]["train"]), int(cfg["data"]["samples_per_class"])
    images = classes * (cfg["data"]["few_shot"] or per_class)
    cfg["data"]["batch_size"] = min(int(cfg["data"]["batch_size"]), classes * per_class, images - images % per_class)
    if method == "lpft":
        cfg["train"]["warmup_epochs"] = int(s["lp_epochs"])
        cfg["train"]["epochs"] += int(s["lp_epochs"])
    cfg["train"]["eval_every"] = cfg["train"]["epochs"]
    if not validation:   # the table's runs also measure MAP@R, the second metric of an R@1 claim at the ceiling
        cfg["train"]["metrics"] = ["R@1", "MAP@R"]
    if method == "full":
        cfg["train"]["wise_ft"] = [float(a) for a in s["wise_ft"]]
    cfg["name"] = f"regime3-{cell['split']}-{cell['data']}-{method}"
    return cfg


def row_config(row: Row, seed: int, profile: str, overrides=()) -> dict:
    if overrides:
        raise ValueError("the regime map's runs take no overrides (they are declared in configs/regime)")
    return run_config(row.spec["cell"], row.spec["method"], seed, profile=profile)


def map3_rows() -> list[Row]:
    """Per split the frozen backbone, then per cell the seven rows and WiSE-FT (full fine-tuning's runs)."""
    rows, methods = [], settings()["methods"]
    for split in settings()["splits"]:
        floor = {"split": split, "data": None}
        rows.append(Row(method="Zero-Shot", setting=setting(floor), runner="zero_shot", group=split,
                        spec={"cell": floor, "method": "zero_shot", "seeds": (0,)}, seed_free=True,
                        name=f"Zero-Shot / {setting(floor)}", label=f"{split}-zero-shot"))
        for cell in (c for c in cells() if c["split"] == split):
            tag = f"{split}-{cell['data']}"
            for name, method in [*methods.items(), (WISE, "full")]:
                rows.append(Row(method=name, setting=setting(cell), runner="train", group=split,
                                spec={"cell": cell, "method": method, "wise": name == WISE},
                                name=f"{name} / {setting(cell)}", label=f"{tag}-{method}"))
    return rows


def scores(result: dict, row: Row) -> dict:
    """R@1 (and MAP@R where the run measured it) on the CUB-like test classes; the WiSE-FT row: the mixture whose
    coefficient :func:`wise_alpha` chose."""
    if row.spec.get("wise"):
        alpha = wise_alpha(row.spec["cell"])
        point = next((p for p in result.get("wise_ft", []) if p["alpha"] == alpha), None)
        return _cub_scores(point) if point is not None else {}
    return _cub_scores(result)


def _cub_scores(result: dict) -> dict:
    """``{("CUB", "R@1"): ..., ("CUB", "MAP@R"): ...}`` of a run's (or a WiSE-FT mixture's) test evaluation; the
    runner keeps the metrics beyond R@1 under ``test_metrics`` (records trained before that hold R@1 only)."""
    out = {("CUB", "R@1"): result["test"]["CUB"]}
    extra = (result.get("test_metrics") or {}).get("CUB") or {}
    if "MAP@R" in extra:
        out[("CUB", "MAP@R")] = extra["MAP@R"]
    return out


def columns() -> list[str]:
    return ["CUB"]


def MAP3() -> Table:  # noqa: N802 - built from the configuration, like the other editions
    """The third edition as a table (R@1 on the CUB-like test classes per cell and row), with its claims."""
    return build_tables(PAPER, sys.modules[__name__], first.DECLARED, "quick", names=[TABLE_NAME])[TABLE_NAME]


def claims_env() -> dict:
    return {"splits": list(settings()["splits"])}


# ------------------------------------------------------------------------------------------------ tuning
def tuning_grid(cell: dict, method: str) -> list[float]:
    """The rates a (cell, method) unit tries: its method's grid plus ``tuning.extra.<split>.<data>.<method>``."""
    t = settings()["tuning"]
    extra = (((t.get("extra") or {}).get(cell["split"]) or {}).get(str(cell["data"])) or {}).get(method) or ()
    return sorted({*(float(x) for x in t["grids"][method]), *(float(x) for x in extra)})


def tuning_sweep() -> Sweep:
    """Each (cell, method) unit at each rate of its grid, on the split's validation protocol, seed 0."""
    def key(unit, lr, profile, seed) -> dict:
        return run_config(unit[0], unit[1], seed, lr=lr, validation=True, profile=profile)
    return Sweep(TUNING_FOLDER, units=lambda profile: [(c, m) for c in cells() for m in settings()["methods"].values()],
                 grid=lambda unit: tuning_grid(*unit), key=key,
                 name=lambda unit: f"{unit[0]['split']}-{unit[0]['data']}-{unit[1]}", runner=lambda unit: "train")


def tuning_jobs(profile: str = "quick", seed: int = 0) -> list[tuple]:
    """(record folder, label, key, runner) of every tuning run, cell-major."""
    return tuning_sweep().jobs(profile, seed)


def tuning_frame(profile: str = "quick") -> pd.DataFrame:
    """Per (cell, method) and rate the validation R@1 (and the stored seconds); ``chosen`` marks each unit's best,
    ``interior`` whether it lies strictly inside the rates tried. Read-only: missing records are skipped. (A tuning
    run's "test" classes are its split's validation classes: :func:`umlkit.experiments.recipes.source.run_config`
    with ``validation=True``.)"""
    from umlkit.experiments.runs.records import stored_record
    lines = []
    for unit in tuning_sweep().units(profile):
        for lr in tuning_grid(*unit):
            rec = stored_record(run_config(unit[0], unit[1], 0, lr=lr, validation=True, profile=profile), profile)
            if rec is None:
                continue
            lines.append({"split": unit[0]["split"], "data": str(unit[0]["data"]), "method": unit[1],
                          "unit": f"{unit[0]['split']}-{unit[0]['data']}-{unit[1]}", "lr": lr,
                          "val R@1": rec["result"]["test"]["CUB"], "seconds": rec["seconds"]})
    out = pd.DataFrame(lines, columns=["split", "data", "method", "unit", "lr", "val R@1", "seconds"])
    if out.empty:
        return out.assign(chosen=pd.Series(dtype=bool), interior=pd.Series(dtype=object))
    return mark_choice(out, "unit", "val R@1")


def wise_alpha(cell: dict, profile: str = "quick") -> float | None:
    """The WiSE-FT coefficient of ``cell``: the one with the best validation R@1 on full fine-tuning's tuning run at
    its chosen rate, the smallest on a tie (None before that run exists)."""
    from umlkit.experiments.runs.records import stored_record
    try:
        key = run_config(cell, "full", 0, validation=True, profile=profile)
    except NotTuned:
        return None
    rec = stored_record(key, profile)
    if rec is None:
        return None
    curve = rec["result"].get("wise_ft") or []
    return max(curve, key=lambda p: (p["test"]["CUB"], -p["alpha"]))["alpha"] if curve else None


def map3_jobs(profile: str = "quick") -> list[tuple]:
    """Every run of the third edition whose rate is chosen, seed-major (WiSE-FT shares full fine-tuning's)."""
    from dataclasses import replace

    from umlkit.experiments.tables.table import distinct_jobs
    table, ready = MAP3(), []
    for row in table.rows:
        try:
            run_config(row.spec["cell"], row.spec["method"], 0, profile=profile)
        except NotTuned:
            continue
        ready.append(row)
    return distinct_jobs({TABLE_NAME: replace(table, rows=ready)}, profile)


def _step(lr: float, up: bool) -> float:
    """The next rate of the 1-3-10 ladder the grids use: 1e-3 -> 3e-3 -> 1e-2 (up) or 1e-3 -> 3e-4 (down)."""
    import math
    exp = math.floor(math.log10(lr) + 1e-9)
    mant = round(lr / 10 ** exp, 6)
    if up:
        return (3.0 if mant < 3 else 10.0) * 10 ** exp
    return (3.0 * 10 ** (exp - 1)) if mant < 3 else 1.0 * 10 ** exp


def edge_extensions(frame: pd.DataFrame) -> dict:
    """``{split: {data: {method: [rate]}}}``: for every unit of :func:`tuning_frame` whose choice sits on its grid's
    edge and whose grid is below the cap, the next rate beyond that edge (what ``tuning.extra`` gains)."""
    cap = int(settings()["tuning"]["cap"])
    out: dict = {}
    for unit, g in frame.groupby("unit", sort=False):
        best = g[g["chosen"]].iloc[0]
        cell = {"split": best["split"], "data": best["data"] if best["data"] == "all" else int(best["data"])}
        if len(g) < len(tuning_grid(cell, best["method"])):   # the grid is not measured through yet
            continue
        if bool(best["interior"]) or len(g) >= cap:
            continue
        # beyond the edge the choice sits on, or the edge it ties (a tie with the grid's edge is an edge)
        tie = best.get("tied edge", "")
        up = tie == "high" or (not tie and float(best["lr"]) >= float(g["lr"].max()))
        edge = float(g["lr"].max() if up else g["lr"].min())
        rate = float(f"{_step(edge, up):.0e}")
        out.setdefault(best["split"], {}).setdefault(str(best["data"]), {})[best["method"]] = [rate]
    return out
