"""ooDML (Milbich, Roth et al., "Characterizing generalization under out-of-distribution shifts in deep metric
learning", NeurIPS 2021): its splits, configurations, tables and analyses as data for the book's chapter.

* **Splits** (Sec. 3, official ``split_helpers.py``): classes are the mean frozen feature of a backbone without
  metric training (paper: ImageNet ResNet-50; quick: the shipped tiny ViT v2 on the large UML-Mini); swapping and
  removal (:mod:`umlkit.experiments.splits`) raise the class-mean FID; :func:`make_splits` keeps Table S1's layout and
  :func:`write_splits` commits them (``configs/oodml/splits_quick.json``); the full profile reads the published
  ``datasplits/*.pkl`` instead (:func:`import_published_splits`). The i.i.d. FID of Table 1 halves every class's
  images at random (five draws).
* **Runs**: :func:`run_config` composes ``configs/oodml/{oodml,methods}.yaml`` with a split's class lists (they
  enter the record key); every run is a ``train_analysis`` record (:mod:`umlkit.experiments.runners`): the
  last-epoch model's R@1, mAP@1000 and MAP@R, R@1 at a fixed class count, embedding structure, few-shot adaptation
  (Tables S7/S8 methods) and transfer to the other sources (default splits). The official pipeline keeps the
  epoch with the best *test* score; the book reports the last epoch, as it never selects on test data.
* **Tables**: S1/1/S2 (FIDs), S4-S6 (every method on every split), S7/S8 (few-shot, from the same records), S3
  (AGS from S4-S6); the learning rates come from :func:`lr_sweep` on training classes only.
* **Analyses** for the figures: trends along the FID (Fig. 2), structure (Fig. 4), generic representations
  (Fig. 6), transfer (Fig. S3), few-shot gains (Fig. 7), and the facts the discussion glues.

:func:`fid_range` (the UML-Mini chapter's check that the large variant spans a wide FID range) lives here too.
"""
from __future__ import annotations

import copy
import json
from functools import lru_cache, partial
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from umlkit.data import build_transforms, load_dataset
from umlkit.experiments.splits import Split, removal_progression, swap_progression
from umlkit.experiments.runners import SOURCE_NAMES
from umlkit.experiments.registry import Paper
from umlkit.experiments.tuning import chosen
from umlkit.experiments.tables import Claim, Floor, Row, Table, measure, lr_sweep_frame
from umlkit.metrics.distribution import class_means
from umlkit.models.backbones import backbone_data_config, create_backbone
from umlkit.train.evaluate import extract_embeddings

__all__ = ["source_class_means", "fid_progression", "fid_range_table", "fid_range", "fid_facts", "PAPER", "SOURCES",
           "make_splits", "write_splits", "load_splits", "split_of", "run_config", "methods_config"]

PAPER = "oodml"
SOURCES = ("cub", "cars", "sop")


def source_class_means(root, source: str, backbone: str = "vit_tiny_uml", weights: str | Path | None = None,
                       splits=("train", "test"), features: dict | None = None) -> tuple[dict, list, list]:
    """({class key: mean frozen feature}, default train keys, default test keys) of one source; ``features``, when
    given, receives ``{split: (image features, labels, class keys)}``."""
    model = create_backbone(backbone, pretrained=weights is None, weights=weights)  # unnormalised, as ooDML's
    tf = build_transforms("mini", backbone_data_config(backbone), train=False)       # avg_features
    means, sides = {}, []
    for split in splits:
        ds = load_dataset(source, root, split, transform=tf, cache=True)
        feats, labels = extract_embeddings(model, ds)
        if features is not None:
            features[split] = (feats.numpy(), labels, list(ds.class_keys))
        keys, mu = class_means(feats.numpy(), labels)
        clash = set(means) & {ds.class_keys[int(k)] for k in keys}
        if clash:
            raise ValueError(f"{source}: class keys {sorted(clash)[:3]} appear in more than one split")
        means.update({ds.class_keys[int(k)]: m for k, m in zip(keys, mu)})
        sides.append([ds.class_keys[int(k)] for k in keys])
    return means, sides[0], sides[1]


def fid_progression(means: dict, train: list, test: list, swap_iterations: int = 25,
                    removal_iterations: int = 35, swaps_per_iter: int = 2) -> list[Split]:
    """The default split, ooDML's swap progression from it, then the removal progression from the last swap."""
    swaps = swap_progression(means, train, test, iterations=swap_iterations, swaps_per_iter=swaps_per_iter)
    return swaps + removal_progression(means, swaps[-1], iterations=removal_iterations)


def fid_range_table(roots: dict, sources=("cub", "cars", "sop"), backbone: str = "vit_tiny_uml_v2",
                    weights=None) -> tuple[pd.DataFrame, dict]:
    """Per UML-Mini variant and source: default FID, hardest swap FID, hardest removal FID, their ratio to the
    default, and the classes left per side; plus every split's (kind, iteration, FID, classes) for plotting."""
    rows, curves = [], {}
    for variant, root in roots.items():
        for source in sources:
            means, train, test = source_class_means(root, source, backbone, weights)
            prog = fid_progression(means, train, test)
            default = prog[0].fid
            swap_max = max(s.fid for s in prog if s.kind == "swap")
            removal = [s for s in prog if s.kind == "removal"]
            rem_max = max((s.fid for s in removal), default=float("nan"))
            last = removal[-1] if removal else prog[-1]
            rows.append({"variant": variant, "source": source, "classes (train/test)": f"{len(train)}/{len(test)}",
                         "default FID": default, "hardest swap FID": swap_max, "hardest removal FID": rem_max,
                         "removal / default": rem_max / default if default > 0 else float("nan"),
                         "classes left (train/test)": f"{len(last.train)}/{len(last.test)}"})
            curves[(variant, source)] = [(s.kind, s.iteration, s.fid, len(s.train)) for s in prog]
    table = pd.DataFrame(rows).set_index(["variant", "source"])
    return table.round({"default FID": 2, "hardest swap FID": 2, "hardest removal FID": 2, "removal / default": 1}), curves


def fid_range(profile: str = "quick", rerun: bool = False, backbone: str = "vit_tiny_uml_v2",
              sources=("cub", "cars", "sop")) -> tuple[pd.DataFrame, dict]:
    """:func:`fid_range_table` on the default and the large UML-Mini, stored as ``results/<profile>/
    uml_mini_fid_range.csv`` (+ its curves in the metadata JSON) and read back unless ``rerun``. About a minute and
    a half on 2 CPU cores, most of it generating the large variant on first use."""
    from umlkit.data.mini import ensure_mini
    from umlkit.results import load_table, save_table
    name = "uml_mini_fid_range"
    if not rerun:
        try:
            table, meta = load_table(name, profile)
            cfg = meta.get("config", {})
            if (cfg.get("backbone"), cfg.get("sources"), cfg.get("generator")) == (backbone, list(sources), _world()):
                curves = {tuple(k.split("/")): [tuple(p) for p in v] for k, v in cfg["curves"].items()}
                return table.set_index(["variant", "source"]) if "variant" in table.columns else table, curves
        except FileNotFoundError:
            pass
    table, curves = fid_range_table({"default": ensure_mini(), "large": ensure_mini(size="large")}, sources,
                                    backbone=backbone)
    save_table(table.reset_index(), name, profile, {"backbone": backbone, "sources": list(sources), "generator": _world(),
                                                    "curves": {"/".join(k): v for k, v in curves.items()}})
    return table, curves


