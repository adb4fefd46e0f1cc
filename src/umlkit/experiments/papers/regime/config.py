"""The regime map: in which regime does a frozen backbone with small modules (PUMA) beat full fine-tuning?

PUMA (Sec. 1 and 4) and VPTSP both rest on the premise that fully fine-tuning a pretrained ViT on the training
classes loses generality (it overfits or forgets), which a frozen backbone with small trainable modules keeps. On
UML-Mini's default split full fine-tuning wins every comparison; this book's own experiment (no paper has it) maps
where the paper's ordering appears instead of assuming it. Everything it runs is declared in
``configs/regime/regime.yaml`` before any of its records exist:

* two axes: images per training class (``shots``: the few-shot section's recipe at k, which follows the official
  README's few-shot training, and Table 2's second-pass recipe on all images), and the kind of shift between
  training and test classes (``shifts``: the loaders' split; test classes whose attribute *combinations* never
  occur in training; test classes with attribute *values* no training class is defined by, seen in pretraining).
  The shifted splits come from the classes' generator attributes
  (:func:`umlkit.experiments.splits.features.attribute_split`),
  generated once and committed (``configs/regime/splits_quick.json``); every row trains and tests on the seven
  sources that can be split so (In-shop-like, whose query/gallery protocol takes no class split, is left out);
* cells: PUMA and full fine-tuning at each point, 3 seeds, the rates chosen by the book's one protocol on the
  default split's validation classes (the few-shot rates and the second pass's), the zero-shot backbone per shift
  as the floor; the map is PUMA - full fine-tuning with a Welch interval
  (:func:`umlkit.experiments.tables.table.claim_test`);
* forgetting, measured: linear probes of the pretraining attributes (shape, texture, period, aspect, disc position,
  hue, disc hue, scale) on each trained model's backbone feature (the frozen backbone's own level, same width; the
  retrieval embedding's mean is kept beside it) (runner ``probed``, :func:`umlkit.metrics.attribute_probes`),
  against the frozen backbone's;
* claims: PUMA beats full fine-tuning (Harmonic R@1) in every cell; PUMA's feature keeps more of the pretraining
  attributes than full fine-tuning's (mean probe accuracy), and full fine-tuning's keeps less than the frozen
  backbone's, per shift on all images.

The records live with PUMA's (``results/<profile>/records/puma/regimemap/``); job list ``umlkit records train
regime map``. Quick profile only: the full profile's data have no generator attributes.
"""
from __future__ import annotations

import copy
import sys
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import pandas as pd

from umlkit.experiments.recipes import paper_configs
from umlkit.experiments.recipes import unified as unified_recipe
from umlkit.experiments.tables.builder import build_tables
from umlkit.experiments.tables.declarations import load_declarations
from umlkit.experiments.tables.table import Row, Table

PAPER = "puma"
DECLARED = load_declarations(__file__)   # tables.yaml: the table's name, metric and claim texts
TABLE_NAME = DECLARED["table"]
PROBE_METRIC = DECLARED["probe_metric"]


def config_dir():
    return paper_configs.config_dir("regime")


def settings() -> dict:
    """``configs/regime/regime.yaml`` (shots, seeds, methods, datasets, shifts, attributes, levels, held-out values,
    margins, probes)."""
    return paper_configs.read_yaml("regime", "regime.yaml")


