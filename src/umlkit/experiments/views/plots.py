"""The standard figures of the book's tables, for any paper: measured against published values (does the paper's
ordering carry over?), every seed of a row, the difference between two settings per dataset, grouped bars, and
annotated heat maps (cross-source matrices, prompt weights), and rank slopes (each row's rank in the paper and
as measured). Inputs are the frames of :mod:`umlkit.experiments.tables.table` (``measure`` / ``compare``)."""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from umlkit.experiments.tables.labels import cell_label, readable
from umlkit.experiments.views.forest import VERDICT_COLOURS, plot_verdicts  # noqa: F401 (their home)

__all__ = ["plot_measured_vs_paper", "plot_seeds", "plot_setting_deltas", "plot_grouped_bars", "plot_heatmap",
           "plot_fid_progression", "plot_metric_vs_fid", "plot_rank_slopes", "plot_retrieved_classes",
           "plot_source_bias", "plot_gap_map", "plot_probes", "plot_sweep_panels"]


_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">"]   # one shape per line where colours are many


def plot_measured_vs_paper(cmp: pd.DataFrame, dataset: str = "Harmonic", metric: str = "R@1", hue: str = "section",
                           ax=None):
    """Measured vs paper value of one column for every row, with Spearman's rank correlation in the title."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    from scipy.stats import spearmanr
    sub = cmp[(cmp["dataset"] == dataset) & (cmp["metric"] == metric)].dropna(subset=["paper"])
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4.5))
    from umlkit.experiments.tables.table import short_label
    # "(a) Dataset-specific metric learning (...)" -> "(a)": a legend that fits; the table names the sections
    sub = sub.assign(**{hue: sub[hue].replace("", "zero-shot").map(lambda v: short_label(v)[:40])})
    sns.scatterplot(data=sub, x="paper", y="measured", hue=hue, ax=ax, s=60)
    from adjustText import adjust_text  # moves the point labels apart where points crowd
    texts = [ax.text(r["paper"], r["measured"], r["row"], fontsize=9) for _, r in sub.iterrows()]
    adjust_text(texts, ax=ax, arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "grey"})
    rho = spearmanr(sub["paper"], sub["measured"]).statistic if len(sub) > 2 else float("nan")
    ax.set_title(f"{dataset} {metric}: measured vs paper (Spearman ρ = {rho:.2f}, {len(sub)} rows)")
    ax.set_xlabel("paper (%)")
    ax.set_ylabel("measured (%)")
    ax.legend(fontsize=9)
    return ax


def plot_seeds(measured: pd.DataFrame, datasets: Sequence[str] = ("Unified", "Harmonic"), metric: str = "R@1",
               ax=None):
    """Every seed as a dot and the mean as a bar, per row, for the chosen columns."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    sub = measured[(measured["metric"] == metric) & measured["dataset"].isin(datasets)]
    sub = sub.assign(row=sub["row"].map(readable), score=sub["dataset"])   # words on the axis; Unified is a score
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    sns.barplot(data=sub, x="row", y="value", hue="score", ax=ax, errorbar=None, alpha=0.6)
    sns.stripplot(data=sub, x="row", y="value", hue="score", dodge=True, ax=ax, palette="dark:black", size=4,
                  legend=False)
    ax.set_ylabel(f"{metric} (%)")
    ax.set_xlabel("")
    ax.tick_params(axis="x", rotation=20, labelsize=9)
    return ax


def plot_setting_deltas(cmp: pd.DataFrame, a: str, b: str, columns: Sequence[str], metric: str = "R@1"):
    """Per dataset and method: the value with setting ``a`` minus the value with setting ``b``, measured beside
    the paper (e.g. PUMA Table 4: unified minus dataset-specific training)."""
    import seaborn as sns
    sub = cmp[cmp["metric"] == metric]
    wide = sub.pivot_table(index=["method", "dataset"], columns="setting", values=["measured", "paper"])
    d = pd.DataFrame({"measured": wide[("measured", a)] - wide[("measured", b)],
                      "paper": wide[("paper", a)] - wide[("paper", b)]})
    label = f"{metric}: {a.split('=')[-1]} minus {b.split('=')[-1]}"   # "training=Univ." -> "Univ."
    d = d.reset_index().melt(id_vars=["method", "dataset"], var_name="source of numbers", value_name=label)
    d = d.dropna(subset=[label])
    d["dataset"] = pd.Categorical(d["dataset"], [c for c in columns if c in set(d["dataset"])])
    g = sns.catplot(data=d, x="dataset", y=label, hue="source of numbers", col="method", kind="bar",
                    height=3.2, aspect=1.3, col_wrap=2 if d["method"].nunique() > 2 else None)
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


