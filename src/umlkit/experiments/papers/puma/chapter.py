# size: the facts and views of PUMA's two chapters, logic the notebooks would otherwise carry
"""PUMA's chapters (``book/puma.ipynb``, ``book/puma_ablations.ipynb``): the facts their prose glues and the views
their tables and figures show - per-table facts, tuning curves and convergence, the few-shot and budget curves, the
cross-source matrix, Figure 3's prompt weights, source bias against training-set size - all read from records.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from umlkit.data.mini import ensure_mini
from umlkit.data.unified import PUMA_ORDER
from umlkit.experiments.papers.puma.config import (
    BACKBONES_QUICK,
    BACKBONES_QUICK_SECOND,
    BUDGET,
    BUDGET_EPOCHS,
    DATASET_COLUMNS,
    DECLARED,
    LOSSES,
    PAPER,
    PEFT_ROWS,
    SECTIONS,
    T5_METHODS,
    TABLE2,
    TABLE3,
    backbones_quick,
    build_tables,
    config_for,
    few_shot_block,
    few_shot_tuning_jobs,
    row_of,
    run_config,
    second_pass,
    sweep_jobs,
    table_claims,
    tuning_units,
)
from umlkit.experiments.recipes.tuning import mark_choice
from umlkit.experiments.runs.records import cached_record, load_record
from umlkit.experiments.runs.records import stored_record as read_stored
from umlkit.experiments.runs.runners import SOURCE_NAMES
from umlkit.experiments.tables.paper_cells import paper_table
from umlkit.experiments.tables.table import Row, compare, measure
from umlkit.experiments.views.prose import signed
from umlkit.metrics import harmonic_mean


def _record(table: str, label: str, key: dict, runner: str, profile: str, rerun: bool = False, log=print,
            train: bool = True) -> dict | None:
    """The record of ``key``, trained first when missing and ``train`` (or ``rerun``); None when reading only and
    it is not stored (the chapter shows "missing records")."""
    if not train and not rerun:
        return read_stored(key, profile)
    return cached_record(PAPER, table, label, key, runner, profile, rerun, log)


def seed_range(seeds: pd.Series) -> str:
    """"3" when every row has 3 seeds, "3 to 5" when some claims' rows were extended (configs/more_seeds.yaml)."""
    lo, hi = int(seeds.min()), int(seeds.max())
    return str(lo) if lo == hi else f"{lo} to {hi}"


def few_shot_curves(cmp: pd.DataFrame, datasets: Sequence[str] = ("Unified", "Harmonic")) -> pd.DataFrame:
    """The few-shot table as curves over k (``shots``): one line per method with its seed mean and spread, and the
    zero-shot backbone repeated at every k as the floor."""
    c = cmp[cmp["dataset"].isin(datasets) & (cmp["metric"] == "R@1")].copy()
    zs = c[c["method"] == "Zero-Shot"]
    c = c[c["method"] != "Zero-Shot"]
    c["shots"] = c["setting"].str.removeprefix("shots=").astype(int)
    floor = [z.assign(shots=k, method="Zero-Shot (no training)") for k in sorted(c["shots"].unique())
             for _, z in [(None, zs)]]
    out = pd.concat([c, *floor], ignore_index=True)
    return out[["method", "shots", "dataset", "measured", "spread", "seeds"]].sort_values(["dataset", "method",
                                                                                          "shots"])


def few_shot_facts(cmp: pd.DataFrame, claims: pd.DataFrame, tuning: pd.DataFrame | None = None) -> dict[str, str]:
    """The numbers the few-shot discussion states (glued): each method's Unified / Harmonic at every k, the floor,
    PUMA's Harmonic gap to full fine-tuning per k, the verdicts and the tuned rates."""
    from umlkit.experiments.views.prose import cell, fmt, verdict, verdict_counts
    f: dict[str, str] = {}
    f["fs_zs"] = f"{fmt(cell(cmp, 'Zero-Shot', 'Unified'))} / {fmt(cell(cmp, 'Zero-Shot', 'Harmonic'))}"
    gaps = {}
    for k in few_shot_block()["shots"]:
        for name in few_shot_block()["methods"]:
            row = f"{name}, k={k}"
            tag = "puma" if name == "PUMA" else "ft"
            f[f"fs_{tag}_{k}"] = (
                f"{fmt(cell(cmp, row, 'Unified'))} / "
                f"{fmt(cell(cmp, row, 'Harmonic'), spread=cell(cmp, row, 'Harmonic', field='spread'))}")
        gaps[k] = cell(cmp, f"PUMA, k={k}", "Harmonic") - cell(cmp, f"Full fine-tuning, k={k}", "Harmonic")
        f[f"fs_gap_{k}"] = signed(gaps[k])
        f[f"fs_v_{k}"] = verdict(claims, f"PUMA beats full fine-tuning with {k} image(s) per class (Harmonic)")
    f["fs_verdicts"] = verdict_counts(claims, claims["claim"].str.startswith("PUMA beats full fine-tuning with"))
    f["fs_seeds"] = seed_range(cmp[cmp["method"] != "Zero-Shot"]["seeds"])
    if tuning is not None and not tuning.empty:
        for _, line in tuning[tuning["chosen"]].iterrows():
            f[f"fs_lr_{line['unit'].split('-')[-1]}"] = f"{line['lr']:g}"
    return f


