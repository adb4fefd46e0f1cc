"""PUMA Table 1 (the benchmark's statistics) computed by the loaders, beside the paper's numbers, and the
UML-Mini example figure."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from umlkit.data import load_dataset
from umlkit.data.unified import PUMA_ORDER
from umlkit.experiments.tables.paper_cells import paper_table

__all__ = ["dataset_statistics", "table1", "share_facts", "plot_examples", "plot_imbalance", "names_table",
           "pretraining_curves",
           "plot_pretraining_curves", "plot_fid_progression", "backbone_facts"]

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
            counts = [rows.get(_PAPER_NAMES.get(n, n), np.nan) for n in out.index]
            out[f"paper {split} {col}"] = pd.array([None if pd.isna(c) else round(c) for c in counts], dtype="Int64")
    out["train image share %"] = (100 * ours["train images"] / ours.loc["Total", "train images"]).round(1)
    paper_train = out["paper train images"].astype(float)   # counts are integers; their shares are not
    out["paper share %"] = (100 * paper_train / paper_train.loc["Total"]).round(1)
    return out


def share_facts(t1: pd.DataFrame) -> dict[str, str]:
    """Glue for the UML-Mini chapter's reading of :func:`table1`: the real benchmark's SOP and In-shop shares of the
    training images and classes (from PUMA Table 1) and UML-Mini's share of its two instance-level sources together,
    in whole percent."""
    def pct(part, whole):
        return f"{100 * part / whole:.0f}" if pd.notna(part) and pd.notna(whole) and whole else "–"
    if not {"sop", "inshop", "Total"} <= set(t1.index):   # a data root without those sources
        return {k: "–" for k in ("real_sop_img", "real_sop_cls", "real_inshop_img", "real_inshop_cls",
                                  "mini_inst_img", "mini_inst_cls")}
    facts = {}
    for src in ("sop", "inshop"):
        facts[f"real_{src}_img"] = pct(t1.loc[src, "paper train images"], t1.loc["Total", "paper train images"])
        facts[f"real_{src}_cls"] = pct(t1.loc[src, "paper train classes"], t1.loc["Total", "paper train classes"])
    inst = ["sop", "inshop"]
    facts["mini_inst_img"] = pct(t1.loc[inst, "train images"].sum(), t1.loc["Total", "train images"])
    facts["mini_inst_cls"] = pct(t1.loc[inst, "train classes"].sum(), t1.loc["Total", "train classes"])
    return facts


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


def names_table(root, names: Sequence[str] = PUMA_ORDER, per_source: int = 2) -> pd.DataFrame:
    """Per source: a few class names as stored on disk, as language guidance reads them, and one caption of an
    image of that class (UML-Mini v2; a real dataset has no captions)."""
    rows = []
    for n in names:
        ds = load_dataset(n, root, "train")
        for c in range(min(per_source, ds.num_classes)):
            i = int(np.flatnonzero(ds.labels == c)[0])
            rows.append({"source": n, "on disk": ds.class_names[c], "language name": ds.language_names[c],
                         "caption of one image": ds.captions[i] if ds.captions is not None else ""})
    return pd.DataFrame(rows).set_index(["source", "on disk"])


def pretraining_curves(reports: dict) -> pd.DataFrame:
    """Long table of pretraining curves: ``reports`` maps a label to a pretraining report (``pretrain_report*.json``
    of :func:`umlkit.models.pretrain.pretrain_tiny_vit`); rows (label, epoch) with train/validation loss and the
    validation accuracy of every head (reports without a per-epoch curve give their final point only)."""
    rows = []
    for label, rep in reports.items():
        curve = rep.get("curve") or [{"epoch": rep["epochs"], "train_loss": rep["loss_per_epoch"][-1],
                                      "val_accuracy": rep["val_accuracy"]}]
        for point in curve:
            row = {"backbone": label, "epoch": point["epoch"], "train loss": point.get("train_loss"),
                   "val loss": point.get("val_loss")}
            row.update({f"acc {k}": 100 * v for k, v in point["val_accuracy"].items()})
            rows.append(row)
    return pd.DataFrame(rows)


def plot_pretraining_curves(curves: pd.DataFrame, heads: Sequence[str] = ("shape", "texture", "period", "aspect",
                                                                           "disc_pos", "hue", "disc_hue", "scale")):
    """Validation loss and per-head validation accuracy along the pretraining epochs (one line per head)."""
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    for label, part in curves.groupby("backbone", sort=False):
        if part["val loss"].notna().any():
            left.plot(part["epoch"], part["val loss"], marker=".", label=f"{label}: validation")
        left.plot(part["epoch"], part["train loss"], linestyle="--", marker="o" if len(part) == 1 else None,
                  label=f"{label}: training")
        if len(part) > 1:
            for h in heads:
                right.plot(part["epoch"], part[f"acc {h}"], label=h)
    left.set_xlabel("epoch")
    left.set_ylabel("summed cross-entropy of the 8 heads")
    left.legend(fontsize=9.5)
    right.axhline(80, color="grey", linewidth=0.8, linestyle=":")
    right.set_xlabel("epoch")
    right.set_ylabel("validation accuracy (%)")
    right.legend(fontsize=9.5, ncol=2)
    fig.tight_layout()
    return fig


def plot_fid_progression(curves: dict, ax=None):
    """Class-mean FID along ooDML's swap then removal iterations, one line per (variant, source)."""
    import matplotlib.pyplot as plt
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.8))
    for (variant, source), points in curves.items():
        ax.plot(range(len(points)), [p[2] for p in points], label=f"{source} ({variant})",
                linestyle="-" if variant == "large" else ":")
    n_swap = sum(1 for p in next(iter(curves.values())) if p[0] == "swap")
    ax.axvline(n_swap - 0.5, color="grey", linewidth=0.8)
    ax.text(n_swap, ax.get_ylim()[1] * 0.95, "removal ->", fontsize=9.5, va="top")
    ax.set_xlabel("split (swap iterations, then removal iterations)")
    ax.set_ylabel("class-mean FID (tiny ViT features)")
    ax.legend(fontsize=9.5, ncol=2)
    return ax


