"""Making class splits of increasing distribution shift, and importing the published ones.

ooDML (Milbich, Roth et al., NeurIPS 2021, Sec. 3 and the official ``split_maker``) orders a source's classes by
how far the test classes' frozen features lie from the training classes' (FID of the class means): starting from
the default split it *swaps* the train/test class pairs that raise the FID most (2 per iteration for 25 iterations;
SOP the same share of its classes), then *removes* the test classes closest to training (2 per iteration, 35
iterations), and for CUB also swaps the other way for easier splits; Table S1's layout picks splits along that
progression (:func:`umlkit.experiments.splits.features.select_splits`). :func:`make_splits` does this for the quick
world
(the large UML-Mini, frozen tiny ViT v2) and :func:`write_splits` commits the result as
``configs/oodml/splits_quick.json``; :func:`import_published_splits` turns the official ``datasplits/*.pkl`` into
``<UMLKIT_DATA>/oodml/splits_full.json`` for the full profile (the user's data, the user's folder). :func:`fid_range`
measures how much shift each UML-Mini variant allows (the UML-Mini chapter). Readers of the committed splits use
:mod:`umlkit.experiments.splits.committed`.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from umlkit.data import build_transforms, load_dataset
from umlkit.experiments.recipes.source import methods_config
from umlkit.experiments.splits.committed import (
    EPISODE_SOURCES,
    SPLIT_SOURCES,
    check_split_ids,
    episodes_path,
    load_splits,
    splits_path,
)
from umlkit.experiments.splits.features import Split, removal_progression, swap_progression
from umlkit.metrics.distribution import class_means
from umlkit.models.backbones import backbone_data_config, create_backbone
from umlkit.train.evaluate import extract_embeddings


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
    return table.round({"default FID": 2, "hardest swap FID": 2, "hardest removal FID": 2,
                        "removal / default": 1}), curves


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
    save_table(table.reset_index(), name, profile, {"backbone": backbone, "sources": list(sources),
                                                    "generator": _world(),
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


# ------------------------------------------------------------------------------------------------ splits
def _jsonable(keys) -> list:
    return [int(k) if isinstance(k, (int, np.integer)) else str(k) for k in keys]


def make_splits(profile: str = "quick", backbone: str = "vit_tiny_uml_v2", sources=SPLIT_SOURCES) -> dict:
    """ooDML's splits of the quick world (the large UML-Mini): per source the swap and removal progressions (and,
    for CUB, the inverse one), the splits chosen from them in Table S1's layout
    (:func:`umlkit.experiments.splits.features.
    select_splits`), the default split's FID and the i.i.d. FID (Table 1). About a minute on 2 cores."""
    if profile != "quick":
        raise ValueError("the full profile reads the published split files (datasplits/*.pkl); make_splits builds "
                         "the quick profile's")
    from umlkit.data.mini import GENERATOR_VERSION, ensure_mini
    from umlkit.experiments.splits.features import iid_fid, select_splits, split_fid
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
        easier = (swap_progression(means, train, test, iterations=15, history=30, inverse=True)[1:]
                  if lay["easier"] else [])
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


def splits_json(splits: dict, path: Path) -> str:
    """The split file's text; refused (nothing written to ``path``) when two splits of a source share an id or a
    number is NaN or infinite (JSON has no such value: the file would not be valid JSON)."""
    check_split_ids(splits, f"not writing {path}")
    try:
        return json.dumps(splits, separators=(",", ":"), sort_keys=True, allow_nan=False) + "\n"
    except ValueError:
        raise ValueError(f"not writing {path}: the splits hold a NaN or infinite number (an FID that could not be "
                         f"computed); check the features the splits were made from") from None


def write_splits(profile: str = "quick", overwrite: bool = False) -> Path:
    """Compute :func:`make_splits` and write ``configs/oodml/splits_<profile>.json`` (committed: configurations
    refer to its splits, so that every machine trains the same classes)."""
    path = splits_path(profile)
    return _write_split_file(path, splits_json(make_splits(profile), path), overwrite)


