"""ooDML (Milbich, Roth et al., NeurIPS 2021) on UML-Mini: class-mean features and the FID range of its splits.

The paper scores a split by the Fréchet distance between train and test class means of an ImageNet ResNet-50 that
saw no metric training (Sec. 3, Eq. 1); the quick profile uses the shipped tiny ViT's frozen CLS feature instead.
:func:`fid_progression` builds ooDML's swap and removal splits (:mod:`umlkit.data.shift`) for one source and
reports their FIDs; the UML-Mini v2 issue asks that the largest removal FID reach at least 5x the default split's.
"""
from __future__ import annotations

import copy
import json
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from umlkit.data import build_transforms, load_dataset
from umlkit.data.shift import Split, removal_progression, swap_progression
from umlkit.experiments.runners import SOURCE_NAMES
from umlkit.experiments.tables import Claim, Row, Table, measure
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
                    removal_iterations: int = 35) -> list[Split]:
    """The default split, ooDML's swap progression from it, then the removal progression from the last swap."""
    swaps = swap_progression(means, train, test, iterations=swap_iterations)
    return swaps + removal_progression(means, swaps[-1], iterations=removal_iterations)


def fid_range_table(roots: dict, sources=("cub", "cars", "sop"), backbone: str = "vit_tiny_uml",
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
    from umlkit._paths import repo_root
    root = repo_root()
    if root is None or not (root / "configs" / "oodml").is_dir():
        raise FileNotFoundError("the ooDML experiments read configs/oodml/*.yaml from an umlkit checkout; clone the "
                                "repository (git clone ...; pip install -e .) and run from inside it")
    return root / "configs" / "oodml"


@lru_cache(maxsize=1)
def methods_config() -> dict:
    """``configs/oodml/methods.yaml``: methods, learning rates, epochs, few-shot settings and the split layout."""
    return yaml.safe_load((_config_dir() / "methods.yaml").read_text())


# ------------------------------------------------------------------------------------------------ splits
def _jsonable(keys) -> list:
    return [int(k) if isinstance(k, (int, np.integer)) else str(k) for k in keys]


def make_splits(profile: str = "quick", backbone: str = "vit_tiny_uml_v2", sources=SOURCES) -> dict:
    """ooDML's splits of the quick world (the large UML-Mini): per source the swap and removal progressions (and,
    for CUB, the inverse one), the splits chosen from them in Table S1's layout (:func:`umlkit.data.shift.
    select_splits`), the default split's FID and the i.i.d. FID (Table 1). About a minute on 2 cores."""
    if profile != "quick":
        raise ValueError("the full profile reads the published split files (datasplits/*.pkl); make_splits builds "
                         "the quick profile's")
    from umlkit.data.mini import GENERATOR_VERSION, ensure_mini
    from umlkit.data.shift import iid_fid, select_splits, swap_progression
    layout = methods_config()["splits"]
    root = ensure_mini(size="large")
    from umlkit.data.shift import split_fid
    out = {"backbone": backbone, "world": f"uml_mini:v{GENERATOR_VERSION}:large:seed0", "sources": {}}
    all_means = {}
    for source in sources:
        feats: dict = {}
        means, train, test = source_class_means(root, source, backbone, features=feats)
        all_means[source] = (means, train, test)
        prog = fid_progression(means, train, test)
        easier = swap_progression(means, train, test, iterations=15, history=30, inverse=True) if layout[source]["easier"] else []
        easier = easier[1:]  # its first split is the default itself
        chosen = select_splits(prog, layout[source]["harder"] + 1, easier=easier, n_easier=layout[source]["easier"])
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
        raise FileExistsError(f"{path} exists with other splits; pass overwrite=True to replace it")
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


def split_of(source: str, split_id: int, profile: str = "quick") -> dict:
    """One split (``{id, kind, iteration, fid, default, train, test}``) of a source, numbered as Table S1."""
    splits = load_splits(profile)["sources"][source]["splits"]
    found = [s for s in splits if s["id"] == int(split_id)]
    if not found:
        raise KeyError(f"{source} has splits {[s['id'] for s in splits]}, not {split_id}")
    return found[0]


def default_split_id(source: str, profile: str = "quick") -> int:
    return next(s["id"] for s in load_splits(profile)["sources"][source]["splits"] if s["default"])


def chosen_lr(method: str, profile: str) -> float:
    lrs = methods_config()["lr"][profile] or {}
    if method in lrs:
        return float(lrs[method])
    if "default" in lrs:
        return float(lrs["default"])
    raise KeyError(f"configs/oodml/methods.yaml has no {profile} learning rate for {method!r} (run the lr sweep)")


def run_config(profile: str = "quick", *, method: str = "Margin (D)", source: str = "cub", split: int | None = None,
               seed: int = 0, lr: float | None = None, validation: bool = False, overrides=()) -> dict:
    """The resolved ``fit`` configuration of one ooDML run: ``oodml.yaml`` (profile block), the method's loss, the
    source and the classes of its split ``split`` (default: the default split), the seed and learning rate (default:
    the chosen one). ``validation=True`` trains on the split's first (1 - val_fraction) training classes and
    tests on the rest: the tuning protocol, which never sees a test class."""
    from umlkit.train.config import load_config, resolve_config
    mc = methods_config()
    if method not in mc["methods"] and method != "zero_shot":
        raise KeyError(f"unknown ooDML method {method!r}; choose from {list(mc['methods'])}")
    cfg = copy.deepcopy(load_config(_config_dir() / "oodml.yaml", profile))
    cfg["data"]["datasets"] = [source]
    s = split_of(source, default_split_id(source, profile) if split is None else split, profile)
    train, test = list(s["train"]), list(s["test"])
    if validation:
        n_val = max(2, int(round(len(train) * float(mc["val_fraction"]))))
        train, test = train[:-n_val], train[-n_val:]
    cfg["data"]["splits"] = {source: {"train": train, "test": test}}
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
    return resolve_config(cfg, overrides=list(overrides))


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


def run_jobs(jobs, profile: str = "quick", runner: str = "train_analysis", worker: tuple[int, int] = (0, 1),
             train: bool = True, log=print) -> list[dict]:
    """Read or run the records of ``jobs`` ((table folder, label, key)) under ``records/oodml/<table>/``; ``worker=(i, n)``
    takes every n-th job from the i-th, so that n processes share a job list without a lock (a record another
    worker wrote meanwhile is read, not retrained)."""
    from umlkit.experiments.records import cached_record, find_record, normalise_key
    i, n = worker
    out = []
    for j, (table, label, key) in enumerate(jobs):
        if j % n != i:
            continue
        if not train and find_record(normalise_key(key), profile) is None:
            continue
        out.append(cached_record(PAPER, table, label, key, runner, profile, log=log))
    return out


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
    return [s["id"] for s in load_splits(profile)["sources"][source]["splits"]]


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


def config_for(row: Row, seed: int, profile: str = "quick", overrides=()) -> dict:
    """The record key of a Table S4-S8 row: ``{"config": run_config(...), "analysis": analysis_for(...)}``."""
    sp = row.spec
    method = "zero_shot" if sp["method"] in GENERIC else sp["method"]
    extra = GENERIC.get(sp["method"], [])
    cfg = run_config(profile, method=method, source=sp["source"], split=sp["split"], seed=seed,
                     overrides=[*extra, *overrides])
    return {"config": cfg, "analysis": analysis_for(method, sp["source"], sp["split"], profile)}


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
            for m in methods_config()["methods"] for i in ids]
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
                 unmeasured={"quick": "not measured in this profile"}, params=False)