def _world() -> str:
    """What the stored measurement depends on besides backbone and sources: the generator version and seed."""
    from umlkit.data.mini import GENERATOR_VERSION
    return f"uml_mini:v{GENERATOR_VERSION}:seed0"


def fid_facts(table: pd.DataFrame) -> dict[str, str]:
    """Numbers the UML-Mini chapter states about :func:`fid_range`: per variant and source the default and the
    hardest removal FID, their ratio and the classes left; and the smallest ratio of the large variant."""
    facts = {}
    for (variant, source), row in table.iterrows():
        key = f"{variant}_{source}"
        facts[f"{key}_default"] = f"{row['default FID']:.1f}"
        facts[f"{key}_removal"] = f"{row['hardest removal FID']:.1f}"
        facts[f"{key}_ratio"] = f"{row['removal / default']:.1f}"
        facts[f"{key}_left"] = row["classes left (train/test)"]
        facts[f"{key}_classes"] = row["classes (train/test)"]
    large = table.loc["large"]
    facts["large_min_ratio"] = f"{large['removal / default'].min():.1f}"
    facts["large_min_ratio_source"] = str(large["removal / default"].idxmin())
    return facts


# ------------------------------------------------------------------------------------------------ configs
def _config_dir() -> Path:
    from umlkit._paths import repo_folder
    return repo_folder("configs", "oodml", what="the ooDML experiments")


@lru_cache(maxsize=1)
def methods_config() -> dict:
    """``configs/oodml/methods.yaml``: methods, learning rates, epochs, few-shot settings and the split layout."""
    return yaml.safe_load((_config_dir() / "methods.yaml").read_text())


# ------------------------------------------------------------------------------------------------ splits
def _jsonable(keys) -> list:
    return [int(k) if isinstance(k, (int, np.integer)) else str(k) for k in keys]


def make_splits(profile: str = "quick", backbone: str = "vit_tiny_uml_v2", sources=SOURCES) -> dict:
    """ooDML's splits of the quick world (the large UML-Mini): per source the swap and removal progressions (and,
    for CUB, the inverse one), the splits chosen from them in Table S1's layout (:func:`umlkit.experiments.splits.
    select_splits`), the default split's FID and the i.i.d. FID (Table 1). About a minute on 2 cores."""
    if profile != "quick":
        raise ValueError("the full profile reads the published split files (datasplits/*.pkl); make_splits builds "
                         "the quick profile's")
    from umlkit.data.mini import GENERATOR_VERSION, ensure_mini
    from umlkit.experiments.splits import iid_fid, select_splits, split_fid
    layout = methods_config()["splits"]
    root = ensure_mini(size="large")
    out = {"backbone": backbone, "world": f"uml_mini:v{GENERATOR_VERSION}:large:seed0", "sources": {}}
    all_means = {}
    for source in sources:
        feats: dict = {}
        means, train, test = source_class_means(root, source, backbone, features=feats)
        all_means[source] = (means, train, test)
        lay = layout[source]
        prog = fid_progression(means, train, test, swap_iterations=int(lay.get("swap_iterations", 25)),
                               swaps_per_iter=int(lay.get("swaps_per_iter", 2)))
        easier = swap_progression(means, train, test, iterations=15, history=30, inverse=True)[1:] if lay["easier"] else []
        chosen = select_splits(prog, lay["harder"] + 1, easier=easier, n_easier=lay["easier"])  # [1:]: not the default
        inverse = {id(s) for s in easier}
        f_all = np.concatenate([feats[s][0] for s in ("train", "test")])
        keys = [feats["train"][2][i] for i in feats["train"][1]] + [feats["test"][2][i] for i in feats["test"][1]]
        out["sources"][source] = {
            "default_fid": round(prog[0].fid, 4),
            "iid_fid": [round(iid_fid(f_all, np.asarray([str(k) for k in keys]), seed=i), 4) for i in range(5)],
            "progression": [[s.kind, s.iteration, round(s.fid, 4), len(s.train), len(s.test)] for s in prog],
            "inverse": [[s.kind, -s.iteration, round(s.fid, 4), len(s.train), len(s.test)] for s in easier],
            "splits": [{"id": i + 1, "kind": "inverse" if id(s) in inverse else s.kind,
                        "iteration": -s.iteration if id(s) in inverse else s.iteration, "fid": round(s.fid, 4),
                        "default": s is prog[0], "train": _jsonable(s.train), "test": _jsonable(s.test)}
                       for i, s in enumerate(chosen)],
        }
    out["cross_fid"] = {}  # Table S2: train classes of one source against the test classes of another
    for a in sources:
        for b in sources:
            if a != b:
                (ma, tra, _), (mb, _, teb) = all_means[a], all_means[b]
                merged = {("a", k): ma[k] for k in tra} | {("b", k): mb[k] for k in teb}
                fid = split_fid(merged, [("a", k) for k in tra], [("b", k) for k in teb])
                out["cross_fid"][f"{a}>{b}"] = round(fid, 4)
    return out


def _splits_path(profile: str) -> Path:
    return _config_dir() / f"splits_{profile}.json"


def write_splits(profile: str = "quick", overwrite: bool = False) -> Path:
    """Compute :func:`make_splits` and write ``configs/oodml/splits_<profile>.json`` (committed: configurations
    refer to its splits, so that every machine trains the same classes)."""
    from umlkit.results import _atomic_write
    path = _splits_path(profile)
    data = json.dumps(make_splits(profile), indent=None, separators=(",", ":"), sort_keys=True) + "\n"
    if path.exists() and not overwrite and path.read_text() != data:
        raise FileExistsError(f"{path} exists with other splits; pass overwrite=True (CLI: --overwrite) to "
                              f"replace it")
    _atomic_write(path, data)
    load_splits.cache_clear()
    return path


@lru_cache(maxsize=2)
def load_splits(profile: str = "quick") -> dict:
    path = _splits_path(profile)
    if not path.is_file():
        hint = ("umlkit.experiments.oodml.write_splits('quick')" if profile == "quick" else
                "umlkit.experiments.oodml.import_published_splits(...) with the official datasplits/*.pkl")
        raise FileNotFoundError(f"no ooDML splits at {path}; create them with {hint}")
    return json.loads(path.read_text())


def _source_splits(source: str, profile: str) -> dict:
    sources = load_splits(profile)["sources"]
    if source not in sources:
        raise KeyError(f"no ooDML splits for source {source!r} in the {profile} profile; sources: {sorted(sources)} "
                       "(umlkit's source names, e.g. 'cub', not the paper's 'CUB')")
    return sources[source]


def split_of(source: str, split_id: int, profile: str = "quick") -> dict:
    """One split (``{id, kind, iteration, fid, default, train, test}``) of a source, numbered as Table S1."""
    splits = _source_splits(source, profile)["splits"]
    found = [s for s in splits if s["id"] == int(split_id)]
    if not found:
        raise KeyError(f"{source} has splits {[s['id'] for s in splits]}, not {split_id}")
    return found[0]