def tuning_curves(profile: str = "quick", chosen_only: bool = True) -> pd.DataFrame:
    """Per tuning unit (at its chosen rate, or every rate), the validation Unified and Harmonic R@1 and the training
    loss after every epoch, from the tuning records (dataset-specific units: the harmonic mean of their models'
    held-out scores, and the mean of their losses)."""
    sweep = tuning_frame(profile)
    if sweep.empty:
        return pd.DataFrame()
    pick = set(map(tuple, sweep[sweep["chosen"] | (not chosen_only)][["unit", "lr"]].to_numpy()))
    lines = []
    for table, label, key, runner in sweep_jobs(profile):
        unit = label.rsplit("-lr", 1)[0]
        lr = next(iter(key.values()))["optimizer"]["lr"] if runner == "specialists" else key["optimizer"]["lr"]
        if (unit, lr) not in pick or (rec := read_stored(key, profile)) is None:
            continue
        r = rec["result"]
        if runner == "specialists":
            per = r["curves"]
            for e in range(len(next(iter(per.values())))):
                val = [per[s][e]["val"][s] for s in per]
                lines.append({"unit": unit, "lr": lr, "epoch": per[next(iter(per))][e]["epoch"],
                              "val Harmonic": harmonic_mean(val), "val Unified": float("nan"),
                              "loss": sum(per[s][e]["loss"] for s in per) / len(per)})
        else:
            for point in r["curves"]:
                lines.append({"unit": unit, "lr": lr, "epoch": point["epoch"],
                              "val Harmonic": point["val"]["Harmonic"], "val Unified": point["val"]["Unified"],
                              "loss": point["loss"]})
    return pd.DataFrame(lines)


def convergence(curves: pd.DataFrame, metric: str = "val Harmonic", tail: int = 5, rising: float = 1.0) -> pd.DataFrame:
    """Per unit and rate: the metric at the last epoch, its gain over the last ``tail`` epochs, the epoch of its best
    value, and ``still rising`` when that gain exceeds ``rising`` points (a run that more epochs would likely help)."""
    out = []
    for (unit, lr), g in curves.groupby(["unit", "lr"], sort=False):
        g = g.sort_values("epoch")
        y = g[metric].to_numpy()
        gain = float(y[-1] - y[-1 - tail]) if len(y) > tail else float("nan")
        out.append({"unit": unit, "lr": lr, f"last {metric}": round(float(y[-1]), 2),
                    f"gain over the last {tail} epochs": round(gain, 2),
                    "best epoch": int(g["epoch"].iloc[int(y.argmax())]), "still rising": bool(gain > rising)})
    return pd.DataFrame(out)


def budget_curves(measured: pd.DataFrame) -> pd.DataFrame:
    """Test R@1 of the longest budget's runs at every evaluated epoch (15, 30, 45): one line per method, epoch and
    dataset with the seed mean (``measured``), standard deviation (``spread``) and seed count."""
    longest = f"epochs={BUDGET_EPOCHS[-1]}"
    lines = []
    for r in measured[measured["setting"] == longest].drop_duplicates("record").itertuples():
        for point in (p for p in stored_record(r.record)["result"]["curves"] if "test" in p):
            for ds in ("Unified", "Harmonic"):
                lines.append({"method": r.row.rsplit(",", 1)[0], "seed": r.seed, "epoch": point["epoch"],
                              "dataset": ds, "R@1": point["test"][ds]})
    if not lines:
        return pd.DataFrame(columns=["method", "epoch", "dataset", "measured", "spread", "seeds"])
    g = pd.DataFrame(lines).groupby(["method", "epoch", "dataset"], sort=False)["R@1"]
    return pd.concat([g.mean().rename("measured"), g.std(ddof=1).fillna(0.0).rename("spread"),
                      g.size().rename("seeds")], axis=1).reset_index()


def budget_claim(epochs: int, dataset: str) -> tuple[str, str]:
    """(table, claim text) of "PUMA beats unified full fine-tuning" at a budget: the tables' 15 epochs are Table 2's
    claim (the same runs, counted once on the board); a longer budget is the Budget table's."""
    if epochs == BUDGET_EPOCHS[0]:
        return "Table 2", f"PUMA beats unified full fine-tuning ({dataset})"
    return "Budget", f"PUMA beats unified full fine-tuning after {epochs} epochs ({dataset})"


def budget_facts(cmp: pd.DataFrame, board: pd.DataFrame) -> dict[str, str]:
    """The longer-budget section's numbers (glued): each method's Unified / Harmonic at every budget, the gap and the
    verdict of "PUMA beats unified full fine-tuning" per budget and dataset (``board``: PUMA's claims with their
    tables, :func:`umlkit.experiments.views.scoreboard.family_board`)."""
    from umlkit.experiments.views.prose import cell, fmt, verdict
    todo = "not measured yet"   # a row whose records are under way (e.g. a re-chosen rate's new keys)
    f: dict[str, str] = {}
    for e in BUDGET_EPOCHS:
        for name, tag in (("Ours", "puma"), ("CurricularFace", "ft")):
            row = row_of(BUDGET(), method=name, setting=f"epochs={e}").title
            there = ((cmp["row"] == row) & cmp["measured"].notna()).any()
            f[f"bud_{tag}_{e}"] = " / ".join(fmt(cell(cmp, row, d), spread=cell(cmp, row, d, field="spread"))
                                             for d in ("Unified", "Harmonic")) if there else todo
        for d in ("Unified", "Harmonic"):
            table, text = budget_claim(e, d)
            claims = board[board["table"] == table]
            f[f"bud_v_{e}_{d[:3].lower()}"] = verdict(claims, text)
            gap = claims.set_index("claim")["gap"].get(text, np.nan)
            f[f"bud_gap_{e}_{d[:3].lower()}"] = signed(float(gap)) if np.isfinite(gap) else todo
    return f