def plot_fid_progression(splits: dict, sources: Sequence[str], names: dict[str, str]):
    """ooDML Fig. 1: FID per swap iteration and per removal iteration of each source (from the splits file), the
    chosen splits marked. ``splits`` is :func:`umlkit.experiments.papers.oodml.load_splits`'s mapping."""
    import matplotlib.pyplot as plt
    width = min(4.2, 10.5 / len(sources))   # the row fits the page's width at the figure's natural size
    fig, axes = plt.subplots(1, len(sources), figsize=(width * len(sources), 3.2), squeeze=False)
    for ax, src in zip(axes[0], sources):
        d = splits["sources"][src]
        swap = [(it, f) for kind, it, f, *_ in d["progression"] if kind == "swap"]
        n_swap = max(it for it, _ in swap)
        removal = [(n_swap + it, f) for kind, it, f, *_ in d["progression"] if kind == "removal"]
        inverse = [(it, f) for _, it, f, *_ in d.get("inverse", [])]
        for pts, label, style, color in ((inverse, "inverse swapping", ":", "tab:green"),
                                         (swap, "swapping", "-", "tab:blue"),
                                         (removal, "removal", "--", "tab:orange")):
            if pts:
                ax.plot(*zip(*pts), style, label=label, color=color)
        for s in d["splits"]:  # inverse iterations are stored negative
            x = s["iteration"] + (n_swap if s["kind"] == "removal" else 0)
            ax.scatter([x], [s["fid"]], color="black", zorder=3, s=14)
            ax.annotate(str(s["id"]), (x, s["fid"]), textcoords="offset points", xytext=(3, 3), fontsize=9)
        ax.axvline(n_swap, color="grey", lw=0.6)
        ax.set_title(names[src])
        ax.set_xlabel("iteration (swaps, then removals)")
    axes[0][0].set_ylabel("class-mean FID")
    axes[0][0].legend(fontsize=9)
    fig.tight_layout()
    return fig


