"""The language-guidance chapter (``book/language_guidance.ipynb``): the facts its prose glues and the views it shows -
guidance gains, training curves, the omega sweep, the equivalence margins, class similarities under each language
model, the semantic neighbours of Fig. 3 and the unified setting - read from records and language files.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from umlkit.experiments.papers.language_guidance.config import (
    ABLATIONS,
    BASELINE,
    CURVE_ROWS,
    PAPER,
    SEMANTIC,
    SOURCES,
    UNIFIED,
    ablation_table,
    class_similarity,
    first_epoch,
    guided_rows,
    lg_config,
    omega_grid,
    omega_jobs,
    related_classes,
    semantic_table,
    split_row,
    table,
    unified_config,
    unified_sweep_jobs,
    unified_table,
)
from umlkit.experiments.papers.language_guidance.language_store import source_classes
from umlkit.experiments.recipes import source as source_recipe
from umlkit.experiments.recipes import unified as unified_recipe
from umlkit.experiments.runs.runners import SOURCE_NAMES
from umlkit.experiments.tables.paper_cells import paper_table
from umlkit.experiments.views.prose import method_value as _value
from umlkit.experiments.views.prose import number as _num
from umlkit.experiments.views.prose import signed
from umlkit.experiments.views.prose import verdict_counts as _verdict_counts


def quoted_table(name: str = "Table 1") -> "pd.DataFrame":  # noqa: F821
    """A table the book quotes rather than runs (Table 1: other methods' published results), R@1 per section."""
    p = paper_table(PAPER, name).fillna({"section": "", "setting": ""})
    p = p[p["metric"] == "R@1"]
    return p.pivot_table(index=["section", "method"], columns="dataset", values="value", sort=False)


def word_order_pairs(source: str = "cub", guidance: str = "ELG", profile: str = "quick") -> dict[str, float]:
    """How the language rows treat class names made of the same words in another order ("amber bird with a blue
    head" / "blue bird with an amber head", distinct classes): the number of such pairs among a source's classes, their
    lowest and mean cosine similarity, and the highest similarity of any other pair. Articles ("a"/"an") are ignored."""
    import numpy as np
    sim = class_similarity(source, guidance, profile)
    rows, texts, _ = source_classes(source, profile)
    words = {r: sorted(w for w in t.lower().split() if w not in ("a", "an")) for r, t in zip(rows, texts)}
    same, other = [], []
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            (same if words[a] == words[b] else other).append(float(sim.at[a, b]))
    return {"pairs": len(same), "min": float(np.min(same)) if same else float("nan"),
            "mean": float(np.mean(same)) if same else float("nan"), "other_max": float(np.max(other))}


def similarities(source: str, guidances, profile: str = "quick", n: int = 12) -> dict[str, "pd.DataFrame"]:  # noqa: F821
    """What each guidance would distil on ``n`` training classes of a source: the cosine similarity of their stored
    language rows (:func:`class_similarity`), before the loss's shift, indexed by the classes' names. Reads the
    language files (computing one only if it is missing)."""
    rows, texts, _ = source_classes(source, profile)
    out = {}
    for g in guidances:
        sim = class_similarity(source, g, profile).loc[rows[:n], rows[:n]]
        out[g] = sim.set_axis(texts[:n], axis=0).set_axis(texts[:n], axis=1)
    return out


def omega_table(profile: str = "quick", select_on: str = "MAP@R") -> "pd.DataFrame":  # noqa: F821
    """The sweep's stored validation scores, one line per (source, row, omega), with the chosen omega per source and
    row (the best validation ``select_on``) and whether it is interior to that source's grid."""
    import pandas as pd

    from umlkit.experiments.runs.records import stored_record
    lines = []
    for _, label, key in omega_jobs(profile):
        rec = stored_record(key, profile)
        if rec is None:
            continue
        cfg = key["config"]
        source = cfg["data"]["datasets"][0]
        terms = [t for t in cfg["objective"] if t["name"].startswith("language_")]   # the guidance term, any kind
        row = label.rsplit("-w", 1)[0] if terms else label.rsplit("-seed", 1)[0]
        row = row.removeprefix(f"{source}-") if source != "cub" else row
        lines.append({"source": source, "row": row, "omega": terms[0]["weight"] if terms else 0.0,
                      **{m: v[SOURCE_NAMES[source]] for m, v in rec["result"]["test"].items()
                         if m in ("R@1", "MAP@R")}})
    out = pd.DataFrame(lines)
    if out.empty:
        return out
    best = out[out["omega"] > 0].loc[lambda d: d.groupby(["source", "row"])[select_on].idxmax()]
    out["chosen"] = out.index.isin(best.index)
    inside = {(r["source"], r["row"]): min(g := omega_grid(r["row"], source=r["source"])) < r["omega"] < max(g)
              for _, r in best.iterrows()}
    out["interior"] = [inside.get(k) for k in zip(out["source"], out["row"])]
    return out


# ------------------------------------------------------------------------------------------------ chapter views
def similarity_guidances(profile: str = "quick") -> list[str]:
    """The guidances whose class similarities a profile can show without training (PLG and the controls need the
    quick profile's classifier and UML-Mini's attributes)."""
    return ["ELG", "PLG Top-5", "attribute overlap", "ELG shuffled"] if profile == "quick" else ["ELG"]


def guidance_gains(cmp: "pd.DataFrame", metric: str = "R@1") -> "pd.DataFrame":  # noqa: F821
    """Table 2 as gains: per base method, guidance and dataset, (with guidance) - (without), measured and in the
    paper (long: ``numbers`` = measured / paper)."""
    import pandas as pd
    sub = cmp[cmp["metric"] == metric]
    value = {(r["method"], r["dataset"]): (r["measured"], r["paper"]) for _, r in sub.iterrows()}
    lines = []
    for (method, d), (m, p) in value.items():
        base, g = split_row(method)
        if g is None or (base, d) not in value:
            continue
        bm, bp = value[(base, d)]
        lines += [{"method": base, "guidance": g, "dataset": d, "numbers": "measured", "gain": m - bm},
                  {"method": base, "guidance": g, "dataset": d, "numbers": "paper", "gain": p - bp}]
    return pd.DataFrame(lines)


def curve_frame(cmp: "pd.DataFrame") -> "pd.DataFrame":  # noqa: F821
    """The compared Fig. S1 table as learning curves: dataset, method, epoch, measured (seed mean), spread."""
    sub = cmp[cmp["metric"].str.startswith("R@1 epoch ")].copy()
    sub["epoch"] = sub["metric"].str.rsplit(" ", n=1).str[1].astype(int)
    return sub[["dataset", "method", "epoch", "measured", "spread", "seeds"]].sort_values(
        ["dataset", "method", "epoch"])


def paper_equivalence_gaps() -> dict[str, float]:
    """The paper's own gaps behind its "about as good" readings: the largest |PLG - ELG| R@1 of Table 2 (completed
    from Table S1) and the range of the language models' R@1 in Table 3 (a) (CUB and Cars)."""
    t2 = paper_table(PAPER, "Table 2").fillna({"section": "", "setting": ""})
    v = {(r["method"], r["dataset"]): r["value"] for _, r in t2[t2["metric"] == "R@1"].iterrows()}
    plg = [abs(v[(f"{m} + PLG Top-5", d)] - v[(f"{m} + ELG", d)]) for m in lg_config()["methods"]
           for d in ("CUB", "Cars", "SOP") if (f"{m} + PLG Top-5", d) in v and (f"{m} + ELG", d) in v]
    t3 = paper_table(PAPER, "Table 3").fillna({"section": ""})
    t3 = t3[(t3["metric"] == "R@1") & (t3["method"] != "Baseline") & t3["section"].isin(["", "(a) Language Models"])]
    lm = t3.groupby("dataset")["value"].agg(lambda x: x.max() - x.min())
    return {"plg_elg": max(plg), "language_models": float(lm.max())}


def detectable_margin(claims, alpha: float = 0.05) -> float:
    """The median, over the equivalence claims with a test, of the smallest margin their TOST could have supported:
    |gap| + t_(1-alpha, df) x se, from each claim's measured gap and the test's standard error and degrees of
    freedom (:func:`umlkit.experiments.tables.table.check_claims`)."""
    import numpy as np
    from scipy import stats
    if claims.empty:
        return float("nan")
    eq = claims[claims["margin"].notna() & claims["se"].gt(0) & claims["df"].gt(0)]
    out = (eq["measured A"] - eq["measured B"]).abs() + stats.t.ppf(1 - alpha, eq["df"]) * eq["se"]
    return float(np.median(out)) if len(out) else float("nan")


def chapter_facts(cmp: dict, claims, sweep, profile: str = "quick", measured: dict | None = None) -> dict:
    """The numbers the chapter's prose glues, from the compared tables (``{table: compare frame}``), the claims and
    the omega sweep; "–" where a table has no records yet."""
    import numpy as np
    import pandas as pd
    facts: dict[str, str] = {}
    t2 = cmp.get("Table 2", pd.DataFrame())
    seeds = pd.concat([c.loc[c["measured"].notna(), "seeds"] for c in cmp.values() if not c.empty]) \
        if any(not c.empty for c in cmp.values()) else pd.Series(dtype=float)
    facts["seeds_min"] = str(int(seeds.min())) if len(seeds) else "0"
    facts["seeds_max"] = str(int(seeds.max())) if len(seeds) else "0"
    facts["seeds_range"] = (facts["seeds_min"] if facts["seeds_min"] == facts["seeds_max"]
                            else f"{facts['seeds_min']} to {facts['seeds_max']}")
    recs = {r for m in (measured or {}).values() if not m.empty for r in m["record"]}
    facts["n_records"] = str(len(recs))
    for g, key in (("ELG", "elg"), ("PLG Top-5", "plg")):
        for s in SOURCES:
            d = SOURCE_NAMES[s]
            for field, prefix in (("measured", ""), ("paper", "paper_")):
                gains = [_value(t2, f"{m} + {g}", d, field=field) - _value(t2, m, d, field=field)
                         for m in lg_config()["methods"]]
                gains = [x for x in gains if np.isfinite(x)]
                facts[f"{prefix}{key}_gain_{s}"] = _num(float(np.mean(gains)), signed=True) if gains else "–"
    is_t2 = claims["claim"].isin([c.text for c in table("Table 2").claims]) if not claims.empty else []
    equiv = claims["margin"].notna() if not claims.empty else []
    if not claims.empty:
        facts["t2_beats"] = str(int((is_t2 & ~equiv).sum()))
        facts["t2_equiv"] = str(int((is_t2 & equiv).sum()))
        facts["t2_beats_verdicts"] = _verdict_counts(claims, is_t2 & ~equiv)
        facts["t2_equiv_verdicts"] = _verdict_counts(claims, is_t2 & equiv)
        t4 = claims["claim"].str.startswith("ELG's row-wise KL beats")
        facts["t4_verdicts"] = _verdict_counts(claims, t4)
        ctl = claims["claim"].isin([c.text for c in ablation_table("Controls", profile).claims])
        facts["ctl_verdicts"] = _verdict_counts(claims, ctl)
    else:
        for k in ("t2_beats", "t2_equiv"):
            facts[k] = "0"
        for k in ("t2_beats_verdicts", "t2_equiv_verdicts", "t4_verdicts", "ctl_verdicts"):
            facts[k] = "not yet checked (no records)"
    r1 = t2[t2["metric"] == "R@1"] if not t2.empty else t2
    facts["max_spread"] = _num(float(r1["spread"].max())) if not r1.empty else "–"
    facts["median_spread"] = _num(float(r1.loc[r1["seeds"] > 1, "spread"].median())) if not r1.empty else "–"
    facts.update(_ablation_facts(cmp, claims))
    facts.update(edge_facts(profile))
    facts.update(_convergence_facts(cmp, claims, profile, t2, r1))
    facts.update(_semantic_and_unified_facts(cmp, claims, profile))
    return facts


def edge_facts(profile: str = "quick") -> dict[str, str]:
    """The (row, source) pairs whose chosen omega stays on its grid's edge however far the grid was extended
    (language_guidance.yaml ``omega_no_interior.<row>.<source>``): each named with its omega and why."""
    edge = lg_config().get("omega_no_interior") or {}
    omegas = (lg_config().get("omega") or {}).get(profile) or {}
    by_reason: dict[str, list[str]] = {}   # the pairs that share a reason are named together
    for row, per in edge.items():
        for s, why in per.items():
            if s in (omegas.get(row) or {}):
                by_reason.setdefault(why, []).append(f"{row} ({SOURCE_NAMES[s]}-like, ω = {float(omegas[row][s]):g})")
    parts = [f"{', '.join(items)}: {why}" for why, items in by_reason.items()]
    grid = [float(w) for w in lg_config()["omega_grid"]]
    return {"omega_edge": "; ".join(parts) if parts else "none", "omega_edge_n": str(sum(map(len, by_reason.values()))),
            "omega_grid_span": f"{min(grid):g} to {max(grid):g}"}


def sweep_gains(sweep: pd.DataFrame) -> pd.DataFrame:
    """The guided lines of the sweep with ``gain``: validation MAP@R minus the unguided base method's on the same
    source (below zero: the term hurts at that omega); ``dataset`` names the source."""
    if sweep.empty:
        return sweep
    base = sweep[sweep["omega"] == 0].set_index(["source", "row"])["MAP@R"]
    guided = sweep[sweep["omega"] > 0].copy()
    guided["gain"] = [m - base.get((s, split_row(r)[0]), float("nan"))
                      for s, r, m in zip(guided["source"], guided["row"], guided["MAP@R"])]
    return guided.assign(dataset=guided["source"].map(SOURCE_NAMES))


def chosen_omegas(sweep: pd.DataFrame) -> pd.DataFrame:
    """Per row, the chosen omega on each source (written as configured, "(edge)" where it is not interior) and its
    validation gain over the unguided base method, in MAP@R points; missing where the row is not tuned there."""
    if sweep.empty:
        return sweep
    g = sweep_gains(sweep)
    g = g[g["chosen"]]
    out = pd.DataFrame(index=pd.Index(list(dict.fromkeys(g["row"])), name="row"))
    for s in dict.fromkeys(g["source"]):
        part = g[g["source"] == s].set_index("row")
        out[f"{SOURCE_NAMES[s]} ω"] = pd.Series([f"{w:g}" + ("" if inside else " (edge)")
                                                 for w, inside in zip(part["omega"], part["interior"])], part.index)
        # a gain that rounds to zero keeps its sign with a third decimal (below or above the baseline matters here)
        out[f"{SOURCE_NAMES[s]} gain"] = part["gain"].map(
            lambda g: f"{g:+.3f}" if g and abs(g) < 0.005 else signed(g, 2))
    return out   # a row not tuned on a source: missing there (the book's tables write "–")


def validation_facts(sweep: pd.DataFrame) -> dict[str, str]:
    """Table 2's guided rows whose chosen omega still scores below their unguided baseline on a source's validation
    classes (the omega sweep's MAP@R): guidance hurt there at every strength tried, before any test run."""
    if sweep.empty:
        return {"val_below_base": "–", "val_below_base_n": "–", "val_guided_n": "–"}
    g = sweep_gains(sweep)
    g = g[g["chosen"] & g["row"].isin([r for r in guided_rows() if split_row(r)[1] is not None])]
    below = g[g["gain"] < 0]
    per = below.groupby("source", sort=False).size()
    parts = [f"{n} on the {SOURCE_NAMES[s]}-like source" for s, n in per.items()]
    text = ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1] if parts else "none"
    return {"val_below_base": text, "val_below_base_n": str(len(below)), "val_guided_n": str(len(g))}


