"""The regime-map chapter (``book/regime_map.ipynb``): the heat map of PUMA - full fine-tuning per (shift, shots),
the forgetting frame of the attribute probes, the splits' summary and the facts its prose glues.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from umlkit.experiments.papers.regime.config import PROBE_METRIC, load_splits, setting_of, settings
from umlkit.experiments.tables.table import MISSING, NOT_COMPARABLE

# verdict -> the glue-key tag the chapter's prose uses (the keys kept their first-edition names)
_VERDICT_TAGS = {"reproduced": "supported", "inconclusive": "inconclusive", "contradicted": "contradicted"}


def cell_words(cell: str) -> str:
    """A second-edition cell as a reader says it: "backbone=v2;shift=values;shortcut" -> "the v2 backbone, values
    split, with the shortcut"."""
    parts = dict(p.split("=", 1) if "=" in p else (p, "") for p in str(cell).split(";") if p)
    words = [f"the {parts['backbone']} backbone" if "backbone" in parts else "",
             f"{parts['shift']} split" if "shift" in parts else "", "with the shortcut" if "shortcut" in parts else ""]
    return ", ".join(w for w in words if w) or str(cell)


# ------------------------------------------------------------------------------------------------ views
def heat_frame(cmp: pd.DataFrame, dataset: str = "Harmonic") -> pd.DataFrame:
    """PUMA - full fine-tuning in ``dataset`` R@1 per (shift, shots): the seed means' gap, its 95 % Welch interval
    (from :func:`umlkit.experiments.tables.table.claim_test`'s standard error and degrees of freedom; NaN with fewer
    than
    the claim test's seeds) and the seeds, in the configuration's order."""
    from scipy import stats

    from umlkit.experiments.tables.table import claim_test
    c = settings()
    sub = cmp[(cmp["dataset"] == dataset) & (cmp["metric"] == "R@1")]
    lines = []
    for shift in c["shifts"]:
        for shots in c["shots"]:
            cells = {m: sub[(sub["method"] == m) & (sub["setting"] == setting_of(shift, shots))] for m in c["methods"]}
            if any(len(v) != 1 for v in cells.values()):
                continue
            a, b = cells["PUMA"].iloc[0], cells["Full fine-tuning"].iloc[0]
            test = claim_test(a["values"], b["values"])
            gap = float(a["measured"] - b["measured"])
            half = float(stats.t.ppf(0.975, test["df"]) * test["se"]) if np.isfinite(test["se"]) else float("nan")
            lines.append({"shift": shift, "shots": str(shots), "gap": gap, "low": gap - half, "high": gap + half,
                          "seeds": int(min(a["seeds"], b["seeds"]))})
    return pd.DataFrame(lines, columns=["shift", "shots", "gap", "low", "high", "seeds"])


def forgetting_frame(cmp: pd.DataFrame, shots="all") -> pd.DataFrame:
    """Probe accuracy (backbone feature; the embedding's mean as attribute "embedding mean") per attribute and
    shift: the frozen backbone, PUMA and full fine-tuning at ``shots``, seed means, one line per (shift,
    attribute)."""
    sub = cmp[cmp["metric"] == PROBE_METRIC]
    lines = []
    for shift in settings()["shifts"]:
        zs = sub[sub["setting"] == setting_of(shift)].set_index("dataset")["measured"]
        runs = sub[sub["setting"] == setting_of(shift, shots)]
        for attr in zs.index:
            name = "embedding mean" if attr == "embedding probe: mean" else attr.removeprefix("probe: ")
            line = {"shift": shift, "attribute": name, "Zero-Shot": float(zs[attr])}
            for m in settings()["methods"]:
                v = runs[(runs["method"] == m) & (runs["dataset"] == attr)]["measured"]
                line[m] = float(v.iloc[0]) if len(v) == 1 else float("nan")
            lines.append(line)
    return pd.DataFrame(lines)