def default_split_id(source: str, profile: str = "quick") -> int:
    found = [s["id"] for s in _source_splits(source, profile)["splits"] if s["default"]]
    if len(found) != 1:
        raise ValueError(f"the {profile} splits of {source!r} flag {len(found)} default splits, expected exactly 1")
    return found[0]


@lru_cache(maxsize=4)
def _base_config(profile: str) -> dict:
    """``oodml.yaml`` for a profile, parsed once per process (a chapter builds ~3,000 record keys from it)."""
    from umlkit.train.config import load_config
    return load_config(_config_dir() / "oodml.yaml", profile)


def tuned_methods(profile: str) -> list[str]:
    """The methods with a chosen learning rate for ``profile`` (a table has rows only for these)."""
    lrs = methods_config()["lr"].get(profile) or {}
    return [m for m in methods_config()["methods"] if m in lrs or "default" in lrs]


def chosen_lr(method: str, profile: str) -> float:
    return chosen(methods_config()["lr"], [(profile, method), (profile, "default")], file="configs/oodml/methods.yaml",
                  what=f"{profile} learning rate for {method!r}", sweep="run the lr sweep (`umlkit records train "
                  "oodml lr_sweep`) and enter the chosen rate")


def run_config(profile: str = "quick", *, method: str = "Margin (D)", source: str = "cub", split: int | None = None,
               seed: int = 0, lr: float | None = None, validation: bool = False, overrides=()) -> dict:
    """The resolved ``fit`` configuration of one ooDML run: ``oodml.yaml`` (profile block), the method's loss, the
    source and the classes of its split ``split`` (default: the default split), the seed and learning rate (default:
    the chosen one). ``validation=True`` trains on the split's first (1 - val_fraction) training classes and
    tests on the rest: the tuning protocol, which never sees a test class."""
    from umlkit.train.config import resolve_config
    mc = methods_config()
    if method not in mc["methods"] and method != "zero_shot":
        raise KeyError(f"unknown ooDML method {method!r}; choose from {list(mc['methods'])}")
    cfg = copy.deepcopy(_base_config(profile))
    cfg["data"]["datasets"] = [source]
    s = split_of(source, default_split_id(source, profile) if split is None else split, profile)
    train, test = list(s["train"]), list(s["test"])
    if validation:
        n_val = max(2, int(round(len(train) * float(mc["val_fraction"]))))
        train, test = train[:-n_val], train[-n_val:]
    cfg["data"]["splits"] = {}  # set after resolving: merging copies every list, ~5 ms a key for SOP's 1,000 classes
    if method == "zero_shot":
        cfg["model"]["method"] = "zero_shot"
    else:
        block = mc["methods"][method]
        options = {**(block.get("options") or {}), **(block.get(profile) or {}),
                   **((block.get("sources") or {}).get(source) or {})}
        cfg["objective"] = [{"name": block["loss"], "weight": 1.0, "options": options}]
        cfg["optimizer"]["lr"] = float(lr) if lr is not None else chosen_lr(method, profile)
        loss_mult = (mc["methods"][method].get("loss_lr_mult") or {}).get(profile)
        if loss_mult is not None:
            cfg["optimizer"]["lr_mult"]["loss"] = float(loss_mult)
    epochs = (mc.get("epochs", {}).get(profile) or {}).get(source)
    if epochs:
        cfg["train"]["epochs"] = int(epochs)
    cfg["seed"] = int(seed)
    cfg["train"]["progress"] = False
    cfg["name"] = f"oodml-{source}-{method}"
    out = resolve_config(cfg, overrides=list(overrides))
    if out["data"]["splits"]:
        raise ValueError("ooDML configurations take their classes from the split id, not from data.splits overrides")
    out["data"]["splits"] = {source: {"train": train, "test": test}}
    return out


# ------------------------------------------------------------------------------------------------ runs
ANALYSIS_METRICS = ["R@1", "mAP@1000", "MAP@R"]


def sweep_key(method: str, lr: float, profile: str = "quick", seed: int = 0) -> dict:
    """The record key of one validation run of the learning-rate sweep (CUB-like default split)."""
    return {"config": run_config(profile, method=method, source="cub", seed=seed, lr=lr, validation=True),
            "analysis": {"metrics": ANALYSIS_METRICS}}


def sweep_jobs(profile: str = "quick", grid=None, methods=None, seed: int = 0) -> list[tuple[str, str, dict]]:
    """(record folder, label, key) of every sweep run: each method x each learning rate of ``grid`` (default: the
    method's ``lr_grid`` in methods.yaml, else the shared one)."""
    mc = methods_config()
    return [("lr_sweep", f"{m}-lr{lr:g}-seed{seed}", sweep_key(m, float(lr), profile, seed))
            for m in (methods or mc["methods"]) for lr in (grid or mc["methods"][m].get("lr_grid") or mc["lr_grid"])]


def job_list(name: str, profile: str = "quick") -> list[tuple[str, str, dict]]:
    """A named job list: ``lr_sweep`` or ``tables`` (every training run of Tables S4-S8)."""
    if name == "lr_sweep":
        return sweep_jobs(profile)
    if name == "tables":
        return table_jobs(profile)
    raise KeyError(f"unknown ooDML job list {name!r}; choose lr_sweep or tables")


# ------------------------------------------------------------------------------------------------ tables
SEEDS = (0, 1, 2)
SHIFT_TABLES = {"cub": "Table S4", "cars": "Table S5", "sop": "Table S6"}
FEW_SHOT_TABLES = {"cub": "Table S7", "cars": "Table S8"}
GENERIC = {"Frozen backbone (no DML)": ["model.pretrained=true"], "Random init (no DML)": ["model.pretrained=false"]}
AGS_NAMES = {"R-Margin (D)": "R-Margin"}  # Table S3 spells one method differently from Tables S4-S6


def _paper_settings(table: str) -> dict[int, str]:
    """Split id -> the paper's setting cell of a split table ('split=3;FID=52.6')."""
    from umlkit.paper import paper_table
    out = {}
    for s in paper_table(PAPER, table)["setting"].dropna().unique():
        parts = dict(p.split("=", 1) for p in s.split(";"))
        out.setdefault(int(parts["split"]), s)
    return out


def split_ids(source: str, profile: str = "quick") -> list[int]:
    return [s["id"] for s in _source_splits(source, profile)["splits"]]


def analysis_for(method: str, source: str, split: int, profile: str = "quick") -> dict:
    """What a Table S4-S8 run measures besides training: the metrics, R@1 at the fewest test classes of the source's
    splits, the embedding structure, few-shot adaptation (Table S7/S8 methods and sources) and, on the default
    split, transfer to the other sources (Table S2 / Fig. S3)."""
    mc = methods_config()
    fs = mc["few_shot"]
    splits = load_splits(profile)["sources"][source]["splits"]
    out = {"metrics": ANALYSIS_METRICS, "fixed_classes": min(len(s["test"]) for s in splits), "structure": True}
    if method in fs["methods"] and source in fs["sources"]:
        out["few_shot"] = {"shots": list(fs["shots"]), "episodes": int(fs["episodes"]),
                           "iterations": int(fs["iterations"][profile]), "lr_mult": float(fs["lr_mult"])}
    if split == default_split_id(source, profile) and method in mc["methods"]:
        out["transfer"] = [s for s in SOURCES if s != source]
    return out