def _ablation_facts(cmp: dict, claims) -> dict:
    """The controls, Table 4's distillation variants, Table S3's pseudolabel counts and Table 5's captions."""
    import numpy as np
    import pandas as pd
    facts: dict[str, str] = {}
    ctl = cmp.get("Controls", pd.DataFrame())
    for key, row in (("base", BASELINE), ("elg", f"{BASELINE} + ELG"), ("shuffled", "+ ELG, shuffled names"),
                     ("attr", "+ attribute overlap (no language model)"),
                     ("tree", "+ attribute tree (no language model)")):
        vals = [_value(ctl, row, d) for d in ("CUB", "Cars")]   # where the paper sees language help
        facts[f"ctl_{key}"] = _num(float(np.nanmean(vals))) if any(np.isfinite(vals)) else "–"
        facts[f"ctl_{key}_sop"] = _num(_value(ctl, row, "SOP"))
    t4c = cmp.get("Table 4", pd.DataFrame())
    alts = [_value(t4c, r[1], "CUB") for r in ABLATIONS["Table 4"]["rows"][2:]]
    alts = [a for a in alts if np.isfinite(a)]
    facts["t4_range"] = f"{min(alts):.1f} to {max(alts):.1f}" if alts else "–"
    facts["t4_elg"] = _num(_value(t4c, "Baseline + ELG", "CUB"))
    s3 = cmp.get("Table S3", pd.DataFrame())
    for k, row in (("top1", "Baseline + PLG"), ("top5", "Baseline + PLG (Top-5)"), ("top10", "Baseline + PLG (Top-10)"),
                   ("top20", "Baseline + PLG (Top-20)")):
        facts[f"s3_{k}"] = _num(_value(s3, row, "CUB"))
    facts["s3_sample"] = _num(_value(s3, "Sample (Top-5)", "CUB"))
    t5c = cmp.get("Table 5", pd.DataFrame())
    facts["t5_caption"] = _num(_value(t5c, "Caption", "CUB"))
    facts["t5_insertion"] = _num(_value(t5c, "Caption + insertion", "CUB"))
    t5 = claims["claim"].str.contains("caption") if not claims.empty else []
    facts["t5_caption_verdicts"] = (_verdict_counts(claims, t5) if not claims.empty and t5.any()
                                    else "not checked yet (no records)")
    return facts


