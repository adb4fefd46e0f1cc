"""ooDML (Milbich, Roth et al., "Characterizing generalization under out-of-distribution shifts in deep metric
learning", NeurIPS 2021): its splits, configurations, tables and analyses as data for the book's chapter.

* **Splits** (Sec. 3, official ``split_helpers.py``): classes are the mean frozen feature of a backbone without
  metric training (paper: ImageNet ResNet-50; quick: the shipped tiny ViT v2 on the large UML-Mini); swapping and
  removal (:mod:`umlkit.experiments.splits.features`) raise the class-mean FID;
  :mod:`umlkit.experiments.papers.oodml.split_making` keeps
  Table S1's layout and commits them (``configs/oodml/splits_quick.json``); the full profile reads the published
  ``datasplits/*.pkl`` instead; every chapter reads them through :mod:`umlkit.experiments.splits.committed`. The i.i.d.
  FID of Table 1 halves every class's images at random (five draws).
* **Runs**: the single-source recipe (:mod:`umlkit.experiments.recipes.source`, shared with language guidance)
  composes ``configs/oodml/{oodml,methods}.yaml`` with a split's class lists (they enter the record key); every run
  is a ``train_analysis`` record (:mod:`umlkit.experiments.runs.runners`): the
  last-epoch model's R@1, mAP@1000 and MAP@R, R@1 at a fixed class count, embedding structure, few-shot adaptation
  (Tables S7/S8 methods) and transfer to the other sources (default splits). The official pipeline keeps the
  epoch with the best *test* score; the book reports the last epoch, as it never selects on test data.
* **Tables**: S1/1/S2 (FIDs), S4-S6 (every method on every split), S7/S8 (few-shot, from the same records), S3
  (AGS from S4-S6); the learning rates come from :func:`lr_sweep` on training classes only.
* **Analyses** for the figures: trends along the FID (Fig. 2), structure (Fig. 4), generic representations
  (Fig. 6), transfer (Fig. S3), few-shot gains (Fig. 7), and the facts the discussion glues.

The split and recipe functions a chapter calls (``oodml.make_splits``, ``oodml.run_config``, ...) are re-exported
from those shared modules so the chapter's namespace keeps them.
"""
from __future__ import annotations

import sys

import pandas as pd

from umlkit.experiments.papers.oodml.split_making import (  # noqa: F401
    fid_facts,
    fid_range,
    import_published_splits,
    make_splits,
    read_published_splits,
    write_splits,
)
from umlkit.experiments.recipes.source import chosen_lr, lr_grid, methods_config, run_config, tuned_methods  # noqa: F401
from umlkit.experiments.recipes.tuning import Sweep, lr_sweep_frame
from umlkit.experiments.runs.runners import SOURCE_NAMES
from umlkit.experiments.splits.committed import default_split_id, episodes_path, load_splits, split_ids, split_of  # noqa: F401
from umlkit.experiments.tables.builder import build_tables
from umlkit.experiments.tables.declarations import load_declarations
from umlkit.experiments.tables.table import Row, Table, measure

PAPER = "oodml"
DECLARED = load_declarations(__file__)   # tables.yaml: the paper's rows, claims and reasons
REASONS = DECLARED["reasons"]
SOURCES = ("cub", "cars", "sop")


# ------------------------------------------------------------------------------------------------ runs
ANALYSIS_METRICS = DECLARED["analysis_metrics"]


def sweep_key(method: str, lr: float, profile: str = "quick", seed: int = 0, source: str = "cub") -> dict:
    """The record key of one validation run of the learning-rate sweep (the source's default split)."""
    return {"config": run_config(profile, method=method, source=source, seed=seed, lr=lr, validation=True),
            "analysis": {"metrics": ANALYSIS_METRICS}}


def sweep(source: str = "cub", methods=None, grid=None) -> Sweep:
    """The learning-rate sweep on ``source``'s validation split: each method x each rate of ``grid`` (default:
    :func:`umlkit.experiments.recipes.source.lr_grid`). Labels of sources other than CUB start with the source."""
    prefix = "" if source == "cub" else f"{source}-"
    return Sweep("lr_sweep", units=lambda profile: list(methods or methods_config()["methods"]),
                 grid=lambda m: grid or lr_grid(m, source),
                 key=lambda m, lr, profile, seed: sweep_key(m, float(lr), profile, seed, source),
                 label=prefix + "{name}-lr{value:g}-seed{seed}")