def cross_source_view(measured: pd.DataFrame) -> pd.DataFrame:
    """For every row of a unified table whose records carry it: the % of queries whose nearest neighbour in the
    union of galleries comes from another source (per source and over all queries; seed means). Sections are
    shortened to their letter ("(a)", ...)."""
    out = []
    for r in measured.drop_duplicates("record").itertuples():
        res = stored_record(r.record)["result"]
        if "cross_source" in res:
            out.append({"section": r.section.split(" ")[0], "row": r.row, "seed": r.seed, **res["cross_source"]})
    if not out:
        return pd.DataFrame()
    frame = pd.DataFrame(out).groupby(["section", "row"], sort=False).mean(numeric_only=True)
    return frame.drop(columns="seed").round(1)


def cross_source_facts(view: pd.DataFrame) -> dict[str, str]:
    """The cross-source numbers of the discussion (glued): the Unified rate of the frozen backbone, the (a) ensemble
    and unified full fine-tuning (CurricularFace) and PUMA."""
    uni = view["Unified"].droplevel("section")
    return {"xs_zs": f"{uni['Zero-Shot']:.1f}", "xs_ft": f"{view.loc[('(b)', 'CurricularFace'), 'Unified']:.1f}",
            "xs_ens": f"{view.loc[('(a)', 'CurricularFace'), 'Unified']:.1f}", "xs_puma": f"{uni['Ours']:.1f}"}


_DIRECTION = {"reproduced": 1, "holds": 1, "smaller than the paper's": 1,   # a gain shown (below the paper's)
              "inconclusive": 0, "no effect": 0, "no effect (paper's gap inside the margin)": 0,
              "paper's gap excluded, no gain shown": 0, "contradicted": -1, "not reproduced": -1}


def verdict_changes(profile: str = "quick") -> pd.DataFrame:
    """Every claim of Tables 2-5 under the first pass (shipped v1 backbone, one rate, mostly one seed) and the
    second (v2 backbone, one tuning protocol, three seeds per compared cell), from the stored records only: the
    measured gap and verdict of each, and whether the verdict's direction moved (reproduced or holds / inconclusive /
    contradicted or not reproduced). Table 5's claims are matched by backbone role: the shipped backbone (v1, then
    v2) stands in for ViT-S/16; the others keep their names."""
    out = {}
    for stage in ("first", "second"):
        backbones = BACKBONES_QUICK_SECOND if stage == "second" else BACKBONES_QUICK
        for name, spec in build_tables(stage).items():
            measured = measure(spec, profile, progress=False, log=None, train=False)
            if measured.empty:
                continue
            for c in table_claims(spec, compare(measured, PAPER)).itertuples():
                text = c.claim
                if name == "Table 5":
                    group, text = c.claim.rsplit(": ", 1)
                    text = f"{'shipped backbone' if backbones[group]['paper'] else group}: {text}"
                out.setdefault((name, text), {"table": name, "claim": text})
                out[(name, text)].update({f"{stage} gap": getattr(c, "gap", np.nan),   # no records: no gap yet
                                          f"{stage} seeds": getattr(c, "seeds", pd.NA), stage: c.verdict})
    frame = pd.DataFrame(list(out.values()))
    for stage in ("first", "second"):   # counts stay integers where a claim has no value in one pass
        if f"{stage} seeds" in frame:
            frame[f"{stage} seeds"] = frame[f"{stage} seeds"].astype("Int64")
    frame["moved"] = [verdict_moved(a, b) for a, b in zip(frame["first"], frame["second"])]
    return frame


def verdict_moved(first, second) -> bool:
    """Whether two verdicts point different ways (supported / holds, inconclusive, contradicted / not reproduced);
    False when either is missing."""
    a, b = (_DIRECTION.get(str(v).split(",")[0]) if isinstance(v, str) else None for v in (first, second))
    return a is not None and b is not None and a != b


def convergence_facts(conv: pd.DataFrame, units: Sequence[str] = ("puma", "full-curricularface")) -> dict[str, str]:
    """For each unit (at its chosen rate): its validation Harmonic gain over the last epochs and its best epoch
    (glued as ``conv_<unit>_gain`` / ``conv_<unit>_best``, the unit's dashes removed)."""
    f: dict[str, str] = {}
    for u in units:
        row = conv[conv["unit"] == u].iloc[0]
        k = u.replace("-", "")
        f[f"conv_{k}_gain"] = signed(row['gain over the last 5 epochs'])
        f[f"conv_{k}_best"] = str(int(row["best epoch"]))
    return f


def tuning_view(sweep: pd.DataFrame) -> pd.DataFrame:
    """The tuning records as a grid: one line per unit, one column per rate (validation Harmonic R@1), the chosen
    rate and whether it is interior."""
    grid = sweep.pivot_table(index="unit", columns="lr", values="val Harmonic", sort=False).round(1)
    grid = grid[sorted(grid.columns)]
    grid.columns = [f"{c:g}" for c in grid.columns]
    grid = grid.astype(object).where(grid.notna(), "")   # a rate the unit did not try: blank
    pick = sweep[sweep["chosen"]].set_index("unit")
    grid["chosen"] = [f"{pick.loc[u, 'lr']:g}" for u in grid.index]
    grid["interior"] = [bool(pick.loc[u, "interior"]) for u in grid.index]
    return grid