_KEYS: dict = {}


def config_for(row: Row, seed: int, profile: str = "quick", overrides=()) -> dict:
    """The record key of a Table S4-S8 row: ``{"config": run_config(...), "analysis": analysis_for(...)}``.

    Keys are built once per (method, source, split, seed, profile, overrides) and process: Tables S7/S8 and S3
    read the records of S4-S6 again, and the scoreboard asks for every seed up to 9. Callers must not mutate the
    returned key (the record machinery copies it before it changes anything)."""
    sp = row.spec
    ident = (sp["method"], sp["source"], sp["split"], int(seed), profile, tuple(overrides),
             id(methods_config()), id(load_splits(profile)))
    if ident not in _KEYS:
        method = "zero_shot" if sp["method"] in GENERIC else sp["method"]
        extra = GENERIC.get(sp["method"], [])
        cfg = run_config(profile, method=method, source=sp["source"], split=sp["split"], seed=seed,
                         overrides=[*extra, *overrides])
        _KEYS[ident] = {"config": cfg, "analysis": analysis_for(method, sp["source"], sp["split"], profile)}
    return _KEYS[ident]


def _shift_scores(result: dict, row: Row) -> dict:
    name = SOURCE_NAMES[row.spec["source"]]
    return {(name, m): v[name] for m, v in result["test"].items()}


def _few_shot_scores(result: dict, row: Row) -> dict:
    name = SOURCE_NAMES[row.spec["source"]]
    block = result["few_shot"][str(row.spec["shot"])][f"{row.spec['use'].lower()}_mean"]
    return {(name, m): v for m, v in block.items()}


def _c(table_setting: str, method: str, dataset: str) -> dict:
    return {"section": "", "method": method, "setting": table_setting, "dataset": dataset}


def shift_table(source: str, profile: str = "quick") -> Table:
    """Table S4 (CUB), S5 (Cars) or S6 (SOP): every method on every split, plus the two representations without
    metric learning of Fig. 6 (rows the paper's tables do not have)."""
    table = SHIFT_TABLES[source]
    settings = _paper_settings(table)
    ids = split_ids(source, profile)
    rows = [Row(method=m, setting=settings[i], spec={"method": m, "source": source, "split": i},
                runner="train_analysis", group="methods", label=f"{source}-{m}-split{i}")
            for m in tuned_methods(profile) for i in ids]
    rows += [Row(method=g, setting=settings[i], spec={"method": g, "source": source, "split": i},
                 runner="train_analysis", group="generic", label=f"{source}-{g.split(' ')[0].lower()}-split{i}")
             for g in GENERIC for i in ids]
    name = SOURCE_NAMES[source]
    default, hardest = settings[default_split_id(source, profile)], settings[ids[-1]]
    claims = [Claim(f"{m}: R@1 falls from the default split to the hardest ({name})", _c(default, m, name),
                    _c(hardest, m, name)) for m in methods_config()["methods"]]
    if source == "sop":
        for m in ("ArcFace", "ProxyAnchor"):
            claims += [Claim(f"{m} beats Margin (D) on the default split ({name})", _c(default, m, name),
                             _c(default, "Margin (D)", name)),
                       Claim(f"Margin (D) beats {m} on the hardest split ({name})", _c(hardest, "Margin (D)", name),
                             _c(hardest, m, name))]
    return Table(PAPER, table, rows, config_for, seeds=SEEDS, scores=_shift_scores, claims=claims,
                 unmeasured={"quick": "not measured in this profile"}, params=False,
                 floor=Floor(frozen="Frozen backbone (no DML)", random="Random init (no DML)"))


def few_shot_table(source: str, profile: str = "quick") -> Table:
    """Table S7 (CUB) or S8 (Cars): zero-shot and adapted query metrics (mean over episodes) from the records of
    Table S4/S5 (the same runs: few-shot adaptation is part of their analysis)."""
    if source not in FEW_SHOT_TABLES:
        raise KeyError(f"the paper has few-shot tables for {sorted(FEW_SHOT_TABLES)} only (SOP's classes have too few "
                       f"images), not {source!r}")
    table = FEW_SHOT_TABLES[source]
    fs = methods_config()["few_shot"]
    ids = split_ids(source, profile)
    rows = [Row(method=m, setting=f"shot={k};use={use};split={i}",
                spec={"method": m, "source": source, "split": i, "shot": k, "use": use},
                runner="train_analysis", group=f"{k}-shot", label=f"{source}-{m}-split{i}")
            for m in fs["methods"] if m in tuned_methods(profile) for k in fs["shots"] for use in ("Zero", "Few")
            for i in ids]
    name = SOURCE_NAMES[source]
    claims = [Claim(f"{m}: {k}-shot adaptation beats zero-shot on the hardest split ({name})",
                    _c(f"shot={k};use=Few;split={ids[-1]}", m, name), _c(f"shot={k};use=Zero;split={ids[-1]}", m, name),
                    paired=True)
              for m in fs["methods"] for k in fs["shots"]]
    return Table(PAPER, table, rows, config_for, seeds=SEEDS, scores=_few_shot_scores, claims=claims,
                 unmeasured={"quick": "not measured in this profile"}, params=False)


def split_fids(profile: str = "quick") -> dict[str, dict[str, float]]:
    """{paper source name: {paper setting: measured FID}} of every split (the x axis of Figs. 2-4)."""
    out = {}
    for src, table in SHIFT_TABLES.items():
        settings = _paper_settings(table)
        out[SOURCE_NAMES[src]] = {settings[s["id"]]: s["fid"] for s in load_splits(profile)["sources"][src]["splits"]}
    return out


def ags_frame(measured: pd.DataFrame, profile: str = "quick") -> pd.DataFrame:
    """Table S3 from the measured Tables S4-S6 (one line per method, source, metric and seed): AGS over the
    source's splits (:func:`umlkit.metrics.aggregated_generalization_score`, FIDs of this profile's splits
    min-max normalised). A (method, source, seed) without every split measured is left out."""
    from umlkit.metrics.distribution import aggregated_generalization_score
    fids = split_fids(profile)
    sub = measured[measured["metric"].isin(["R@1", "mAP@1000"]) & measured["row"].isin(list(methods_config()["methods"]))]
    out = []
    for (method, dataset, metric, seed), g in sub.groupby(["method", "dataset", "metric", "seed"]):
        x = fids[dataset]
        if set(g["setting"]) != set(x):
            continue
        name = AGS_NAMES.get(method, method)
        out.append({"table": "Table S3", "section": "", "method": name, "setting": "", "row": name, "seed": seed,
                    "dataset": dataset, "metric": f"AGS-{metric}", "stale": ",".join(sorted(set(g["stale"]) - {""})),
                    "value": aggregated_generalization_score([x[s] for s in g["setting"]], g["value"].to_numpy())})
    return pd.DataFrame(out)