def sweep_jobs(profile: str = "quick", grid=None, methods=None, seed: int = 0,
               source: str = "cub") -> list[tuple[str, str, dict]]:
    """(record folder, label, key) of every run of :func:`sweep` on ``source``."""
    return sweep(source, methods, grid).jobs(profile, seed)


def cars_sweep_jobs(profile: str = "quick") -> list[tuple]:
    """The tuning protocol on the Cars-like source's validation split."""
    return sweep_jobs(profile, source="cars")


def sop_sweep_jobs(profile: str = "quick") -> list[tuple]:
    """The tuning protocol on the SOP-like source's validation split."""
    return sweep_jobs(profile, source="sop")


# ------------------------------------------------------------------------------------------------ tables
SEEDS = (0, 1, 2)
SHIFT_TABLES = DECLARED["shift_tables"]
FEW_SHOT_TABLES = DECLARED["few_shot_tables"]
GENERIC = DECLARED["generic"]
AGS_NAMES = DECLARED["ags_names"]  # Table S3 spells one method differently from Tables S4-S6


def _paper_settings(table: str) -> dict[int, str]:
    """Split id -> the paper's setting cell of a split table ('split=3;FID=52.6')."""
    from umlkit.experiments.tables.paper_cells import paper_table
    out = {}
    for s in paper_table(PAPER, table)["setting"].dropna().unique():
        parts = dict(p.split("=", 1) for p in s.split(";"))
        out.setdefault(int(parts["split"]), s)
    return out


def analysis_for(method: str, source: str, split: int, profile: str = "quick") -> dict:
    """What a Table S4-S8 run measures besides training: the metrics, R@1 at the fewest test classes of the source's
    splits, the embedding structure, few-shot adaptation (Table S7/S8 methods and sources) and, on the default
    split, transfer to the other sources (Table S2 / Fig. S3)."""
    mc = methods_config()
    fs = mc["few_shot"]
    splits = load_splits(profile)["sources"][source]["splits"]
    out = {"metrics": ANALYSIS_METRICS, "fixed_classes": min(len(s["test"]) for s in splits), "structure": True}
    if method in fs["methods"] and source in fs["sources"]:
        its = fs["iterations"][profile]
        out["few_shot"] = {"shots": list(fs["shots"]), "episodes": int(fs["episodes"]),
                           "iterations": {int(k): int(v) for k, v in its.items()} if isinstance(its, dict)
                           else int(its), "lr_mult": float(fs["lr_mult"])}
        if method in fs.get("beta", {}):   # the fine-tuning criterion's beta where the run's own differs from 1.2
            out["few_shot"]["beta"] = float(fs["beta"][method])
        if profile == "full" and episodes_path().is_file():   # the published support sets drive the protocol
            out["few_shot"]["published"] = {"source": source, "split": int(split)}
    if split == default_split_id(source, profile) and method in mc["methods"]:
        out["transfer"] = [s for s in SOURCES if s != source]
    return out


_KEYS: dict = {}


def config_for(row: Row, seed: int, profile: str = "quick", overrides=()) -> dict:
    """The record key of a Table S4-S8 row: ``{"config": run_config(...), "analysis": analysis_for(...)}``.

    Keys are built once per (method, source, split, seed, profile, overrides) and process: Tables S7/S8 and S3
    read the records of S4-S6 again, and the scoreboard asks for every seed up to 9. Callers must not mutate the
    returned key (the record machinery copies it before it changes anything)."""
    sp = row.spec
    ident = (sp["method"], sp["source"], sp["split"], int(seed), profile, tuple(overrides),
             id(methods_config()), id(load_splits(profile)))
    if ident not in _KEYS:
        method = "zero_shot" if sp["method"] in GENERIC else sp["method"]
        extra = GENERIC.get(sp["method"], [])
        cfg = run_config(profile, method=method, source=sp["source"], split=sp["split"], seed=seed,
                         overrides=[*extra, *overrides])
        _KEYS[ident] = {"config": cfg, "analysis": analysis_for(method, sp["source"], sp["split"], profile)}
    return _KEYS[ident]


def shift_scores(result: dict, row: Row) -> dict:
    name = SOURCE_NAMES[row.spec["source"]]
    return {(name, m): v[name] for m, v in result["test"].items()}


def few_shot_scores(result: dict, row: Row) -> dict:
    name = SOURCE_NAMES[row.spec["source"]]
    block = result["few_shot"][str(row.spec["shot"])][f"{row.spec['use'].lower()}_mean"]
    return {(name, m): v for m, v in block.items()}


