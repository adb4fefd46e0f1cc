"""The VPTSP chapter (``book/vptsp.ipynb``): the facts its prose glues - the learning-rate sweep, the gaps of Tables
1, 4 and 5, the rate transfer, the later tables, the cost of the method and the verdict counts - read from records.
"""
from __future__ import annotations

import pandas as pd

from umlkit.experiments.papers.vptsp.config import (
    ALL_SOURCES,
    DIAGNOSIS_SOURCES,
    FIG3,
    METRICS,
    PAPER,
    PLAIN,
    T2_SETTINGS,
    TABLE2,
    TABLE4,
    TABLE8_QUICK,
    ZERO_SHOT,
    chosen_lr,
    methods_config,
    run_config,
    sweep_jobs,
)
from umlkit.experiments.recipes.tuning import lr_sweep_frame
from umlkit.experiments.runs.runners import SOURCE_NAMES
from umlkit.experiments.views.prose import method_value as _value
from umlkit.experiments.views.prose import number, verdict_counts


# ------------------------------------------------------------------------------------------------ prose
def floor_facts(t2) -> dict[str, str]:
    """Table 2's floors for the prose: the frozen backbone's R@1 per source and VPTSP-G's / VPTSP-M's on the SOP- and
    In-shop-like sources, and which rows fell below it (:func:`umlkit.experiments.tables.table.mark_floors`)."""
    from umlkit.experiments.views.prose import number
    out = {f"t2_zs_{s}": number(_value(t2, ZERO_SHOT, SOURCE_NAMES[s])) for s in ALL_SOURCES}
    for m, tag in (("VPTSP-G", "g"), ("VPTSP-M", "m"), ("VPT-Base", "vpt"), ("Hyp-ViT", "hypvit")):
        for s in ("sop", "inshop"):
            out[f"t2_{tag}_{s}"] = number(_value(t2, m, SOURCE_NAMES[s]))
    marked = {"floor", "metric", "row", "dataset"} <= set(t2)   # an empty measurement has no columns
    below = t2[(t2["floor"] != "") & (t2["metric"] == "R@1")] if marked else pd.DataFrame(columns=["row", "dataset"])
    out["t2_below"] = ", ".join(f"{r} ({d})" for r, d in below[["row", "dataset"]].drop_duplicates().to_numpy()) \
        or "none"
    return out


def _paper(table: str, method: str, dataset: str, metric: str = "R@1", setting: str | None = None) -> float:
    """One of the paper's cells (NaN when it has none): the prose quotes the paper whether or not a cell was run."""
    from umlkit.experiments.tables.paper_cells import paper_table
    p = paper_table(PAPER, table)
    hit = p[(p["method"] == method) & (p["dataset"] == dataset) & (p["metric"] == metric)
            & ((p["setting"].fillna("") == setting) if setting is not None else True)]
    return float(hit["value"].iloc[0]) if len(hit) == 1 else float("nan")


def _span(values, signed: bool = True) -> str:
    """"a to b" of the finite values (one decimal), one number when they round alike, "–" when there are none."""
    from umlkit.experiments.views.prose import number
    v = [float(x) for x in values if x is not None and x == x]
    if not v:
        return "–"
    lo, hi = (number(x, signed=signed) for x in (min(v), max(v)))
    return lo if lo == hi else f"{lo} to {hi}"


def chapter_facts(cmp: dict, claims, sweep, profile: str = "quick", measured: dict | None = None) -> dict:
    """The numbers the chapter's prose glues, from the compared tables (``{table: compare frame}``, Table 10's step
    times included), the claims and the learning-rate sweep; "–" where a table has no records yet."""
    mc = methods_config()
    facts = {"val_share": f"{100 * float(mc['val_fraction']):.0f} %"}
    cfg = run_config(profile, row="VPT (B)", source="cub", lr=1e-3)
    splits = cfg["data"]["splits"]
    facts["proxy_params"] = f"{len(splits['cub']['train'])} x {cfg['model']['embed_dim']}" if splits else "–"
    recs = {r for m in (measured or {}).values() if not m.empty and "record" in m for r in m["record"]}
    facts["n_records"] = str(len(recs))
    empty = pd.DataFrame()
    facts.update(_sweep_facts(sweep))
    facts.update(_gap_facts(cmp.get("Table 1", empty), cmp.get("Table 4", empty), cmp.get("Table 5", empty)))
    facts.update(_rate_transfer_facts(cmp.get("Rate transfer", empty), profile))
    facts.update(_later_table_facts(cmp, measured or {}, mc))
    facts.update(_cost_facts(cmp, cfg, splits))
    facts.update(_verdict_facts(claims))
    return facts