def tuning_facts(sweep: pd.DataFrame) -> dict[str, str]:
    """How far the second pass's tuning has come (glued): units tuned, of them interior, and the units left."""
    pick = sweep[sweep["chosen"]]
    units = list(tuning_units())
    done = [u for u in units if u in set(pick["unit"])]
    interior = [u for u in done if bool(pick.set_index("unit").loc[u, "interior"])]
    return {"tune_units": str(len(units)), "tune_done": str(len(done)), "tune_interior": str(len(interior)),
            "tune_edge": ", ".join(u for u in done if u not in interior) or "none",
            "tune_runs": str(len(sweep))}


def figure3_weights(profile: str = "quick", seed: int = 0, rerun: bool = False, log=print,
                    overrides: Sequence[str] = (), stage: str | None = None, train: bool = True) -> pd.DataFrame:
    """Average prompt-pool weight per source (rows) and prompt (columns) of the PUMA run of Table 3 (in the
    profile's current stage, or ``stage``); empty when reading only and its record is not stored."""
    row = row_of(TABLE3, setting="prompt=Cond.;adapter=Stoc.")
    rec = _record(TABLE3.slug, f"{row.label}-seed{seed}", config_for(row, seed, profile, overrides, stage=stage),
                  row.runner, profile, rerun, log, train)
    if rec is None:
        return pd.DataFrame()
    df = pd.DataFrame(rec["result"]["prompt_weights"]).T
    df.columns = [f"prompt {i}" for i in range(df.shape[1])]
    return df.loc[[d for d in SOURCE_NAMES.values() if d in df.index]]


FIGURE3_PAIRS = (("CUB", "NABirds"), ("CUB", "InShop"), ("CUB", "Cars"), ("CUB", "Flowers"), ("SOP", "InShop"))


def figure3_pairs(weights: dict[int, pd.DataFrame], pairs=FIGURE3_PAIRS) -> pd.DataFrame:
    """Per seed (rows), the correlation of two sources' prompt-weight profiles (columns "CUB–NABirds", ...): how
    alike the prompts two sources draw on are, the quantity behind the paper's reading of Figure 3."""
    rows = {}
    for seed, w in weights.items():
        corr = w.T.corr()
        rows[seed] = {f"{a}–{b}": float(corr.loc[a, b]) for a, b in pairs}
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "seed"
    return out


def figure3_observation(pairs: pd.DataFrame) -> dict:
    """The paper's observation "CUB's prompts are closer to NABirds' than to In-shop's", tested over the seeds with
    the book's rule (:func:`umlkit.experiments.tables.table.claim_test`, paired: both correlations come from the same
    runs)."""
    from umlkit.experiments.tables.table import claim_test
    a, b = pairs["CUB–NABirds"].to_dict(), pairs["CUB–InShop"].to_dict()
    return claim_test(a, b, paired=True)


def cross_matrix(profile: str = "quick", loss: str = "CurricularFace", seed: int = 0,
                 overrides: Sequence[str] = (), stage: str | None = None, train: bool = True) -> pd.DataFrame:
    """Table 2 (a)'s eight specialists, each evaluated on every source (R@1): trained-on x evaluated-on (in the
    profile's current stage, or ``stage``); empty when reading only and its record is not stored."""
    row = row_of(TABLE2, section=SECTIONS["a"], method=loss)
    rec = _record(TABLE2.slug, f"{row.label}-seed{seed}", config_for(row, seed, profile, overrides, stage=stage),
                  row.runner, profile, log=None, train=train)
    if rec is None:
        return pd.DataFrame()
    order = [d for d in SOURCE_NAMES.values() if d in rec["result"]["cross"]]
    return pd.DataFrame(rec["result"]["cross"]).T.loc[order, order]


def trainable_breakdown(profile: str = "quick", method: str = "puma", options: dict | None = None,
                        num_classes: int | None = None) -> pd.DataFrame:
    """Trainable parameters of a PUMA-profile model by part (adapters, prompt pool, head, ...), built without
    pretrained weights."""
    from umlkit.train.engine import build_model
    cfg = run_config(profile, method=method, options=options)
    model = build_model(cfg, num_classes=num_classes, load_weights=False)
    parts = {}
    for name, p in model.named_parameters():
        if p.requires_grad:
            part = next((k for k in ("adapters", "prompt_pool", "head", "lora", "adaptformer", "shallow", "deep")
                         if k in name), "backbone")
            parts[part] = parts.get(part, 0) + p.numel()
    out = pd.DataFrame({"trainable parameters": parts})
    out.loc["total"] = out.sum()
    return out


def train_sizes(profile: str = "quick", root: str | None = None) -> pd.Series:
    """Training images per source: quick, UML-Mini's (counted); full, the real datasets' (the paper's Table 1, as
    printed, which :func:`source_bias` also uses for the paper's own numbers)."""
    if profile == "quick":
        from umlkit.data import load_dataset
        base = root or ensure_mini()
        return pd.Series({SOURCE_NAMES[n]: len(load_dataset(n, base, "train", expected=None, check_files=False))
                          for n in PUMA_ORDER}, name="train images")
    t1 = paper_table(PAPER, "Table 1")
    t1 = t1[t1["setting"] == "split=train;unit=samples"].set_index("dataset")["value"]
    return pd.Series({d: float(t1[d]) for d in SOURCE_NAMES.values()}, name="train images")