def _convergence_facts(cmp: dict, claims, profile: str, t2, r1) -> dict:
    """Fig. S1 (the early gap and the cost of guidance) and the paper's own gaps against this run's seed noise."""
    import numpy as np
    import pandas as pd
    facts: dict[str, str] = {}
    conv = cmp.get("Fig. S1", pd.DataFrame())
    first = first_epoch(profile)
    metric = f"R@1 epoch {first}"
    early = [_value(conv, g, d, metric) - _value(conv, BASELINE, d, metric)
             for g in CURVE_ROWS[1:] for d in ("CUB", "Cars")]
    early = [e for e in early if np.isfinite(e)]
    facts["first_epoch"] = str(first)
    if not conv.empty:
        last = conv[conv["metric"].str.startswith("R@1 epoch ")].assign(
            epoch=lambda d: d["metric"].str.rsplit(" ", n=1).str[1].astype(int)).groupby("dataset")["epoch"].max()
        facts["epochs_cub_cars"] = str(int(last.get("CUB", 0)))
        facts["epochs_sop"] = str(int(last.get("SOP", 0)))
    else:
        facts["epochs_cub_cars"] = facts["epochs_sop"] = "–"
    facts["early_gap"] = _num(float(np.mean(early)), signed=True) if early else "–"
    ratio = [_value(conv, g, SOURCE_NAMES[s], "train seconds")
             / _value(conv, BASELINE, SOURCE_NAMES[s], "train seconds")
             for g in CURVE_ROWS[1:] for s in SOURCES]
    ratio = [r for r in ratio if np.isfinite(r)]
    facts["time_ratio"] = _num(float(np.mean(ratio)), digits=2) if ratio else "–"
    gaps = paper_equivalence_gaps()
    facts["paper_plg_elg_gap"] = _num(gaps["plg_elg"])
    facts["paper_lm_range"] = _num(gaps["language_models"])
    facts["detectable_margin"] = _num(detectable_margin(claims))
    t2p = [_value(t2, f"{m} + {g}", d, field="paper") - _value(t2, m, d, field="paper")
           for m in lg_config()["methods"] for g in ("ELG", "PLG Top-5") for d in ("CUB", "Cars")]
    t2p = [x for x in t2p if np.isfinite(x)]
    facts["paper_gain_range"] = f"{min(t2p):.1f} to {max(t2p):.1f}" if t2p else "–"
    spread = float(r1.loc[r1["seeds"] > 1, "spread"].median()) if not r1.empty else float("nan")
    facts["gains_below_spread"] = (f"{sum(abs(x) < spread for x in t2p)} of {len(t2p)}" if t2p and np.isfinite(spread)
                                   else "–")
    return facts