def backbone_facts(zs: pd.DataFrame, reports: dict, accuracies: dict, old: str, new: str) -> dict[str, str]:
    """Numbers the backbone section states: zero-shot Unified/Harmonic of the ``old`` and ``new`` columns of
    ``zs`` (a :func:`umlkit.experiments.pages.zero_shot.zero_shot_table`), head accuracies of both measured the same way
    (``accuracies``: label -> :func:`umlkit.models.pretrain.head_accuracies`), and the pretraining reports' epochs,
    images, minutes and where the validation loss stopped falling."""
    heads = ("shape", "texture", "period", "aspect", "disc_pos", "hue", "disc_hue", "scale")
    facts = {}
    for tag, col in (("old", old), ("new", new), ("rand", "random init")):
        for ds in ("Unified", "Harmonic"):
            facts[f"zs_{tag}_{ds[:3].lower()}"] = f"{zs.loc[ds, col]:.1f}"
    per_source = zs.drop(index=["Unified", "Harmonic"])
    facts["zs_sources_up"] = str(int((per_source[new] > per_source[old]).sum()))
    facts["zs_sources_down"] = ", ".join(per_source.index[per_source[new] < per_source[old]]) or "none"
    for tag, label in (("old", old), ("new", new)):
        rep, acc = reports[label], accuracies[label]
        for h in heads:
            facts[f"{tag}_{h}"] = f"{100 * acc[h]:.1f}"
        lowest = min(heads, key=lambda h: acc[h])
        facts[f"{tag}_lowest_head"] = f"{lowest} ({100 * acc[lowest]:.1f} %)"
        facts[f"{tag}_heads_80"] = str(sum(acc[h] >= 0.8 for h in heads))
        facts[f"{tag}_named"] = f"{100 * acc['class (320 named)']:.1f}"
        facts[f"{tag}_epochs"] = str(rep["epochs"])
        facts[f"{tag}_images"] = f"{rep['n_images']:,}"
        facts[f"{tag}_minutes"] = f"{rep['seconds'] / 60:.0f}"
        if "val_loss_plateau_epoch" in rep:
            e, n = rep["val_loss_plateau_epoch"], rep["epochs"]
            facts[f"{tag}_plateau"] = (f"flattens from epoch {e} of {n} on (it never again falls by 1 %)" if e < n - 1
                                       else f"was still falling by more than 1 % per epoch until epoch {e} of {n}, "
                                            f"when the cosine schedule ran out; a longer schedule might still help")
            facts[f"{tag}_cpu"] = rep.get("cpu", "unknown CPU")
            facts[f"{tag}_threads"] = str(rep.get("threads"))
    return facts
