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
  The shifted splits come from the classes' generator attributes (:func:`umlkit.experiments.splits.attribute_split`),
  generated once and committed (``configs/regime/splits_quick.json``); every row trains and tests on the seven
  sources that can be split so (In-shop-like, whose query/gallery protocol takes no class split, is left out);
* cells: PUMA and full fine-tuning at each point, 3 seeds, the rates chosen by the book's one protocol on the
  default split's validation classes (the few-shot rates and the second pass's), the zero-shot backbone per shift
  as the floor; the map is PUMA - full fine-tuning with a Welch interval
  (:func:`umlkit.experiments.tables.claim_test`);
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
import json
from collections.abc import Sequence
from functools import lru_cache, partial
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from umlkit._paths import repo_folder
from umlkit.experiments.registry import Paper
from umlkit.experiments.tables import Claim, Row, Table

__all__ = ["PAPER", "TABLE_NAME", "config", "make_splits", "write_splits", "load_splits", "split_of", "map_config",
           "MAP", "job_list", "heat_frame", "forgetting_frame", "regime_facts", "PROBE_METRIC", "split_summary",
           "table_claims", "probe_table"]

PAPER = "puma"
TABLE_NAME = "Regime map"
PROBE_METRIC = "probe accuracy"


def _dir():
    return repo_folder("configs", "regime", what="the regime map's configuration")


@lru_cache(maxsize=1)
def config() -> dict:
    """``configs/regime/regime.yaml`` (shots, seeds, methods, datasets, shifts, attributes, levels, held-out values,
    margins, probes)."""
    return yaml.safe_load((_dir() / "regime.yaml").read_text())


# ------------------------------------------------------------------------------------------------ splits
def make_splits(root=None) -> dict:
    """``{shift: {source: {"train": [class keys], "test": [...]}}}`` for every shift but the loaders' own, from the
    class attributes of the default UML-Mini (``root``: its tree; default: the quick profile's). The attributes are
    regenerated from the tree's seed (its manifest) and paired with the loaders' class keys in the generator's
    order (each split's training classes, then its test classes)."""
    from umlkit.data import ensure_mini, load_dataset
    from umlkit.data.datasets import MINI_MANIFEST
    from umlkit.data.mini import class_attributes
    from umlkit.experiments.splits import attribute_split
    c = config()
    root = Path(root or ensure_mini())
    manifest = root / MINI_MANIFEST
    if not manifest.is_file():
        raise FileNotFoundError(f"{root} has no {MINI_MANIFEST}: make_splits needs a UML-Mini tree (its seed)")
    info = json.loads(manifest.read_text())
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
    return _dir() / "splits_quick.json"


def write_splits(root=None) -> str:
    """Generate the shifted splits and write ``configs/regime/splits_quick.json`` (atomically); returns the path.
    A file already there is replaced only by an identical one: the committed splits define the map's records."""
    from umlkit.results import _atomic_write
    text = json.dumps(make_splits(root), indent=1, sort_keys=True, default=int) + "\n"
    path = _splits_path()
    if path.exists() and path.read_text() != text:
        raise FileExistsError(f"{path} holds other splits than the ones generated now; the map's records depend on "
                              "it. Move it away first if the change is intended.")
    _atomic_write(path, text)
    return str(path)


@lru_cache(maxsize=1)
def load_splits() -> dict:
    path = _splits_path()
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run umlkit.experiments.regime.write_splits() once")
    return json.loads(path.read_text())


def split_of(shift: str) -> dict:
    """``data.splits`` of a shift: ``{}`` for the loaders' split, else every listed source's class lists."""
    if shift not in config()["shifts"]:
        raise ValueError(f"unknown shift {shift!r}; choose one of {config()['shifts']}")
    if shift == "families":
        return {}
    if shift not in load_splits():
        raise KeyError(f"{_splits_path()} has no {shift!r} splits: regenerate it (regime.write_splits)")
    return copy.deepcopy(load_splits()[shift])


# ------------------------------------------------------------------------------------------------ runs
def _base_config(method: str, shots, seed: int, profile: str) -> dict:
    from umlkit.experiments import puma
    if method == "zero_shot" or shots == "all":
        t2 = puma.build_tables("second")["Table 2"]
        if method == "zero_shot":
            row = next(r for r in t2.rows if r.runner == "zero_shot")
        elif method == "puma":
            row = next(r for r in t2.rows if r.method == "Ours" and r.section.startswith("(c)"))
        else:
            row = next(r for r in t2.rows if r.group == "b" and r.spec.get("loss") == "curricularface")
        return t2.config(row, seed, profile, ())
    return puma.few_shot_config(profile, method, int(shots), seed)


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
    elif isinstance(shots, bool) or shots not in config()["shots"] or type(shots) not in (int, str):
        raise ValueError(f"shots must be one of {config()['shots']} (an int or 'all'), got {shots!r}")
    cfg = _base_config(method, shots, seed, profile)
    cfg["data"]["datasets"] = list(config()["datasets"])
    cfg["data"]["splits"] = split_of(shift)
    cfg["name"] = f"regime-{shift}-{shots if shots is not None else 'none'}-{method}"
    return {"config": cfg, "probes": copy.deepcopy(config()["probes"])}