def regime_facts(heat: pd.DataFrame, claims: pd.DataFrame, forgetting: pd.DataFrame,
                 unified: pd.DataFrame | None = None, cmp: pd.DataFrame | None = None) -> dict[str, str]:
    """The numbers the chapter's discussion states (glued): every cell's Harmonic gap (``rm_gap_<shift>_<shots>``;
    ``unified``: :func:`heat_frame` on Unified, ``rm_ugap_...``), the range, the best cell for PUMA, how many cells
    each verdict got; per shift the probes' mean accuracy of the frozen backbone, PUMA and full fine-tuning, their
    losses against the frozen backbone, full fine-tuning's most-forgotten attribute, the held-out-value probes and
    the forgetting claims' verdicts; with ``cmp`` every cell's Harmonic R@1
    (``rm_h_<zs|puma|ft>_<shift>[_<shots>]``)."""
    from umlkit.experiments.views.prose import number
    f: dict[str, str] = {}
    if cmp is not None:
        tags = {"Zero-Shot": "zs", "PUMA": "puma", "Full fine-tuning": "ft"}
        h = cmp[(cmp["dataset"] == "Harmonic") & (cmp["metric"] == "R@1")]
        for _, r in h.iterrows():
            parts = dict(p.split("=") for p in r["setting"].split(";"))
            shots = [parts["shots"]] if "shots" in parts else []
            f["_".join([f"rm_h_{tags[r['method']]}", parts["shift"], *shots])] = number(r["measured"])
    for frame, tag in ((heat, "gap"), (unified, "ugap")):
        if frame is None or frame.empty:
            continue
        for _, r in frame.iterrows():
            f[f"rm_{tag}_{r['shift']}_{r['shots']}"] = number(r["gap"], True)
    if not heat.empty:
        best = heat.loc[heat["gap"].idxmax()]
        f["rm_gap_min"], f["rm_gap_max"] = number(heat["gap"].min(), True), number(heat["gap"].max(), True)
        f["rm_best_cell"], f["rm_best_gap"] = f"{best['shift']}, k={best['shots']}", number(best["gap"], True)
        f["rm_best_interval"] = f"{number(best['low'], True)} to {number(best['high'], True)}"
        f["rm_cells"] = str(len(heat))
        f["rm_cells_puma_ahead"] = str(int((heat["gap"] > 0).sum()))
    beats = claims[claims["claim"].str.contains("beats full fine-tuning")]
    for v, tag in _VERDICT_TAGS.items():   # the glue keys keep the first edition's names
        f[f"rm_cells_{tag}"] = str(int((beats["verdict"] == v).sum()))
    f["rm_cells_not_comparable"] = str(int(beats["verdict"].str.startswith(NOT_COMPARABLE).sum()))
    for shift in dict.fromkeys(forgetting["shift"]):
        fr = forgetting[forgetting["shift"] == shift].set_index("attribute")
        for col, tag in (("Zero-Shot", "zs"), ("PUMA", "puma"), ("Full fine-tuning", "ft")):
            f[f"rm_probe_{shift}_{tag}"] = number(fr.loc["mean", col])
            for held in [a for a in fr.index if a.endswith("(held-out)")]:
                f[f"rm_held_{held.split()[0]}_{shift}_{tag}"] = number(fr.loc[held, col])
        f[f"rm_ft_loss_{shift}"] = number(fr.loc["mean", "Zero-Shot"] - fr.loc["mean", "Full fine-tuning"])
        f[f"rm_puma_loss_{shift}"] = number(fr.loc["mean", "Zero-Shot"] - fr.loc["mean", "PUMA"])
        heads = fr.drop(index=[a for a in fr.index if a in ("mean", "embedding mean") or a.endswith("(held-out)")])
        drop = (heads["Zero-Shot"] - heads["Full fine-tuning"]).sort_values(ascending=False)
        f[f"rm_ft_worst_{shift}"] = f"{drop.index[0]} ({number(-drop.iloc[0], True)})"
        f[f"rm_ft_second_{shift}"] = f"{drop.index[1]} ({number(-drop.iloc[1], True)})"
        for claim, tag in (("PUMA's feature keeps more", "keep"), ("full fine-tuning's feature keeps less", "forget")):
            hit = claims[claims["claim"].str.startswith(f"{shift}, all images: {claim}")]
            if len(hit) == 1:
                f[f"rm_v_{tag}_{shift}"] = str(hit["verdict"].iloc[0])
    return f


def split_summary() -> pd.DataFrame:
    """Training, test and left-out classes of every source under every shift (the loaders' split for
    ``families``), one line per (shift, source)."""
    from umlkit.data.mini import SOURCES
    c = settings()
    lines = []
    for shift in c["shifts"]:
        for src in c["datasets"]:
            (n_train, _), (n_test, _) = SOURCES[src].train, SOURCES[src].test
            if shift != "families":
                split = load_splits()[shift][src]
                total = n_train + n_test
                n_train, n_test = len(split["train"]), len(split["test"])
                left = total - n_train - n_test
            else:
                left = 0
            lines.append({"shift": shift, "source": src, "split by": "" if shift == "families" else
                          " x ".join(c["attributes"][src][:1 if shift == "values" else 2]),
                          "train classes": n_train, "test classes": n_test, "left out": left,
                          "train / test / left out": f"{n_train} / {n_test} / {left}"})
    return pd.DataFrame(lines)