def plot_metric_vs_fid(frame: pd.DataFrame, metric: str = "R@1", hue: str = "method", col: str = "dataset",
                       paper: pd.DataFrame | None = None, xlabel: str = "split FID (this profile)"):
    """ooDML Fig. 2 / 4 / 7: ``metric`` against the split FID, one line per ``hue`` (seed mean, bars = seed range),
    one panel per ``col``; ``paper`` (same columns, FIDs of the paper's splits) is drawn as thin dashed lines on a
    second x axis when given."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    if frame.empty:
        from umlkit.experiments.views.chapter import missing_figure
        return missing_figure(f"{metric} against the split FID")
    cols = list(dict.fromkeys(frame[col]))
    # two panels a row fit the page's 936 px at their natural size (ticks stay 10 pt); a spare slot holds the legend
    ncols = min(2, len(cols))
    nrows = -(-len(cols) // ncols)
    fig, grid = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, 3.5 * nrows), squeeze=False)
    for ax in grid.flat[len(cols):]:
        ax.axis("off")   # a free slot: the first one holds the legend
    axes = [list(grid.flat[:len(cols)])]
    hues = list(dict.fromkeys(frame[hue]))
    palette = dict(zip(hues, sns.color_palette("tab10", len(hues))))
    markers = dict(zip(hues, _MARKERS * (1 + len(hues) // len(_MARKERS))))   # colour and shape tell methods apart
    for i, (ax, c) in enumerate(zip(axes[0], cols)):
        ax.set_ylabel(metric if i % ncols == 0 else "")
        sub = frame[frame[col] == c]
        for h, g in sub.groupby(hue, sort=False):
            s = g.groupby("fid")["value"].agg(["mean", "min", "max"]).reset_index()
            ax.errorbar(s["fid"], s["mean"], yerr=[s["mean"] - s["min"], s["max"] - s["mean"]], marker=markers[h],
                        ms=4.5, lw=1.2, capsize=2, label=h, color=palette[h])
        ax.set_title(c)
        ax.set_xlabel(xlabel)
        if paper is not None and not paper[paper[col] == c].empty:
            twin = ax.twiny()
            for h, g in paper[paper[col] == c].groupby(hue, sort=False):
                twin.plot(g["fid"], g["value"], ls="--", lw=0.7, color=palette.get(h, "grey"))
            twin.set_xlabel("paper split FID (dashed)", fontsize=9.5)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.tight_layout()
    if len(grid.flat) > len(cols):   # the free panel beside the last row
        grid.flat[len(cols)].legend(handles, labels, loc="center", fontsize=10, frameon=False)
    else:       # below the panels, in columns that fit their width
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(len(labels), 3),
                   fontsize=10, frameon=False)
    return fig


def plot_rank_slopes(views, title: str = "rank in the paper (left) and measured (right)"):
    """One panel per table: every row's rank in the paper joined to its measured rank (the frames of
    :func:`umlkit.experiments.tables.table.rank_view`, ``{panel title: frame}``); a line that stays level is an ordering
    that carried over, Spearman's ρ of the two rankings is in each panel's title."""
    import matplotlib.pyplot as plt
    views = dict(views)
    if not views:
        raise ValueError("plot_rank_slopes needs at least one rank view")
    # one panel under the other: a book page is narrow, and the row labels need the width
    fig, axes = plt.subplots(len(views), 1, figsize=(8, 3.4 * len(views)), squeeze=False)
    for ax, (name, v) in zip(axes[:, 0], views.items()):
        n = int(max(v["paper rank"].max(), v["measured rank"].max()))
        labels = [readable(x) for x in v["row"]]
        tails = {x.rsplit(" / ", 1)[1] if " / " in x else None for x in labels}
        if len(tails) == 1 and None not in tails:  # one shared " / backbone" suffix says nothing: drop it
            labels = [x.rsplit(" / ", 1)[0] for x in labels]
        for label, (_, r) in zip(labels, v.iterrows()):
            colour = "tab:green" if r["paper rank"] == r["measured rank"] else (
                "tab:blue" if r["measured rank"] < r["paper rank"] else "tab:red")
            ax.plot([0, 1], [r["paper rank"], r["measured rank"]], "o-", color=colour, lw=1.5)
            short = label if len(label) <= 34 else label[:33] + "…"
            ax.annotate(f"{short}  {int(r['paper rank'])}", (0, r["paper rank"]), xytext=(-6, 0),
                        textcoords="offset points", ha="right", va="center", fontsize=9)
            ax.annotate(f"{int(r['measured rank'])}  {short}", (1, r["measured rank"]), xytext=(6, 0),
                        textcoords="offset points", ha="left", va="center", fontsize=9)
        ax.set_ylim(n + 0.5, 0.5)
        ax.set_xlim(-1.3, 2.3)
        ax.set_xticks([0, 1], ["paper", "measured"])
        ax.set_yticks([])
        for side in ("left", "right", "top"):
            ax.spines[side].set_visible(False)
        ax.set_title(f"{name} (ρ = {v.attrs.get('spearman', float('nan')):.2f})", fontsize=9)
    fig.suptitle(title, y=1.02)
    fig.tight_layout()
    return fig


def plot_similarity_panels(mats: dict, ncols: int = 2, title: str = "cosine similarity of the class rows"):
    """One heat map per named square matrix (e.g. the language similarities each guidance distils), sharing the
    colour scale and one colour bar at the right (so that every panel has the same size); row labels on the first
    column only."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    names = list(mats)
    nrows = -(-len(names) // ncols)
    # drawn at about the width the page shows it (8 in), so the class names keep a legible size on the page
    fig = plt.figure(figsize=(4.2 * ncols + 0.6, 3.9 * nrows))
    grid = fig.add_gridspec(nrows, ncols + 1, width_ratios=[1] * ncols + [0.05])
    axes = [fig.add_subplot(grid[r, c]) for r in range(nrows) for c in range(ncols)]
    bar = fig.add_subplot(grid[:, ncols])
    lo = min(float(m.to_numpy().min()) for m in mats.values())
    for i, ax in enumerate(axes):
        if i >= len(names):
            ax.axis("off")
            continue
        m = mats[names[i]]
        sns.heatmap(m, vmin=min(lo, 0.0), vmax=1.0, cmap="magma", ax=ax, cbar=i == 0, cbar_ax=bar if i == 0 else None,
                    xticklabels=False, yticklabels=list(m.index) if i % ncols == 0 else False, square=True)
        ax.set_title(names[i], fontsize=11)
        ax.tick_params(axis="y", labelsize=10)
    fig.suptitle(title, y=1.0)
    fig.tight_layout()
    return fig


def plot_sweep(frame: pd.DataFrame, x: str, y: str, hue: str, chosen: str | None = "chosen", logx: bool = True,
               ax=None, highlight: Sequence[str] | None = None, hue_order: Sequence[str] | None = None):
    """A validation sweep: ``y`` against ``x`` per ``hue`` (one line each), the chosen value of each line ringed.
    With ``highlight``, only those lines are coloured and named; every other line is drawn thin and grey behind them
    (a sweep of thirty units is unreadable in thirty colours; the table beside it has every value). ``hue_order``
    fixes each line's colour and marker across several panels (:func:`plot_sweep_panels`)."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4.5))
    shown = frame if highlight is None else frame[frame[hue].isin(highlight)]
    if highlight is not None:
        for _, line in frame[~frame[hue].isin(highlight)].groupby(hue):
            line = line.sort_values(x)
            ax.plot(line[x], line[y], color="0.75", lw=0.8, zorder=1)
        ax.plot([], [], color="0.75", lw=0.8, label=f"the other {frame[hue].nunique() - shown[hue].nunique()}")
    order = list(hue_order) if hue_order is not None else highlight
    if (len(order) if order is not None else shown[hue].nunique()) > 8:
        # past eight lines colours repeat: twenty colours and a marker and dash per line
        sns.lineplot(data=shown, x=x, y=y, hue=hue, style=hue, markers=True, dashes=True, palette="tab20", ax=ax,
                     hue_order=order, style_order=order)
    else:
        sns.lineplot(data=shown, x=x, y=y, hue=hue, marker="o", ax=ax, hue_order=order)
    if chosen and chosen in frame:
        pick = shown[shown[chosen].astype(bool)]
        ax.scatter(pick[x], pick[y], s=160, facecolors="none", edgecolors="black", linewidths=1.2, zorder=5,
                   label="chosen")
    if logx:
        ax.set_xscale("log")
    ax.legend(fontsize=9, bbox_to_anchor=(1.02, 1), loc="upper left")
    return ax


def plot_sweep_panels(frame: pd.DataFrame, x: str, y: str, hue: str, col: str, titles: dict | None = None,
                      zero: bool = True, xlabel: str | None = None, ylabel: str | None = None):
    """One :func:`plot_sweep` panel per value of ``col`` (e.g. per source), sharing the y axis, with one legend
    below them; with ``zero``, a black line at y = 0 (the reference a gain is read against)."""
    import matplotlib.pyplot as plt
    keys = list(dict.fromkeys(frame[col]))
    if not keys:
        raise ValueError(f"plot_sweep_panels: no rows to draw (no value in column {col!r})")
    fig, axes = plt.subplots(1, len(keys), figsize=(3.7 * len(keys), 3.6), sharey=True, squeeze=False)
    order = list(dict.fromkeys(frame[hue]))   # one colour and marker per line in every panel
    for ax, key in zip(axes[0], keys):
        plot_sweep(frame[frame[col] == key], x, y, hue, ax=ax, hue_order=order)
        ax.set_title((titles or {}).get(key, key))
        ax.set_xlabel(xlabel or x)
        if zero:
            ax.axhline(0, color="black", lw=0.8)
    fullest = max(axes[0], key=lambda a: len(a.get_legend_handles_labels()[1]))   # the panel with every line
    handles, labels = fullest.get_legend_handles_labels()
    for ax in axes[0]:
        ax.get_legend().remove()
    axes[0][0].set_ylabel(ylabel or y)
    fig.tight_layout()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(3, len(labels)),
               frameon=False)
    return fig


def plot_gains(frame: pd.DataFrame, x: str = "dataset", col: str = "method", row: str | None = None,
               value: str = "gain", hue: str = "numbers", order: Sequence[str] | None = None):
    """Bars of a gain (e.g. R@1 with guidance minus without), measured beside the paper's, one panel per ``col``
    (and ``row``)."""
    import seaborn as sns
    n = frame[col].nunique()   # wider grids shrink to the page, and their text with them: 2 x 2 or rows of 3
    wrap = (2 if n == 4 else 3) if row is None and n > 3 else None
    width = 9.6 / (wrap or n)   # a row of panels and the legend beside it within the page's width
    g = sns.catplot(data=frame, x=x, y=value, hue=hue, col=col, row=row, kind="bar", errorbar=None, height=2.8,
                    aspect=min(1.4, width / 2.8), order=order, col_wrap=wrap)
    g.set_titles("{row_name}: {col_name}" if row is not None else "{col_name}", size=10.5)
    for ax in g.axes.flat:
        ax.axhline(0, color="black", lw=0.8)
    return g


def plot_curves(frame: pd.DataFrame, x: str = "epoch", y: str = "measured", hue: str = "method", col: str = "dataset",
                err: str | None = "spread", ylabel: str = "R@1 (%)"):
    """Learning curves (seed means, with a band of ± ``err``), one panel per ``col``."""
    import matplotlib.pyplot as plt
    cols = list(dict.fromkeys(frame[col]))
    ncols = min(3, len(cols))   # rows of at most three panels, each narrow enough that a row fits the page
    nrows = -(-len(cols) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(min(4.2, 10.5 / ncols) * ncols, 3.4 * nrows), squeeze=False)
    for ax in axes.flat[len(cols):]:
        ax.set_visible(False)
    for i, (ax, c) in enumerate(zip(axes.flat, cols)):
        ax.set_ylabel(ylabel if i % ncols == 0 else "")
        for h, sub in frame[frame[col] == c].groupby(hue, sort=False):
            sub = sub.sort_values(x)
            ax.plot(sub[x], sub[y], marker="o", label=h)
            if err and err in sub:
                ax.fill_between(sub[x], sub[y] - sub[err], sub[y] + sub[err], alpha=0.15)
        ax.set_title(c)
        ax.set_xlabel(x)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.tight_layout()
    # one legend below the panels, never over a curve
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(len(labels), 4),
               fontsize=10, frameon=False)
    return fig


def plot_retrieved_classes(frame: pd.DataFrame, ncols: int = 1):
    """The language-guidance paper's Fig. 3: per query class (one panel each), how many of the top-k neighbours of
    its images fall in the query class and in its most related classes (left to right by language similarity),
    one bar per method. ``frame``: query, rank, class, similarity, method, count
    (:func:`umlkit.experiments.papers.language_guidance.semantic_counts`)."""
    import textwrap

    import matplotlib.pyplot as plt
    queries = list(dict.fromkeys(frame["query"]))
    methods = list(dict.fromkeys(frame["method"]))
    nrows = -(-len(queries) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(9.0 * ncols, 3.6 * nrows), squeeze=False)
    width = 0.8 / max(1, len(methods))
    for ax, q in zip(axes.flat, queries):
        sub = frame[frame["query"] == q].sort_values("rank")
        ranks = list(dict.fromkeys(sub["rank"]))
        names = [sub.loc[sub["rank"] == r, "class"].iloc[0] for r in ranks]
        sims = [sub.loc[sub["rank"] == r, "similarity"].iloc[0] for r in ranks]
        for i, m in enumerate(methods):
            counts = [float(sub.loc[(sub["rank"] == r) & (sub["method"] == m), "count"].sum()) for r in ranks]
            ax.bar([r + (i - (len(methods) - 1) / 2) * width for r in range(len(ranks))], counts, width, label=m)
        ax.set_xticks(range(len(ranks)))
        ax.set_xticklabels([f"{textwrap.fill(n, 16)}\n(sim {s:.2f})" for n, s in zip(names, sims)], fontsize=9.5)
        ax.set_title(f"query: {q}", fontsize=10.5)
        ax.set_ylabel("retrieved images", fontsize=10)
    for ax in list(axes.flat)[len(queries):]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.tight_layout()
    # one column of panels at page width (its text stays legible); one legend above them, over no bar
    fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(methods), fontsize=10,
               frameon=False)
    return fig


def plot_setting_panels(measured: pd.DataFrame, metrics: Sequence[str] = ("R@1", "MAP@R"), ncols: int = 3,
                        labels: dict[str, str] | None = None):
    """One panel per ``section`` of a measured frame whose ``setting`` reads ``name=value`` (a one-setting sweep,
    e.g. VPTSP's Fig. 3): each metric against the value, mean and standard deviation over seeds; ``labels`` names a
    setting on its axis as the text does (e.g. ``{"proxy_bias_ratio": "α"}``)."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    d = measured[measured["metric"].isin(metrics)].copy()
    d["value of the setting"] = d["setting"].str.split("=", n=1).str[1].astype(float)
    panels = list(dict.fromkeys(d["section"]))
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 3.0 * nrows), squeeze=False, sharey=True)
    for ax, panel in zip(axes.flat, panels):
        sub = d[d["section"] == panel]
        sns.lineplot(data=sub, x="value of the setting", y="value", hue="metric", marker="o", errorbar="sd", ax=ax,
                     legend=ax is axes.flat[0])
        ax.set_title(panel, fontsize=9)
        ax.set_xticks(sorted(sub["value of the setting"].unique()))
        name = sub["setting"].iloc[0].split("=", 1)[0]
        ax.set_xlabel((labels or {}).get(name, name), fontsize=9.5)
        ax.set_ylabel("")
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def plot_row_gaps(cmp: pd.DataFrame, reference: str, columns: Sequence[str], metric: str = "R@1"):
    """Per dataset and row: the row's value minus ``reference``'s (a row of the same table), measured beside the
    paper (e.g. VPTSP Table 2: each method against VPT-Base on every benchmark); bars of :func:`plot_gains`."""
    sub = cmp[cmp["metric"] == metric]
    ref = sub[sub["row"] == reference].set_index("dataset")[["measured", "paper"]]
    d = sub[sub["row"] != reference].copy()
    label = f"{metric} minus {reference}"
    for col in ("measured", "paper"):
        d[col] = d[col].to_numpy() - ref[col].reindex(d["dataset"]).to_numpy()
    d = d.melt(id_vars=["row", "dataset"], value_vars=["measured", "paper"], var_name="numbers", value_name=label)
    return plot_gains(d, col="row", value=label, order=[c for c in columns if c in set(d["dataset"])])


