"""The ooDML chapter (``book/oodml.ipynb``): the facts its prose glues and the views it shows - results against the
splits' FID, trends from the default to the hardest split, embedding structure and its correlations, transfer
between sources, few-shot gains and the floor marks - all read from records and the committed splits.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from umlkit.experiments.papers.oodml.config import (
    PAPER,
    SEEDS,
    SHIFT_TABLES,
    SOURCES,
    T1,
    default_split_id,
    load_splits,
    shift_table,
    split_ids,
    tuned_methods,
)
from umlkit.experiments.runs.runners import SOURCE_NAMES
from umlkit.experiments.tables.floors import MARKS
from umlkit.experiments.tables.table import Table
from umlkit.experiments.views.prose import signed


# ------------------------------------------------------------------------------------------------ analyses
def with_fid(measured: pd.DataFrame, profile: str = "quick") -> pd.DataFrame:
    """Measured cells of Tables S4-S8 with the split id and this profile's split FID (the x axis of Figs. 2-7)."""
    if measured.empty:
        return measured.assign(split=pd.Series(dtype=int), fid=pd.Series(dtype=float))
    fids = {SOURCE_NAMES[s]: {d["id"]: d["fid"] for d in load_splits(profile)["sources"][s]["splits"]} for s in SOURCES}
    split = measured["setting"].str.extract(r"split=(\d+)")[0].astype(int)
    out = measured.assign(split=split.to_numpy())
    out["fid"] = [fids[d][i] for d, i in zip(out["dataset"], out["split"])]
    return out


def trend_table(measured: pd.DataFrame, metric: str = "R@1", profile: str = "quick") -> pd.DataFrame:
    """Per source and method: the seed-mean ``metric`` on the default and the hardest split, their difference,
    Spearman's rank correlation between split FID and the seed mean over all splits (-1: falls at every step),
    the splits and the seeds measured."""
    from scipy.stats import spearmanr
    columns = ["dataset", "method", "default", "hardest", "change", "spearman(FID, metric)", "splits", "seeds"]
    if measured.empty:   # missing records: an empty table of the same shape
        return pd.DataFrame(columns=columns)
    sub = with_fid(measured[measured["metric"] == metric], profile)
    rows = []
    for (dataset, method), g in sub.groupby(["dataset", "method"], sort=False):
        mean = g.groupby("split").agg(fid=("fid", "first"), value=("value", "mean"), seeds=("seed", "nunique"))
        src = next(s for s in SOURCES if SOURCE_NAMES[s] == dataset)
        d_id, last = default_split_id(src, profile), max(split_ids(src, profile))
        rho = spearmanr(mean["fid"], mean["value"]).correlation if len(mean) > 2 else float("nan")
        rows.append({"dataset": dataset, "method": method,
                     "default": mean["value"].get(d_id, float("nan")), "hardest": mean["value"].get(last, float("nan")),
                     "change": mean["value"].get(last, float("nan")) - mean["value"].get(d_id, float("nan")),
                     "spearman(FID, metric)": rho, "splits": len(mean), "seeds": int(mean["seeds"].min())})
    return pd.DataFrame(rows, columns=columns)


def record_results(spec: Table, profile: str = "quick", seeds=SEEDS, rows=None):
    """(row, seed, result) of every stored record of ``spec``'s rows (nothing is trained)."""
    from umlkit.experiments.runs.records import stored_record
    out = []
    for row in rows if rows is not None else spec.rows:
        for seed in seeds:
            rec = stored_record(spec.config(row, seed, profile, ()), profile)
            if rec is not None:
                out.append((row, seed, rec["result"]))
    return out