def probe_table(forgetting: pd.DataFrame) -> pd.DataFrame:
    """:func:`forgetting_frame` as one line per (shift, model) and one column per attribute."""
    long = forgetting.melt(id_vars=["shift", "attribute"], var_name="model", value_name="accuracy")
    out = long.pivot_table(index=["shift", "model"], columns="attribute", values="accuracy", sort=False)
    return out[list(dict.fromkeys(forgetting["attribute"]))]


# ------------------------------------------------------------------------------------------------ second edition
def cell_values(cmp: pd.DataFrame, setting: str, method: str, dataset: str = "Harmonic"):
    """(seed mean, per-seed values, exact) of one cell of the second edition (exact: a seed-free record, the frozen
    backbone), or None when it has no record."""
    hit = cmp[(cmp["setting"] == setting) & (cmp["method"] == method) & (cmp["dataset"] == dataset)
              & (cmp["metric"] == "R@1")] if not cmp.empty else cmp
    if len(hit) != 1:
        return None
    stored = hit["values"].iloc[0]   # {seed: value}
    values = [float(v) for v in (stored.values() if isinstance(stored, dict) else stored)]
    return float(hit["measured"].iloc[0]), values, bool(hit["seed_free"].iloc[0])


def welch_interval(groups: list[tuple], signs: list[int]) -> tuple[float, float, float, int]:
    """A signed sum of independent seed means (``groups`` from :func:`cell_values`, ``signs`` +1/-1) with its 95 %
    Welch-Satterthwaite interval: (value, low, high, fewest seeds of a trained group). Each trained group adds s²/n
    to the variance and an exact one (seed-free) none; df = (sum s²/n)² / sum (s²/n)² / (n - 1). NaN bounds when a
    trained group has fewer than two seeds. Written out: scipy and statsmodels test two groups, not a difference of
    two gaps."""
    from scipy import stats
    value = float(sum(s * g[0] for s, g in zip(signs, groups)))
    trained = [g[1] for g in groups if not g[2]]
    n = min((len(v) for v in trained), default=0)
    if not trained or n < 2:
        return value, float("nan"), float("nan"), n
    parts = [(float(np.var(v, ddof=1)) / len(v), len(v)) for v in trained]
    se2 = sum(p for p, _ in parts)
    if se2 <= 0:
        return value, value, value, n
    df = se2 ** 2 / sum(p ** 2 / (k - 1) for p, k in parts if p > 0)
    half = float(stats.t.ppf(0.975, df) * np.sqrt(se2))
    return value, value - half, value + half, n


def axis_frame(cmp: pd.DataFrame, dataset: str = "Harmonic") -> pd.DataFrame:
    """The second edition per axis and cell: each method's ``dataset`` R@1 minus full fine-tuning's (``gap``, its
    95 % Welch interval ``low``/``high``, ``seeds``), for PUMA, LP-FT and the linear probe, and the frozen
    backbone's; NaN where a record is missing. One line per (axis, cell, method), in the file's order."""
    from umlkit.experiments.papers.regime import edition2 as e2
    lines = []
    for axis, axis_cells in e2.settings()["axes"].items():
        for c in axis_cells:
            cell = {"backbone": c["backbone"], "shift": c["shift"], "shortcut": bool(c.get("shortcut", False))}
            where = e2.setting(cell)
            full = cell_values(cmp, where, "Full fine-tuning", dataset)
            for method in ("PUMA", "LP-FT", "Linear probe", "Zero-Shot"):
                mine = cell_values(cmp, where, method, dataset)
                line = {"axis": axis, "cell": where, "method": method, "gap": np.nan, "low": np.nan,
                        "high": np.nan, "seeds": 0}
                if mine is not None and full is not None:
                    gap, low, high, seeds = welch_interval([mine, full], [1, -1])
                    line.update(gap=gap, low=low, high=high, seeds=seeds)
                lines.append(line)
    return pd.DataFrame(lines, columns=["axis", "cell", "method", "gap", "low", "high", "seeds"])