def _semantic_and_unified_facts(cmp: dict, claims, profile: str) -> dict:
    """Fig. 3 (which classes the neighbours come from), word order, and the unified setting."""
    import pandas as pd
    facts: dict[str, str] = {}
    sem = cmp.get("Fig. 3", pd.DataFrame())
    sd = SOURCE_NAMES[SEMANTIC["source"]]
    for key, row in (("base", BASELINE), ("elg", f"{BASELINE} + ELG"), ("plg", f"{BASELINE} + PLG Top-5")):
        facts[f"sem_rel_{key}"] = _num(_value(sem, row, sd, "related classes"))
        facts[f"sem_same_{key}"] = _num(_value(sem, row, sd, "same class"))
    facts["sem_k"], facts["sem_related"] = str(SEMANTIC["neighbours"]), str(SEMANTIC["related"])
    if profile == "quick":
        wo = word_order_pairs(SEMANTIC["source"], SEMANTIC["judge"], profile)
        facts["wo_pairs"], facts["wo_min"] = str(wo["pairs"]), _num(wo["min"], digits=3)
        facts["wo_other_max"] = _num(wo["other_max"], digits=3)
    else:
        facts["wo_pairs"] = facts["wo_min"] = facts["wo_other_max"] = "–"
    in_sem = claims["claim"].isin([c.text for c in semantic_table(profile).claims]) if not claims.empty else []
    facts["sem_verdicts"] = (_verdict_counts(claims, in_sem) if not claims.empty and in_sem.any()
                             else "not checked yet (no records)")
    u = lg_config()["unified"]
    facts["unified_grid"] = ", ".join(f"{w:g}" for w in u["omega_grid"])
    facts["unified_val"] = f"{100 * u['val_fraction']:.0f} %"
    facts["val_share"] = f"{100 * float(source_recipe.methods_config()['val_fraction']):.0f} %"
    facts["unified_classes"] = str(len(source_classes(UNIFIED, profile)[0])) if profile == "quick" else "–"
    base = unified_config(profile, method="PUMA")   # the unguided rows' configuration: which backbone and rates
    facts["unified_backbone"], facts["unified_lr"] = base["model"]["backbone"], f"{base['optimizer']['lr']:g}"
    facts["unified_lr_full"] = f"{unified_config(profile, method='full fine-tuning')['optimizer']['lr']:g}"
    stage = unified_recipe.tables_stage(profile)
    facts["unified_pass"] = f"{stage}-pass"
    facts["unified_rates_how"] = ("each chosen there on the same validation split" if stage == "second"
                                  else "the base configurations' rates")
    chosen = (u["omega"].get(profile) or {}).items()
    facts["unified_omegas"] = "; ".join(f"{row} {w:g}" for row, w in chosen) or "none chosen yet"
    uni = cmp.get("Unified setting", pd.DataFrame())
    for m, key in (("PUMA", "puma"), ("full fine-tuning", "full")):
        for g, gk in (("ELG", "elg"), ("PLG Top-5", "plg")):
            facts[f"uni_{key}_{gk}"] = _num(_value(uni, f"{m} + {g}", "Unified") - _value(uni, m, "Unified"),
                                            signed=True)
    facts.update(_unified_elg_test(claims))
    in_uni = claims["claim"].str.contains("in the unified setting") if not claims.empty else []
    facts["uni_claims"] = str(len(unified_table(profile).claims))
    facts["uni_verdicts"] = (_verdict_counts(claims, in_uni) if not claims.empty and in_uni.any()
                             else "not checked yet (the guided rows wait for the unified omega sweep)")
    return facts