def shift_rows(source: str, profile: str = "quick") -> list[Row]:
    """Rows of Table S4 (CUB), S5 (Cars) or S6 (SOP): every method on every split, plus the two representations
    without metric learning of Fig. 6 (rows the paper's tables do not have)."""
    settings = _paper_settings(SHIFT_TABLES[source])
    ids = split_ids(source, profile)
    rows = [Row(method=m, setting=settings[i], spec={"method": m, "source": source, "split": i},
                runner="train_analysis", group="methods", label=f"{source}-{m}-split{i}")
            for m in tuned_methods(profile) for i in ids]
    return rows + [Row(method=g, setting=settings[i], spec={"method": g, "source": source, "split": i},
                       runner="train_analysis", group="generic", label=f"{source}-{g.split(' ')[0].lower()}-split{i}")
                   for g in GENERIC for i in ids]


def shift_env(source: str, profile: str = "quick") -> dict:
    """What the shift claims fill in: the source's name, its default and hardest split's settings, the methods."""
    settings, ids = _paper_settings(SHIFT_TABLES[source]), split_ids(source, profile)
    return {"name": SOURCE_NAMES[source], "default": settings[default_split_id(source, profile)],
            "hardest": settings[ids[-1]], "methods": list(methods_config()["methods"])}


def shift_table(source: str, profile: str = "quick") -> Table:
    """Table S4 (CUB), S5 (Cars) or S6 (SOP) as tables.yaml declares it."""
    return build_tables(PAPER, sys.modules[__name__], DECLARED, profile, names=[SHIFT_TABLES[source]])[
        SHIFT_TABLES[source]]


def few_shot_rows(source: str, profile: str = "quick") -> list[Row]:
    """Rows of Table S7 (CUB) or S8 (Cars): zero-shot and adapted query metrics (mean over episodes) from the records
    of Table S4/S5 (the same runs: few-shot adaptation is part of their analysis)."""
    if source not in FEW_SHOT_TABLES:
        raise KeyError(f"the paper has few-shot tables for {sorted(FEW_SHOT_TABLES)} only (SOP's classes have too few "
                       f"images), not {source!r}")
    fs = methods_config()["few_shot"]
    ids = split_ids(source, profile)
    return [Row(method=m, setting=f"shot={k};use={use};split={i}",
                spec={"method": m, "source": source, "split": i, "shot": k, "use": use},
                runner="train_analysis", group=f"{k}-shot", label=f"{source}-{m}-split{i}")
            for m in fs["methods"] if m in tuned_methods(profile) for k in fs["shots"] for use in ("Zero", "Few")
            for i in ids]


def few_shot_env(source: str, profile: str = "quick") -> dict:
    fs = methods_config()["few_shot"]
    return {"name": SOURCE_NAMES[source], "last": split_ids(source, profile)[-1], "few_shot_methods": fs["methods"],
            "shots": fs["shots"]}


def split_fids(profile: str = "quick") -> dict[str, dict[str, float]]:
    """{paper source name: {paper setting: measured FID}} of every split (the x axis of Figs. 2-4)."""
    out = {}
    for src, table in SHIFT_TABLES.items():
        settings = _paper_settings(table)
        out[SOURCE_NAMES[src]] = {settings[s["id"]]: s["fid"] for s in load_splits(profile)["sources"][src]["splits"]}
    return out


def ags_frame(measured: pd.DataFrame, profile: str = "quick") -> pd.DataFrame:
    """Table S3 from the measured Tables S4-S6 (one line per method, source, metric and seed): AGS over the
    source's splits (:func:`umlkit.metrics.aggregated_generalization_score`, FIDs of this profile's splits
    min-max normalised). A (method, source, seed) without every split measured is left out."""
    from umlkit.metrics.distribution import aggregated_generalization_score
    fids = split_fids(profile)
    sub = measured[measured["metric"].isin(["R@1", "mAP@1000"])
                   & measured["row"].isin(list(methods_config()["methods"]))]
    out = []
    for (method, dataset, metric, seed), g in sub.groupby(["method", "dataset", "metric", "seed"]):
        x = fids[dataset]
        if set(g["setting"]) != set(x):
            continue
        name = AGS_NAMES.get(method, method)
        out.append({"table": "Table S3", "section": "", "method": name, "setting": "", "row": name, "seed": seed,
                    "dataset": dataset, "metric": f"AGS-{metric}", "stale": ",".join(sorted(set(g["stale"]) - {""})),
                    "value": aggregated_generalization_score([x[s] for s in g["setting"]], g["value"].to_numpy())})
    return pd.DataFrame(out)