def _setting(shift: str, shots=None) -> str:
    return f"shift={shift}" + ("" if shots is None else f";shots={shots}")


def _rows() -> list[Row]:
    c = config()
    rows = []
    for shift in c["shifts"]:
        rows.append(Row(method="Zero-Shot", setting=_setting(shift),   # one record: the frozen backbone is exact
                        spec={"shift": shift, "method": "zero_shot", "seeds": tuple(c["seeds"][:1])},
                        runner="probed", group=shift, name=f"Zero-Shot / {shift}", label=f"{shift}-zero-shot",
                        seed_free=True))
        for shots in c["shots"]:
            for name, method in c["methods"].items():
                rows.append(Row(method=name, setting=_setting(shift, shots), runner="probed", group=shift,
                                spec={"shift": shift, "method": method, "shots": shots},
                                name=f"{name} / {shift} / k={shots}", label=f"{shift}-{shots}-{method}"))
    return rows


def _row_config(row: Row, seed: int, profile: str, overrides: Sequence[str] = ()) -> dict:
    if overrides:
        raise ValueError("the regime map's runs take no overrides (they are declared in configs/regime)")
    s = row.spec
    return map_config(s["shift"], s.get("shots"), s["method"], seed, profile)


def _scores(result: dict, row: Row) -> dict:
    """R@1 of every dataset column; each probe's accuracy on the backbone feature (``probe: <attribute>``: the level
    every model has, the frozen backbone's included, at one width) and the embedding's mean (``embedding probe:
    mean``)."""
    out = {(d, "R@1"): v for d, v in result["test"].items()}
    out.update({(f"probe: {a}", PROBE_METRIC): v for a, v in result["probes"]["feature"].items()})
    out[("embedding probe: mean", PROBE_METRIC)] = result["probes"]["embedding"]["mean"]
    return out


def _claims() -> list[Claim]:
    c = config()
    out = []
    for shift in c["shifts"]:
        for shots in c["shots"]:
            cell = {m: {"section": "", "method": m, "setting": _setting(shift, shots), "dataset": "Harmonic"}
                    for m in c["methods"]}
            out.append(Claim(f"{shift}, k={shots}: PUMA beats full fine-tuning (Harmonic R@1)", cell["PUMA"],
                             cell["Full fine-tuning"]))
        probe = {m: {"section": "", "method": m, "setting": _setting(shift, "all"), "dataset": "probe: mean"}
                 for m in c["methods"]}
        zs = {"section": "", "method": "Zero-Shot", "setting": _setting(shift), "dataset": "probe: mean"}
        out.append(Claim(f"{shift}, all images: PUMA's feature keeps more of the pretraining attributes than full "
                         "fine-tuning's (mean probe accuracy)", probe["PUMA"], probe["Full fine-tuning"],
                         metric=PROBE_METRIC))
        out.append(Claim(f"{shift}, all images: full fine-tuning's feature keeps less of the pretraining attributes "
                         "than the frozen backbone's (mean probe accuracy)", zs, probe["Full fine-tuning"],
                         metric=PROBE_METRIC))
    return out


def _columns() -> list[str]:
    from umlkit.data.mini import PRETRAIN_HEADS
    from umlkit.experiments.runners import SOURCE_NAMES
    restrict = list((config()["probes"].get("restrict") or {}))
    return (["Unified", "Harmonic", *(SOURCE_NAMES[s] for s in config()["datasets"]), "probe: mean",
             *(f"probe: {h}" for h in PRETRAIN_HEADS), *(f"probe: {h} (held-out)" for h in restrict),
             "embedding probe: mean"])


def MAP() -> Table:  # noqa: N802 - built from the configuration, like puma.FEW_SHOT
    """The regime map as a table: per shift the zero-shot floor and both methods at every k (R@1 per dataset,
    probe accuracies), with its claims."""
    return Table(PAPER, TABLE_NAME, _rows(), _row_config, seeds=tuple(config()["seeds"]), scores=_scores,
                 claims=_claims(), params=False, columns=_columns())


def table_claims(cmp: pd.DataFrame) -> pd.DataFrame:
    """The map's declared claims whose cells were measured, with verdicts (the book's rule)."""
    from umlkit.experiments.tables import table_claims as _claims_of
    return _claims_of(MAP(), cmp)