def source_bias(cmp: pd.DataFrame, sizes: pd.Series, loss: str = "CurricularFace") -> pd.DataFrame:
    """The paper's "bias toward dominant sources" (Sec. 1, Sec. 3), per source: its training images beside what one
    unified model changes against the dataset-specific model of (a) (unified full fine-tuning, section (b), and
    PUMA, section (c)), measured (``sizes``: the profile's training images) and in the paper (its Table 1 sizes). The
    paper predicts that full fine-tuning's change grows with the source's size and PUMA's does not
    (:func:`size_correlation`)."""
    from umlkit.experiments.views.prose import cell
    paper_sizes = train_sizes("full")
    rows = []
    for d in SOURCE_NAMES.values():
        line = {"source": d, "train images (measured)": int(sizes[d]), "train images (paper)": int(paper_sizes[d])}
        for tag in ("measured", "paper"):
            spec = cell(cmp, loss, d, section="(a)", field=tag)
            line[f"full FT unified - specific ({tag})"] = cell(cmp, loss, d, section="(b)", field=tag) - spec
            line[f"PUMA - specific ({tag})"] = cell(cmp, "Ours", d, section="(c)", field=tag) - spec
        rows.append(line)
    return pd.DataFrame(rows).set_index("source")


def size_correlation(bias: pd.DataFrame, permutations: int = 20000, seed: int = 0) -> pd.DataFrame:
    """Spearman's rho between a source's size and each change column of :func:`source_bias` (measured changes
    against the profile's sizes, the paper's against its Table 1), with a one-sided permutation p-value: the share of
    random orderings of the changes (``permutations`` draws) whose rho is at least the observed one."""
    import numpy as np
    from scipy.stats import rankdata, spearmanr
    rng = np.random.default_rng(seed)
    out = []
    for col in [c for c in bias.columns if not c.startswith("train images")]:
        tag = "paper" if col.endswith("(paper)") else "measured"
        size, y = bias[f"train images ({tag})"].to_numpy(), bias[col].to_numpy()
        if np.isnan(y).any() or np.ptp(y) == 0:   # a constant change has no rank correlation
            continue
        rho = float(spearmanr(size, y).statistic)
        # Spearman's rho is Pearson's r of the ranks: permute the change's ranks, all draws at once
        rs, ry = rankdata(size), rankdata(y)
        perm = rng.permuted(np.tile(ry, (permutations, 1)), axis=1)
        rs_c, perm_c = rs - rs.mean(), perm - perm.mean(axis=1, keepdims=True)
        r = perm_c @ rs_c / (np.linalg.norm(perm_c, axis=1) * np.linalg.norm(rs_c))
        out.append({"change": col, "Spearman rho (size, change)": round(rho, 3),
                    "p (rho >= observed, permutation)": float((r >= rho - 1e-12).mean())})
    return pd.DataFrame(out).set_index("change")


def source_bias_facts(corr: pd.DataFrame) -> dict[str, str]:
    """The numbers the source-size discussion states: Spearman's rho and its permutation p per change column."""
    f = {}
    for change, line in corr.iterrows():
        who = "ft" if change.startswith("full FT") else "puma"
        tag = "paper" if change.endswith("(paper)") else "meas"
        f[f"bias_{who}_{tag}_rho"] = signed(line['Spearman rho (size, change)'], 2)
        f[f"bias_{who}_{tag}_p"] = f"{line['p (rho >= observed, permutation)']:.2f}"
    return f


def paper_harmonic_check(table: str = "Table 2") -> pd.DataFrame:
    """The paper's printed Harmonic beside the harmonic mean of the row's 8 printed R@1 values."""
    p = paper_table(PAPER, table)
    p = p[p["metric"] == "R@1"].fillna({"section": "", "method": "", "setting": ""})
    rows = []
    for (sec, method, setting), g in p.groupby(["section", "method", "setting"], sort=False):
        vals = g.set_index("dataset")["value"]
        if "Harmonic" not in vals or not all(d in vals for d in SOURCE_NAMES.values()):
            continue
        computed = harmonic_mean([vals[d] for d in SOURCE_NAMES.values()])
        rows.append({"section": sec, "method": method or setting, "printed Harmonic": vals["Harmonic"],
                     "harmonic mean of the row": round(computed, 1),
                     "difference": round(vals["Harmonic"] - computed, 1)})
    out = pd.DataFrame(rows)
    out["consistent (|diff| <= 0.1)"] = out["difference"].abs() <= 0.1
    return out


def stored_record(path: str | Path) -> dict:
    """A record file (for the chapters' record listings)."""
    return load_record(path)


# ------------------------------------------------------------------------------------------------ chapter facts
def paper_table5() -> pd.DataFrame:
    """The paper's Table 5 as the page shows it: one row per (backbone, method), the backbone named by its
    architecture and pretraining data (the embedding sizes are the paper's: the backbone's own zero-shot, 128 trained),
    R@1 per dataset, so that every column fits the article at 1400 px."""
    p5 = paper_table(PAPER, "Table 5")
    parts = p5["setting"].str.extract(r"arch=([^;]+);dim=\d+;pretraining=(.+)$")
    backbone = parts[0] + " · " + parts[1].str.replace(" (Sup.)", "", regex=False).str.replace(
        " (Self-Sup.)", ", self-sup.", regex=False).str.replace(" (Language Sup.)", ", language", regex=False)
    view = p5.assign(backbone=backbone).pivot_table(index=["backbone", "method"], columns="dataset", values="value",
                                                    sort=False)
    return view[DATASET_COLUMNS].round(1)


def table2_rows(sections: Sequence[str] = ("zero-shot", "a", "b", "c"), losses: Sequence[str] | None = None,
                peft: Sequence[str] | None = None) -> list[Row]:
    """The rows a Table 2 chapter run selects: ``losses`` names rows of (a)/(b), ``peft`` rows of (c)."""
    return [r for r in TABLE2.rows if r.group in sections
            and (r.group not in ("a", "b") or losses is None or r.method in losses)
            and (r.group != "c" or peft is None or r.method in peft)]