def _unified_elg_test(claims) -> dict[str, str]:
    """``uni_elg_test``: the test behind "PUMA + ELG beats PUMA in the unified setting (Unified)": seeds, two-sided
    p (doubled for a second look), Holm-adjusted p and the verdict."""
    text = "PUMA + ELG beats PUMA in the unified setting (Unified)"
    row = claims[claims["claim"] == text] if not claims.empty else claims
    if row.empty or "p adjusted" not in row or not np.isfinite(row["p adjusted"].iloc[0]):
        return {"uni_elg_test": "not tested yet"}
    r = row.iloc[0]
    looks = int(r.get("looks", 1) or 1)
    p = f"p = {r['p decision']:.2g}" + (f" after doubling for its {looks} looks" if looks > 1 else "")
    return {"uni_elg_test": f"{int(r['seeds'])} seeds, {p}, Holm-adjusted {r['p adjusted']:.2g}: {r['verdict']}"}


def unified_sweep(profile: str = "quick") -> "pd.DataFrame":  # noqa: F821
    """The stored unified sweep: validation and test Unified / Harmonic R@1 per (row, omega), the best omega so far
    (best validation Unified R@1) marked, and whether it is interior to the values measured for the row (once it is,
    it is configured in ``unified.omega``)."""
    import pandas as pd

    from umlkit.experiments.runs.records import stored_record
    lines = []
    for _, label, cfg, _ in unified_sweep_jobs(profile):
        rec = stored_record(cfg, profile)
        if rec is None:
            continue
        r = rec["result"]
        terms = [t for t in cfg["objective"] if t["name"] == "language_guidance"]
        lines.append({"row": label.rsplit("-w", 1)[0].rsplit("-seed", 1)[0].replace("_", " "),
                      "omega": terms[0]["weight"] if terms else 0.0,
                      "val Unified": r["val"]["Unified"], "val Harmonic": r["val"]["Harmonic"],
                      "test Unified": r["test"]["Unified"]})
    out = pd.DataFrame(lines)
    if out.empty:
        return out
    best = out[out["omega"] > 0].loc[lambda d: d.groupby("row")["val Unified"].idxmax()]
    out["chosen"] = out.index.isin(best.index)
    tried = out[out["omega"] > 0].groupby("row")["omega"].agg(["min", "max"])   # the values measured so far
    out["interior"] = out["row"].map({r["row"]: tried.loc[r["row"], "min"] < r["omega"] < tried.loc[r["row"], "max"]
                                      for _, r in best.iterrows()})
    return out