def structure_frame(profile: str = "quick", part: str = "train") -> pd.DataFrame:
    """Fig. 4 / S6 / S7 data: per method, split and seed of Tables S4-S6, the structure of the ``part`` embeddings
    (pi_intra, pi_inter, pi_ratio, spectral decay rho) beside the test R@1."""
    rows = []
    for src in SOURCES:
        spec = shift_table(src, profile)
        for row, seed, res in record_results(spec, profile, rows=spec.select(["methods"])):
            if "structure" not in res:
                continue
            rows.append({"dataset": SOURCE_NAMES[src], "method": row.method, "split": row.spec["split"], "seed": seed,
                         "R@1": res["test"]["R@1"][SOURCE_NAMES[src]], **res["structure"][part]})
    out = pd.DataFrame(rows)
    return with_fid(out.assign(setting="split=" + out["split"].astype(str)), profile).drop(columns="setting") \
        if not out.empty else out


def structure_correlations(frame: pd.DataFrame) -> pd.DataFrame:
    """Spearman correlation between each structural metric and test R@1 over every (method, split, seed) point of a
    source, and within each split across methods (the mean over splits): does a metric track generalisation?"""
    from scipy.stats import spearmanr
    rows = []
    for dataset, g in frame.groupby("dataset", sort=False):
        for m in ("pi_intra", "pi_inter", "pi_ratio", "rho"):
            within = [spearmanr(s[m], s["R@1"]).correlation for _, s in g.groupby("split") if s["method"].nunique() > 2]
            rows.append({"dataset": dataset, "metric": m, "across all points": spearmanr(g[m], g["R@1"]).correlation,
                         "within a split (mean)": float(np.nanmean(within)) if within else float("nan"),
                         "points": len(g)})
    return pd.DataFrame(rows)


def transfer_frame(profile: str = "quick") -> pd.DataFrame:
    """Table S2 / Fig. S3: R@1 of each method trained on one source's default split, on its own test classes and on
    every other source's test set, beside the FID between the two (seed means)."""
    rows, data = [], load_splits(profile)
    for src in SOURCES:
        spec = shift_table(src, profile)
        d = default_split_id(src, profile)
        chosen = [r for r in spec.select(["methods"]) if r.spec["split"] == d]
        for row, seed, res in record_results(spec, profile, rows=chosen):
            rows.append({"train": SOURCE_NAMES[src], "test": SOURCE_NAMES[src], "method": row.method, "seed": seed,
                         "R@1": res["test"]["R@1"][SOURCE_NAMES[src]], "FID": data["sources"][src]["default_fid"]})
            for other, scores in res.get("transfer", {}).items():
                o = next(s for s in SOURCES if SOURCE_NAMES[s] == other)
                rows.append({"train": SOURCE_NAMES[src], "test": other, "method": row.method, "seed": seed,
                             "R@1": scores["R@1"], "FID": data.get("cross_fid", {}).get(f"{src}>{o}", float("nan"))})
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    return out.groupby(["train", "test", "method"], sort=False).agg(**{"R@1": ("R@1", "mean"), "FID": ("FID", "first"),
                                                                      "seeds": ("seed", "nunique")}).reset_index()


def few_shot_gains(measured: pd.DataFrame, metric: str = "R@1", profile: str = "quick") -> pd.DataFrame:
    """Per source, method, shots and split: zero-shot and adapted query ``metric`` (seed means), the gain and the
    relative gain (Fig. 7 / S8's black line), with the split FID."""
    sub = with_fid(measured[measured["metric"] == metric], profile)
    parts = sub["setting"].str.extract(r"shot=(\d+);use=(\w+);")
    sub = sub.assign(shots=parts[0].astype(int).to_numpy(), use=parts[1].to_numpy())
    piv = sub.pivot_table(index=["dataset", "method", "shots", "split", "fid"], columns="use", values="value",
                          aggfunc="mean").reset_index()
    piv["gain"] = piv["Few"] - piv["Zero"]
    piv["relative gain (%)"] = 100 * piv["gain"] / piv["Zero"]
    return piv