def ags_table(profile: str = "quick") -> Table:
    def derive(profile: str = profile, train: bool = False) -> pd.DataFrame:
        parts = [measure(shift_table(s, profile), profile, train=train, progress=False, log=None) for s in SOURCES]
        parts = [p for p in parts if not p.empty]
        return ags_frame(pd.concat(parts, ignore_index=True), profile) if parts else pd.DataFrame()
    claims = [Claim(f"{m} beats Margin (D) by AGS ({SOURCE_NAMES[s]})", _c("", m, SOURCE_NAMES[s]),
                    _c("", "Margin (D)", SOURCE_NAMES[s]), metric="AGS-R@1")
              for m in ("S2SD", "DiVA", "R-Margin") for s in SOURCES]
    return Table(PAPER, "Table S3", [], lambda *a: {}, seeds=SEEDS, claims=claims, params=False, derive=derive,
                 unmeasured={"quick": "not measured in this profile"})


def TABLES(profile: str = "quick") -> dict[str, Table]:
    """Every ooDML table of a profile: the FID tables (computed with the splits), the shift tables S4-S6 and the
    few-shot tables S7-S8 (records), and Table S3 (AGS, from the records of S4-S6)."""
    out = {t: fid_table(t, profile) for t in ("Table 1", "Table S1", "Table S2")}
    out.update({SHIFT_TABLES[s]: shift_table(s, profile) for s in SOURCES})
    out.update({FEW_SHOT_TABLES[s]: few_shot_table(s, profile) for s in FEW_SHOT_TABLES})
    out["Table S3"] = ags_table(profile)
    return out


def table_jobs(profile: str = "quick", seeds=SEEDS) -> list[tuple[str, str, dict]]:
    """(record folder, label, key) of every training run of Tables S4-S8, seed-major (all of seed 0 first)."""
    jobs = []
    for seed in seeds:
        for src in SOURCES:
            spec = shift_table(src, profile)  # rows of tuned methods only: untuned ones wait for their sweep
            jobs += [(spec.slug, f"{row.label}-seed{seed}", config_for(row, seed, profile)) for row in spec.rows]
    return jobs


def lr_sweep(profile: str = "quick", train: bool = False, select_on: str = "MAP@R") -> pd.DataFrame:
    """The tuning protocol's results: per method and learning rate, the validation scores (R@1, mAP@1000, MAP@R on
    the held-out training classes of the CUB-like default split); ``chosen`` marks each method's best by
    ``select_on``, and ``interior`` says whether that best lies inside the grid (not on its edge)."""
    return lr_sweep_frame(PAPER, sweep_jobs(profile), profile, train, name="method", metrics=ANALYSIS_METRICS,
                          select_on=select_on)


# ------------------------------------------------------------------------------------------------ FID tables
_T1 = {"default": "split=Default - different classes train/test", "iid": "split=i.i.d. - same classes train/test"}
_DIRECTION = {"cub": "CUB", "cars": "CARS", "sop": "SOP"}


def _fid_row(table: str, setting: str, dataset: str, value: float, seed: int = 0, row: str | None = None) -> dict:
    return {"table": table, "section": "", "method": "", "setting": setting, "row": row or setting, "seed": seed,
            "dataset": dataset, "metric": "FID", "value": float(value), "stale": ""}


def fid_measured(table: str, profile: str = "quick") -> pd.DataFrame:
    """Table 1 (default and i.i.d. FID; the i.i.d. split drawn 5 times, as seeds), Table S1 (every split's FID) or
    Table S2 (train classes of one source against the test classes of another; the largest FID of any split) of
    this profile's splits, in the measured long format. Computed when the splits were made: no training."""
    data = load_splits(profile)
    rows = []
    if table == "Table 1":
        for src in SOURCES:
            d, name = data["sources"][src], SOURCE_NAMES[src]
            rows.append(_fid_row(table, _T1["default"], name, d["default_fid"], row="default split"))
            rows += [_fid_row(table, _T1["iid"], name, v, seed=i, row="i.i.d. split") for i, v in enumerate(d["iid_fid"])]
    elif table == "Table S1":
        for src in SOURCES:
            rows += [_fid_row(table, f"split={s['id']}", SOURCE_NAMES[src], s["fid"], row=f"split {s['id']}")
                     for s in data["sources"][src]["splits"]]
    elif table == "Table S2":
        for pair, v in data["cross_fid"].items():
            a, b = pair.split(">")
            setting = f"direction={_DIRECTION[a]}→{_DIRECTION[b]};train={SOURCE_NAMES[a]};test={SOURCE_NAMES[b]}"
            rows.append(_fid_row(table, setting, "", v, row=f"{SOURCE_NAMES[a]} → {SOURCE_NAMES[b]}"))
        top = max(s["fid"] for d in data["sources"].values() for s in d["splits"])
        rows.append(_fid_row(table, "direction=Max. ooDML;value=parenthesised", "", top, row="largest ooDML split"))
    else:
        raise KeyError(f"{table!r} is not an FID table; choose Table 1, Table S1 or Table S2")
    return pd.DataFrame(rows)


def fid_table(table: str, profile: str = "quick") -> Table:
    unmeasured = {"quick": "not measured in this profile"}
    if table == "Table S2":
        unmeasured = {p: "ambiguous in the paper: the printed '155 (235)' has a main value that matches no split of "
                         "Table S1; the parenthesised 235 is compared with the largest split FID" for p in ("quick", "full")}
    return Table(PAPER, table, [], lambda *a: {}, metric="FID", params=False, unmeasured=unmeasured,
                 derive=lambda profile=profile, train=False: fid_measured(table, profile))


# ------------------------------------------------------------------------------------------------ analyses
def with_fid(measured: pd.DataFrame, profile: str = "quick") -> pd.DataFrame:
    """Measured cells of Tables S4-S8 with the split id and this profile's split FID (the x axis of Figs. 2-7)."""
    if measured.empty:
        return measured.assign(split=pd.Series(dtype=int), fid=pd.Series(dtype=float))
    fids = {SOURCE_NAMES[s]: {d["id"]: d["fid"] for d in load_splits(profile)["sources"][s]["splits"]} for s in SOURCES}
    split = measured["setting"].str.extract(r"split=(\d+)")[0].astype(int)
    out = measured.assign(split=split.to_numpy())
    out["fid"] = [fids[d][i] for d, i in zip(out["dataset"], out["split"])]
    return out


def trend_table(measured: pd.DataFrame, metric: str = "R@1", profile: str = "quick") -> pd.DataFrame:
    """Per source and method: the seed-mean ``metric`` on the default and the hardest split, their difference,
    Spearman's rank correlation between split FID and the seed mean over all splits (-1: falls at every step),
    the splits and the seeds measured."""
    from scipy.stats import spearmanr
    sub = with_fid(measured[measured["metric"] == metric], profile)
    rows = []
    for (dataset, method), g in sub.groupby(["dataset", "method"], sort=False):
        mean = g.groupby("split").agg(fid=("fid", "first"), value=("value", "mean"), seeds=("seed", "nunique"))
        src = next(s for s in SOURCES if SOURCE_NAMES[s] == dataset)
        d_id, last = default_split_id(src, profile), max(split_ids(src, profile))
        rho = spearmanr(mean["fid"], mean["value"]).correlation if len(mean) > 2 else float("nan")
        rows.append({"dataset": dataset, "method": method,
                     "default": mean["value"].get(d_id, float("nan")), "hardest": mean["value"].get(last, float("nan")),
                     "change": mean["value"].get(last, float("nan")) - mean["value"].get(d_id, float("nan")),
                     "spearman(FID, metric)": rho, "splits": len(mean), "seeds": int(mean["seeds"].min())})
    return pd.DataFrame(rows)