def _sweep_facts(sweep) -> dict:
    """The tuning runs' facts: validation MAP@R at the chosen and at PUMA's rate, how many Cars-like rates are
    lower."""
    facts: dict[str, str] = {}
    sweep = sweep if sweep is not None and not sweep.empty else pd.DataFrame(
        columns=["source", "row", "lr", "val MAP@R", "chosen"])

    def val(source, row, lr=None):
        """Validation MAP@R of a sweep line: the row's chosen rate, or ``lr``; NaN when not stored."""
        sub = sweep[(sweep["source"] == source) & (sweep["row"] == row)]
        sub = sub[sub["chosen"].astype(bool)] if lr is None else sub[sub["lr"] == lr]
        return float(sub["val MAP@R"].iloc[0]) if len(sub) == 1 else float("nan")
    facts["vptsp_val"], facts["vpt_val"] = number(val("cub", "VPTSP-G (B)")), number(val("cub", "VPT (B)"))
    facts["vptsp_val_1e3"] = number(val("cub", "VPTSP-G (B)", 1e-3))
    facts["vpt_val_1e3"] = number(val("cub", "VPT (B)", 1e-3))
    facts["cars_gap_val"] = number(val("cars", "VPTSP-G (B)") - val("cars", "VPT (B)"), signed=True)
    facts["n_sweep"] = str(len(sweep))
    picked = sweep[sweep["chosen"].astype(bool)]
    table4_rows = {base for base, _ in TABLE4.values()}
    both = picked[picked["source"].isin(["cub", "cars"]) & picked["row"].isin(table4_rows)].pivot(
        index="row", columns="source", values="lr")
    both = both.dropna() if {"cub", "cars"} <= set(both.columns) else both.iloc[:0]
    facts["n_cars_lower"] = f"{int((both['cars'] < both['cub']).sum())} of {len(both)}" if len(both) else "–"
    return facts


def _gap_facts(t1, t4, t5) -> dict:
    """VPTSP minus VPT on the CUB-like (Table 1) and Cars-like (Table 4) sources, here and in the paper; the best
    plain method; the Cars-like rows the prose names."""
    facts: dict[str, str] = {}
    for metric, key in (("R@1", "r1"), ("MAP@R", "mapr")):
        facts[f"sp_gap_cub_{key}"] = number(_value(t1, "VPTSP-G (B)", "CUB", metric)
                                            - _value(t1, "VPT (B)", "CUB", metric), signed=True)
        facts[f"paper_sp_gap_cub_{key}"] = number(_paper("Table 1", "VPTSP-G (B)", "CUB", metric)
                                                  - _paper("Table 1", "VPT (B)", "CUB", metric), signed=True)
        facts[f"sp_gap_cars_{key}"] = number(_value(t4, "VPTSP (GRU) + Bias", "Cars", metric)
                                             - _value(t4, "VPT+Bias (Baseline)", "Cars", metric), signed=True)
        facts[f"paper_sp_gap_cars_{key}"] = number(_paper("Table 4", "VPTSP (GRU) + Bias", "Cars", metric)
                                                   - _paper("Table 4", "VPT+Bias (Baseline)", "Cars", metric),
                                                   signed=True)
    efficient = [m for m in PLAIN if m != "Full Fine-tuning (PA)"]
    plain = t1[(t1["metric"] == "MAP@R") & t1["method"].isin(efficient)] if not t1.empty else t1
    if not plain.empty:
        best = plain.loc[plain["measured"].idxmax()]
        facts["best_plain"], facts["best_plain_mapr"] = str(best["method"]), number(float(best["measured"]))
    else:
        facts["best_plain"], facts["best_plain_mapr"] = "–", "–"
    for name, d in (("cars_vptsp", "VPTSP (GRU) + Bias"), ("cars_vpt", "VPT+Bias (Baseline)"),
                    ("cars_full", "Full Fine-tuning (PA)"), ("cars_ema", "VPTSP (EMA)")):
        facts[name] = number(_value(t4, d, "Cars"))
    facts["cars_sample"] = number(_value(t5, "Sample", "Cars"))
    return facts


