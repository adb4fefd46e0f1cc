"""The third edition's views for its chapter section: per cell (split x images per class) which row retrieves best and
by how much it beats full fine-tuning (the decision map), the WiSE-FT curves, the published quadrants set against
the cells, and the glued facts of its prose.

A row's margin over full fine-tuning is the difference of seed means with a 95 % interval: Welch-Satterthwaite for
rows trained in their own runs (:func:`umlkit.experiments.papers.regime.chapter.welch_interval`), a paired t
interval for WiSE-FT, which is read from full fine-tuning's own runs. A cell's winner is *separable* when the interval
of its margin over the runner-up excludes zero; the map hatches the others.

The quadrants are Han et al.'s (ICLR 2024, "Facing the elephant in the room: visual prompt tuning or full
finetuning?", Sec. 4 and Fig. 1): prompt tuning is preferable when the task is close to the pretraining (small shift)
and data are few, full fine-tuning as the data grow. Here "a parameter-efficient row" is any of the linear probe,
LayerNorm, BitFit, LoRA and PUMA, and "full fine-tuning" includes LP-FT and WiSE-FT (both fine-tune every weight).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from umlkit.experiments.papers.regime import edition3 as e3
from umlkit.experiments.papers.regime.chapter import cell_values, welch_interval

__all__ = ["PEFT", "FULL_LIKE", "decision_frame", "quadrant_frame", "wise_curve_frame", "plot_decision_map",
           "plot_wise_curves", "edition3_facts", "decision_view", "level_facts", "design_facts", "tuning_view",
           "quadrant_view"]

PEFT = ("Linear probe", "LayerNorm", "BitFit", "LoRA", "PUMA")
FULL_LIKE = ("Full fine-tuning", "LP-FT", e3.WISE)
FULL = "Full fine-tuning"


def _paired_interval(a: dict, b: dict) -> tuple[float, float, float, int]:
    """Mean of the per-seed differences a - b over their common seeds with its 95 % t interval."""
    from scipy import stats
    seeds = sorted(set(a) & set(b))
    d = np.array([float(a[s]) - float(b[s]) for s in seeds])
    if len(d) < 2:
        return (float(d.mean()) if len(d) else np.nan), np.nan, np.nan, len(d)
    half = float(stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d)))
    return float(d.mean()), float(d.mean() - half), float(d.mean() + half), len(d)


def _values(cmp: pd.DataFrame, where: str, method: str) -> dict | None:
    hit = cmp[(cmp["setting"] == where) & (cmp["method"] == method) & (cmp["dataset"] == "CUB")
              & (cmp["metric"] == "R@1")] if not cmp.empty else cmp
    if len(hit) != 1 or not isinstance(hit["values"].iloc[0], dict) or not hit["values"].iloc[0]:
        return None
    return {int(k): float(v) for k, v in hit["values"].iloc[0].items()}


def _gap(cmp: pd.DataFrame, where: str, a: str, b: str) -> tuple[float, float, float, int]:
    """a - b in one cell: paired when both are read from full fine-tuning's runs, Welch otherwise."""
    if {a, b} == {e3.WISE, FULL}:
        va, vb = _values(cmp, where, a), _values(cmp, where, b)
        return _paired_interval(va, vb) if va and vb else (np.nan, np.nan, np.nan, 0)
    ga, gb = cell_values(cmp, where, a, "CUB"), cell_values(cmp, where, b, "CUB")
    return welch_interval([ga, gb], [1, -1]) if ga and gb else (np.nan, np.nan, np.nan, 0)


def decision_frame(cmp: pd.DataFrame) -> pd.DataFrame:
    """One line per cell (split, data): the best row by seed mean and its mean, its margin over full fine-tuning
    with the 95 % interval (``margin``, ``low``, ``high``), the runner-up and whether the winner is separable from
    it (the interval of winner - runner-up excludes zero); NaN where the cell's records are missing."""
    rows = [*e3.settings()["methods"], e3.WISE]
    lines = []
    for cell in e3.cells():
        where = e3.setting(cell)
        means = {m: v[0] for m in rows if (v := cell_values(cmp, where, m, "CUB")) is not None}
        line = {"split": cell["split"], "data": str(cell["data"]), "winner": None, "mean": np.nan,
                "margin": np.nan, "low": np.nan, "high": np.nan, "runner-up": None, "separable": False}
        if len(means) == len(rows):
            order = sorted(means, key=means.get, reverse=True)
            win, second = order[0], order[1]
            margin, low, high, _ = (0.0, 0.0, 0.0, 0) if win == FULL else _gap(cmp, where, win, FULL)
            _, lo2, hi2, _ = _gap(cmp, where, win, second)
            line.update(winner=win, mean=means[win], margin=margin, low=low, high=high, **{"runner-up": second},
                        separable=bool(np.isfinite(lo2) and lo2 > 0))
        lines.append(line)
    return pd.DataFrame(lines)