def split_view(cmp: pd.DataFrame, metric: str = "R@1", digits: int = 1, profile: str = "quick") -> pd.DataFrame:
    """A shift or few-shot table in the paper's layout: one line per method (and, for Tables S7/S8, shots and
    zero/few), one column per split ("split i: FID <this profile's> (paper <the paper's>)"), each cell "measured
    ±spread (paper)", the spread left out where it rounds to zero (a frozen backbone's seeds); † marks a stale
    record, and ↓ / ⊥ a run below its frozen backbone or collapsed
    when ``cmp`` went through :func:`umlkit.experiments.tables.table.mark_floors`."""
    sub = with_fid(cmp[cmp["metric"] == metric], profile)
    if sub.empty:
        return pd.DataFrame()
    paper_fid = sub["setting"].str.extract(r"FID=([\d.]+)")[0]
    lines: dict = {}
    for (_, r), pf in zip(sub.iterrows(), paper_fid):
        parts = dict(p.split("=", 1) for p in r["setting"].split(";"))
        label = r["row"] if "shot" not in parts else f"{r['row']}, {parts['shot']}-shot, {parts['use'].lower()}"
        col = f"split {r['split']}: FID {r['fid']:.0f}" + (f" (paper {float(pf):.0f})" if isinstance(pf, str) else "")
        text = f"{r['measured']:.{digits}f}"
        if r["seeds"] > 1 and round(r["spread"], digits) > 0:   # one run, or none that differ: no "±0.0"
            text += f" ±{r['spread']:.{digits}f}"
        text += f" ({r['paper']:.{digits}f})" if pd.notna(r["paper"]) else ""
        if r.get("stale"):
            text += " †"
        if r.get("floor"):
            text += f" {MARKS[r['floor']]}"
        lines.setdefault(label, {})[(r["split"], col)] = text
    out = pd.DataFrame.from_dict(lines, orient="index")
    out = out[sorted(out.columns)].fillna("")
    out.columns = [c for _, c in out.columns]
    out.index.name = "method"
    return out


def _flat_rows(sub: pd.DataFrame) -> list[str]:
    """The methods that trained yet stayed at the frozen backbone's level on every split: each of their cells with a
    floor marked "≈ frozen" by :func:`umlkit.experiments.tables.floors.mark_floors` (a claim won against them is won
    against the backbone; a single such cell is marked, and withholds its claims, on its own)."""
    from umlkit.experiments.tables.floors import FROZEN_LIKE
    if not len(sub) or "floor" not in sub:
        return []
    judged = sub[sub["frozen"].notna()] if "frozen" in sub else sub
    flat = judged.groupby("row")["floor"].agg(lambda marks: bool(len(marks)) and (marks == FROZEN_LIKE).all())
    return sorted(flat[flat].index)


def floor_facts(floors: pd.DataFrame, profile: str = "quick") -> dict[str, str]:
    """Per source, the methods with a split whose R@1 fell below the frozen backbone or collapsed to random
    initialisation (``floors``: the shift tables through :func:`umlkit.experiments.tables.table.mark_floors`), those
    that
    stayed at its level on every split (``<src>_flat_rows``), and the R@1 span over the splits and methods without
    the marked ones."""
    from umlkit.experiments.tables.floors import BELOW, COLLAPSED, FROZEN_LIKE, SEED_COLLAPSE
    out = {}
    for src in SOURCES:
        name = SOURCE_NAMES[src]
        sub = floors[(floors["dataset"] == name) & (floors["metric"] == "R@1")
                     & floors["row"].isin(tuned_methods(profile))] if not floors.empty else floors
        words = []
        for kind, label in ((COLLAPSED, "collapsed"), (BELOW, "below the frozen backbone"),
                            (SEED_COLLAPSE, "with a collapsed seed")):
            hit = sub[sub["floor"] == kind] if len(sub) else sub
            if len(hit):
                per = hit.groupby("row")["setting"].nunique()
                names = [f"{m} ({n} of {sub['setting'].nunique()} splits)" for m, n in per.items()]
                words.append(f"{', '.join(names)} {label}")
        out[f"{src}_floor_rows"] = "; ".join(words) if words else "none"
        out[f"{src}_flat_rows"] = ", ".join(_flat_rows(sub)) or "none"
        bad = sub["floor"].astype(bool) & (sub["floor"] != FROZEN_LIKE) if len(sub) else None
        ok = sub[~sub["row"].isin(set(sub.loc[bad, "row"]))] if len(sub) else sub
        out[f"{src}_r1_range_working"] = (f"{ok['measured'].min():.1f}–{ok['measured'].max():.1f}"
                                          if len(ok) else "n/a")
    marked = [SOURCE_NAMES[s] + "-like" for s in SOURCES if out[f"{s}_floor_rows"] != "none"]
    out["ags_floor_note"] = (f"on the {' and '.join(marked)} source{'s' if len(marked) > 1 else ''} its lowest places "
                             f"include the marked runs" if marked else "no run of any source is marked")
    return out