def record_results(spec: Table, profile: str = "quick", seeds=SEEDS, rows=None):
    """(row, seed, result) of every stored record of ``spec``'s rows (nothing is trained)."""
    from umlkit.experiments.records import find_record, load_record, normalise_key
    out = []
    for row in rows if rows is not None else spec.rows:
        for seed in seeds:
            path = find_record(normalise_key(spec.config(row, seed, profile, ())), profile)
            if path is not None:
                out.append((row, seed, load_record(path)["result"]))
    return out


def structure_frame(profile: str = "quick", part: str = "train") -> pd.DataFrame:
    """Fig. 4 / S6 / S7 data: per method, split and seed of Tables S4-S6, the structure of the ``part`` embeddings
    (pi_intra, pi_inter, pi_ratio, spectral decay rho) beside the test R@1."""
    rows = []
    for src in SOURCES:
        spec = shift_table(src, profile)
        for row, seed, res in record_results(spec, profile, rows=spec.select(["methods"])):
            if "structure" not in res:
                continue
            rows.append({"dataset": SOURCE_NAMES[src], "method": row.method, "split": row.spec["split"], "seed": seed,
                         "R@1": res["test"]["R@1"][SOURCE_NAMES[src]], **res["structure"][part]})
    out = pd.DataFrame(rows)
    return with_fid(out.assign(setting="split=" + out["split"].astype(str)), profile).drop(columns="setting") \
        if not out.empty else out


def structure_correlations(frame: pd.DataFrame) -> pd.DataFrame:
    """Spearman correlation between each structural metric and test R@1 over every (method, split, seed) point of a
    source, and within each split across methods (the mean over splits): does a metric track generalisation?"""
    from scipy.stats import spearmanr
    rows = []
    for dataset, g in frame.groupby("dataset", sort=False):
        for m in ("pi_intra", "pi_inter", "pi_ratio", "rho"):
            within = [spearmanr(s[m], s["R@1"]).correlation for _, s in g.groupby("split") if s["method"].nunique() > 2]
            rows.append({"dataset": dataset, "metric": m, "across all points": spearmanr(g[m], g["R@1"]).correlation,
                         "within a split (mean)": float(np.nanmean(within)) if within else float("nan"),
                         "points": len(g)})
    return pd.DataFrame(rows)


def transfer_frame(profile: str = "quick") -> pd.DataFrame:
    """Table S2 / Fig. S3: R@1 of each method trained on one source's default split, on its own test classes and on
    every other source's test set, beside the FID between the two (seed means)."""
    rows, data = [], load_splits(profile)
    for src in SOURCES:
        spec = shift_table(src, profile)
        d = default_split_id(src, profile)
        chosen = [r for r in spec.select(["methods"]) if r.spec["split"] == d]
        for row, seed, res in record_results(spec, profile, rows=chosen):
            rows.append({"train": SOURCE_NAMES[src], "test": SOURCE_NAMES[src], "method": row.method, "seed": seed,
                         "R@1": res["test"]["R@1"][SOURCE_NAMES[src]], "FID": data["sources"][src]["default_fid"]})
            for other, scores in res.get("transfer", {}).items():
                o = next(s for s in SOURCES if SOURCE_NAMES[s] == other)
                rows.append({"train": SOURCE_NAMES[src], "test": other, "method": row.method, "seed": seed,
                             "R@1": scores["R@1"], "FID": data.get("cross_fid", {}).get(f"{src}>{o}", float("nan"))})
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    return out.groupby(["train", "test", "method"], sort=False).agg(**{"R@1": ("R@1", "mean"), "FID": ("FID", "first"),
                                                                      "seeds": ("seed", "nunique")}).reset_index()


def few_shot_gains(measured: pd.DataFrame, metric: str = "R@1", profile: str = "quick") -> pd.DataFrame:
    """Per source, method, shots and split: zero-shot and adapted query ``metric`` (seed means), the gain and the
    relative gain (Fig. 7 / S8's black line), with the split FID."""
    sub = with_fid(measured[measured["metric"] == metric], profile)
    parts = sub["setting"].str.extract(r"shot=(\d+);use=(\w+);")
    sub = sub.assign(shots=parts[0].astype(int).to_numpy(), use=parts[1].to_numpy())
    piv = sub.pivot_table(index=["dataset", "method", "shots", "split", "fid"], columns="use", values="value",
                          aggfunc="mean").reset_index()
    piv["gain"] = piv["Few"] - piv["Zero"]
    piv["relative gain (%)"] = 100 * piv["gain"] / piv["Zero"]
    return piv


def split_view(cmp: pd.DataFrame, metric: str = "R@1", digits: int = 1, profile: str = "quick") -> pd.DataFrame:
    """A shift or few-shot table in the paper's layout: one line per method (and, for Tables S7/S8, shots and
    zero/few), one column per split ("split i" with this profile's FID and the paper's), each cell "measured
    ±half the seed range (paper)"; † marks a stale record."""
    sub = with_fid(cmp[cmp["metric"] == metric], profile)
    if sub.empty:
        return pd.DataFrame()
    paper_fid = sub["setting"].str.extract(r"FID=([\d.]+)")[0]
    lines: dict = {}
    for (_, r), pf in zip(sub.iterrows(), paper_fid):
        parts = dict(p.split("=", 1) for p in r["setting"].split(";"))
        label = r["row"] if "shot" not in parts else f"{r['row']}, {parts['shot']}-shot, {parts['use'].lower()}"
        col = f"split {r['split']} ({r['fid']:.0f}" + (f" / {float(pf):.0f})" if isinstance(pf, str) else ")")
        text = f"{r['measured']:.{digits}f}"
        if r["seeds"] > 1:
            text += f" ±{r['spread']:.{digits}f}"
        text += f" ({r['paper']:.{digits}f})" if pd.notna(r["paper"]) else ""
        if r.get("stale"):
            text += " †"
        lines.setdefault(label, {})[(r["split"], col)] = text
    out = pd.DataFrame.from_dict(lines, orient="index")
    out = out[sorted(out.columns)].fillna("")
    out.columns = [c for _, c in out.columns]
    out.index.name = "method"
    return out


def floor_facts(floors: pd.DataFrame, profile: str = "quick") -> dict[str, str]:
    """Per source, the methods with a split whose R@1 fell below the frozen backbone or collapsed to random
    initialisation (``floors``: the shift tables through :func:`umlkit.experiments.tables.mark_floors`), and the R@1
    span over the splits and methods without them."""
    from umlkit.experiments.tables import BELOW, COLLAPSED
    out = {}
    for src in SOURCES:
        name = SOURCE_NAMES[src]
        sub = floors[(floors["dataset"] == name) & (floors["metric"] == "R@1")
                     & floors["row"].isin(tuned_methods(profile))] if not floors.empty else floors
        words = []
        for kind, label in ((COLLAPSED, "collapsed"), (BELOW, "below the frozen backbone")):
            hit = sub[sub["floor"] == kind] if len(sub) else sub
            if len(hit):
                per = hit.groupby("row")["setting"].nunique()
                names = [f"{m} ({n} of {sub['setting'].nunique()} splits)" for m, n in per.items()]
                words.append(f"{', '.join(names)} {label}")
        out[f"{src}_floor_rows"] = "; ".join(words) if words else "none"
        ok = sub[~sub["row"].isin(set(sub.loc[sub["floor"].astype(bool), "row"]))] if len(sub) else sub
        out[f"{src}_r1_range_working"] = (f"{ok['measured'].min():.1f}–{ok['measured'].max():.1f}" if len(ok) else "n/a")
    return out