def _write_split_file(path: Path, data: str, overwrite: bool) -> Path:
    """Write a split file atomically; one that holds other splits is replaced only with ``overwrite``."""
    from umlkit.results import atomic_write
    if path.exists() and not overwrite and path.read_text() != data:
        raise FileExistsError(f"{path} exists with other splits; pass overwrite=True (CLI: --overwrite) to "
                              f"replace it")
    atomic_write(path, data)
    load_splits.cache_clear()
    return path


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
        if not isinstance(s, dict):
            raise ValueError(f"{pkl_path}: split {sid!r} = {str(s)[:60]}: expected {{train: [class names], test: "
                             f"[class names], fid: number, split_train, split_val, test_episodes}}")
        lacking = [k for k in ("train", "test", "fid") if k not in s]
        if lacking:
            raise ValueError(f"{pkl_path}: split {sid!r} lacks the key(s) {lacking}; an official split holds train, "
                             f"test (class names), fid, split_train, split_val and test_episodes")
        empty = [p for p in ("train", "test") if not (isinstance(s[p], (list, tuple)) and len(s[p]))]
        if empty:
            raise ValueError(f"{pkl_path}: split {sid!r}: {empty} must be non-empty lists of class names")
        try:
            fid = round(float(s["fid"]), 4)
        except (TypeError, ValueError):
            raise ValueError(f"{pkl_path}: split {sid!r} has fid {s['fid']!r}; expected a number") from None
        entry = {"id": int(sid), "kind": "published", "iteration": 0, "fid": fid,
                 "default": int(sid) == default, "train": keys(s["train"], sid, "train"),
                 "test": keys(s["test"], sid, "test")}
        if set(entry["train"]) & set(entry["test"]):
            raise ValueError(f"{pkl_path}: split {sid!r} trains and tests on "
                             f"{len(set(entry['train']) & set(entry['test']))} "
                             f"shared class(es); ooDML's splits are class-disjoint")
        entry.update(_validation_classes(pkl_path, sid, s, keys))
        splits.append(entry)
    d = next((s for s in splits if s["default"]), None)
    if d is None:
        raise ValueError(f"{pkl_path}: no split {default}, ooDML's default split of {source} (ood_main.py trains "
                         f"the paper's main tables on it); the file has split(s) {[s['id'] for s in splits]}")
    return {"default_fid": d["fid"], "splits": splits, "progression": [], "inverse": []}


def _validation_classes(pkl_path, sid, s: dict, keys) -> dict:
    """``{"val_train", "val"}``: the published class-level split of a split's training classes (``split_train`` /
    ``split_val``, which the official code trains and selects its checkpoint on); a class of either that is not one
    of the split's training classes (a test class above all) is refused, naming it."""
    if not s.get("split_val"):
        return {}
    train, test = {str(c) for c in s["train"]}, {str(c) for c in s["test"]}
    for part in ("split_train", "split_val"):
        wrong = [c for c in s.get(part) or [] if str(c) not in train]
        if wrong:
            where = "test classes" if any(str(c) in test for c in wrong) else "not training classes"
            raise ValueError(f"{pkl_path}: split {sid!r} {part} lists {len(wrong)} class(es) that are {where} of "
                             f"the split, e.g. {wrong[:3]}; validation classes must come from its train list")
    val = keys(s["split_val"], sid, "split_val")
    fit = keys(s["split_train"], sid, "split_train") if s.get("split_train") else \
        [k for k in keys(s["train"], sid, "train") if k not in set(val)]
    return {"val_train": fit, "val": val}