def _split_fid_facts(data: dict) -> dict[str, str]:
    """The chapter's facts about the splits' FIDs: the paper's default / i.i.d. ratio, the easiest CUB-like split,
    the cross-source FIDs against the largest split FID."""
    from umlkit.experiments.tables.paper_cells import paper_table
    from umlkit.experiments.views.prose import fmt
    f = {}
    t1 = paper_table(PAPER, "Table 1").pivot_table(index="dataset", columns="setting", values="value")
    ratio = t1[T1["default"]] / t1[T1["iid"]]
    f["paper_iid_ratio"] = ", ".join(f"{ratio[SOURCE_NAMES[s]]:.1f}" for s in SOURCES[:-1]) + \
        f" and {ratio[SOURCE_NAMES[SOURCES[-1]]]:.1f}"
    cub = data["sources"]["cub"]["splits"]
    easier = [x["fid"] for x in cub if x["fid"] < data["sources"]["cub"]["default_fid"]]
    f["cub_easiest"] = fmt(min(easier)) if easier else "n/a"
    f["cub_easier_share"] = (f"{100 * (1 - min(easier) / data['sources']['cub']['default_fid']):.0f} %"
                             if easier else "n/a")
    cross = list(data.get("cross_fid", {}).values())
    top = max(x["fid"] for d in data["sources"].values() for x in d["splits"])
    f["cross_min"], f["cross_max"] = (fmt(min(cross)), fmt(max(cross))) if cross else ("n/a", "n/a")
    f["split_max"] = fmt(top)
    f["cross_above"] = f"{sum(c > top for c in cross)} of {len(cross)}" if cross else "n/a"
    return f