def _rate_transfer_facts(rt, profile: str) -> dict:
    """The Cars-like rows at the CUB-like rates against their own (the rate-transfer view)."""
    facts: dict[str, str] = {}
    if not rt.empty:
        r1 = rt[rt["metric"] == "R@1"]
        at = {w: r1[r1["setting"] == f"lr chosen on {w}"].set_index("row")["measured"] for w in ("CUB", "Cars")}
        facts["rt_vptsp_cub"] = number(float(at["CUB"].get("VPTSP (GRU) + Bias", float("nan"))))
        facts["rt_vptsp_cars"] = number(float(at["Cars"].get("VPTSP (GRU) + Bias", float("nan"))))
        moved = [name for name, (base, _) in TABLE4.items()
                 if chosen_lr(base, profile, "cub") != chosen_lr(base, profile, "cars")]
        vptsp_rows = [r for r in at["CUB"].index if r.startswith("VPTSP") and r in moved]
        facts["rt_vptsp_span_cub"] = _span([at["CUB"].get(r) for r in vptsp_rows], signed=False)
        facts["rt_vptsp_span_cars"] = _span([at["Cars"].get(r) for r in vptsp_rows], signed=False)
        facts["rt_n_vptsp_moved"] = str(len(vptsp_rows))
        facts["rt_gru_same"] = number(float(at["Cars"].get("VPTSP (GRU)", float("nan"))))
    else:
        for k in ("rt_vptsp_cub", "rt_vptsp_cars", "rt_vptsp_span_cub", "rt_vptsp_span_cars", "rt_n_vptsp_moved",
                  "rt_gru_same"):
            facts[k] = "–"
    return facts


def _later_table_facts(cmp: dict, measured: dict, mc: dict) -> dict:
    """Tables 2, 6 and 8, Fig. 3 and the diagnosis, here and in the paper."""
    facts: dict[str, str] = {}
    empty = pd.DataFrame()
    t2 = cmp.get("Table 2", empty)
    for d in ("CUB", "Cars", "SOP", "InShop"):
        k = d.lower()
        facts[f"t2_sp_{k}"] = number(_value(t2, "VPTSP-G", d) - _value(t2, "VPT-Base", d), signed=True)
        facts[f"t2_hyp_{k}"] = number(_value(t2, "VPTSP-G", d) - _value(t2, "Hyp-ViT", d), signed=True)
        p2 = {m: _paper("Table 2", m, d, "R@1", T2_SETTINGS[m]) for m in TABLE2}
        facts[f"paper_t2_sp_{k}"] = number(p2["VPTSP-G"] - p2["VPT-Base"], signed=True)
        facts[f"paper_t2_hyp_{k}"] = number(p2["VPTSP-G"] - p2["Hyp-ViT"], signed=True)
    t6 = cmp.get("Table 6", empty)
    for metric, key in (("R@1", "r1"), ("MAP@R", "mapr")):
        facts[f"t6_full_{key}"] = number(_value(t6, "VPTSP", "CUB", metric)
                                         - _value(t6, "Full fine-tuning (PA)", "CUB", metric), signed=True)
        facts[f"paper_t6_full_{key}"] = number(_paper("Table 6", "VPTSP", "CUB", metric)
                                               - _paper("Table 6", "Full fine-tuning (PA)", "CUB", metric), signed=True)
    t8 = cmp.get("Table 8", empty)
    if not t8.empty:
        r1 = t8[(t8["metric"] == "R@1") & (t8["method"] == "VPTSP")]   # the frozen backbones are the floors
        v1, v2 = (r1[r1["setting"] == k].set_index("dataset")["measured"] for k in TABLE8_QUICK)
        facts["t8_gain"] = _span((v2 - v1).dropna())
    else:
        facts["t8_gain"] = "–"
    f3 = measured.get("Fig. 3", empty)
    for option, _ in FIG3.values():
        if f3.empty:
            facts[f"f3_best_{option}"] = facts[f"f3_range_{option}"] = "–"
            continue
        sub = f3[(f3["metric"] == "MAP@R") & f3["setting"].str.startswith(f"{option}=")]
        means = sub.groupby("setting")["value"].mean()
        several = len(means) >= 2   # a best value needs something to be better than
        facts[f"f3_best_{option}"] = means.idxmax().split("=", 1)[1] if several else "–"
        facts[f"f3_range_{option}"] = f"{number(means.min())} to {number(means.max())}" if several else "–"
    for src in DIAGNOSIS_SOURCES:   # alpha: the learnable bias's share of each proxy, the memory has the rest
        alpha = float(mc["sources"][src]["alpha"])
        facts[f"alpha_{src}"], facts[f"memory_share_{src}"] = f"{alpha:g}", f"{100 * (1 - alpha):.0f} %"
    dg = cmp.get("Diagnosis", empty)
    short = {"VPTSP-G (B)": "vptsp", "alpha = 1 (no semantic memory)": "a1", "original normalisation": "orig",
             "alpha = 1, original normalisation": "a1orig",
             "alpha = 1, original normalisation, PML's proxy init": "a1pml",
             "original normalisation, PML's proxy init": "pml", "VPT (B)": "vpt"}
    for src in DIAGNOSIS_SOURCES:
        for row, k in short.items():
            facts[f"dg_{src}_{k}"] = number(_value(dg, row, SOURCE_NAMES[src], "MAP@R"))
        facts[f"dg_{src}_a1pml_gap"] = number(_value(dg, "alpha = 1, original normalisation, PML's proxy init",
                                                     SOURCE_NAMES[src], "MAP@R")
                                              - _value(dg, "VPT (B)", SOURCE_NAMES[src], "MAP@R"), signed=True)
    return facts