def plot_source_bias(bias: pd.DataFrame, columns: Sequence[tuple[str, str]] = (
        ("full FT unified - specific", "unified full fine-tuning"), ("PUMA - specific", "PUMA")), axes=None):
    """Per source, what one unified model changes against the dataset-specific model (y) against the source's
    training images (x, log scale): measured (top) and in the paper (bottom), one marker per model, sources named.
    ``bias`` is :func:`umlkit.experiments.papers.puma.source_bias`'s frame (columns "<change> (measured|paper)" and
    "train images (measured|paper)")."""
    import matplotlib.pyplot as plt
    from adjustText import adjust_text  # the sources' names, moved apart where points crowd
    if axes is None:
        _, axes = plt.subplots(2, 1, figsize=(9, 9))   # one above the other: text legible at page width
    for ax, tag in zip(axes, ("measured", "paper")):
        texts = []
        for (col, label), marker in zip(columns, ("o", "s")):
            y, size = bias[f"{col} ({tag})"], bias[f"train images ({tag})"]
            ax.scatter(size, y, marker=marker, label=label)
            texts += [ax.text(xv, yv, src, fontsize=9) for src, xv, yv in zip(bias.index, size, y)]
        ax.set_xscale("log")
        adjust_text(texts, ax=ax, arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "grey"})
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xlabel("training images of the source")
        ax.set_ylabel("R@1 change against the dataset-specific model")
        ax.set_title(tag)
        ax.legend(fontsize=9.5)
    return axes