def axis_moves(cmp: pd.DataFrame, dataset: str = "Harmonic") -> pd.DataFrame:
    """How far each method's gap to full fine-tuning moves along each axis: per step (consecutive cells) and, on an
    axis of more than two cells, from its first cell to its last. ``move`` = gap at ``to`` - gap at ``from``, with
    its 95 % Welch-Satterthwaite interval over the four cells' seeds (the cells are trained independently). One
    line per (axis, step, method) for PUMA and LP-FT; NaN where a cell is missing."""
    from umlkit.experiments.papers.regime import edition2 as e2
    lines = []
    for axis, axis_cells in e2.settings()["axes"].items():
        where = [e2.setting({"backbone": c["backbone"], "shift": c["shift"],
                             "shortcut": bool(c.get("shortcut", False))}) for c in axis_cells]
        steps = list(zip(where, where[1:])) + ([(where[0], where[-1])] if len(where) > 2 else [])
        for a, b in steps:
            for method in ("PUMA", "LP-FT"):
                groups = [cell_values(cmp, w, m, dataset) for w in (a, b) for m in (method, "Full fine-tuning")]
                line = {"axis": axis, "from": a, "to": b, "method": method, "move": np.nan, "low": np.nan,
                        "high": np.nan, "seeds": 0}
                if all(g is not None for g in groups):   # (to: method - full) - (from: method - full)
                    move, low, high, seeds = welch_interval([groups[2], groups[3], groups[0], groups[1]],
                                                             [1, -1, -1, 1])
                    line.update(move=move, low=low, high=high, seeds=seeds)
                lines.append(line)
    return pd.DataFrame(lines, columns=["axis", "from", "to", "method", "move", "low", "high", "seeds"])


def backbone_table(cmp: pd.DataFrame) -> pd.DataFrame:
    """What each backbone of the second edition knows before fine-tuning: its pretraining world and width, the
    validation accuracy of its attribute heads (its pretraining report; heads its world does not supervise are
    blank), how long its pretraining took and on what, and its frozen feature's Harmonic R@1 on the values split (the
    zero-shot record). A backbone not yet pretrained is listed with blanks."""
    import json

    from umlkit.experiments.papers.regime import edition2 as e2
    from umlkit.models.pretrain import RECIPES, weight_files
    lines = []
    for key, name in e2.settings()["backbones"].items():
        files = weight_files(key)
        line = {"backbone": key, "model": name, "world": RECIPES[key].get("world", "v2"),
                "width": 192 if "wide" in name else 96}
        if files["report"].is_file():
            report = json.loads(files["report"].read_text())
            line.update({f"head: {h}": 100 * a for h, a in report["val_accuracy"].items() if not h.startswith("class")})
            line["pretraining minutes"] = round(report["seconds"] / 60, 1)
            threads = report.get("threads")   # reports before the device option trained on the CPU
            line["pretrained on"] = (report.get("device") if report.get("device", "cpu") != "cpu"
                                     else f"CPU ({report.get('cpu', '?')}, "
                                          f"{threads} thread{'s' if threads != 1 else ''})")
        zs = cell_values(cmp, e2.setting({"backbone": key, "shift": "values", "shortcut": False}), "Zero-Shot")
        line["zero-shot Harmonic R@1 (values split)"] = zs[0] if zs is not None else np.nan
        lines.append(line)
    return pd.DataFrame(lines).set_index("backbone")


def probe_gain_frame(cmp: pd.DataFrame) -> pd.DataFrame:
    """Per (cell, trained method) of the second edition: the backbone feature's mean probe accuracy and the
    Harmonic R@1 gain over the cell's frozen backbone (seed means); the frozen backbone itself at gain 0."""
    from umlkit.experiments.papers.regime import edition2 as e2
    lines = []
    for cell in e2.cells():
        where = e2.setting(cell)
        zs = cell_values(cmp, where, "Zero-Shot")
        for method in ("Zero-Shot", *e2.settings()["methods"]):
            r = cell_values(cmp, where, method)
            probe = cmp[(cmp["setting"] == where) & (cmp["method"] == method) & (cmp["dataset"] == "probe: mean")
                        & (cmp["metric"] == PROBE_METRIC)] if not cmp.empty else cmp
            if r is None or zs is None or len(probe) != 1:
                continue
            lines.append({"cell": where, "backbone": cell["backbone"], "method": method,
                          "probe accuracy": float(probe["measured"].iloc[0]), "R@1 gain": r[0] - zs[0]})
    return pd.DataFrame(lines, columns=["cell", "backbone", "method", "probe accuracy", "R@1 gain"])