# ------------------------------------------------------------------------------------------------ splits
def make_splits(root=None) -> dict:
    """``{shift: {source: {"train": [class keys], "test": [...]}}}`` for every shift but the loaders' own, from the
    class attributes of the default UML-Mini (``root``: its tree; default: the quick profile's). The attributes are
    regenerated from the tree's seed (its manifest) and paired with the loaders' class keys in the generator's
    order (each split's training classes, then its test classes)."""
    from umlkit.data import ensure_mini, load_dataset
    from umlkit.data.datasets import MINI_MANIFEST
    from umlkit.data.mini import class_attributes, read_manifest
    from umlkit.experiments.splits.features import attribute_split
    c = settings()
    root = Path(root or ensure_mini())
    manifest = root / MINI_MANIFEST
    info = read_manifest(root)
    if info is None:
        raise FileNotFoundError(f"{root} has no {MINI_MANIFEST}: make_splits needs a UML-Mini tree (its seed)")
    if info.get("variant", "default") != "default":
        raise ValueError(f"{manifest}: the regime map splits the default UML-Mini, this tree is {info.get('variant')}")
    seed = int(info["seed"])
    out = {}
    for shift in c["shifts"]:
        if shift == "families":
            continue
        out[shift] = {}
        for src, attrs in c["attributes"].items():
            keys = [*load_dataset(src, root, "train").class_keys, *load_dataset(src, root, "test").class_keys]
            try:
                out[shift][src] = attribute_split(class_attributes(src, seed), keys, shift, attrs, c["levels"],
                                                  c["held_out"], c.get("margins"))
            except ValueError as err:
                raise ValueError(f"configs/regime/regime.yaml, shift {shift!r}, source {src!r}: {err}") from None
    return out


def _splits_path():
    return config_dir() / "splits_quick.json"


def write_splits(root=None) -> str:
    """Generate the shifted splits and write ``configs/regime/splits_quick.json`` (atomically); returns the path.
    A file already there is replaced only by an identical one: the committed splits define the map's records."""
    from umlkit.experiments.splits.features import write_split_file
    return str(write_split_file(_splits_path(), make_splits(root), "the map's records"))


@lru_cache(maxsize=1)
def load_splits() -> dict:
    from umlkit.experiments.splits.features import read_split_file
    return read_split_file(_splits_path(), "umlkit.experiments.papers.regime.write_splits()")


def split_of(shift: str) -> dict:
    """``data.splits`` of a shift: ``{}`` for the loaders' split, else every listed source's class lists."""
    if shift not in settings()["shifts"]:
        raise ValueError(f"unknown shift {shift!r}; choose one of {settings()['shifts']}")
    if shift == "families":
        return {}
    if shift not in load_splits():
        raise KeyError(f"{_splits_path()} has no {shift!r} splits: regenerate it (regime.write_splits)")
    return copy.deepcopy(load_splits()[shift])


# ------------------------------------------------------------------------------------------------ runs
def _base_config(method: str, shots, seed: int, profile: str) -> dict:
    """The recipe of one cell before its shift: PUMA's Table 2 second pass on all images (zero-shot, PUMA or full
    fine-tuning with CurricularFace, each at its tuning unit's chosen rate), else the few-shot recipe at k."""
    if method == "zero_shot" or shots == "all":
        unit = {"puma": "puma", "full": "full-curricularface"}.get(method)
        return unified_recipe.run_config(profile, method=method, loss="curricularface", seed=seed,
                                         lr=unified_recipe.chosen_lr(unit) if unit else None, stage="second")
    return unified_recipe.few_shot_config(profile, method, int(shots), seed)


def map_config(shift: str, shots, method: str, seed: int = 0, profile: str = "quick") -> dict:
    """The record key of one cell run: ``{"config": the run's configuration with the shift's class lists,
    "probes": the probe set}`` (runner ``probed``). ``method``: ``puma``, ``full`` or ``zero_shot``; ``shots``: an
    integer (the few-shot recipe) or ``"all"`` (Table 2's)."""
    if profile != "quick":
        raise ValueError("the regime map is the quick profile's (the full profile's data have no generator "
                         "attributes to split by)")
    if method not in ("puma", "full", "zero_shot"):
        raise ValueError(f"method must be puma, full or zero_shot, got {method!r}")
    if method == "zero_shot":
        if shots is not None:
            raise ValueError(f"the frozen backbone trains on nothing: shots must be None, got {shots!r}")
    elif isinstance(shots, bool) or shots not in settings()["shots"] or type(shots) not in (int, str):
        raise ValueError(f"shots must be one of {settings()['shots']} (an int or 'all'), got {shots!r}")
    cfg = _base_config(method, shots, seed, profile)
    cfg["data"]["datasets"] = list(settings()["datasets"])
    cfg["data"]["splits"] = split_of(shift)
    cfg["name"] = f"regime-{shift}-{shots if shots is not None else 'none'}-{method}"
    return {"config": cfg, "probes": copy.deepcopy(settings()["probes"])}