def job_list(name: str, profile: str = "quick") -> list[tuple]:
    """``map``: every run of the map, seed-major (``umlkit records train regime map``)."""
    from umlkit.experiments.tables import distinct_jobs
    if name != "map":
        raise KeyError(f"unknown regime job list {name!r}; choose map")
    return distinct_jobs({TABLE_NAME: MAP()}, profile)


# ------------------------------------------------------------------------------------------------ views
def heat_frame(cmp: pd.DataFrame, dataset: str = "Harmonic") -> pd.DataFrame:
    """PUMA - full fine-tuning in ``dataset`` R@1 per (shift, shots): the seed means' gap, its 95 % Welch interval
    (from :func:`umlkit.experiments.tables.claim_test`'s standard error and degrees of freedom; NaN with fewer than
    the claim test's seeds) and the seeds, in the configuration's order."""
    from scipy import stats

    from umlkit.experiments.tables import claim_test
    c = config()
    sub = cmp[(cmp["dataset"] == dataset) & (cmp["metric"] == "R@1")]
    lines = []
    for shift in c["shifts"]:
        for shots in c["shots"]:
            cells = {m: sub[(sub["method"] == m) & (sub["setting"] == _setting(shift, shots))] for m in c["methods"]}
            if any(len(v) != 1 for v in cells.values()):
                continue
            a, b = cells["PUMA"].iloc[0], cells["Full fine-tuning"].iloc[0]
            test = claim_test(a["values"], b["values"])
            gap = float(a["measured"] - b["measured"])
            half = float(stats.t.ppf(0.975, test["df"]) * test["se"]) if np.isfinite(test["se"]) else float("nan")
            lines.append({"shift": shift, "shots": str(shots), "gap": gap, "low": gap - half, "high": gap + half,
                          "seeds": int(min(a["seeds"], b["seeds"]))})
    return pd.DataFrame(lines, columns=["shift", "shots", "gap", "low", "high", "seeds"])


def forgetting_frame(cmp: pd.DataFrame, shots="all") -> pd.DataFrame:
    """Probe accuracy (backbone feature; the embedding's mean as attribute "embedding mean") per attribute and
    shift: the frozen backbone, PUMA and full fine-tuning at ``shots``, seed means, one line per (shift,
    attribute)."""
    sub = cmp[cmp["metric"] == PROBE_METRIC]
    lines = []
    for shift in config()["shifts"]:
        zs = sub[sub["setting"] == _setting(shift)].set_index("dataset")["measured"]
        runs = sub[sub["setting"] == _setting(shift, shots)]
        for attr in zs.index:
            name = "embedding mean" if attr == "embedding probe: mean" else attr.removeprefix("probe: ")
            line = {"shift": shift, "attribute": name, "Zero-Shot": float(zs[attr])}
            for m in config()["methods"]:
                v = runs[(runs["method"] == m) & (runs["dataset"] == attr)]["measured"]
                line[m] = float(v.iloc[0]) if len(v) == 1 else float("nan")
            lines.append(line)
    return pd.DataFrame(lines)