def plot_gap_map(heat: pd.DataFrame, rows: str = "shift", cols: str = "shots", title: str = "",
                 label: str = "PUMA - full fine-tuning (R@1 points)"):
    """A diverging heat map of a gap with its interval in every cell ("+2.1" over "[-0.4, +4.6]"): ``heat`` has one
    line per (``rows``, ``cols``) with ``gap``, ``low`` and ``high`` (e.g. :func:`umlkit.experiments.papers.regime.
    heat_frame`). Red cells favour the second method, blue the first; the colour scale is symmetric around 0."""
    import matplotlib.pyplot as plt
    import numpy as np
    import seaborn as sns
    order_r, order_c = list(dict.fromkeys(heat[rows])), list(dict.fromkeys(heat[cols]))
    grid = heat.pivot(index=rows, columns=cols, values="gap").reindex(index=order_r, columns=order_c)
    text = heat.assign(t=[f"{g:+.1f}\n[{lo:+.1f}, {hi:+.1f}]" if np.isfinite(lo) else f"{g:+.1f}"
                          for g, lo, hi in zip(heat["gap"], heat["low"], heat["high"])])
    notes = text.pivot(index=rows, columns=cols, values="t").reindex(index=order_r, columns=order_c)
    bound = max(1.0, float(np.nanmax(np.abs(grid.to_numpy()))))
    fig, ax = plt.subplots(figsize=(1.7 * len(order_c) + 2.5, 1.0 * len(order_r) + 1.6))
    sns.heatmap(grid, annot=notes.fillna(""), fmt="", cmap="RdBu", center=0.0, vmin=-bound, vmax=bound, ax=ax,
                cbar_kws={"label": label}, annot_kws={"fontsize": 8})
    ax.set_title(title)
    ax.set_xlabel(cols)
    ax.set_ylabel(rows)
    fig.tight_layout()
    return fig


