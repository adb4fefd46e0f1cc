"""The standard figures of the book's tables, for any paper: measured against published values (does the paper's
ordering carry over?), every seed of a row, the difference between two settings per dataset, grouped bars, and
annotated heat maps (cross-source matrices, prompt weights). Inputs are the frames of
:mod:`umlkit.experiments.tables` (``measure`` / ``compare``)."""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

__all__ = ["plot_measured_vs_paper", "plot_seeds", "plot_setting_deltas", "plot_grouped_bars", "plot_heatmap"]


def plot_measured_vs_paper(cmp: pd.DataFrame, dataset: str = "Harmonic", metric: str = "R@1", hue: str = "section",
                           ax=None):
    """Measured vs paper value of one column for every row, with Spearman's rank correlation in the title."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    from scipy.stats import spearmanr
    sub = cmp[(cmp["dataset"] == dataset) & (cmp["metric"] == metric)].dropna(subset=["paper"])
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4.5))
    sub = sub.assign(**{hue: sub[hue].replace("", "zero-shot").str.slice(0, 40)})
    sns.scatterplot(data=sub, x="paper", y="measured", hue=hue, ax=ax, s=60)
    for _, r in sub.iterrows():
        ax.annotate(r["row"], (r["paper"], r["measured"]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    rho = spearmanr(sub["paper"], sub["measured"]).statistic if len(sub) > 2 else float("nan")
    ax.set_title(f"{dataset} {metric}: measured vs paper (Spearman ρ = {rho:.2f}, {len(sub)} rows)")
    ax.set_xlabel("paper (%)")
    ax.set_ylabel("measured (%)")
    ax.legend(fontsize=7)
    return ax


def plot_seeds(measured: pd.DataFrame, datasets: Sequence[str] = ("Unified", "Harmonic"), metric: str = "R@1",
               ax=None):
    """Every seed as a dot and the mean as a bar, per row, for the chosen columns."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    sub = measured[(measured["metric"] == metric) & measured["dataset"].isin(datasets)]
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    sns.barplot(data=sub, x="row", y="value", hue="dataset", ax=ax, errorbar=None, alpha=0.6)
    sns.stripplot(data=sub, x="row", y="value", hue="dataset", dodge=True, ax=ax, palette="dark:black", size=4,
                  legend=False)
    ax.set_ylabel(f"{metric} (%)")
    ax.set_xlabel("")
    ax.tick_params(axis="x", rotation=20, labelsize=8)
    return ax


def plot_setting_deltas(cmp: pd.DataFrame, a: str, b: str, columns: Sequence[str], metric: str = "R@1"):
    """Per dataset and method: the value with setting ``a`` minus the value with setting ``b``, measured beside
    the paper (e.g. PUMA Table 4: unified minus dataset-specific training)."""
    import seaborn as sns
    sub = cmp[cmp["metric"] == metric]
    wide = sub.pivot_table(index=["method", "dataset"], columns="setting", values=["measured", "paper"])
    d = pd.DataFrame({"measured": wide[("measured", a)] - wide[("measured", b)],
                      "paper": wide[("paper", a)] - wide[("paper", b)]})
    d = d.reset_index().melt(id_vars=["method", "dataset"], var_name="source of numbers", value_name=f"{a} − {b}")
    d["dataset"] = pd.Categorical(d["dataset"], list(columns))
    g = sns.catplot(data=d, x="dataset", y=f"{a} − {b}", hue="source of numbers", col="method", kind="bar",
                    height=3.2, aspect=1.3)
    for ax in g.axes.flat:
        ax.axhline(0, color="black", lw=0.8)
        ax.tick_params(axis="x", rotation=45, labelsize=8)
    return g


def plot_grouped_bars(measured: pd.DataFrame, x: str, hue: str, datasets: Sequence[str] = ("Unified", "Harmonic"),
                      metric: str = "R@1", xlabel: str | None = None):
    """Bars of ``metric`` per ``x`` and ``hue``, one panel per dataset column (seed means)."""
    import seaborn as sns
    sub = measured[(measured["metric"] == metric) & measured["dataset"].isin(datasets)]
    g = sns.catplot(data=sub, x=x, y="value", hue=hue, col="dataset", kind="bar", errorbar=None, height=3.4,
                    aspect=1.5)
    g.set_axis_labels(xlabel or x, f"{metric} (%)")
    for ax in g.axes.flat:
        ax.tick_params(axis="x", rotation=15, labelsize=8)
    return g


def plot_heatmap(df: pd.DataFrame, title: str, cbar: str, fmt: str = ".0f", cmap: str = "viridis",
                 xlabel: str = "", ylabel: str = "", ax=None):
    """An annotated heat map of a small matrix (e.g. trained-on x evaluated-on R@1, or prompt weights)."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 5))
    sns.heatmap(df, annot=True, fmt=fmt, cmap=cmap, ax=ax, cbar_kws={"label": cbar})
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return ax