def quadrant_frame(cmp: pd.DataFrame) -> pd.DataFrame:
    """Per cell, the best parameter-efficient row against the best full-fine-tuning-like row (full fine-tuning,
    LP-FT, WiSE-FT): ``gap`` (PEFT - full-like, 95 % interval), ``observed`` (which side wins, "neither" when the
    interval holds zero), and what Han et al.'s quadrants predict there (PEFT at the default split with few images,
    full fine-tuning with all images, no prediction elsewhere)."""
    lines = []
    for cell in e3.cells():
        where = e3.setting(cell)
        peft = {m: v[0] for m in PEFT if (v := cell_values(cmp, where, m, "CUB")) is not None}
        full = {m: v[0] for m in FULL_LIKE if (v := cell_values(cmp, where, m, "CUB")) is not None}
        predicted = ("PEFT" if cell["split"] == "default" and cell["data"] != "all"
                     else "full fine-tuning" if cell["data"] == "all" else "")
        line = {"split": cell["split"], "data": str(cell["data"]), "PEFT row": None, "full-like row": None,
                "gap": np.nan, "low": np.nan, "high": np.nan, "observed": "", "predicted": predicted}
        if len(peft) == len(PEFT) and len(full) == len(FULL_LIKE):
            p, f = max(peft, key=peft.get), max(full, key=full.get)
            gap, low, high, _ = _gap(cmp, where, p, f)
            observed = "PEFT" if low > 0 else "full fine-tuning" if high < 0 else "neither"
            line.update({"PEFT row": p, "full-like row": f, "gap": gap, "low": low, "high": high,
                         "observed": observed})
        lines.append(line)
    return pd.DataFrame(lines)


def wise_curve_frame(profile: str = "quick") -> pd.DataFrame:
    """Every stored WiSE-FT point: per cell, seed (``-1``: the validation run of the tuning, whose held-out classes
    chose the coefficient) and alpha, the R@1 on the CUB-like test classes (or validation classes)."""
    from umlkit.experiments.recipes.tuning import NotTuned
    from umlkit.experiments.runs.records import stored_record
    lines = []
    for cell in e3.cells():
        for seed in (-1, *e3.settings()["seeds"]):
            try:
                key = e3.run_config(cell, "full", max(seed, 0), validation=seed < 0, profile=profile)
            except NotTuned:
                break
            rec = stored_record(key, profile)
            for p in (rec["result"].get("wise_ft") or []) if rec else []:
                lines.append({"split": cell["split"], "data": str(cell["data"]), "seed": seed, "alpha": p["alpha"],
                              "R@1": p["test"]["CUB"]})
    return pd.DataFrame(lines, columns=["split", "data", "seed", "alpha", "R@1"])


def _row_label(split: str) -> str:
    return f"{split} (split {e3.settings()['splits'][split]})"


