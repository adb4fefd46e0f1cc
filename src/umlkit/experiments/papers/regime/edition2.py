"""The regime map, second edition: the axes the first edition pointed to, run.

The first edition (:mod:`umlkit.experiments.papers.regime.config`) found that full fine-tuning forgets more of
the pretraining attributes than PUMA yet wins retrieval in every mapped cell. Its discussion named what might turn
the ordering: a pretraining broader than the fine-tuning data, a larger backbone, and fine-tuning data in which
something other than the class definition predicts the class. The second edition runs those axes, declared in
``configs/regime/edition2.yaml`` before any of their runs:

* **breadth**: tiny ViTs pretrained by v2's recipe (:data:`umlkit.models.pretrain.RECIPES`) on a world narrower than
  the fine-tuning sources' test classes need (:data:`umlkit.data.mini.PRETRAIN_WORLDS`, ``narrow``), on v2's, and
  on a broader one (``broad``), each fine-tuned on the first edition's *values* split;
* **capacity**: the broad world at the tiny width and at twice it (``vit_wide_uml_patch8_32``);
* **shortcut**: the loaders' split without and with a class-predicting mark on the training images
  (:mod:`umlkit.data.shortcut`);
* **methods**: PUMA, full fine-tuning, a linear probe (the embedding head on the frozen backbone) and LP-FT (Kumar
  et al., ICLR 2022: the head first with the backbone frozen, then everything; here the engine's
  ``train.warmup_epochs``, which drops the backbone's gradients, for ``lp_epochs`` before Table 2's 15 epochs),
  with the frozen backbone of each cell as the floor;
* **rates**: chosen per backbone on its validation classes by the book's protocol (:func:`tuning_jobs`,
  :func:`tuning_frame`); the v2 backbone reuses the PUMA chapter's choices where they exist.

Every run is a ``probed`` record (retrieval plus the attribute probes of the first edition), under PUMA's records
(``results/<profile>/records/puma/regimemapsecondedition/``); job lists ``umlkit records train regime map2`` and
``... map2-tuning``. Quick profile only.
"""
from __future__ import annotations

import copy
import sys
from functools import lru_cache

import pandas as pd

from umlkit.experiments.papers.regime import config as first
from umlkit.experiments.recipes import paper_configs
from umlkit.experiments.recipes import unified as unified_recipe
from umlkit.experiments.recipes.tuning import Sweep, chosen
from umlkit.experiments.tables.builder import build_tables
from umlkit.experiments.tables.table import Row, Table

PAPER = "puma"
DECLARED = first.DECLARED["edition2"]
TABLE_NAME = DECLARED["table"]
TUNING_FOLDER = "regime map 2 tuning"


@lru_cache(maxsize=1)
def settings() -> dict:
    """``configs/regime/edition2.yaml``: methods, backbones, axes, shortcut, tuning and chosen rates."""
    return paper_configs.read_yaml("regime", "edition2.yaml")


def cells() -> list[dict]:
    """Every distinct cell of the axes, in the file's order: ``{backbone, shift, shortcut}``."""
    out = []
    for axis in settings()["axes"].values():
        for c in axis:
            cell = {"backbone": c["backbone"], "shift": c["shift"], "shortcut": bool(c.get("shortcut", False))}
            if cell not in out:
                out.append(cell)
    return out


def setting(cell: dict) -> str:
    """A cell's ``setting`` key: ``backbone=<b>;shift=<s>`` and ``;shortcut`` when marked."""
    return f"backbone={cell['backbone']};shift={cell['shift']}" + (";shortcut" if cell["shortcut"] else "")


# ------------------------------------------------------------------------------------------------ runs
def rate(backbone: str, method: str) -> float:
    """The learning rate of ``method`` on ``backbone``: the PUMA chapter's choice where edition2.yaml reuses it,
    else edition2.yaml's ``lr.<backbone>.<method>`` (chosen by :func:`tuning_frame`)."""
    reuse = (settings()["tuning"].get("reuse") or {}).get(backbone, {})
    if method in reuse:
        return unified_recipe.chosen_lr(reuse[method])
    return chosen(settings().get("lr"), [(backbone, method)], file="configs/regime/edition2.yaml",
                  what=f"rate for {method} on the {backbone} backbone",
                  sweep=f"train `umlkit records train regime map2-tuning`, then enter the choice of "
                        f"regime.tuning_frame() under lr.{backbone}.{method}")