def _cost_facts(cmp: dict, cfg: dict, splits) -> dict:
    """The proxies' initial scale, the seed spread behind Fig. 3 and Table 10's step times."""
    facts: dict[str, str] = {}
    empty = pd.DataFrame()
    n_cls, dim = len(splits["cub"]["train"]) if splits else 100, int(cfg["model"]["embed_dim"])
    official = (6 / (n_cls + dim)) ** 0.5 / 8 / 3 ** 0.5     # xavier-uniform / 8: the entries' standard deviation
    facts["bias_norm_ratio"] = f"{(2 / n_cls) ** 0.5 / official:.0f}"   # kaiming-normal, fan_out: sqrt(2 / classes)
    facts["f3_seed_spread"] = number(_value(cmp.get("Table 1", pd.DataFrame()), "VPTSP-G (B)", "CUB", "MAP@R",
                                            "spread"))
    st = cmp.get("Table 10", empty)
    for b in (32, 64):
        for m, k in (("VPTSP", "vptsp"), ("VPT", "vpt")):
            hit = st if st.empty else st[(st["method"] == m) & (st["setting"] == f"batch_size={b}")
                                         & (st["metric"] == "Latency (x full)")]
            facts[f"t10_{k}_{b}"] = number(float(hit["measured"].iloc[0]), digits=2) if len(hit) == 1 else "–"
            facts[f"paper_t10_{k}_{b}"] = number(_paper("Table 10", m, "Cars", "Latency (x full)", f"batch_size={b}"),
                                                 digits=2)
    return facts