def chapter_facts(measured: pd.DataFrame, trends: dict, ags: pd.DataFrame, corr: pd.DataFrame,
                  transfer: pd.DataFrame, gains: pd.DataFrame, claims: pd.DataFrame, profile: str = "quick") -> dict:
    """The numbers the ooDML chapter's discussion states, from its tables (glued into the text; every fact is
    computed from whatever records exist, and says how many there are)."""
    from umlkit.experiments.views.prose import fmt
    data = load_splits(profile)
    f: dict[str, str] = {k: "n/a" for k in (
        "transfer_own", "transfer_cross", "fs_points", "fs_positive", "fs_gain_first", "fs_gain_last", "fs5_gain_first",
        "fs5_gain_last", "claims_n", "claims_summary", "corr_pi_ratio", "corr_pi_ratio_signs", "corr_rho",
        "corr_rho_signs", *[f"{s}_ags_{k}" for s in SOURCES for k in ("best", "worst", "range")])}
    f["n_records"] = str(measured["record"].nunique()) if not measured.empty else "0"
    seeds = measured.groupby(["row", "setting", "dataset"])["seed"].nunique() if not measured.empty else pd.Series([0])
    f["seeds_min"], f["seeds_max"] = str(int(seeds.min())), str(int(seeds.max()))
    f["seeds_range"] = f["seeds_min"] if f["seeds_min"] == f["seeds_max"] else f"{f['seeds_min']} to {f['seeds_max']}"
    for src in SOURCES:
        d, name = data["sources"][src], SOURCE_NAMES[src]
        iid = float(np.mean(d["iid_fid"])) if d.get("iid_fid") else float("nan")
        f[f"{src}_default"], f[f"{src}_iid"] = fmt(d["default_fid"]), fmt(iid)
        f[f"{src}_default_iid"] = fmt(d["default_fid"] / iid) if iid == iid else "n/a"
        r1 = measured[(measured["dataset"] == name) & (measured["metric"] == "R@1")
                      & measured["row"].isin(tuned_methods(profile))] if not measured.empty else measured
        means = r1.groupby(["row", "setting"])["value"].mean() if len(r1) else r1   # seed means, as the tables
        f[f"{src}_r1_range"] = f"{means.min():.1f}–{means.max():.1f}" if len(r1) else "n/a"
        f[f"{src}_hardest"] = fmt(d["splits"][-1]["fid"])
        f[f"{src}_hardest_ratio"] = fmt(d["splits"][-1]["fid"] / d["default_fid"])
        for key, t in trends.items():
            sub = t[(t["dataset"] == name) & (t["splits"] == len(d["splits"]))]
            tag = {"R@1": "r1", "R@1 fixed": "fixed", "MAP@R": "mapr"}[key]
            f[f"{src}_{tag}_methods"] = str(len(sub))
            f[f"{src}_{tag}_falls"] = str(int((sub["change"] < 0).sum()))
            f[f"{src}_{tag}_rho"] = fmt(sub["spearman(FID, metric)"].mean(), 2) if len(sub) else "n/a"
            f[f"{src}_{tag}_drop"] = fmt(-sub["change"].mean()) if len(sub) else "n/a"
    f.update(_split_fid_facts(data))
    if not ags.empty:
        a = ags[ags["metric"] == "AGS-R@1"].groupby(["dataset", "row"])["measured"].mean()
        for src in SOURCES:
            name = SOURCE_NAMES[src]
            if name in a.index.get_level_values(0):
                s = a.loc[name].sort_values()
                f[f"{src}_ags_best"], f[f"{src}_ags_worst"] = s.index[-1], s.index[0]
                f[f"{src}_ags_range"] = f"{s.iloc[0]:.1f}–{s.iloc[-1]:.1f}"
    if not corr.empty:
        for m in ("pi_ratio", "rho"):
            c = corr[corr["metric"] == m]["across all points"]
            f[f"corr_{m}"] = ", ".join(signed(v, 2) for v in c)
            f[f"corr_{m}_signs"] = ("the same sign on every source" if (c > 0).all() or (c < 0).all()
                                    else "opposite signs across sources")
    if not transfer.empty:
        own = transfer[transfer["train"] == transfer["test"]]["R@1"].mean()
        cross = transfer[transfer["train"] != transfer["test"]]["R@1"].mean()
        f["transfer_own"], f["transfer_cross"] = fmt(own), fmt(cross)
    if not gains.empty:
        f["fs_points"] = str(len(gains))
        f["fs_positive"] = str(int((gains["gain"] > 0).sum()))
        for k in (2, 5):  # each source's own easiest and hardest split
            g = gains[gains["shots"] == k]
            lo = g[g["split"] == g.groupby("dataset")["split"].transform("min")]["gain"]
            hi = g[g["split"] == g.groupby("dataset")["split"].transform("max")]["gain"]
            tag = "fs" if k == 2 else "fs5"
            f[f"{tag}_gain_first"] = fmt(lo.mean()) if len(lo) else "n/a"
            f[f"{tag}_gain_last"] = fmt(hi.mean()) if len(hi) else "n/a"
    if not claims.empty:
        from umlkit.experiments.tables.table import verdict_group
        counts = claims["verdict"].map(verdict_group).value_counts()
        f["claims_n"] = str(len(claims))
        f["claims_summary"] = "; ".join(f"{v} {k}" for k, v in counts.items())
    return f