def few_shot_table(source: str, profile: str = "quick") -> Table:
    """Table S7 (CUB) or S8 (Cars): zero-shot and adapted query metrics (mean over episodes) from the records of
    Table S4/S5 (the same runs: few-shot adaptation is part of their analysis)."""
    table = FEW_SHOT_TABLES[source]
    fs = methods_config()["few_shot"]
    ids = split_ids(source, profile)
    rows = [Row(method=m, setting=f"shot={k};use={use};split={i}",
                spec={"method": m, "source": source, "split": i, "shot": k, "use": use},
                runner="train_analysis", group=f"{k}-shot", label=f"{source}-{m}-split{i}")
            for m in fs["methods"] for k in fs["shots"] for use in ("Zero", "Few") for i in ids]
    name = SOURCE_NAMES[source]
    claims = [Claim(f"{m}: {k}-shot adaptation beats zero-shot on the hardest split ({name})",
                    _c(f"shot={k};use=Few;split={ids[-1]}", m, name), _c(f"shot={k};use=Zero;split={ids[-1]}", m, name))
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
    """Every record-based ooDML table of a profile (the FID tables need no records: :func:`fid_tables`)."""
    out = {SHIFT_TABLES[s]: shift_table(s, profile) for s in SOURCES}
    out.update({FEW_SHOT_TABLES[s]: few_shot_table(s, profile) for s in FEW_SHOT_TABLES})
    out["Table S3"] = ags_table(profile)
    return out


def table_jobs(profile: str = "quick", seeds=SEEDS) -> list[tuple[str, str, dict]]:
    """(record folder, label, key) of every training run of Tables S4-S8, seed-major (all of seed 0 first)."""
    tuned = set(methods_config()["lr"].get(profile) or {})
    default = "default" in tuned
    jobs = []
    for seed in seeds:
        for src in SOURCES:
            spec = shift_table(src, profile)
            jobs += [(spec.slug, f"{row.label}-seed{seed}", config_for(row, seed, profile)) for row in spec.rows
                     if row.group == "generic" or default or row.method in tuned]  # untuned methods wait
    return jobs


def lr_sweep(profile: str = "quick", train: bool = False, select_on: str = "MAP@R") -> pd.DataFrame:
    """The tuning protocol's results: per method and learning rate, the validation scores (R@1, mAP@1000, MAP@R on
    the held-out training classes of the CUB-like default split); ``chosen`` marks each method's best by
    ``select_on``, and ``interior`` says whether that best lies inside the grid (not on its edge)."""
    rows = []
    for table, label, key in sweep_jobs(profile):
        recs = run_jobs([(table, label, key)], profile, train=train, log=None)
        if not recs:
            continue
        res = recs[0]["result"]["test"]
        method = label.split("-lr")[0]
        rows.append({"method": method, "lr": key["config"]["optimizer"]["lr"],
                     **{f"val {m}": v["CUB"] for m, v in res.items() if m in ANALYSIS_METRICS},
                     "seconds": recs[0]["seconds"]})
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    best = out.loc[out.groupby("method", sort=False)[f"val {select_on}"].idxmax()]
    out["chosen"] = out.index.isin(best.index)
    grid = out.groupby("method", sort=False)["lr"].agg(["min", "max"])
    out["interior"] = [bool(c and grid.loc[m, "min"] < lr < grid.loc[m, "max"]) if c else None
                       for m, lr, c in zip(out["method"], out["lr"], out["chosen"])]
    return out