def regime_facts(heat: pd.DataFrame, claims: pd.DataFrame, forgetting: pd.DataFrame,
                 unified: pd.DataFrame | None = None, cmp: pd.DataFrame | None = None) -> dict[str, str]:
    """The numbers the chapter's discussion states (glued): every cell's Harmonic gap (``rm_gap_<shift>_<shots>``;
    ``unified``: :func:`heat_frame` on Unified, ``rm_ugap_...``), the range, the best cell for PUMA, how many cells
    each verdict got; per shift the probes' mean accuracy of the frozen backbone, PUMA and full fine-tuning, their
    losses against the frozen backbone, full fine-tuning's most-forgotten attribute, the held-out-value probes and
    the forgetting claims' verdicts; with ``cmp`` every cell's Harmonic R@1
    (``rm_h_<zs|puma|ft>_<shift>[_<shots>]``)."""
    from umlkit.experiments.prose import number
    f: dict[str, str] = {}
    if cmp is not None:
        tags = {"Zero-Shot": "zs", "PUMA": "puma", "Full fine-tuning": "ft"}
        h = cmp[(cmp["dataset"] == "Harmonic") & (cmp["metric"] == "R@1")]
        for _, r in h.iterrows():
            parts = dict(p.split("=") for p in r["setting"].split(";"))
            shots = [parts["shots"]] if "shots" in parts else []
            f["_".join([f"rm_h_{tags[r['method']]}", parts["shift"], *shots])] = number(r["measured"])
    for frame, tag in ((heat, "gap"), (unified, "ugap")):
        if frame is None or frame.empty:
            continue
        for _, r in frame.iterrows():
            f[f"rm_{tag}_{r['shift']}_{r['shots']}"] = number(r["gap"], True)
    if not heat.empty:
        best = heat.loc[heat["gap"].idxmax()]
        f["rm_gap_min"], f["rm_gap_max"] = number(heat["gap"].min(), True), number(heat["gap"].max(), True)
        f["rm_best_cell"], f["rm_best_gap"] = f"{best['shift']}, k={best['shots']}", number(best["gap"], True)
        f["rm_best_interval"] = f"{number(best['low'], True)} to {number(best['high'], True)}"
        f["rm_cells"] = str(len(heat))
        f["rm_cells_puma_ahead"] = str(int((heat["gap"] > 0).sum()))
    beats = claims[claims["claim"].str.contains("beats full fine-tuning")]
    for v in ("supported", "inconclusive", "contradicted"):
        f[f"rm_cells_{v}"] = str(int((beats["verdict"] == v).sum()))
    for shift in dict.fromkeys(forgetting["shift"]):
        fr = forgetting[forgetting["shift"] == shift].set_index("attribute")
        for col, tag in (("Zero-Shot", "zs"), ("PUMA", "puma"), ("Full fine-tuning", "ft")):
            f[f"rm_probe_{shift}_{tag}"] = number(fr.loc["mean", col])
            for held in [a for a in fr.index if a.endswith("(held-out)")]:
                f[f"rm_held_{held.split()[0]}_{shift}_{tag}"] = number(fr.loc[held, col])
        f[f"rm_ft_loss_{shift}"] = number(fr.loc["mean", "Zero-Shot"] - fr.loc["mean", "Full fine-tuning"])
        f[f"rm_puma_loss_{shift}"] = number(fr.loc["mean", "Zero-Shot"] - fr.loc["mean", "PUMA"])
        heads = fr.drop(index=[a for a in fr.index if a in ("mean", "embedding mean") or a.endswith("(held-out)")])
        drop = (heads["Zero-Shot"] - heads["Full fine-tuning"]).sort_values(ascending=False)
        f[f"rm_ft_worst_{shift}"] = f"{drop.index[0]} ({number(-drop.iloc[0], True)})"
        f[f"rm_ft_second_{shift}"] = f"{drop.index[1]} ({number(-drop.iloc[1], True)})"
        for claim, tag in (("PUMA's feature keeps more", "keep"), ("full fine-tuning's feature keeps less", "forget")):
            hit = claims[claims["claim"].str.startswith(f"{shift}, all images: {claim}")]
            if len(hit) == 1:
                f[f"rm_v_{tag}_{shift}"] = str(hit["verdict"].iloc[0])
    return f


def split_summary() -> pd.DataFrame:
    """Training, test and left-out classes of every source under every shift (the loaders' split for
    ``families``), one line per (shift, source)."""
    from umlkit.data.mini import SOURCES
    c = config()
    lines = []
    for shift in c["shifts"]:
        for src in c["datasets"]:
            (n_train, _), (n_test, _) = SOURCES[src].train, SOURCES[src].test
            if shift != "families":
                split = load_splits()[shift][src]
                total = n_train + n_test
                n_train, n_test = len(split["train"]), len(split["test"])
                left = total - n_train - n_test
            else:
                left = 0
            lines.append({"shift": shift, "source": src, "split by": "" if shift == "families" else
                          " x ".join(c["attributes"][src][:1 if shift == "values" else 2]),
                          "train classes": n_train, "test classes": n_test, "left out": left,
                          "train / test / left out": f"{n_train} / {n_test} / {left}"})
    return pd.DataFrame(lines)


def probe_table(forgetting: pd.DataFrame) -> pd.DataFrame:
    """:func:`forgetting_frame` as one line per (shift, model) and one column per attribute."""
    long = forgetting.melt(id_vars=["shift", "attribute"], var_name="model", value_name="accuracy")
    out = long.pivot_table(index=["shift", "model"], columns="attribute", values="accuracy", sort=False)
    return out[list(dict.fromkeys(forgetting["attribute"]))]


# ------------------------------------------------------------------------------------------------ registry entry
# what the scoreboard, `umlkit records` and `umlkit reproduce --paper` need (registered by umlkit.experiments.catalog)
def claim_tables(profile: str = "quick") -> dict[str, Table]:
    """The map's table (quick profile only: its shifted splits are UML-Mini's)."""
    return {TABLE_NAME: MAP()} if profile == "quick" else {}


# the book's own experiment on PUMA's configuration: its records live with PUMA's, its claims are a family of their own
ENTRY = Paper(name="regime", title="Regime map (this book, on PUMA's configuration)", claim_tables=claim_tables,
              records=PAPER, chapters=("regime_map",),
              headline="combinations, k=all: PUMA beats full fine-tuning (Harmonic R@1)",
              job_lists={"map": partial(job_list, "map")})