def paper_curves(metric: str = "R@1") -> pd.DataFrame:
    """The paper's Tables S4-S6 as curves (dataset, method, split, fid = the paper's split FID, value): Fig. 2 as
    published, for a figure beside the measured one."""
    from umlkit.experiments.tables.paper_cells import paper_table
    parts = []
    for table in SHIFT_TABLES.values():
        p = paper_table(PAPER, table)
        p = p[p["metric"] == metric]
        fid = p["setting"].str.extract(r"FID=([\d.]+)")[0].astype(float)
        split = p["setting"].str.extract(r"split=(\d+)")[0].astype(int)
        parts.append(pd.DataFrame({"dataset": p["dataset"].to_numpy(), "method": p["method"].to_numpy(),
                                   "split": split.to_numpy(), "fid": fid.to_numpy(), "value": p["value"].to_numpy(),
                                   "seed": 0}))
    return pd.concat(parts, ignore_index=True)


def rate_table(profile: str = "quick") -> pd.DataFrame:
    """Per method and source: the rate that source's own validation sweep chose (whether it lies inside the grid)
    and the rate the source's table trains with (``lr_sources``, else the CUB-like choice)."""
    from umlkit.experiments.papers.oodml.config import lr_sweep
    from umlkit.experiments.recipes.source import chosen_lr
    rows = []
    for src in SOURCES:
        sweep = lr_sweep(profile, source=src)
        for _, r in (sweep[sweep["chosen"].astype(bool)] if not sweep.empty else sweep).iterrows():
            method = r["method"].removeprefix(f"{src}-") if src != "cub" else r["method"]
            rows.append({"method": method, "source": SOURCE_NAMES[src], "chosen": float(r["lr"]),
                         "interior": bool(r["interior"]), "trained with": chosen_lr(method, profile, src)})
    return pd.DataFrame(rows, columns=["method", "source", "chosen", "interior", "trained with"])


def rate_view(rates: pd.DataFrame) -> pd.DataFrame:
    """:func:`rate_table` as method x source cells "chosen" (or "chosen → trained with" where they differ; "edge"
    marks a choice on its grid's edge)."""
    def cell(r) -> str:
        text = f"{r['chosen']:g}" + ("" if r["interior"] else " (edge)")
        return text if r["chosen"] == r["trained with"] else f"{text}; trains at {r['trained with']:g}"
    view = rates.assign(cell=[cell(r) for _, r in rates.iterrows()])
    return view.pivot(index="method", columns="source", values="cell").reindex(
        columns=[SOURCE_NAMES[s] for s in SOURCES if SOURCE_NAMES[s] in set(rates["source"])])


def rate_facts(rates: pd.DataFrame) -> dict[str, str]:
    """Per source other than CUB: the methods whose own rate differs from the CUB-like one and is used
    (``<src>_own_rates``), and those whose own choice differs but whose table still trains at the CUB-like rate
    (``<src>_pending_rates``; all sources: ``pending_rates``)."""
    out = {}
    cub = rates[rates["source"] == SOURCE_NAMES["cub"]].set_index("method")["chosen"] if len(rates) else pd.Series()
    for src in SOURCES[1:]:
        sub = rates[rates["source"] == SOURCE_NAMES[src]] if len(rates) else rates
        own = [f"{r['method']} {r['chosen']:g}" for _, r in sub.iterrows()
               if r["chosen"] == r["trained with"] and r["chosen"] != cub.get(r["method"])]
        pending = [f"{r['method']} ({r['chosen']:g}, trains at {r['trained with']:g})" for _, r in sub.iterrows()
                   if r["chosen"] != r["trained with"]]
        out[f"{src}_own_rates"] = ", ".join(own) or "none"
        out[f"{src}_pending_rates"] = ", ".join(pending) or "none"
    pending = [f"{SOURCE_NAMES[src]}-like: {out[f'{src}_pending_rates']}" for src in SOURCES[1:]
               if out[f"{src}_pending_rates"] != "none"]
    out["pending_rates"] = "; ".join(pending) or "none"
    return out