def semantic_counts(profile: str = "quick", queries: int = 4) -> "pd.DataFrame":  # noqa: F821
    """The figure's data: for ``queries`` test classes (those whose images the baseline most often confuses with
    other classes, over its seeds), the query and its ``related - 1`` closest classes, with the mean retrieved count
    per row over seeds. Columns: query, rank (0 = the query class), class, similarity, method, count."""
    import numpy as np
    import pandas as pd

    from umlkit.experiments.runs.records import find_record, load_record
    spec = semantic_table(profile)
    src = SEMANTIC["source"]
    sim = class_similarity(src, SEMANTIC["judge"], profile)
    names = dict(zip(*source_classes(src, profile)[:2]))
    per = {}
    for r in spec.rows:
        found = [find_record(spec.config(r, s, profile), profile) for s in spec.seeds_of(r, profile)]
        per[r.method] = [load_record(p)["result"]["neighbour_classes"] for p in found if p is not None]
    if not per.get(BASELINE):
        return pd.DataFrame(columns=["query", "rank", "class", "similarity", "method", "count"])
    base = per[BASELINE]
    confused = {q: np.mean([sum(v for c, v in run[q].items() if c != q) for run in base]) for q in base[0]}
    chosen = sorted(confused, key=lambda q: (-confused[q], q))[:queries]
    rel = related_classes(base[0], sim, SEMANTIC["related"] - 1)
    lines = []
    for q in chosen:
        for rank, c in enumerate([q, *rel[q]]):
            for m, runs in per.items():
                if runs:
                    lines.append({"query": names[q], "rank": rank, "class": names[c], "similarity": float(sim.at[q, c]),
                                  "method": m, "count": float(np.mean([run[q].get(c, 0) for run in runs]))})
    return pd.DataFrame(lines)