def _cell_tag(cell: str) -> str:
    """A second-edition setting as a glue-name part: "backbone=v2;shift=families;shortcut" -> "v2_families_shortcut"."""
    return cell.replace("backbone=", "").replace(";shift=", "_").replace(";", "_")


def _claim_verdicts(claims: pd.DataFrame, tags: dict[str, str]) -> dict[str, str]:
    """``rm2_verdict_<cell tag>_<method tag>``: each claim's verdict as the board gives it ("inconclusive (Holm p
    0.14)"; Holm-adjusted when ``claims`` comes from the chapter's family), so no sentence types a verdict."""
    out = {}
    if "claim" not in claims:
        return out
    for _, r in claims.iterrows():
        cell, _, rest = str(r["claim"]).partition(": ")
        method = rest.split(" beats ")[0]
        if method in tags and cell:
            p, first = r.get("p adjusted"), r.get("first edition") or ""
            out[f"rm2_verdict_{_cell_tag(cell)}_{tags[method]}"] = (
                f"{r['verdict']} (first edition: {first})" if first else
                f"{r['verdict']} (Holm p {p:.2g})" if isinstance(p, float) and np.isfinite(p) else str(r["verdict"]))
    return out


def _leads_in_words(claims: pd.DataFrame) -> str:
    """``rm2_lead``: the claims "X beats full fine-tuning" whose interval lies above zero, as the sentence that opens
    the second edition's findings (so which method leads, if any, is read from the records, never typed)."""
    if not {"claim", "low"} <= set(claims):
        return "Not every record of the map is in yet"
    ahead = [str(c) for c, lo in zip(claims["claim"], claims["low"]) if " beats full fine-tuning" in str(c)
             and np.isfinite(lo) and lo > 0]
    if not ahead:
        return ("No method is ahead of full fine-tuning with an interval clear of zero anywhere on the second "
                "edition's map")
    named = "; ".join(f"{c.split(': ')[1].split(' beats ')[0]} ({cell_words(c.split(': ')[0])})" for c in ahead)
    return f"Ahead of full fine-tuning with an interval clear of zero: {named}"


def edition2_facts(axes: pd.DataFrame, moves: pd.DataFrame, claims: pd.DataFrame,
                   cmp: pd.DataFrame | None = None) -> dict[str, str]:
    """The numbers the second edition's prose states (glued; "not measured yet" where records are missing): every
    cell's gap to full fine-tuning per method (``rm2_gap_<cell tag>_<puma|lpft|linear|zs>``), each step's move
    (``rm2_step_<from tag>_<to tag>_<method>``) and each axis's whole move (``rm2_move_<axis>_<puma|lpft>``) per
    method with its interval, the counts of the edition's verdicts
    (``rm2_supported`` ...), how many of its runs are stored, and the largest gap PUMA and LP-FT reach
    (``rm2_best_<puma|lpft>``); with ``cmp`` every cell's Harmonic R@1 and mean probe accuracy per method
    (``rm2_h_<cell tag>_<method>``, ``rm2_probe_...``) and the mark's cost to each method (``rm2_mark_cost_<method>``:
    Harmonic R@1 without the mark - with it)."""
    from umlkit.experiments.views.prose import number
    tags = {"PUMA": "puma", "LP-FT": "lpft", "Linear probe": "linear", "Zero-Shot": "zs"}
    todo = "not measured yet"

    def interval(v, lo, hi):
        if not np.isfinite(v):
            return todo
        return f"{number(v, True)} ({number(lo, True)} to {number(hi, True)})" if np.isfinite(lo) else number(v, True)
    f: dict[str, str] = {}
    for _, r in axes.iterrows():
        f[f"rm2_gap_{_cell_tag(r['cell'])}_{tags[r['method']]}"] = interval(r["gap"], r["low"], r["high"])
    for _, r in moves.iterrows():   # every step, and the axis's whole move (its first cell to its last) last
        step = "_".join(_cell_tag(c) for c in (r["from"], r["to"]))
        f[f"rm2_step_{step}_{tags[r['method']]}"] = interval(r["move"], r["low"], r["high"])
        f[f"rm2_move_{r['axis']}_{tags[r['method']]}"] = interval(r["move"], r["low"], r["high"])
    for v, tag in _VERDICT_TAGS.items():
        f[f"rm2_{tag}"] = str(int((claims["verdict"] == v).sum()))
    f.update(_claim_verdicts(claims, tags))
    f["rm2_lead"] = _leads_in_words(claims)
    f["rm2_claims"], f["rm2_claims_measured"] = str(len(claims)), str(int((claims["verdict"] != MISSING).sum()))
    for method in ("PUMA", "LP-FT"):
        done = axes[(axes["method"] == method) & np.isfinite(axes["gap"])]
        best = done.loc[done["gap"].idxmax()] if len(done) else None
        f[f"rm2_best_{tags[method]}"] = (f"{number(best['gap'], True)} ({cell_words(best['cell'])})" if best is not None
                                         else todo)
    if cmp is not None:
        from umlkit.experiments.papers.regime import edition2 as e2
        every = {**tags, "Full fine-tuning": "ft"}
        for cell in e2.cells():
            for method, tag in every.items():
                hit = cell_values(cmp, e2.setting(cell), method)
                f[f"rm2_h_{_cell_tag(e2.setting(cell))}_{tag}"] = number(hit[0]) if hit is not None else todo
                probe = cmp[(cmp["setting"] == e2.setting(cell)) & (cmp["method"] == method)
                            & (cmp["dataset"] == "probe: mean")]["measured"]
                f[f"rm2_probe_{_cell_tag(e2.setting(cell))}_{tag}"] = number(probe.iloc[0]) if len(probe) else todo
        for method, tag in every.items():
            plain, marked = (cell_values(cmp, e2.setting({"backbone": "v2", "shift": "families", "shortcut": m}),
                                          method) for m in (False, True))
            f[f"rm2_mark_cost_{tag}"] = number(plain[0] - marked[0]) if plain and marked else todo
    f["rm2_findings"] = (f"{f['rm2_claims_measured']} of its {f['rm2_claims']} claims measured "
                         f"({f['rm2_supported']} reproduced, {f['rm2_contradicted']} contradicted, "
                         f"{f['rm2_inconclusive']} inconclusive); the largest gap to full fine-tuning is "
                         f"{f['rm2_best_puma']} for PUMA and {f['rm2_best_lpft']} for LP-FT")
    return f