def table2_facts(cmp: pd.DataFrame, claims: pd.DataFrame) -> dict[str, str]:
    """Every number the Table 2 discussion states (glued into the text)."""
    from scipy.stats import spearmanr

    from umlkit.experiments.views.prose import cell, fmt, verdict

    def v(row, ds, sec=None, field="measured"):
        return cell(cmp, row, ds, section=sec, field=field)

    f: dict[str, str] = {}
    f["zs_uni"], f["zs_har"] = fmt(v("Zero-Shot", "Unified")), fmt(v("Zero-Shot", "Harmonic"))
    for key, row, sec in (("cf_b", "CurricularFace", "(b)"), ("cf_a", "CurricularFace", "(a)")):
        f[f"{key}_uni"], f[f"{key}_har"] = fmt(v(row, "Unified", sec)), fmt(v(row, "Harmonic", sec))
    f["cf_a_har_paper"] = fmt(v("CurricularFace", "Harmonic", "(a)", "paper"))
    f["cf_b_har_paper"] = fmt(v("CurricularFace", "Harmonic", "(b)", "paper"))
    wins = [n for n in LOSSES if v(n, "Unified", "(b)") > v(n, "Unified", "(a)")]
    f["n_unified_wins"], f["n_losses"] = str(len(wins)), str(len(LOSSES))
    f["unified_loses"] = ", ".join(n for n in LOSSES if n not in wins) or "none"
    for n in PEFT_ROWS:
        k = n.split()[0].lower().replace("-", "")
        f[f"c_{k}_uni"] = fmt(v(n, "Unified", "(c)"))
        f[f"c_{k}_har"] = fmt(v(n, "Harmonic", "(c)"), spread=v(n, "Harmonic", "(c)", "spread"))
    c = cmp[cmp["section"].str.startswith("(c)") & cmp["dataset"].isin(["Unified", "Harmonic"])
            & (cmp["metric"] == "R@1")]
    widest = c.loc[c["spread"].idxmax()]
    f["c_max_spread"], f["c_max_spread_row"] = fmt(widest["spread"]), f"{widest['row']} ({widest['dataset']})"
    f["c_seeds"] = seed_range(c["seeds"])
    b = cmp[cmp["section"].str.startswith("(b)") & (cmp["metric"] == "R@1")].set_index(["row", "dataset"])["measured"]
    har = b.xs("Harmonic", level="dataset").sort_values()
    f["b_low"] = ", ".join(f"{n} {fmt(x)}" for n, x in har.iloc[:2].items())
    f["b_low_sop"] = ", ".join(f"{n} {fmt(b[(n, 'SOP')])}" for n in har.index[:2])
    f["b_low_cub"] = ", ".join(f"{n} {fmt(b[(n, 'CUB')])}" for n in har.index[:2])
    f["b_high"] = f"{har.index[-1]} {fmt(har.iloc[-1])}"
    seeds = cmp[cmp["section"].str.startswith("(b)") & (cmp["dataset"] == "Harmonic")
                & (cmp["metric"] == "R@1")].set_index("row")["seeds"].fillna(0).astype(int)
    multi = seeds[seeds > 1]   # the (b) rows a claim compares carry the claim's seeds, the rest one
    f["b_multi"] = ", ".join(multi.index) or "none"
    f["b_multi_seeds"] = seed_range(multi) if len(multi) else "0"
    f["b_single_n"] = str(int((seeds <= 1).sum()))
    p = cmp[(cmp["dataset"] == "Harmonic") & (cmp["metric"] == "R@1")].dropna(subset=["paper"])
    f["rho"], f["rho_rows"] = f"{spearmanr(p['paper'], p['measured']).statistic:.2f}", str(len(p))
    chk = paper_harmonic_check("Table 2")
    bad = chk[~chk["consistent (|diff| <= 0.1)"]]
    f["paper_bad_n"] = str(len(bad))
    f["paper_bad_range"] = f"{-bad['difference'].max():.1f} to {-bad['difference'].min():.1f}"
    # by the claims' texts, never by their position in tables.yaml (a declaration moved to Table 4 once shifted them)
    for key, text in (("v_ft_zs", "fine-tuning beats zero-shot (unified full FT, CurricularFace, Unified)"),
                      ("v_uni_ens", "one unified model beats the ensemble of specialists (CurricularFace, Unified)"),
                      ("v_puma_ft_uni", "PUMA beats unified full fine-tuning (Unified)"),
                      ("v_puma_ft_har", "PUMA beats unified full fine-tuning (Harmonic)")):
        f[key] = verdict(claims, text)
    # the specialists against the unified model on Harmonic is declared once, in Table 4 (the same runs)
    f["v_spec_uni"] = _table2_verdict("CurricularFace: dataset-specific training beats unified training (Harmonic)")
    for m in ("Linear Embedding", "MLP-3 Embedding", "VPT", "LoRA", "AdaptFormer", "VPTSP-G"):
        f["v_puma_" + m.split()[0].lower().replace("-", "")] = verdict(claims, f"PUMA beats {m} (Harmonic)")
    # the abstract's headline: PUMA against every dataset-specific ensemble of (a), and the parameter ratio
    for d, tag in (("Unified", "uni"), ("Harmonic", "har")):
        head = claims[claims["claim"].isin([f"PUMA beats the dataset-specific {m} models ({d})" for m in LOSSES])]
        f[f"head_{tag}_wins"] = f"{int((head['gap'] > 0).sum())} of {len(head)}"   # the measured means' direction
        paper_wins = claims[claims["claim"].str.startswith("PUMA beats the dataset-specific")
                            & claims["claim"].str.endswith(f"({d})")]["holds in paper"]
        f[f"head_{tag}_paper"] = f"{int(paper_wins.sum())} of {len(paper_wins)}"
    pa = cell(cmp, "CurricularFace", "", "TrainableParams(M)", section="(a)")
    po = cell(cmp, "Ours", "", "TrainableParams(M)", section="(c)")
    pa_p = cell(cmp, "CurricularFace", "", "TrainableParams(M)", section="(a)", field="paper")
    po_p = cell(cmp, "Ours", "", "TrainableParams(M)", section="(c)", field="paper")
    f["head_ratio"], f["head_ratio_paper"] = f"{pa / po:.0f}", f"{pa_p / po_p:.0f}"
    return f