def _verdict_facts(claims) -> dict:
    """The verdict counts of each group of claims the prose names."""
    facts: dict[str, str] = {}
    if claims is None or claims.empty:
        for k in ("baseline_verdicts", "bitfit_verdicts", "proxy_verdicts", "gru_verdicts", "source_verdicts",
                  "acc_verdicts", "full_verdicts", "many_verdicts", "t6_verdicts", "t8_verdicts", "t10_verdicts",
                  "dg_verdicts_memory", "dg_verdicts_norm", "dg_verdicts_repaired_memory", "dg_verdicts_repaired_vpt",
                  "all_verdicts"):
            facts[k] = "not yet checked (no records)"
        facts["n_claims"] = "0"
        return facts
    text = claims["claim"]
    facts["baseline_verdicts"] = verdict_counts(claims, text.str.startswith("VPT (B) beats")
                                                & ~text.str.contains("(BitFit helps)", regex=False))
    facts["bitfit_verdicts"] = verdict_counts(claims, text.str.contains("(BitFit helps)", regex=False))
    facts["proxy_verdicts"] = verdict_counts(claims, text.str.contains("(semantic proxies)", regex=False))
    facts["gru_verdicts"] = verdict_counts(claims, text.str.contains("(GRU beats EMA)", regex=False))
    facts["source_verdicts"] = verdict_counts(claims, text.str.contains("(class prompts are needed)", regex=False))
    facts["acc_verdicts"] = verdict_counts(claims, text.str.startswith("GRU with Relu beats"))
    facts["full_verdicts"] = verdict_counts(claims, text.str.contains("(beats full fine-tuning)", regex=False))
    facts["many_verdicts"] = verdict_counts(claims, text.str.contains("(the gain turns on many-class sources)",
                                                                      regex=False))
    facts["t6_verdicts"] = verdict_counts(claims, text.str.startswith("VPTSP beats"))
    facts["t8_verdicts"] = verdict_counts(claims, text.str.startswith("the longer-pretrained tiny ViT"))
    facts["t10_verdicts"] = verdict_counts(claims, text.str.contains("step takes longer", regex=False))
    facts["dg_verdicts_memory"] = verdict_counts(claims, text.str.startswith("the semantic memory helps:"))
    facts["dg_verdicts_norm"] = verdict_counts(claims, text.str.contains("original normalisation beats", regex=False))
    facts["dg_verdicts_repaired_memory"] = verdict_counts(claims, text.str.startswith(
        "the semantic memory helps once"))
    facts["dg_verdicts_repaired_vpt"] = verdict_counts(claims, text.str.contains("proxy init beats VPT (B)",
                                                                                 regex=False))
    facts["all_verdicts"] = verdict_counts(claims, text.notna())
    facts["n_claims"] = str(len(claims))
    return facts


def lr_sweep(profile: str = "quick", train: bool = False, select_on: str = "MAP@R", sources=None,
             backbone: str | None = None) -> pd.DataFrame:
    """Per source, row and learning rate, the validation R@1 and MAP@R; ``chosen`` marks each row's best on each
    source by ``select_on`` and ``interior`` says whether it lies inside the grid. ``backbone``: the sweep of
    Table 8's other backbone (VPTSP-G (B) on it, every source)."""
    parts = []
    rows = ["VPTSP-G (B)"] if backbone else None
    for source in sources or (ALL_SOURCES if backbone else (methods_config().get("sweep") or {"cub": "all"})):
        jobs = sweep_jobs(profile, rows=rows, sources=[source], backbone=backbone)
        part = lr_sweep_frame(PAPER, jobs, profile, train, name="row", metrics=METRICS,
                              dataset=SOURCE_NAMES[source], select_on=select_on)
        if not part.empty:
            parts.append(part.assign(source=source)[["source", *part.columns]])
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def validation_view(spec, cmp: pd.DataFrame, sweep: pd.DataFrame, metric: str = "MAP@R") -> pd.DataFrame:
    """Each tuned row of ``spec`` with its chosen rate, the validation ``metric`` it was chosen on and its test
    ``metric`` (:func:`umlkit.experiments.recipes.tuning.validation_beside`); rows that name their own rate are left
    out."""
    from umlkit.experiments.recipes.tuning import validation_beside
    best = sweep[sweep["chosen"]] if not sweep.empty else sweep
    chosen = {(s, r): (lr, v) for s, r, lr, v in zip(best["source"], best["row"], best["lr"], best[f"val {metric}"])}
    return validation_beside(
        spec, cmp, chosen, metric=metric,
        unit_of=lambda row: (row.spec["source"], row.spec["row"]) if "row" in row.spec and "lr" not in row.spec
        else None,
        dataset_of=lambda row: SOURCE_NAMES[row.spec.get("source", "cub")])
