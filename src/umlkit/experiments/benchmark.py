"""PUMA Table 1 (the benchmark's statistics) computed by the loaders, beside the paper's numbers, and the
UML-Mini example figure."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from umlkit.data import load_dataset
from umlkit.data.unified import PUMA_ORDER
from umlkit.paper import paper_table

__all__ = ["dataset_statistics", "table1", "plot_examples", "plot_imbalance"]

_PAPER_NAMES = {"cub": "CUB", "cars": "Cars", "sop": "SOP", "inshop": "InShop", "nabirds": "NABirds", "dogs": "Dogs",
                "flowers": "Flowers", "aircraft": "Aircraft"}


def dataset_statistics(root, names: Sequence[str] = PUMA_ORDER, expected="auto") -> pd.DataFrame:
    """Train/test images and classes per source as the loaders read them (In-shop test = query + gallery)."""
    rows = {}
    for n in names:
        tr = load_dataset(n, root, "train", expected=expected, check_files=False)
        te = load_dataset(n, root, "test", expected=expected, check_files=False)
        rows[n] = {"train images": len(tr), "train classes": tr.num_classes, "test images": len(te),
                   "test classes": te.num_classes}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.loc["Total"] = df.sum()
    df.index.name = "source"
    return df


def table1(root, names: Sequence[str] = PUMA_ORDER, expected="auto") -> pd.DataFrame:
    """Measured statistics beside PUMA Table 1 (paper numbers as printed, e.g. 5.8K -> 5800), with shares of the
    training images so a scaled-down benchmark (UML-Mini) can be compared in kind."""
    ours = dataset_statistics(root, names, expected)
    paper = paper_table("puma", "Table 1")
    out = ours.copy()
    for split in ("train", "test"):
        for unit, col in (("samples", "images"), ("classes", "classes")):
            rows = paper[paper["setting"] == f"split={split};unit={unit}"].set_index("dataset")["value"]
            out[f"paper {split} {col}"] = [rows.get(_PAPER_NAMES.get(n, n), np.nan) for n in out.index]
    out["train image share %"] = (100 * ours["train images"] / ours.loc["Total", "train images"]).round(1)
    paper_train = out["paper train images"]
    out["paper share %"] = (100 * paper_train / paper_train.loc["Total"]).round(1)
    return out


def plot_examples(root, names: Sequence[str] = PUMA_ORDER, classes: int = 4, per_class: int = 3, ax=None):
    """A grid: one row per source, ``classes`` training classes x ``per_class`` images each."""
    import matplotlib.pyplot as plt
    rows = []
    for n in names:
        ds = load_dataset(n, root, "train")
        tiles = []
        for c in range(classes):
            idx = np.flatnonzero(ds.labels == c)[:per_class]
            tiles += [np.asarray(ds[i][0]) for i in idx]
            tiles.append(np.full_like(tiles[-1][:, :4], 255))  # gap between classes
        rows.append(np.concatenate(tiles[:-1], axis=1))
    width = max(r.shape[1] for r in rows)
    grid = np.concatenate([np.pad(r, ((2, 2), (0, width - r.shape[1]), (0, 0)), constant_values=255) for r in rows])
    if ax is None:
        _, ax = plt.subplots(figsize=(width / 40, grid.shape[0] / 40))
    ax.imshow(grid, interpolation="nearest")
    ax.set_yticks([(i + 0.5) * grid.shape[0] / len(names) for i in range(len(names))], list(names))
    ax.set_xticks([])
    ax.set_title(f"{classes} training classes x {per_class} images per source")
    return ax


def plot_imbalance(table: pd.DataFrame, ax=None):
    """Share of training images and classes per source: measured vs the paper (log-free bar chart)."""
    import matplotlib.pyplot as plt
    t = table.drop(index="Total")
    share = pd.DataFrame({
        "images (measured)": 100 * t["train images"] / t["train images"].sum(),
        "images (paper)": 100 * t["paper train images"] / t["paper train images"].sum(),
        "classes (measured)": 100 * t["train classes"] / t["train classes"].sum(),
        "classes (paper)": 100 * t["paper train classes"] / t["paper train classes"].sum(),
    })
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.5))
    share.plot.bar(ax=ax, width=0.8)
    ax.set_ylabel("% of the training set")
    ax.set_title("Imbalance across sources")
    return ax