def plot_axes(axes: pd.DataFrame, label: str = "gap to full\nfine-tuning"):
    """The regime map's second edition: one diverging heat map per axis (stacked), rows the methods, columns the
    axis's cells in order, each cell "gap [low, high]" against full fine-tuning and "not run yet" on grey where a
    record is missing (:func:`umlkit.experiments.papers.regime.axis_frame`). One colour scale for every panel,
    symmetric around 0: blue favours the method, red full fine-tuning."""
    import matplotlib.pyplot as plt
    import numpy as np
    import seaborn as sns
    names = list(dict.fromkeys(axes["axis"]))
    bound = max(1.0, float(np.nanmax(np.abs(axes["gap"].to_numpy()))) if axes["gap"].notna().any() else 1.0)
    fig, panels = plt.subplots(len(names), 1, figsize=(10.0, 2.9 * len(names)), squeeze=False)
    for ax, name in zip(panels[:, 0], names):
        part = axes[axes["axis"] == name]
        cols = [cell_label(c) for c in dict.fromkeys(part["cell"])]
        part = part.assign(column=[cell_label(c) for c in part["cell"]],
                           text=[f"{g:+.1f}\n[{lo:+.1f}, {hi:+.1f}]" if np.isfinite(lo) else
                                 (f"{g:+.1f}" if np.isfinite(g) else "")
                                 for g, lo, hi in zip(part["gap"], part["low"], part["high"])])
        rows = list(dict.fromkeys(part["method"]))
        grid = part.pivot(index="method", columns="column", values="gap").reindex(index=rows, columns=cols)
        notes = part.pivot(index="method", columns="column", values="text").reindex(index=rows, columns=cols)
        ax.set_facecolor("#f1f3f5")
        sns.heatmap(grid, annot=notes, fmt="", cmap="RdBu", center=0.0, vmin=-bound, vmax=bound, ax=ax,
                    cbar_kws={"label": label}, annot_kws={"fontsize": 10}, linewidths=1.0, linecolor="white")
        for i, j in zip(*np.where(grid.isna().to_numpy())):
            ax.text(j + 0.5, i + 0.5, "not run yet", ha="center", va="center", fontsize=9, color="#868e96")
        ax.set_title(f"{name} axis", fontsize=12)
        ax.set_xlabel("")
        ax.set_ylabel("")
        ax.tick_params(labelsize=10, length=0)
        ax.set_yticklabels(ax.get_yticklabels(), rotation=0)
    fig.tight_layout(rect=(0, 0, 0.97, 1))
    return fig


