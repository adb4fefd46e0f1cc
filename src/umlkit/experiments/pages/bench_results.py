"""Benchmark results as the book shows them: ``benchmarks/bench_eval.py --scales ... --json`` (the retrieval engine
against pytorch-metric-learning's ``AccuracyCalculator`` at several sizes, each implementation in a fresh process),
read into one frame and drawn for the evaluation chapter, and which search kernel this machine runs at a given size
(:func:`kernel_choices`). Reading only: the benchmarks write these files, and nothing here times a kernel.

Why by hand: a pivot of the benchmark's own JSON lines; no library reads this format.
"""
from __future__ import annotations

import pandas as pd

__all__ = ["kernel_choices", "speed_by_size", "speed_view", "plot_speed_by_size"]


def speed_by_size(path) -> tuple[pd.DataFrame, str]:
    """The full benchmark at several sizes (``benchmarks/bench_eval.py --scales ... --json``, each implementation in
    a fresh process): one line per size with each implementation's seconds and umlkit's speed-up over PML's
    AccuracyCalculator, and the machine it ran on; an empty frame when the file is not there."""
    from umlkit.results import load_benchmark
    runs, header = load_benchmark(path, "bench_eval.py's results at several sizes")
    if not runs:
        return pd.DataFrame(), ""
    frame = pd.DataFrame(runs).pivot_table(index="items", columns="impl", values="seconds").sort_index()
    if {"pml", "umlkit"} - set(frame.columns):
        raise ValueError(f"{path}: expected runs of both 'pml' and 'umlkit', found {sorted(frame.columns)}")
    frame["speed-up"] = frame["pml"] / frame["umlkit"]
    return frame, f"{header.get('machine', 'machine not recorded')}, {header.get('date', '')}"


def speed_view(speed: pd.DataFrame, reference: str = "umlkit (fp32 search)") -> pd.DataFrame:
    """The live comparison (:func:`umlkit.metrics.examples.compare_with_pml`) as the page shows it: metrics in
    points with two decimals, seconds and speed-up with two, and how far each row's metrics are from ``reference``'s
    (the largest absolute difference, in points, in scientific notation: equality is the claim, not the digits)."""
    metrics = [m for m in ("R@1", "MAP@R", "RP") if m in speed]
    diff = (speed[metrics] - speed.loc[reference, metrics]).abs().max(axis=1) * 100
    out = (speed[metrics] * 100).round(2)
    out["seconds"] = speed["seconds"].round(2)
    out["speed-up vs PML"] = speed["speed-up vs PML"].round(2)
    out[f"max |metric - {reference.split(' (')[0]} fp32| (points)"] = diff.map(lambda d: f"{d:.1e}")
    return out


def plot_speed_by_size(frame: pd.DataFrame, machine: str):
    """Seconds against the number of items (log-log) for PML's AccuracyCalculator and umlkit, each point labelled
    with umlkit's speed-up (:func:`speed_by_size`); the machine in the title."""
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    for impl, colour, label in (("pml", "tab:gray", "PML AccuracyCalculator"), ("umlkit", "tab:blue", "umlkit")):
        ax.plot(frame.index, frame[impl], marker="o", color=colour, label=label)
    for items, r in frame.iterrows():
        ax.annotate(f"x{r['speed-up']:.1f}", (items, r["umlkit"]), xytext=(0, -14), textcoords="offset points",
                    ha="center", fontsize=9, color="tab:blue")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(bottom=frame["umlkit"].min() / 3)   # room for the lowest point's label
    ax.set_xlabel("items (query set = gallery), 128-d")
    ax.set_ylabel("seconds (R@1/2/4/8, MAP@R, RP)")
    ax.set_title(machine, fontsize=9.5)
    ax.legend(fontsize=10, frameon=False)
    fig.tight_layout()
    return fig


def kernel_choices(sizes, dim: int = 128) -> pd.DataFrame:
    """For self-searches of each number of items in ``sizes``: the kernel the engine runs on this machine and why
    (:func:`umlkit.metrics.knn.explain_search` with ``measure=False``: a stored measurement is read, none is taken;
    ``UMLKIT_SEARCH_DTYPE`` pins the kernel where it is set)."""
    from umlkit.metrics.knn import explain_search, self_search_size
    rows = []
    for n in sizes:
        n = int(n)
        choice = explain_search(self_search_size(n), dim, n * n, measure=False)
        rows.append({"items (query set = gallery)": f"{n:,}", "kernel": choice.kernel, "why": choice.reason})
    return pd.DataFrame(rows).set_index("items (query set = gallery)")