def ablation_facts(cmp3=None, claims3=None, cmp4=None, claims4=None, cmp5=None, claims5=None,
                   weights=None) -> dict[str, str]:
    """The numbers the discussions of Tables 3, 4, 5 and Figure 3 state (glued into the text), for the tables
    given (each discussion follows its own table, so each glues its own facts)."""
    f: dict[str, str] = {}
    if cmp3 is not None:
        f.update(_table3_facts(cmp3, claims3))
    if cmp4 is not None:
        f.update(_table4_facts(cmp4, claims4))
    if cmp5 is not None:
        f.update(_table5_facts(cmp5, claims5))
    if weights is not None:  # {seed: prompt weights}
        from umlkit.experiments.views.prose import fmt
        pairs = figure3_pairs(weights)
        for col in pairs:
            a, b = col.split("–")
            f[f"f3_{a.lower()}_{b.lower()}"] = fmt(pairs[col].mean(), 2,
                                                   pairs[col].std(ddof=1) if len(pairs) > 1 else None)
            f[f"f3_{a.lower()}_{b.lower()}_range"] = f"{pairs[col].min():.2f} to {pairs[col].max():.2f}"
        f["f3_seeds"] = str(len(pairs))
        obs = figure3_observation(pairs)
        f["f3_verdict"], f["f3_test"] = obs["verdict"], obs["test"]
    return f


def _table3_facts(cmp3, claims3) -> dict[str, str]:
    from umlkit.experiments.views.prose import cell, fmt, verdict
    f: dict[str, str] = {}
    t3 = {"sing": "prompt=Sing.;adapter=none", "cond": "prompt=Cond.;adapter=none", "stat": "prompt=none;adapter=Stat.",
          "stoc": "prompt=none;adapter=Stoc.", "singstat": "prompt=Sing.;adapter=Stat.",
          "puma": "prompt=Cond.;adapter=Stoc."}
    for k, s in t3.items():
        for ds in ("Unified", "Harmonic"):
            f[f"t3_{k}_{ds[:3].lower()}"] = fmt(cell(cmp3, s, ds), spread=cell(cmp3, s, ds, field="spread"))
        f[f"t3_{k}_params"] = f"{cell(cmp3, s, '', 'TrainableParams(M)') * 1e3:.1f}k"
    for src in ("SOP", "InShop", "Flowers"):
        f[f"t3_stat_{src}"], f[f"t3_stoc_{src}"] = fmt(cell(cmp3, t3["stat"], src)), fmt(cell(cmp3, t3["stoc"], src))
    f["t3_seeds"] = seed_range(cmp3["seeds"])
    for i, c in enumerate(claims3["claim"]):
        f[f"v3_{i}"] = verdict(claims3, c)
    return f


def _table4_facts(cmp4, claims4) -> dict[str, str]:
    from umlkit.experiments.views.prose import cell, fmt, verdict
    f: dict[str, str] = {}
    for name in ("CurricularFace", "PA", "Ours"):
        k = name.lower()
        spec, uni = cell(cmp4, f"{name} (dataset-specific)", "Harmonic"), cell(cmp4, f"{name} (unified)", "Harmonic")
        sd_spec = cell(cmp4, f"{name} (dataset-specific)", "Harmonic", field="spread")
        sd_uni = cell(cmp4, f"{name} (unified)", "Harmonic", field="spread")
        f[f"t4_{k}_spec"], f[f"t4_{k}_uni"] = fmt(spec, spread=sd_spec), fmt(uni, spread=sd_uni)
        f[f"t4_{k}_gap"] = signed(uni - spec)
        f[f"t4_{k}_paper_spec"] = fmt(cell(cmp4, f"{name} (dataset-specific)", "Harmonic", field="paper"))
        f[f"t4_{k}_paper_uni"] = fmt(cell(cmp4, f"{name} (unified)", "Harmonic", field="paper"))
    for i, c in enumerate(claims4["claim"]):
        f[f"v4_{i}"] = verdict(claims4, c)
    f["v4_headline"] = _table2_verdict("PUMA beats unified full fine-tuning (Harmonic)")   # the same runs
    f["t4_seeds"] = seed_range(cmp4["seeds"])
    return f


# Table 5's comparisons on Table 2's own backbone are Table 2's claims (the same runs, declared once)
_T2_OWN = {"puma": "PUMA beats unified full fine-tuning (Unified)",
           "zs": "fine-tuning beats zero-shot (unified full FT, CurricularFace, Unified)"}