def plot_image_rows(rows: dict, scale: float = 1.1):
    """Lines of small images, one per entry of ``rows`` (its label, then (n, h, w, 3) uint8 images), nearest-
    neighbour enlarged so that 32-px pixels stay sharp."""
    import matplotlib.pyplot as plt
    n = max(len(v) for v in rows.values())
    fig, axes = plt.subplots(len(rows), n, figsize=(scale * n + 2.6, scale * len(rows)), squeeze=False)
    for r, (label, images) in enumerate(rows.items()):
        for c in range(n):
            ax = axes[r, c]
            ax.axis("off")
            if c < len(images):
                ax.imshow(images[c], interpolation="nearest")
        axes[r, 0].text(-0.15, 0.5, label, transform=axes[r, 0].transAxes, ha="right", va="center", fontsize=10)
    fig.subplots_adjust(left=0.22, right=0.99, wspace=0.05, hspace=0.1)
    return fig


def plot_probe_gain(frame: pd.DataFrame):
    """Mean probe accuracy of the backbone feature (x) against the Harmonic R@1 gain over the frozen backbone (y),
    one point per (cell, method), coloured by method and shaped by backbone
    (:func:`umlkit.experiments.papers.regime.probe_gain_frame`): does keeping the pretraining attributes go with
    retrieving the test classes better?"""
    import matplotlib.pyplot as plt
    import seaborn as sns
    fig, ax = plt.subplots(figsize=(8.5, 4.6))
    sns.scatterplot(data=frame, x="probe accuracy", y="R@1 gain", hue="method", style="backbone", s=90, ax=ax)
    ax.axhline(0.0, color="#868e96", lw=0.8, ls="--")
    ax.set_xlabel("mean probe accuracy of the backbone feature (%)", fontsize=11)
    ax.set_ylabel("Harmonic R@1 gain over the frozen backbone", fontsize=11)
    ax.tick_params(labelsize=10)
    ax.legend(bbox_to_anchor=(1.02, 1), loc="upper left", fontsize=9, frameon=False)
    fig.tight_layout()
    return fig


def plot_probes(frame: pd.DataFrame, models: Sequence[str] = ("Zero-Shot", "PUMA", "Full fine-tuning"),
                col: str = "shift"):
    """Linear-probe accuracy per attribute (bars per model), one panel per ``col`` value, stacked (e.g.
    :func:`umlkit.experiments.papers.regime.forgetting_frame`); the axis starts at 40 %, below every attribute's chance
    level but one (period and scale: 50 %)."""
    import seaborn as sns
    long = frame.melt(id_vars=[col, "attribute"], value_vars=list(models), var_name="model",
                      value_name="probe accuracy (%)")
    g = sns.catplot(data=long, x="attribute", y="probe accuracy (%)", hue="model", row=col, kind="bar",
                    errorbar=None, height=2.3, aspect=4.2, hue_order=list(models))
    g.set_titles("{row_name}", size=10)
    for ax in g.axes.flat:
        ax.tick_params(axis="x", rotation=20, labelsize=8)
        ax.set_ylim(40, 101)
    return g