def chapter_facts(measured: pd.DataFrame, trends: dict, ags: pd.DataFrame, corr: pd.DataFrame,
                  transfer: pd.DataFrame, gains: pd.DataFrame, claims: pd.DataFrame, profile: str = "quick") -> dict:
    """The numbers the ooDML chapter's discussion states, from its tables (glued into the text; every fact is
    computed from whatever records exist, and says how many there are)."""
    from umlkit.experiments.prose import fmt
    data = load_splits(profile)
    f: dict[str, str] = {k: "n/a" for k in (
        "transfer_own", "transfer_cross", "fs_points", "fs_positive", "fs_gain_first", "fs_gain_last", "fs5_gain_first",
        "fs5_gain_last", "claims_n", "claims_summary", "corr_pi_ratio", "corr_pi_ratio_signs", "corr_rho",
        "corr_rho_signs", *[f"{s}_ags_{k}" for s in SOURCES for k in ("best", "worst", "range")])}
    f["n_records"] = str(measured["record"].nunique()) if not measured.empty else "0"
    seeds = measured.groupby(["row", "setting", "dataset"])["seed"].nunique() if not measured.empty else pd.Series([0])
    f["seeds_min"], f["seeds_max"] = str(int(seeds.min())), str(int(seeds.max()))
    for src in SOURCES:
        d, name = data["sources"][src], SOURCE_NAMES[src]
        iid = float(np.mean(d["iid_fid"])) if d.get("iid_fid") else float("nan")
        f[f"{src}_default"], f[f"{src}_iid"] = fmt(d["default_fid"]), fmt(iid)
        f[f"{src}_default_iid"] = fmt(d["default_fid"] / iid) if iid == iid else "n/a"
        r1 = measured[(measured["dataset"] == name) & (measured["metric"] == "R@1")
                      & measured["row"].isin(tuned_methods(profile))] if not measured.empty else measured
        f[f"{src}_r1_range"] = (f"{r1['value'].min():.1f}–{r1['value'].max():.1f}" if len(r1) else "n/a")
        f[f"{src}_hardest"] = fmt(d["splits"][-1]["fid"])
        f[f"{src}_hardest_ratio"] = fmt(d["splits"][-1]["fid"] / d["default_fid"])
        for key, t in trends.items():
            sub = t[(t["dataset"] == name) & (t["splits"] == len(d["splits"]))]
            tag = {"R@1": "r1", "R@1 fixed": "fixed", "MAP@R": "mapr"}[key]
            f[f"{src}_{tag}_methods"] = str(len(sub))
            f[f"{src}_{tag}_falls"] = str(int((sub["change"] < 0).sum()))
            f[f"{src}_{tag}_rho"] = fmt(sub["spearman(FID, metric)"].mean(), 2) if len(sub) else "n/a"
            f[f"{src}_{tag}_drop"] = fmt(-sub["change"].mean()) if len(sub) else "n/a"
    from umlkit.paper import paper_table
    t1 = paper_table(PAPER, "Table 1").pivot_table(index="dataset", columns="setting", values="value")
    ratio = t1[_T1["default"]] / t1[_T1["iid"]]
    f["paper_iid_ratio"] = ", ".join(f"{ratio[SOURCE_NAMES[s]]:.1f}" for s in SOURCES[:-1]) + \
        f" and {ratio[SOURCE_NAMES[SOURCES[-1]]]:.1f}"
    cub = data["sources"]["cub"]["splits"]
    easier = [x["fid"] for x in cub if x["fid"] < data["sources"]["cub"]["default_fid"]]
    f["cub_easiest"] = fmt(min(easier)) if easier else "n/a"
    f["cub_easier_share"] = (f"{100 * (1 - min(easier) / data['sources']['cub']['default_fid']):.0f} %" if easier else "n/a")
    cross = list(data.get("cross_fid", {}).values())
    top = max(x["fid"] for d in data["sources"].values() for x in d["splits"])
    f["cross_min"], f["cross_max"] = (fmt(min(cross)), fmt(max(cross))) if cross else ("n/a", "n/a")
    f["split_max"] = fmt(top)
    f["cross_above"] = f"{sum(c > top for c in cross)} of {len(cross)}" if cross else "n/a"
    if not ags.empty:
        a = ags[ags["metric"] == "AGS-R@1"].groupby(["dataset", "row"])["measured"].mean()
        for src in SOURCES:
            name = SOURCE_NAMES[src]
            if name in a.index.get_level_values(0):
                s = a.loc[name].sort_values()
                f[f"{src}_ags_best"], f[f"{src}_ags_worst"] = s.index[-1], s.index[0]
                f[f"{src}_ags_range"] = f"{s.iloc[0]:.1f}–{s.iloc[-1]:.1f}"
    if not corr.empty:
        for m in ("pi_ratio", "rho"):
            c = corr[corr["metric"] == m]["across all points"]
            f[f"corr_{m}"] = ", ".join(f"{v:+.2f}" for v in c)
            f[f"corr_{m}_signs"] = "the same sign on every source" if (c > 0).all() or (c < 0).all() else "opposite signs across sources"
    if not transfer.empty:
        own = transfer[transfer["train"] == transfer["test"]]["R@1"].mean()
        cross = transfer[transfer["train"] != transfer["test"]]["R@1"].mean()
        f["transfer_own"], f["transfer_cross"] = fmt(own), fmt(cross)
    if not gains.empty:
        f["fs_points"] = str(len(gains))
        f["fs_positive"] = str(int((gains["gain"] > 0).sum()))
        for k in (2, 5):  # each source's own easiest and hardest split
            g = gains[gains["shots"] == k]
            lo = g[g["split"] == g.groupby("dataset")["split"].transform("min")]["gain"]
            hi = g[g["split"] == g.groupby("dataset")["split"].transform("max")]["gain"]
            tag = "fs" if k == 2 else "fs5"
            f[f"{tag}_gain_first"] = fmt(lo.mean()) if len(lo) else "n/a"
            f[f"{tag}_gain_last"] = fmt(hi.mean()) if len(hi) else "n/a"
    if not claims.empty:
        from umlkit.experiments.tables import verdict_group
        counts = claims["verdict"].map(verdict_group).value_counts()
        f["claims_n"] = str(len(claims))
        f["claims_summary"] = "; ".join(f"{v} {k}" for k, v in counts.items())
    return f


# ------------------------------------------------------------------------------------------------ full profile
PUBLISHED_FILES = {"cub": "cub200_splits.pkl", "cars": "cars196_splits.pkl", "sop": "online_products_splits.pkl"}