def _episodes(eps, where: str) -> list[tuple[int, dict]]:
    """(index, {class: files}) of one shot count's episodes, as the official code writes them (a dict keyed by the
    episode index, ``datasets/cub200.py`` reads ``test_episodes[shots][ep_idx][classname]``) or as a list."""
    items = sorted(eps.items()) if isinstance(eps, dict) else list(enumerate(eps)) if isinstance(eps, list) else None
    if items is None or not all(isinstance(ep, dict) for _, ep in items):
        raise ValueError(f"{where}: expected {{episode index: {{class name: [support file names]}}}}, got "
                         f"{type(eps).__name__} of {type(next(iter(eps), None)).__name__ if items else '?'}")
    return items


def read_published_episodes(pkl_path, source: str, root) -> dict:
    """``{split id: {shots: [episode: {class name: [support file names]}]}}`` from an official split file's
    ``test_episodes`` (the few-shot protocol's published support sets, ooDML Sec. 4.4); every class of an episode
    must be a test class of its split, and every file one of that class's test images in ``root`` (matched by file
    name, so CUB's ``images/<class>/``, Cars' ``car_ims/`` and SOP's folders all resolve), else an error names it."""
    from umlkit.data import load_dataset
    from umlkit.data.few_shot import load_plain_pickle
    raw = load_plain_pickle(pkl_path, "ooDML split file (datasplits/*_splits.pkl)")
    test = load_dataset(source, root, "test", cache=False)
    train = load_dataset(source, root, "train", cache=False)
    files = {p.name for ds in (train, test) for p in ds.paths}
    out = {}
    for sid in sorted(raw, key=_split_id(pkl_path)):
        episodes = raw[sid].get("test_episodes") if isinstance(raw[sid], dict) else None
        if not episodes:
            continue
        test_classes = {str(c) for c in raw[sid]["test"]}
        out[str(sid)] = {}
        for shots, eps in episodes.items():
            lists = []
            for e, episode in _episodes(eps, f"{pkl_path}: split {sid} {shots}-shot test_episodes"):
                for cls, names in episode.items():
                    if str(cls) not in test_classes:
                        raise ValueError(f"{pkl_path}: split {sid} {shots}-shot episode {e} draws from class {cls!r}, "
                                         f"which is not a test class of the split")
                    missing = [n for n in names if Path(str(n)).name not in files]
                    if missing:
                        raise FileNotFoundError(f"{pkl_path}: split {sid} {shots}-shot episode {e}, class {cls!r}: "
                                                f"support image {missing[0]!r} is not under {root} ({source})")
                lists.append({str(c): [Path(str(n)).name for n in names] for c, names in episode.items()})
            out[str(sid)][str(int(shots))] = lists
    return out


def import_published_splits(pkl_dir, root, sources=SPLIT_SOURCES, overwrite: bool = False) -> Path:
    """Write ``<UMLKIT_DATA>/oodml/splits_full.json`` from the official split files in ``pkl_dir`` for the datasets
    under ``root`` (the full profile's splits; its configurations then refer to them like the quick profile's)."""
    pkl_dir = Path(pkl_dir)
    missing = [PUBLISHED_FILES[s] for s in sources if not (pkl_dir / PUBLISHED_FILES[s]).is_file()]
    if missing:
        raise FileNotFoundError(f"{pkl_dir} lacks {missing}; download the official repository's datasplits/ folder")
    out = {"backbone": "resnet50 (published splits)", "world": "published", "cross_fid": {},
           "sources": {s: read_published_splits(pkl_dir / PUBLISHED_FILES[s], s, root) for s in sources}}
    for s in out["sources"].values():  # the i.i.d. FID is not in the files: the full profile reports the paper's
        s["iid_fid"] = []
    path = splits_path("full")
    episodes = {s: read_published_episodes(pkl_dir / PUBLISHED_FILES[s], s, root) for s in sources
                if s in EPISODE_SOURCES}
    if any(episodes.values()):   # beside the splits (CUB's and Cars' support lists; SOP has no few-shot table)
        _write_split_file(episodes_path(), json.dumps(episodes), overwrite)
    return _write_split_file(path, splits_json(out, path), overwrite)


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