def plot_decision_map(decision: pd.DataFrame, ax=None):
    """The decision map: splits (rows, by FID) x images per class (columns); each cell names its best row and that
    row's margin over full fine-tuning with the 95 % interval, coloured by the margin (blue: the row beats full
    fine-tuning); hatched where the winner is not separable from the runner-up; grey where records are missing."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    splits, data = list(e3.settings()["splits"]), [str(d) for d in e3.settings()["data"]]
    grid = decision.set_index(["split", "data"])
    margin = np.array([[grid.loc[(s, d), "margin"] for d in data] for s in splits], dtype=float)
    if ax is None:
        _, ax = plt.subplots(figsize=(9.5, 4.6))
    bound = max(1.0, float(np.nanmax(np.abs(margin))) if np.isfinite(margin).any() else 1.0)
    image = ax.imshow(np.ma.masked_invalid(margin), cmap="RdBu", vmin=-bound, vmax=bound, aspect="auto")
    ax.figure.colorbar(image, ax=ax, fraction=0.04, pad=0.02, label="margin over full fine-tuning (R@1 points)")
    ax.set_facecolor("#dddddd")
    for i, s in enumerate(splits):
        for j, d in enumerate(data):
            r = grid.loc[(s, d)]
            if r["winner"] is None or pd.isna(r["winner"]):
                ax.text(j, i, "not run yet", ha="center", va="center", fontsize=10, color="#555555")
                continue
            ci = f"[{r['low']:+.1f}, {r['high']:+.1f}]" if np.isfinite(r["low"]) else ""
            text = f"{r['winner']}\n{r['mean']:.1f} R@1\nvs full: {r['margin']:+.1f} {ci}".rstrip()
            ax.text(j, i, text, ha="center", va="center", fontsize=10,   # a light box: readable on any colour
                    bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "none", "boxstyle": "round,pad=0.3"})
            if not r["separable"]:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="//", edgecolor="#777777",
                                       linewidth=0))
    ax.set_xticks(range(len(data)), [f"{d} images / class" if d != "all" else "all images (12 / class)"
                                     for d in data])
    ax.set_yticks(range(len(splits)), [_row_label(s) for s in splits])
    ax.set_title("Best row per cell and its margin over full fine-tuning (CUB-like R@1, 95 % interval; "
                 "hatched: not separable from the runner-up)", fontsize=10)
    return ax


def plot_wise_curves(curves: pd.DataFrame, chosen: dict | None = None):
    """WiSE-FT: test R@1 against the mixing coefficient, one panel per split, one line per data level (seed mean,
    band: min to max over seeds); a star marks the coefficient chosen on validation classes."""
    import matplotlib.pyplot as plt
    splits = list(e3.settings()["splits"])
    fig, axes = plt.subplots(1, len(splits), figsize=(9.5, 3.6), sharey=True)
    test = curves[curves["seed"] >= 0]
    for ax, split in zip(np.atleast_1d(axes), splits):
        for data in (str(d) for d in e3.settings()["data"]):
            pts = test[(test["split"] == split) & (test["data"] == data)]
            if pts.empty:
                continue
            g = pts.groupby("alpha")["R@1"].agg(["mean", "min", "max"])
            line, = ax.plot(g.index, g["mean"], marker="o", label=data if data != "all" else "all (12)")
            ax.fill_between(g.index, g["min"], g["max"], color=line.get_color(), alpha=0.15)
            a = (chosen or {}).get((split, data))
            if a is not None and a in g.index:
                ax.plot([a], [g.loc[a, "mean"]], marker="*", markersize=15, color=line.get_color())
        ax.set_title(_row_label(split), fontsize=10)
        ax.set_xlabel("alpha (0: start, 1: fine-tuned)")
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("test R@1 (CUB-like)")
    legend = {}   # every panel's lines: a panel whose split has no runs yet has none
    for ax in np.atleast_1d(axes):
        legend.update({label: handle for handle, label in zip(*ax.get_legend_handles_labels())})
    if legend:
        fig.legend(list(legend.values()), list(legend), title="images per class", loc="lower center",
                   ncol=len(legend), fontsize=9)
    fig.suptitle("WiSE-FT along the mixing coefficient (star: chosen on validation classes)", fontsize=11)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    return fig


def decision_view(decision: pd.DataFrame) -> pd.DataFrame:
    """:func:`decision_frame` as the chapter prints it: the interval in one column, rounded."""
    return pd.DataFrame({
        "split": decision["split"], "images / class": decision["data"], "best row": decision["winner"],
        "R@1": decision["mean"].round(1), "margin over full fine-tuning": decision["margin"].round(1),
        "95 % interval": [f"[{lo:+.1f}, {hi:+.1f}]" if np.isfinite(lo) else "–"
                          for lo, hi in zip(decision["low"], decision["high"])],
        "runner-up": decision["runner-up"],
        "separable": np.where(decision["separable"], "yes", "no")}).set_index(["split", "images / class"])


def _winners_text(done: pd.DataFrame) -> str:
    """"WiSE-FT wins 4 cells, LP-FT 3 and LayerNorm 2": the decided cells' winners, most first."""
    counts = done["winner"].value_counts()
    if counts.empty:
        return "No cell has all its records yet."
    parts = [f"{m} {n}" for m, n in counts.items()]
    first = f"{counts.index[0]} wins {counts.iloc[0]} cell{'s' if counts.iloc[0] != 1 else ''}"
    rest = parts[1:]
    tail = "" if not rest else (f", {', '.join(rest[:-1])} and {rest[-1]}" if len(rest) > 1 else f" and {rest[0]}")
    return f"{first}{tail}."