def _published_names(source: str, ds) -> dict[str, object]:
    """{name used in the official split files: class key} for a loaded split: CUB folder names
    ("001.Black_footed_Albatross"), Cars class names, SOP product ids (the image file names' prefix)."""
    if source == "sop":
        out = {}
        for path, label in zip(ds.paths, ds.labels):
            out.setdefault(Path(path).name.split("_")[0], ds.class_keys[int(label)])
        return out
    return {str(n): k for n, k in zip(ds.class_names, ds.class_keys)}


def _split_id(pkl_path):
    """Sort key of a split file's ids (integers, maybe as strings); another id is named with its file."""
    def key(sid):
        try:
            return int(sid)
        except (TypeError, ValueError):
            raise ValueError(f"{pkl_path}: split id {sid!r} is not an integer; expected the official file's 1, 2, "
                             f"...") from None
    return key


def read_published_splits(pkl_path, source: str, root) -> dict:
    """One official ``datasplits/*_splits.pkl`` (ooDML's repository) as this module's split layout: per split id its
    train/test class keys (class names mapped onto ``root``'s annotation ids), FID, the default flag (CUB 3, Cars
    and SOP 1, as ``ood_main.py``) and the class-level validation split (``split_val``). A class name the data
    root does not have is an error naming it. The pickle is read as plain data only (containers, strings, numbers,
    numpy arrays): a file that asks for anything else is refused, so a crafted one cannot run code."""
    from umlkit.data import load_dataset
    from umlkit.data.few_shot import load_plain_pickle
    raw = load_plain_pickle(pkl_path, "ooDML split file (datasplits/*_splits.pkl)")
    if not isinstance(raw, dict) or not raw:
        raise ValueError(f"{pkl_path}: expected a dict of split id -> {{train, test, fid, ...}}")
    names = {}
    for part in ("train", "test"):
        names.update(_published_names(source, load_dataset(source, root, part, cache=False)))
    default = 3 if source == "cub" else 1

    def keys(lst, sid, part):
        missing = [n for n in lst if str(n) not in names]
        if missing:
            raise KeyError(f"{pkl_path}: split {sid} {part} names {len(missing)} class(es) that {root} does not have, "
                           f"e.g. {missing[:3]}; known names look like {list(names)[:3]}")
        return _jsonable(names[str(n)] for n in lst)

    splits = []
    for sid in sorted(raw, key=_split_id(pkl_path)):
        s = raw[sid]
        if not (isinstance(s, dict) and {"train", "test", "fid"} <= set(s)
                and all(isinstance(s[p], (list, tuple)) and len(s[p]) for p in ("train", "test"))):
            raise ValueError(f"{pkl_path}: split {sid!r} = {str(s)[:80]}: expected {{train: [class names], test: [class "
                             f"names], fid: number[, split_val: [...]]}} with non-empty train and test")
        try:
            fid = round(float(s["fid"]), 4)
        except (TypeError, ValueError):
            raise ValueError(f"{pkl_path}: split {sid!r} has fid {s['fid']!r}; expected a number") from None
        entry = {"id": int(sid), "kind": "published", "iteration": 0, "fid": fid,
                 "default": int(sid) == default, "train": keys(s["train"], sid, "train"), "test": keys(s["test"], sid, "test")}
        if set(entry["train"]) & set(entry["test"]):
            raise ValueError(f"{pkl_path}: split {sid!r} trains and tests on {len(set(entry['train']) & set(entry['test']))} "
                             f"shared class(es); ooDML's splits are class-disjoint")
        if s.get("split_val"):
            entry["val"] = keys(s["split_val"], sid, "split_val")
        splits.append(entry)
    d = next((s for s in splits if s["default"]), splits[0])
    return {"default_fid": d["fid"], "splits": splits, "progression": [], "inverse": []}


def import_published_splits(pkl_dir, root, sources=SOURCES, overwrite: bool = False) -> Path:
    """Write ``configs/oodml/splits_full.json`` from the official split files in ``pkl_dir`` for the datasets under
    ``root`` (the full profile's splits; its configurations then refer to them like the quick profile's)."""
    from umlkit.results import _atomic_write
    pkl_dir = Path(pkl_dir)
    missing = [PUBLISHED_FILES[s] for s in sources if not (pkl_dir / PUBLISHED_FILES[s]).is_file()]
    if missing:
        raise FileNotFoundError(f"{pkl_dir} lacks {missing}; download the official repository's datasplits/ folder")
    out = {"backbone": "resnet50 (published splits)", "world": "published", "cross_fid": {},
           "sources": {s: read_published_splits(pkl_dir / PUBLISHED_FILES[s], s, root) for s in sources}}
    for s in out["sources"].values():  # the i.i.d. FID is not in the files: the full profile reports the paper's
        s["iid_fid"] = []
    path = _splits_path("full")
    data = json.dumps(out, separators=(",", ":"), sort_keys=True) + "\n"
    if path.exists() and not overwrite and path.read_text() != data:
        raise FileExistsError(f"{path} exists with other splits; pass overwrite=True (CLI: --overwrite) to "
                              f"replace it")
    _atomic_write(path, data)
    load_splits.cache_clear()
    return path


def compare_with_published(quick: dict, published: dict) -> pd.DataFrame:
    """How generated splits relate to published ones of the same source (both in this module's layout): per split
    id the two FIDs and the overlap of their test classes (Jaccard)."""
    rows = []
    by_id = {s["id"]: s for s in published["splits"]}
    for a in quick["splits"]:
        if a["id"] not in by_id:
            continue
        b = by_id[a["id"]]
        ta, tb_ = set(map(str, a["test"])), set(map(str, b["test"]))
        rows.append({"split": a["id"], "FID (generated)": a["fid"], "FID (published)": b["fid"],
                     "test-class overlap (Jaccard)": len(ta & tb_) / max(1, len(ta | tb_))})
    return pd.DataFrame(rows)


def paper_curves(metric: str = "R@1") -> pd.DataFrame:
    """The paper's Tables S4-S6 as curves (dataset, method, split, fid = the paper's split FID, value): Fig. 2 as
    published, for a figure beside the measured one."""
    from umlkit.paper import paper_table
    parts = []
    for table in SHIFT_TABLES.values():
        p = paper_table(PAPER, table)
        p = p[p["metric"] == metric]
        fid = p["setting"].str.extract(r"FID=([\d.]+)")[0].astype(float)
        split = p["setting"].str.extract(r"split=(\d+)")[0].astype(int)
        parts.append(pd.DataFrame({"dataset": p["dataset"].to_numpy(), "method": p["method"].to_numpy(),
                                   "split": split.to_numpy(), "fid": fid.to_numpy(), "value": p["value"].to_numpy(),
                                   "seed": 0}))
    return pd.concat(parts, ignore_index=True)


# ------------------------------------------------------------------------------------------------ registry entry
# what the scoreboard, `umlkit records` and `umlkit reproduce --paper` need (registered by umlkit.experiments.catalog)
ENTRY = Paper(name=PAPER, title="ooDML (Milbich, Roth et al., NeurIPS 2021)", claim_tables=TABLES, chapters=("oodml",),
              headline="Margin (D): R@1 falls from the default split to the hardest (CUB)",
              job_lists={n: partial(job_list, n) for n in ("lr_sweep", "tables")})