def ags_derive(profile: str = "quick", train: bool = False) -> pd.DataFrame:
    """Table S3's measured cells from the records of Tables S4-S6 (:func:`ags_frame`)."""
    parts = [measure(shift_table(s, profile), profile, train=train, progress=False, log=None) for s in SOURCES]
    parts = [p for p in parts if not p.empty]
    return ags_frame(pd.concat(parts, ignore_index=True), profile) if parts else pd.DataFrame()


def TABLES(profile: str = "quick") -> dict[str, Table]:
    """Every ooDML table of a profile as tables.yaml declares it: the FID tables (computed with the splits), the
    shift tables S4-S6 and the few-shot tables S7-S8 (records), and Table S3 (AGS, from the records of S4-S6)."""
    return build_tables(PAPER, sys.modules[__name__], DECLARED, profile)


def table_jobs(profile: str = "quick", seeds=SEEDS) -> list[tuple[str, str, dict]]:
    """(record folder, label, key) of every training run of Tables S4-S8, seed-major (all of seed 0 first)."""
    jobs = []
    for seed in seeds:
        for src in SOURCES:
            spec = shift_table(src, profile)  # rows of tuned methods only: untuned ones wait for their sweep
            jobs += [(spec.slug, f"{row.label}-seed{seed}", config_for(row, seed, profile)) for row in spec.rows]
    return jobs


def lr_sweep(profile: str = "quick", train: bool = False, select_on: str = "MAP@R",
             source: str = "cub") -> pd.DataFrame:
    """The tuning protocol's results: per method and learning rate, the validation scores (R@1, mAP@1000, MAP@R on
    the held-out training classes of ``source``'s default split); ``chosen`` marks each method's best by
    ``select_on``, and ``interior`` says whether that best lies inside the grid (not on its edge)."""
    return lr_sweep_frame(PAPER, sweep_jobs(profile, source=source), profile, train, name="method",
                          metrics=ANALYSIS_METRICS, dataset=SOURCE_NAMES[source], select_on=select_on)


# ------------------------------------------------------------------------------------------------ FID tables
T1 = DECLARED["t1"]
_DIRECTION = DECLARED["direction"]


def _fid_row(table: str, setting: str, dataset: str, value: float, seed: int = 0, row: str | None = None) -> dict:
    return {"table": table, "section": "", "method": "", "setting": setting, "row": row or setting, "seed": seed,
            "dataset": dataset, "metric": "FID", "value": float(value), "stale": ""}


def fid_measured(table: str, profile: str = "quick") -> pd.DataFrame:
    """Table 1 (default and i.i.d. FID; the i.i.d. split drawn 5 times, as seeds), Table S1 (every split's FID) or
    Table S2 (train classes of one source against the test classes of another; the largest FID of any split) of
    this profile's splits, in the measured long format. Computed when the splits were made: no training."""
    data = load_splits(profile)
    rows = []
    if table == "Table 1":
        for src in SOURCES:
            d, name = data["sources"][src], SOURCE_NAMES[src]
            rows.append(_fid_row(table, T1["default"], name, d["default_fid"], row="default split"))
            rows += [_fid_row(table, T1["iid"], name, v, seed=i, row="i.i.d. split")
                     for i, v in enumerate(d["iid_fid"])]
    elif table == "Table S1":
        for src in SOURCES:
            rows += [_fid_row(table, f"split={s['id']}", SOURCE_NAMES[src], s["fid"], row=f"split {s['id']}")
                     for s in data["sources"][src]["splits"]]
    elif table == "Table S2":
        for pair, v in data["cross_fid"].items():
            a, b = pair.split(">")
            setting = f"direction={_DIRECTION[a]}→{_DIRECTION[b]};train={SOURCE_NAMES[a]};test={SOURCE_NAMES[b]}"
            rows.append(_fid_row(table, setting, "", v, row=f"{SOURCE_NAMES[a]} → {SOURCE_NAMES[b]}"))
        top = max(s["fid"] for d in data["sources"].values() for s in d["splits"])
        rows.append(_fid_row(table, "direction=Max. ooDML;value=parenthesised", "", top, row="largest ooDML split"))
    else:
        raise KeyError(f"{table!r} is not an FID table; choose Table 1, Table S1 or Table S2")
    return pd.DataFrame(rows)


def fid_derive(profile: str = "quick", train: bool = False, *, table: str) -> pd.DataFrame:
    """An FID table's cells (:func:`fid_measured`): nothing to train."""
    return fid_measured(table, profile)