def run_config(cell: dict, method: str, seed: int = 0, lr: float | None = None, profile: str = "quick") -> dict:
    """The resolved ``fit`` configuration of one run: Table 2's second-pass recipe (CurricularFace, 15 epochs) for
    ``method`` (``linear``, ``puma``, ``full``, ``lpft`` or ``zero_shot``) on the cell's backbone, shift and
    shortcut, at ``lr`` (default: :func:`rate`)."""
    if profile != "quick":
        raise ValueError("the regime map is the quick profile's (the full profile's data have no generator "
                         "attributes to split by)")
    known = (*settings()["methods"].values(), "zero_shot")
    if method not in known:
        raise ValueError(f"method must be one of {known}, got {method!r}")
    if method != "zero_shot" and lr is None:
        lr = rate(cell["backbone"], method)
    cfg = unified_recipe.run_config(profile, method="full" if method == "lpft" else method, loss="curricularface",
                                    seed=seed, lr=lr, stage="second")
    cfg["model"]["backbone"] = settings()["backbones"][cell["backbone"]]
    cfg["data"]["datasets"] = list(settings()["datasets"])
    cfg["data"]["splits"] = first.split_of(cell["shift"])
    if cell["shortcut"] and method != "zero_shot":
        cfg["data"]["shortcut"] = dict(settings()["shortcut"])
    if method == "lpft":
        lp = int(settings()["lp_epochs"])
        cfg["train"]["warmup_epochs"] = lp
        cfg["train"]["epochs"] += lp
        cfg["train"]["eval_every"] = cfg["train"]["epochs"]
    # the first edition's run name: its v2 runs on all images (and its frozen backbones) are this edition's too
    cfg["name"] = f"regime-{cell['shift']}-{'none' if method == 'zero_shot' else 'all'}-{method}"
    return cfg


def row_config(row: Row, seed: int, profile: str, overrides=()) -> dict:
    if overrides:
        raise ValueError("the regime map's runs take no overrides (they are declared in configs/regime)")
    cfg = run_config(row.spec["cell"], row.spec["method"], seed, profile=profile)
    return {"config": cfg, "probes": copy.deepcopy(first.settings()["probes"])}


def map2_rows() -> list[Row]:
    rows = []
    for cell in cells():
        tag = setting(cell).replace("backbone=", "").replace(";shift=", "-").replace(";", "-")
        floor = {**cell, "shortcut": False}    # the frozen backbone sees no training image: one floor per column
        rows.append(Row(method="Zero-Shot", setting=setting(cell), runner="probed", group=setting(cell),
                        spec={"cell": floor, "method": "zero_shot", "seeds": (0,)}, seed_free=True,
                        name=f"Zero-Shot / {setting(cell)}", label=f"{tag}-zero-shot"))
        for name, method in settings()["methods"].items():
            rows.append(Row(method=name, setting=setting(cell), runner="probed", group=setting(cell),
                            spec={"cell": cell, "method": method}, name=f"{name} / {setting(cell)}",
                            label=f"{tag}-{method}"))
    return rows


def MAP2() -> Table:  # noqa: N802 - built from the configuration, like the first edition's MAP
    """The second edition as a table: per cell the frozen backbone and the four methods (R@1 per dataset, probe
    accuracies), with its claims; its runs are declared before they exist (``in_progress`` until they all do)."""
    return build_tables(PAPER, sys.modules[__name__], first.DECLARED, "quick", names=[TABLE_NAME])[TABLE_NAME]


def claims_env() -> dict:
    """The cells the claims loop over (their settings), and those whose PUMA claim the first edition makes."""
    return {"cells": [setting(c) for c in cells()],
            "first_edition_cells": [setting(c) for c in cells() if c["backbone"] == "v2" and not c["shortcut"]]}


scores, columns = first.scores, first.columns   # the first edition's cells and columns (the table declares them)


# ------------------------------------------------------------------------------------------------ tuning
def tuning_units() -> list[tuple[str, str]]:
    """(backbone, method) pairs whose rate this edition chooses: every method on every backbone but those the v2
    backbone reuses."""
    reuse = settings()["tuning"].get("reuse") or {}
    return [(b, m) for b in settings()["backbones"] for m in settings()["methods"].values()
            if m not in reuse.get(b, {})]


def tuning_grid(method: str, backbone: str) -> list[float]:
    """The rates a unit tries: its method's grid plus ``tuning.extra.<backbone>.<method>``."""
    t = settings()["tuning"]
    extra = ((t.get("extra") or {}).get(backbone) or {}).get(method) or ()
    return sorted({*(float(x) for x in t["grids"][method]), *(float(x) for x in extra)})


def backbone_ready(backbone: str) -> bool:
    """Whether a backbone's pretrained weights are there (``umlkit data pretrain-mini --recipe <backbone>`` makes
    them)."""
    from pathlib import Path

    import timm

    from umlkit.models.backbones import resolve_backbone_name
    cfg = timm.models.get_pretrained_cfg(resolve_backbone_name(settings()["backbones"][backbone]))
    return cfg is None or not cfg.file or Path(cfg.file).is_file()