def setting_of(shift: str, shots=None) -> str:
    return f"shift={shift}" + ("" if shots is None else f";shots={shots}")


def map_rows() -> list[Row]:
    c = settings()
    rows = []
    for shift in c["shifts"]:
        rows.append(Row(method="Zero-Shot", setting=setting_of(shift),   # one record: the frozen backbone is exact
                        spec={"shift": shift, "method": "zero_shot", "seeds": tuple(c["seeds"][:1])},
                        runner="probed", group=shift, name=f"Zero-Shot / {shift}", label=f"{shift}-zero-shot",
                        seed_free=True))
        for shots in c["shots"]:
            for name, method in c["methods"].items():
                rows.append(Row(method=name, setting=setting_of(shift, shots), runner="probed", group=shift,
                                spec={"shift": shift, "method": method, "shots": shots},
                                name=f"{name} / {shift} / k={shots}", label=f"{shift}-{shots}-{method}"))
    return rows


def row_config(row: Row, seed: int, profile: str, overrides: Sequence[str] = ()) -> dict:
    if overrides:
        raise ValueError("the regime map's runs take no overrides (they are declared in configs/regime)")
    s = row.spec
    return map_config(s["shift"], s.get("shots"), s["method"], seed, profile)


def scores(result: dict, row: Row) -> dict:
    """R@1 of every dataset column; each probe's accuracy on the backbone feature (``probe: <attribute>``: the level
    every model has, the frozen backbone's included, at one width) and the embedding's mean (``embedding probe:
    mean``)."""
    out = {(d, "R@1"): v for d, v in result["test"].items()}
    out.update({(f"probe: {a}", PROBE_METRIC): v for a, v in result["probes"]["feature"].items()})
    out[("embedding probe: mean", PROBE_METRIC)] = result["probes"]["embedding"]["mean"]
    return out


def columns() -> list[str]:
    from umlkit.data.mini import PRETRAIN_HEADS
    from umlkit.experiments.runs.runners import SOURCE_NAMES
    restrict = list((settings()["probes"].get("restrict") or {}))
    return (["Unified", "Harmonic", *(SOURCE_NAMES[s] for s in settings()["datasets"]), "probe: mean",
             *(f"probe: {h}" for h in PRETRAIN_HEADS), *(f"probe: {h} (held-out)" for h in restrict),
             "embedding probe: mean"])


def MAP() -> Table:  # noqa: N802 - built from the configuration, like puma.FEW_SHOT
    """The regime map as a table: per shift the zero-shot floor and both methods at every k (R@1 per dataset,
    probe accuracies), with its claims."""
    return build_tables(PAPER, sys.modules[__name__], DECLARED, "quick", names=[TABLE_NAME])[TABLE_NAME]


def table_claims(cmp: pd.DataFrame) -> pd.DataFrame:
    """The map's declared claims whose cells were measured, with verdicts (the book's rule)."""
    from umlkit.experiments.tables.table import table_claims as _claims_of
    return _claims_of(MAP(), cmp)


def map_runs() -> int:
    """The map's runs without the extra seeds of the plan: per shift the frozen backbone once and every method at
    every k and seed."""
    c = settings()
    return len(c["shifts"]) * (1 + len(c["shots"]) * len(c["methods"]) * len(c["seeds"]))


def map_jobs(profile: str = "quick") -> list[tuple]:
    """Every run of the map, seed-major (``umlkit records train regime map``)."""
    from umlkit.experiments.tables.table import distinct_jobs
    return distinct_jobs({TABLE_NAME: MAP()}, profile)


# ------------------------------------------------------------------------------------------------ registry entry
# what the scoreboard, `umlkit records` and `umlkit reproduce --paper` need (registered by umlkit.experiments.catalog)
def claim_tables(profile: str = "quick") -> dict[str, Table]:
    """The map's table (quick profile only: its shifted splits are UML-Mini's)."""
    return {TABLE_NAME: MAP()} if profile == "quick" else {}