def edition3_facts(decision: pd.DataFrame, quadrants: pd.DataFrame, claims: pd.DataFrame | None = None
                   ) -> dict[str, str]:
    """Glue for the section's prose: how many cells are decided (``rm3_cells_done`` of ``rm3_cells``) and who wins
    them (``rm3_winners``), how many a parameter-efficient row wins and how many winners are separable
    (``rm3_peft_wins``, ``rm3_separable``), the quadrant tally (``rm3_quadrant_holds`` of ``rm3_quadrant_tested``
    predicted cells, ``rm3_quadrant_against``), the WiSE-FT coefficient chosen most often (``rm3_alpha_mode``) and
    its range (``rm3_alpha_range``), and the claims' verdicts (``rm3_claims``, ``rm3_claims_measured``,
    ``rm3_verdicts``), and the findings box's line (``rm3_findings``)."""
    from umlkit.experiments.claims.verdicts import MISSING
    done = decision[decision["winner"].notna()]
    predicted = quadrants[(quadrants["predicted"] != "") & (quadrants["observed"] != "")]
    holds = predicted[predicted["observed"] == predicted["predicted"]]
    against = predicted[(predicted["observed"] != "neither") & (predicted["observed"] != predicted["predicted"])]
    chosen = [a for a in (e3.wise_alpha(c) for c in e3.cells()) if a is not None]
    mode = pd.Series(chosen).mode() if chosen else pd.Series(dtype=float)
    claims = claims if claims is not None else pd.DataFrame(columns=["verdict"])
    measured = claims[~claims["verdict"].astype(str).str.startswith(MISSING)] if len(claims) else claims
    verdicts = measured["verdict"].value_counts()
    findings = (f"{_winners_text(done)[:-1]} of the {len(done)} decided cells; a parameter-efficient row wins "
                f"{int(done['winner'].isin(PEFT).sum())}; the published quadrants' prediction is supported in "
                f"{len(holds)} of {len(predicted)} predicted cells and contradicted in {len(against)}"
                if len(done) else "no cell has all its records yet")
    return {"rm3_findings": findings,
            "rm3_cells": str(len(decision)), "rm3_cells_done": str(len(done)), "rm3_winners": _winners_text(done),
            "rm3_peft_wins": str(int(done["winner"].isin(PEFT).sum())),
            "rm3_separable": str(int(done["separable"].sum())),
            "rm3_quadrant_tested": str(len(predicted)), "rm3_quadrant_holds": str(len(holds)),
            "rm3_quadrant_against": str(len(against)),
            "rm3_alpha_mode": f"{mode.iloc[0]:g}" if len(mode) else "–",
            "rm3_alpha_range": f"{min(chosen):g} to {max(chosen):g}" if chosen else "–",
            "rm3_claims": str(len(claims)), "rm3_claims_measured": str(len(measured)),
            "rm3_verdicts": ", ".join(f"{n} {v}" for v, n in verdicts.items()) or "none yet"}