def example_images(n: int = 8, seed: int = 0) -> dict[str, np.ndarray]:
    """What the second edition changes, as pictures (uint8, (n, 32, 32, 3) per line): pretraining images of the
    narrow, v2 and broad worlds, and CUB-like training images with the shortcut mark beside the same images without
    it (test images look like the latter)."""
    from umlkit.data import ensure_mini, load_unified
    from umlkit.data.mini import pretraining_set
    from umlkit.data.shortcut import ShortcutDataset
    from umlkit.experiments.papers.regime import edition2 as e2
    out = {f"pretraining: {w}": pretraining_set(n, seed=seed, world=w)[0] for w in ("narrow", "v2", "broad")}
    train = load_unified(ensure_mini(), "train", names=["cub", "cars"])
    marked = ShortcutDataset(train, **e2.settings()["shortcut"], seed=seed)
    picks = np.linspace(0, len(train) - 1, n).astype(int)
    out["training images with the mark"] = np.stack([np.asarray(marked[int(i)][0]) for i in picks])
    out["the same images, unmarked"] = np.stack([np.asarray(train[int(i)][0]) for i in picks])
    return out


def tuning_view(frame: pd.DataFrame) -> pd.DataFrame:
    """:func:`edition2.tuning_frame` as a reader reads it: one line per (backbone, method, rate), the rate as
    written in the configuration ("3e-04"), scores to one decimal, the choice marked."""
    if frame.empty:
        return frame
    out = frame.drop(columns="unit").assign(lr=[f"{x:.0e}" for x in frame["lr"]],
                                            seconds=frame["seconds"].round(0).astype(int))
    out["chosen"] = np.where(frame["chosen"], np.where(frame["interior"].fillna(False).astype(bool),
                                                       "chosen (interior)", "chosen (edge)"), "")
    return out.drop(columns="interior").round({"val Harmonic": 1, "val Unified": 1}).set_index(["backbone", "method"])


def moves_view(moves: pd.DataFrame) -> pd.DataFrame:
    """:func:`axis_moves` with short cell labels ("v2 / values") and the interval in one column."""
    from umlkit.experiments.tables.labels import cell_label
    return pd.DataFrame({"axis": moves["axis"], "from": moves["from"].map(cell_label),
                         "to": moves["to"].map(cell_label), "method": moves["method"],
                         "move": moves["move"].round(1),
                         "95 % interval": [f"[{lo:+.1f}, {hi:+.1f}]" if np.isfinite(lo) else "–"
                                           for lo, hi in zip(moves["low"], moves["high"])],
                         "seeds": moves["seeds"]}).set_index(["axis", "from", "to"])
