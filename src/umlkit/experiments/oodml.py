"""ooDML (Milbich, Roth et al., NeurIPS 2021) on UML-Mini: class-mean features and the FID range of its splits.

The paper scores a split by the Fréchet distance between train and test class means of an ImageNet ResNet-50 that
saw no metric training (Sec. 3, Eq. 1); the quick profile uses the shipped tiny ViT's frozen CLS feature instead.
:func:`fid_progression` builds ooDML's swap and removal splits (:mod:`umlkit.data.shift`) for one source and
reports their FIDs; the UML-Mini v2 issue asks that the largest removal FID reach at least 5x the default split's.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from umlkit.data import build_transforms, load_dataset
from umlkit.data.shift import Split, removal_progression, swap_progression
from umlkit.metrics.distribution import class_means
from umlkit.models.backbones import backbone_data_config, create_backbone
from umlkit.train.evaluate import extract_embeddings

__all__ = ["source_class_means", "fid_progression", "fid_range_table", "fid_range", "fid_facts"]


def source_class_means(root, source: str, backbone: str = "vit_tiny_uml", weights: str | Path | None = None,
                       splits=("train", "test")) -> tuple[dict, list, list]:
    """({class key: mean frozen feature}, default train keys, default test keys) of one source."""
    model = create_backbone(backbone, pretrained=weights is None, weights=weights)  # unnormalised, as ooDML's
    tf = build_transforms("mini", backbone_data_config(backbone), train=False)       # avg_features
    means, sides = {}, []
    for split in splits:
        ds = load_dataset(source, root, split, transform=tf, cache=True)
        feats, labels = extract_embeddings(model, ds)
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