def level_facts(cmp: pd.DataFrame) -> dict[str, str]:
    """Per data level (``rm3_full_<k>``, ``rm3_best_<k>``): full fine-tuning's seed-mean R@1 and the best row's,
    each as a range over the three splits ("51.6 to 56.4"), and the frozen backbone's (``rm3_frozen``)."""
    def span(values) -> str:
        values = [v for v in values if v is not None and np.isfinite(v)]
        return f"{min(values):.1f} to {max(values):.1f}" if values else "–"

    def mean(where, method):
        got = cell_values(cmp, where, method, "CUB")
        return None if got is None else got[0]
    rows = [*e3.settings()["methods"], e3.WISE]
    floors = (mean(e3.setting({"split": s, "data": None}), "Zero-Shot") for s in e3.settings()["splits"])
    from umlkit.experiments.claims.verdicts import CEILING
    out = {"rm3_frozen": span(floors), "rm3_ceiling": f"{CEILING:g}"}
    for data in e3.settings()["data"]:
        cells = [c for c in e3.cells() if c["data"] == data]
        out[f"rm3_full_{data}"] = span(mean(e3.setting(c), FULL) for c in cells)
        best = [max((m for m in (mean(e3.setting(c), r) for r in rows) if m is not None), default=None) for c in cells]
        out[f"rm3_best_{data}"] = span(best)
    return out


def design_facts(profile: str = "quick") -> dict[str, str]:
    """Glue for the design paragraph: each split's id and measured FID (``rm3_split_<name>``), the data levels, the
    LP-FT head epochs, the WiSE-FT coefficients, the seeds, and the stored runs against the declared ones."""
    from umlkit.experiments.recipes.tuning import NotTuned
    from umlkit.experiments.runs.records import stored_or_previous
    from umlkit.experiments.splits.committed import load_splits
    s = e3.settings()
    fid = {int(x["id"]): float(x["fid"]) for x in load_splits(profile)["sources"][s["source"]]["splits"]}
    out = {f"rm3_split_{name}": f"split {i}, FID {fid[int(i)]:.1f}" for name, i in s["splits"].items()}
    table, tuning = e3.MAP3(), e3.tuning_jobs(profile)
    runs = [(r, seed) for r in table.rows if not r.spec.get("wise") for seed in table.seeds_of(r, profile)]
    stored = 0
    for row, seed in runs:
        try:
            stored += stored_or_previous(e3.row_config(row, seed, profile), profile) is not None
        except NotTuned:   # a rate not chosen yet: the run is declared, not stored
            pass
    out.update({"rm3_data_levels": ", ".join(str(d) for d in s["data"][:-1]) + " or all of them",
                "rm3_lp_epochs": str(s["lp_epochs"]), "rm3_alphas": ", ".join(f"{a:g}" for a in s["wise_ft"]),
                "rm3_seeds": str(len(s["seeds"])), "rm3_runs": str(len(runs)), "rm3_runs_stored": str(stored),
                "rm3_tuning_runs": str(len(tuning)),
                "rm3_tuning_stored": str(sum(stored_or_previous(k, profile) is not None for _, _, k, _ in tuning))})
    return out


def tuning_view(frame: pd.DataFrame) -> pd.DataFrame:
    """:func:`edition3.tuning_frame` as a reader reads it: one line per cell (split, images per class), one column per
    row, each entry the chosen rate with its validation R@1 and the number of rates tried ("3e-02: 97.8 of 5"), "edge"
    added where the choice is not interior."""
    if frame.empty:
        return frame
    lines = {}
    for unit, g in frame.groupby("unit", sort=False):
        best = g[g["chosen"]].iloc[0]
        text = f"{best['lr']:.0e}: {best['val R@1']:.1f} of {len(g)}" + ("" if bool(best["interior"]) else ", edge")
        lines.setdefault((best["split"], str(best["data"])), {})[best["method"]] = text
    out = pd.DataFrame.from_dict(lines, orient="index")
    out.index.names = ["split", "images / class"]
    names = {m: name for name, m in e3.settings()["methods"].items()}
    return out[[m for m in names if m in out.columns]].rename(columns=names)


def quadrant_view(quadrants: pd.DataFrame) -> pd.DataFrame:
    """:func:`quadrant_frame` as the chapter prints it."""
    return pd.DataFrame({
        "split": quadrants["split"], "images / class": quadrants["data"],
        "best parameter-efficient row": quadrants["PEFT row"], "best full-tuning row": quadrants["full-like row"],
        "gap": quadrants["gap"].round(1),
        "95 % interval": [f"[{lo:+.1f}, {hi:+.1f}]" if np.isfinite(lo) else "–"
                          for lo, hi in zip(quadrants["low"], quadrants["high"])],
        "observed": quadrants["observed"], "Han et al. predict": quadrants["predicted"].replace("", "–")}
    ).set_index(["split", "images / class"])
