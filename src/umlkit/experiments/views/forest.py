"""A forest plot of a paper's claims: each claim's measured gap with its 95 % interval, the paper's own gap as a
marker, the smallest effect size of interest as a band around zero, and the verdict as the colour.

The layout follows the forest plots of meta-analyses (one line per comparison, a shared axis, the no-effect line):
a reader sees at once which claims the data decide, which intervals still straddle zero, and how far the paper's
number lies from the measured interval. Drawn with matplotlib (no plotting library draws forest plots from a
frame of intervals without reshaping it into its own model).
"""
from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd

from umlkit.experiments.claims.verdicts import NOT_COMPARABLE, SESOI, verdict_group

__all__ = ["VERDICT_COLOURS", "plot_verdicts", "forest_frame", "plot_forest", "show_forest"]


def forest_frame(claims: pd.DataFrame) -> pd.DataFrame:
    """The claims a forest plot can draw (a measured gap with an interval), in their order: ``label``, ``gap``,
    ``low``, ``high``, ``paper gap``, ``group`` (the verdict's group)."""
    if claims.empty or "low" not in claims:
        return pd.DataFrame(columns=["label", "gap", "low", "high", "paper gap", "group"])
    gap = claims["test gap"] if "test gap" in claims else claims["gap"]
    keep = np.isfinite(claims["low"].astype(float)) & np.isfinite(claims["high"].astype(float))
    sub = claims[keep]
    label = sub["claim"].astype(str)
    if "table" in sub and sub["table"].nunique() > 1:
        label = sub["table"].astype(str) + ": " + label
    paper = sub["paper gap"] if "paper gap" in sub else pd.Series(np.nan, index=sub.index)
    return pd.DataFrame({"label": label, "gap": gap[keep].astype(float), "low": sub["low"].astype(float),
                         "high": sub["high"].astype(float), "paper gap": paper.astype(float),
                         "group": sub["verdict"].map(verdict_group)}).reset_index(drop=True)


def _short(text: str, width: int) -> str:
    return textwrap.shorten(text, width=width, placeholder="…")


def plot_forest(claims: pd.DataFrame, title: str = "", sesoi: float = SESOI, label_width: int = 70):
    """The forest plot of ``claims`` (a chapter's checked claims after the Holm adjustment, or a paper's rows of the
    board); None when no claim has an interval. The x axis is clipped to the intervals' range (a paper gap beyond
    it is drawn at the edge as an arrow)."""
    import matplotlib.pyplot as plt

    f = forest_frame(claims)
    if f.empty:
        return None
    n = len(f)
    fig, ax = plt.subplots(figsize=(11, 0.27 * n + 1.6))   # a line per claim, legible at the page's width
    y = np.arange(n)[::-1]
    lo, hi = float(min(f["low"].min(), -sesoi)), float(max(f["high"].max(), sesoi))
    pad = 0.06 * (hi - lo)
    lo, hi = lo - pad, hi + pad
    ax.axvspan(-sesoi, sesoi, color="#dee2e6", alpha=0.7, lw=0, label=f"±{sesoi:g} point (no effect)")
    ax.axvline(0, color="#495057", lw=0.8)
    for group, sub in f.groupby("group", sort=False):
        colour = VERDICT_COLOURS.get(group, VERDICT_COLOURS.get(NOT_COMPARABLE, "#868e96"))
        yy = y[sub.index]
        ax.hlines(yy, sub["low"], sub["high"], color=colour, lw=2)
        ax.plot(sub["gap"], yy, "o", color=colour, ms=5, label=group)
    paper = f["paper gap"]
    has = paper.notna()
    ax.plot(paper[has].clip(lo, hi), y[has.to_numpy()], "D", mfc="none", mec="black", ms=5, label="the paper's gap")
    ax.set_xlim(lo, hi)
    ax.set_yticks(y)
    ax.set_yticklabels([_short(t, label_width) for t in f["label"]], fontsize=8.5)
    ax.set_ylim(-0.8, n - 0.2)
    ax.set_xlabel("gap A − B with its 95 % interval (points of the claim's metric)", fontsize=10)
    ax.grid(axis="x", color="#e9ecef", lw=0.6)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    if title:
        ax.set_title(title, fontsize=11)
    height = 0.27 * n + 1.6
    fig.tight_layout(rect=(0, 0.5 / height, 1, 1))   # half an inch at the foot for the legend
    fig.legend(*ax.get_legend_handles_labels(), fontsize=8.5, loc="lower center", ncol=4, frameon=False)
    return fig


def show_forest(claims: pd.DataFrame, title: str = "", sesoi: float = SESOI) -> None:
    """Draw :func:`plot_forest` into a notebook where the call stands (before what the cell shows next), and close
    the figure so that it is not drawn twice; nothing without a claim to draw."""
    import matplotlib.pyplot as plt
    from IPython.display import display
    fig = plot_forest(claims, title=title, sesoi=sesoi)
    if fig is not None:
        display(fig)
        plt.close(fig)


VERDICT_COLOURS = {"reproduced": "#2b8a3e", "smaller than the paper's": "#74b816", "no effect": "#1971c2",
                   "no effect (paper's gap inside the margin)": "#74c0fc", "contradicted": "#c92a2a",
                   "paper's gap excluded, no gain shown": "#a61e4d", "inconclusive": "#adb5bd",
                   "at ceiling": "#9c36b5", "not comparable": "#f08c00", "timing (not a test)": "#3bc9db",
                   "not a test: the two cells hold the same numbers": "#dee2e6", "missing records": "#495057",
                   "stale records": "#8d6e63"}
_LEGEND_COLUMNS = 3   # the verdict names are long: three per legend row fit the page's 9-inch figure


def plot_verdicts(board: pd.DataFrame, by: str = "paper", title: str = "verdicts per paper (Holm-adjusted)"):
    """Horizontal stacked bars: how many of each ``by`` group's claims got each verdict (preliminary verdicts in
    their own grey), with the counts written in the bars; readable at page width (labels >= 10 pt), the legend in
    rows of :data:`_LEGEND_COLUMNS` below the bars."""
    import matplotlib.pyplot as plt
    counts = (board.assign(v=board["verdict"].map(verdict_group)).groupby([by, "v"]).size().unstack(fill_value=0))
    counts = counts.loc[list(dict.fromkeys(board[by]))]   # the board's order (the registry's), top to bottom
    cols = [c for c in VERDICT_COLOURS if c in counts] + [c for c in counts if c not in VERDICT_COLOURS]
    counts = counts[cols].iloc[::-1]
    rows = -(-len(cols) // _LEGEND_COLUMNS)
    fig, ax = plt.subplots(figsize=(9, 0.55 * len(counts) + 1.0 + 0.3 * rows))
    left = pd.Series(0, index=counts.index)
    for c in cols:
        ax.barh(counts.index, counts[c], left=left, color=VERDICT_COLOURS.get(c, "#ced4da"), label=c)
        for y, (x0, n) in enumerate(zip(left, counts[c])):
            if n >= 3:
                ax.text(x0 + n / 2, y, str(n), ha="center", va="center", fontsize=10, color="white")
        left += counts[c]
    ax.set_xlabel("claims", fontsize=11)
    ax.tick_params(labelsize=11)
    ax.set_title(title, fontsize=12)
    # the legend about 0.75 in below the axes, whatever their height (a fraction of the axes' 0.55 in per bar)
    ax.legend(fontsize=10, ncol=min(len(cols), _LEGEND_COLUMNS), loc="upper center",
              bbox_to_anchor=(0.5, -0.75 / (0.55 * len(counts))), frameon=False)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    return fig