def tuning_sweep(backbones=None) -> Sweep:
    """Each (backbone, method) unit at each rate of its grid, on the loaders' split of its backbone with the last
    ``val_fraction`` of every source's training classes held out, evaluated after every epoch."""
    t = settings()["tuning"]

    def key(unit, lr, profile, seed) -> dict:
        cfg = run_config({"backbone": unit[0], "shift": "families", "shortcut": False}, unit[1], seed, lr=lr,
                         profile=profile)
        cfg["data"]["val_fraction"] = float(t["val_fraction"])
        cfg["train"]["eval_every"] = 1
        return cfg
    return Sweep(TUNING_FOLDER, units=lambda profile: [u for u in tuning_units() if backbones is None
                                                       or u[0] in backbones],
                 grid=lambda unit: tuning_grid(unit[1], unit[0]), key=key, name=lambda unit: f"{unit[0]}-{unit[1]}",
                 runner=lambda unit: "train")


def tuning_jobs(profile: str = "quick", backbones=None, seed: int = 0) -> list[tuple]:
    """(record folder, label, key, runner) of every run of :func:`tuning_sweep`."""
    return tuning_sweep(backbones).jobs(profile, seed)


def tuning_frame(profile: str = "quick", train: bool = False) -> pd.DataFrame:
    """Per unit and rate the validation Harmonic R@1 (over the cell's sources) and Unified R@1 after the last
    epoch; ``chosen`` marks each unit's best by ``tuning.select_on`` and ``interior`` whether it lies strictly
    inside the rates tried. Missing records are skipped unless ``train``."""
    from umlkit.experiments.recipes.tuning import mark_choice
    from umlkit.experiments.runs.records import cached_record, stored_record
    from umlkit.experiments.runs.runners import SOURCE_NAMES
    from umlkit.metrics import harmonic_mean
    lines = []
    for folder, label, key, runner in tuning_jobs(profile):
        rec = (cached_record(PAPER, folder, label, key, runner, profile, log=None) if train
               else stored_record(key, profile))
        if rec is None:
            continue
        val = rec["result"]["val"]
        backbone, method = label.split("-")[:2]
        lines.append({"backbone": backbone, "method": method, "unit": f"{backbone}-{method}",
                      "lr": key["optimizer"]["lr"],
                      "val Harmonic": round(harmonic_mean([val[SOURCE_NAMES[d]] for d in settings()["datasets"]]), 3),
                      "val Unified": val["Unified"], "seconds": rec["seconds"]})
    out = pd.DataFrame(lines, columns=["backbone", "method", "unit", "lr", "val Harmonic", "val Unified", "seconds"])
    if out.empty:
        return out.assign(chosen=pd.Series(dtype=bool), interior=pd.Series(dtype=object))
    return mark_choice(out, "unit", f"val {settings()['tuning']['select_on']}")


def map2_jobs(profile: str = "quick") -> list[tuple]:
    """Every run of the second edition whose backbone and rate are ready, seed-major."""
    from dataclasses import replace

    from umlkit.experiments.recipes.tuning import NotTuned
    from umlkit.experiments.tables.table import distinct_jobs
    table, ready = MAP2(), []
    for row in table.rows:   # a row waits for its backbone's pretraining and its rate's tuning runs
        if not backbone_ready(row.spec["cell"]["backbone"]):
            continue
        try:
            rate(row.spec["cell"]["backbone"], row.spec["method"]) if row.spec["method"] != "zero_shot" else None
        except NotTuned:
            continue
        ready.append(row)
    return distinct_jobs({TABLE_NAME: replace(table, rows=ready)}, profile)


def run_status(profile: str = "quick") -> dict[str, str]:
    """``{"rm2_runs": declared (row, seed) runs, "rm2_runs_stored": those with a stored record, "rm2_tuning_runs",
    "rm2_tuning_stored"}`` as text, read-only: how far the edition's runs have come."""
    from umlkit.experiments.runs.records import normalise_key, stored_or_previous
    from umlkit.experiments.views.scoreboard import missing_records
    table = MAP2()
    total = sum(1 if r.seed_free else len(table.seeds_of(r, profile)) for r in table.rows)
    missing = missing_records(profile, papers=["regime"])
    missing = missing[missing["table"] == TABLE_NAME]
    tuning = tuning_jobs(profile)
    stored = sum(stored_or_previous(normalise_key(k), profile) is not None for _, _, k, _ in tuning)
    return {"rm2_runs": str(total), "rm2_runs_stored": str(total - len(missing)),
            "rm2_tuning_runs": str(len(tuning)), "rm2_tuning_stored": str(stored)}