def validation_view(spec, cmp: pd.DataFrame, sweep: pd.DataFrame, metric: str = "MAP@R") -> pd.DataFrame:
    """Each guided row of ``spec`` with its chosen omega, the validation ``metric`` it was chosen on and its test
    ``metric`` (:func:`umlkit.experiments.recipes.tuning.validation_beside`)."""
    from umlkit.experiments.recipes.tuning import validation_beside
    from umlkit.experiments.runs.runners import SOURCE_NAMES
    best = sweep[sweep["chosen"]] if not sweep.empty else sweep
    chosen = {(s, r): (w, v) for s, r, w, v in zip(best["source"], best["row"], best["omega"], best[metric])}
    return validation_beside(spec, cmp, chosen, metric=metric, value="chosen omega",
                             unit_of=lambda row: (row.spec.get("source", "cub"), row.spec.get("method")),
                             dataset_of=lambda row: SOURCE_NAMES[row.spec.get("source", "cub")])


def wordnet_facts(profile: str = "quick", sources=("cub", "cars")) -> dict[str, str]:
    """The WordNet rows' glued facts: per source, how its class names map to WordNet 3.0
    (:func:`~umlkit.experiments.papers.language_guidance.wordnet_names.coverage`) - the share of names whose head
    noun WordNet knows, the distinct head nouns and synset lists, the mean depth of the head nouns' lowest common
    hypernyms - or, without the database, that it is not installed."""
    from umlkit.experiments.papers.language_guidance import wordnet_names
    if not wordnet_names.available():
        missing = (f"not computed here: WordNet 3.0 is not installed (the {wordnet_names.WORDNET_PACKAGE!r} "
                   "package); the rows' numbers come from the stored records")
        return {f"wn_{s}": missing for s in sources}
    out = {}
    for s in sources:
        _, names, _ = source_classes(s, profile)
        c = wordnet_names.coverage(names)
        depth = ("there is one head noun, so no pair to compare" if np.isnan(c["lcs_depth"]) else
                 f"the head nouns' lowest common hypernyms lie at depth {c['lcs_depth']:.1f} below WordNet's root "
                 "on average")
        out[f"wn_{s}"] = (f"{c['with_head']:.0%} of its {c['names']} class names have their head noun in WordNet; "
                          f"they map to {c['head_nouns']} distinct head noun{'s' if c['head_nouns'] != 1 else ''} "
                          f"and {c['distinct']} distinct sets of synsets (colour words included); {depth}")
    return out