def _table2_verdict(text: str, profile: str = "quick") -> str:
    """The Holm-adjusted verdict of Table 2's claim ``text``, from the paper's board (the ablation chapter states
    the verdicts of comparisons that Table 2 declares)."""
    from umlkit.experiments.views.prose import verdict
    from umlkit.experiments.views.scoreboard import family_board
    return verdict(family_board("puma", profile), text)


def _table5_facts(cmp5, claims5, profile: str = "quick") -> dict[str, str]:
    from umlkit.experiments.views.prose import cell, fmt, verdict
    f: dict[str, str] = {}
    for b, bb in backbones_quick(profile).items():
        k = bb["fact"]
        for name in T5_METHODS:
            row = f"{name} / {b}"
            if (cmp5["row"] == row).any():
                f[f"t5_{k}_{name[:4].lower()}"] = " / ".join(
                    fmt(cell(cmp5, row, d), spread=cell(cmp5, row, d, field="spread")) for d in ("Unified", "Harmonic"))
    for b, bb in backbones_quick(profile).items():   # v5_<fact>_<puma|zs>: the two claims of each backbone
        for tag, what in (("puma", "PUMA beats full fine-tuning (Unified)"),
                          ("zs", "full fine-tuning beats zero-shot (Unified)")):
            text = f"{b}: {what}"
            own = text not in set(claims5["claim"])
            f[f"v5_{bb['fact']}_{tag}"] = _table2_verdict(_T2_OWN[tag], profile) if own else verdict(claims5, text)
    trained = cmp5[cmp5["method"] != "Zero-Shot"]
    f["t5_seeds"] = seed_range(trained["seeds"])
    return f


# ------------------------------------------------------------------------------------------------ other runs
# the learning-rate grids of the sweep, per profile: each brackets the profile's configured rate (quick: 1e-3 for
# both; full: the paper's 3e-5 for full fine-tuning and 1e-4 for PUMA, configs/puma/*.yaml); PUMA's new modules
# train at 10x the base rate
LR_GRIDS = DECLARED["lr_grids"]



def lr_sweep(profile: str = "quick", lrs: dict[str, Sequence[float]] | None = None, seed: int = 0,
             val_fraction: float = 0.2, rerun: bool = False, progress: bool = True, log=print,
             overrides: Sequence[str] = (), train: bool = True) -> pd.DataFrame:
    """Learning-rate choice on a validation split: the last ``val_fraction`` of each source's *training* classes
    are held out, the rest trains. Returns validation (and, for reference, test) Unified/Harmonic R@1 per
    (method, lr); without ``train``, the stored runs only (empty when none is). The test columns are shown, never
    used for the choice."""
    lrs = lrs or LR_GRIDS[profile]
    jobs = [(m, lr) for m, values in lrs.items() for lr in values]
    if progress:
        from umlkit._progress import tqdm
        jobs = tqdm(jobs, desc="lr sweep", unit="run")
    rows = []
    for method, lr in jobs:
        cfg = run_config(profile, method=method, seed=seed, lr=lr,
                         overrides=[f"data.val_fraction={val_fraction}", *overrides])
        rec = _record("lr_sweep", f"{method}-lr{lr:g}-seed{seed}", cfg, "train", profile, rerun, log, train)
        if rec is None:
            continue
        r = rec["result"]
        rows.append({"method": method, "lr": lr, "val Unified": r["val"]["Unified"],
                     "val Harmonic": r["val"]["Harmonic"], "test Unified": r["test"]["Unified"],
                     "test Harmonic": r["test"]["Harmonic"], "seconds": rec["seconds"]})
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    best = out.loc[out.groupby("method")["val Unified"].idxmax()]
    out["chosen (val Unified)"] = out.index.isin(best.index)
    metrics = ["val Unified", "val Harmonic", "test Unified", "test Harmonic"]
    return out.round({**dict.fromkeys(metrics, 2), "seconds": 0})   # chosen on the unrounded values above



def tuning_frame(profile: str = "quick", train: bool = False) -> pd.DataFrame:
    """The second pass's tuning records: per unit and rate, the validation Harmonic (and, for models trained on the
    union, Unified) R@1; ``chosen`` marks each unit's best by ``select_on`` and ``interior`` whether it lies strictly
    inside the rates tried. Missing records are skipped unless ``train``."""
    return _selection_frame(sweep_jobs(profile), profile, train)



def _selection_frame(jobs, profile: str, train: bool) -> pd.DataFrame:
    select = second_pass()["tuning"]["select_on"]
    lines = []
    for table, label, key, runner in jobs:
        rec = cached_record(PAPER, table, label, key, runner, profile, log=None) if train else read_stored(key, profile)
        if rec is None:
            continue
        r = rec["result"]
        val = r["val_own"] if runner == "specialists" else {d: r["val"][d] for d in SOURCE_NAMES.values()}
        lines.append({"unit": label.rsplit("-lr", 1)[0],
                      "lr": next(iter(key.values()))["optimizer"]["lr"] if runner == "specialists"
                      else key["optimizer"]["lr"],
                      "val Harmonic": round(harmonic_mean(list(val.values())), 3),
                      "val Unified": r["val"]["Unified"] if runner != "specialists" else float("nan"),
                      "seconds": rec["seconds"]})
    out = pd.DataFrame(lines)
    return out if out.empty else mark_choice(out, "unit", f"val {select}")



def few_shot_tuning(profile: str = "quick", train: bool = False) -> pd.DataFrame:
    """Validation Harmonic / Unified R@1 of the few-shot tuning runs, the chosen rate per method and whether it is
    interior (the tables' selection rule, :func:`tuning_frame`)."""
    return _selection_frame(few_shot_tuning_jobs(profile), profile, train)
