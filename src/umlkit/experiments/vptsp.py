"""VPTSP (Ren et al., "Towards parameter-efficient metric learning: visual prompt tuning with semantic proxies",
ICLR 2024): configurations, the tuning protocol, tables and claims as data for the book's chapter.

* **Runs** (:func:`run_config`): one source at a time, as the paper (Sec. 4.1) and the official ``main.py`` train.
  ``configs/vptsp/vptsp.yaml`` holds the shared recipe (class-random batches of 64 with 2 images per class, AdamW,
  cosine schedule; official ``config/cars_small.yaml``), ``configs/vptsp/methods.yaml`` each row's method, options
  and loss. Baselines train Proxy-Anchor with learnable proxies (the paper's "(PA)"), VPTSP rows Proxy-Anchor over
  their semantic proxies (official ``criteria/dml_proxy_peft.py``: both terms averaged over all classes). Learnable
  proxies train at ``lr_mult.loss`` / ``lr_mult.proxy`` times the row's rate: the official second optimizer at
  ``lr_proxy`` for ``proxies_bias``. Quick: the tiny ViT v2 frozen on the large UML-Mini's default splits (the
  classes ooDML and the language-guidance chapter use), so the three chapters share their world.
* **Tuning** (:func:`sweep_jobs`, :func:`lr_sweep`): the paper searched "a pair of proper lr and lr for proxy" per
  method (Table 9) on the test data's benchmark; here every row's learning rate is chosen by validation MAP@R on the
  last ``val_fraction`` of the CUB-like training classes, over a grid extended until the best value is interior;
  the proxy multiple is fixed at the official CUB and Cars configs' ratio (20) for every row.
* **Tables**: 1 (every parameter-efficient method on CUB), 4 (components on CUB and Cars), 5 (proxy source) and 7
  (accumulators), with the paper's claims. All runs are ``train_analysis`` records (R@1 and MAP@R of the last
  epoch; the official code prints the best epoch on the test set, which the book never selects on).
"""
from __future__ import annotations

import copy
import json
from functools import lru_cache
from pathlib import Path

import pandas as pd
import yaml

from umlkit.experiments import oodml
from umlkit.experiments.runners import SOURCE_NAMES
from umlkit.experiments.tables import Claim, Row, Table, lr_sweep_frame

__all__ = ["PAPER", "SOURCES", "SEEDS", "methods_config", "run_config", "chosen_lr", "sweep_jobs", "lr_sweep",
           "TABLES", "table_jobs", "job_list", "chapter_facts"]

PAPER = "vptsp"
SOURCES = ("cub", "cars")   # the sources of the tables built so far (Tables 1, 4, 5, 7); Table 2 adds SOP and In-shop
SEEDS = (0, 1, 2)
METRICS = ["R@1", "MAP@R"]


def _config_dir() -> Path:
    from umlkit._paths import repo_folder
    return repo_folder("configs", "vptsp", what="the VPTSP experiments")


@lru_cache(maxsize=1)
def methods_config() -> dict:
    """``configs/vptsp/methods.yaml``, parsed once per process."""
    from umlkit.train.config import _coerce
    return _coerce(yaml.safe_load((_config_dir() / "methods.yaml").read_text()))


@lru_cache(maxsize=4)
def _base_config(profile: str) -> dict:
    from umlkit.train.config import load_config
    return load_config(_config_dir() / "vptsp.yaml", profile)


def _row_block(row: str) -> dict:
    rows = methods_config()["rows"]
    if row not in rows:
        raise KeyError(f"unknown VPTSP row {row!r}; configs/vptsp/methods.yaml has {list(rows)}")
    return rows[row]


def chosen_lr(row: str, profile: str) -> float:
    lrs = methods_config()["lr"].get(profile) or {}
    if row in lrs:
        return float(lrs[row])
    if "default" in lrs:
        return float(lrs["default"])
    raise KeyError(f"configs/vptsp/methods.yaml has no {profile} learning rate for {row!r} (run the lr sweep: "
                   "umlkit records train vptsp lr_sweep)")


def _classes(source: str, profile: str, validation: bool) -> dict | None:
    """Quick: the source's default train/test classes (ooDML's default split, as the language-guidance chapter);
    with ``validation`` the first (1 - val_fraction) training classes train and the rest are the test set. Full:
    None (the dataset's own split, the paper's; validation then holds classes out with ``data.val_fraction``)."""
    if profile != "quick":
        return None
    s = oodml.split_of(source, oodml.default_split_id(source, profile), profile)
    train, test = list(s["train"]), list(s["test"])
    if validation:
        n_val = max(2, int(round(len(train) * float(methods_config()["val_fraction"]))))
        train, test = train[:-n_val], train[-n_val:]
    return {"train": train, "test": test}


def run_config(profile: str = "quick", *, row: str = "VPTSP-G (B)", source: str = "cub", seed: int = 0,
               lr: float | None = None, validation: bool = False, options: dict | None = None,
               overrides=()) -> dict:
    """The resolved ``fit`` configuration of one run: ``vptsp.yaml`` (profile block) <- the row's method, loss and
    options <- ``options`` (a table's variation, e.g. another accumulator) <- the source's alpha and epochs <- the
    classes. ``lr`` defaults to the row's chosen rate."""
    from umlkit.train.config import resolve_config
    block, mc = _row_block(row), methods_config()
    if source not in mc["sources"]:
        raise KeyError(f"no VPTSP settings for source {source!r}; configs/vptsp/methods.yaml has {list(mc['sources'])}")
    src = mc["sources"][source]
    cfg = copy.deepcopy(_base_config(profile))
    cfg["data"]["datasets"] = [source]
    cfg["data"]["splits"] = {}
    opts = {**((block.get("options") or {}).get("all") or {}), **((block.get("options") or {}).get(profile) or {}),
            **(options or {})}
    if block["method"] == "vptsp":
        opts.setdefault("proxy_bias_ratio", float(src["alpha"]))
    cfg["model"]["method"] = block["method"]
    cfg["model"]["options"] = opts
    cfg["objective"] = [{"name": block["loss"], "weight": 1.0, "options": {}}]
    cfg["optimizer"]["lr"] = float(lr) if lr is not None else chosen_lr(row, profile)
    cfg["train"]["epochs"] = int(src["epochs"][profile])
    cfg["train"]["eval_every"] = cfg["train"]["epochs"]
    cfg["train"]["progress"] = False
    cfg["seed"] = int(seed)
    cfg["name"] = f"vptsp-{source}-{row}"
    if validation and profile != "quick":
        cfg["data"]["val_fraction"] = float(mc["val_fraction"])
    out = resolve_config(cfg, overrides=list(overrides))
    classes = _classes(source, profile, validation)
    if classes is not None:
        out["data"]["splits"] = {source: classes}
    return out


def _key(cfg: dict) -> dict:
    return {"config": cfg, "analysis": {"metrics": METRICS}}


# ------------------------------------------------------------------------------------------------ tuning
def sweep_jobs(profile: str = "quick", rows=None, seed: int = 0) -> list[tuple[str, str, dict]]:
    """(record folder, label, key) of every validation run: each row x each rate of its grid (the row's
    ``lr_grid`` in methods.yaml, else the shared one), on the CUB-like validation split."""
    mc = methods_config()
    jobs = []
    for row in rows or mc["rows"]:
        grid = _row_block(row).get("lr_grid") or mc["lr_grid"]
        jobs += [("lr_sweep", f"{row}-lr{float(lr):g}-seed{seed}",
                  _key(run_config(profile, row=row, source="cub", seed=seed, lr=float(lr), validation=True)))
                 for lr in grid]
    return jobs


def lr_sweep(profile: str = "quick", train: bool = False, select_on: str = "MAP@R") -> pd.DataFrame:
    """Per row and learning rate, the validation R@1 and MAP@R; ``chosen`` marks each row's best by ``select_on``
    and ``interior`` says whether it lies inside the grid."""
    return lr_sweep_frame(PAPER, sweep_jobs(profile), profile, train, name="row", metrics=METRICS,
                          select_on=select_on)


# ------------------------------------------------------------------------------------------------ tables
def config_for(row: Row, seed: int, profile: str = "quick", overrides=()) -> dict:
    """The record key of a table row (``spec``: the methods.yaml row, the source, options on top)."""
    sp = row.spec
    return _key(run_config(profile, row=sp["row"], source=sp["source"], seed=seed, options=dict(sp.get("options", {})),
                           overrides=overrides))


def _scores(result: dict, row: Row) -> dict:
    name = SOURCE_NAMES[row.spec["source"]]
    return {(name, m): v[name] for m, v in result["test"].items() if m in METRICS}


@lru_cache(maxsize=None)
def _paper_setting(table: str, method: str) -> str:
    """The paper's setting cell of a row (Table 1 spells the modules' sizes there, e.g. "L=12;N=10")."""
    from umlkit.paper import paper_table
    p = paper_table(PAPER, table)
    settings = p.loc[p["method"] == method, "setting"].fillna("").unique()
    return str(settings[0]) if len(settings) == 1 else ""


def _rows(table: str, names: dict[str, tuple[str, dict]], sources=("cub",)) -> list[Row]:
    """Rows of a table: paper method name -> (methods.yaml row, options), one Row per source."""
    return [Row(method=paper_name, setting=_paper_setting(table, paper_name),
                spec={"row": base, "source": s, "options": opts}, runner="train_analysis", label=f"{s}-{paper_name}")
            for paper_name, (base, opts) in names.items() for s in sources]


def _cell(method: str, dataset: str = "CUB", metric: str = "R@1", table: str = "Table 1") -> dict:
    return {"section": "", "method": method, "setting": _paper_setting(table, method), "dataset": dataset,
            "metric": metric}


# Table 1's rows are methods.yaml's rows; "Memory(GB)" is a GPU measurement (Table 10's benchmark in the full profile)
TABLE1 = {r: (r, {}) for r in ("Full Fine-tuning (PA)", "Linear Prob", "BitFit", "Adapter", "Adapter (B)", "VPT",
                               "VPT (B)", "VPTSP-M", "VPTSP-M (B)", "VPTSP-G", "VPTSP-G (B)")}
TABLE4 = {"Full Fine-tuning (PA)": ("Full Fine-tuning (PA)", {}), "VPT+Bias (Baseline)": ("VPT (B)", {}),
          "VPTSP (EMA)": ("VPTSP-M", {}), "VPTSP (EMA) + Bias": ("VPTSP-M (B)", {}),
          "VPTSP (GRU)": ("VPTSP-G", {}), "VPTSP (GRU) + Bias": ("VPTSP-G (B)", {})}
TABLE5 = {"Sample": ("VPTSP-G (B)", {"proxy_source": "sample"}),
          "Encoder": ("VPTSP-G (B)", {"proxy_source": "encoder"}),
          "Fixed Encoder": ("VPTSP-G (B)", {"proxy_source": "fixed_encoder"}),
          "VPTSP-G": ("VPTSP-G (B)", {})}
TABLE7 = {"LSTM": ("VPTSP-G (B)", {"accumulator": "lstm"}), "RNN Unit": ("VPTSP-G (B)", {"accumulator": "rnn"}),
          "Cross Attention": ("VPTSP-G (B)", {"accumulator": "cross_attention"}),
          "GRU with Tanh": ("VPTSP-G (B)", {"accumulator": "gru"}),
          "GRU with Relu": ("VPTSP-G (B)", {})}
_PLAIN = ("Full Fine-tuning (PA)", "Linear Prob", "BitFit", "Adapter", "Adapter (B)", "VPT", "VPT (B)")


def _beats(a: str, b: str, dataset: str = "CUB", metric: str = "R@1", what: str = "", table: str = "Table 1") -> Claim:
    return Claim(f"{a} beats {b}{what} ({dataset}, {metric})", _cell(a, dataset, metric, table),
                 _cell(b, dataset, metric, table), metric=metric)


def table1(profile: str = "quick") -> Table:
    claims = [_beats("VPT (B)", m) for m in _PLAIN if m != "VPT (B)"]          # the strongest plain baseline
    claims += [_beats(f"{m} (B)", m, what=" (BitFit helps)") for m in ("Adapter", "VPT", "VPTSP-M", "VPTSP-G")]
    claims += [_beats("VPTSP-G (B)", "VPT (B)", metric=m, what=" (semantic proxies)") for m in METRICS]
    claims += [_beats("VPTSP-G (B)", "Linear Prob")]
    return Table(PAPER, "Table 1", _rows("Table 1", TABLE1), config_for, seeds=SEEDS, scores=_scores, claims=claims,
                 unmeasured={"quick": {"*": "full-profile only: GPU memory (the quick profile trains on the CPU)"}},
                 params=True)


def table4(profile: str = "quick") -> Table:
    claims = []
    for d in ("CUB", "Cars"):
        claims += [_beats("VPTSP (GRU) + Bias", "VPT+Bias (Baseline)", d, m, " (semantic proxies)", "Table 4")
                   for m in METRICS]
        claims += [_beats("VPTSP (GRU)", "VPTSP (EMA)", d, what=" (GRU beats EMA)", table="Table 4"),
                   _beats("VPTSP (GRU) + Bias", "VPTSP (EMA) + Bias", d, what=" (GRU beats EMA)", table="Table 4")]
    return Table(PAPER, "Table 4", _rows("Table 4", TABLE4, SOURCES), config_for, seeds=SEEDS, scores=_scores,
                 claims=claims, params=False)


def table5(profile: str = "quick") -> Table:
    claims = [_beats("VPTSP-G", m, d, what=" (class prompts are needed)", table="Table 5")
              for d in ("CUB", "Cars") for m in ("Sample", "Encoder", "Fixed Encoder")]
    return Table(PAPER, "Table 5", _rows("Table 5", TABLE5, SOURCES), config_for, seeds=SEEDS, scores=_scores,
                 claims=claims, params=False)


def table7(profile: str = "quick") -> Table:
    claims = [_beats("GRU with Relu", m, table="Table 7") for m in TABLE7 if m != "GRU with Relu"]
    return Table(PAPER, "Table 7", _rows("Table 7", TABLE7), config_for, seeds=SEEDS, scores=_scores, claims=claims,
                 params=False)


def TABLES(profile: str = "quick") -> dict[str, Table]:
    """The VPTSP tables built so far, by the paper's name."""
    return {"Table 1": table1(profile), "Table 4": table4(profile), "Table 5": table5(profile),
            "Table 7": table7(profile)}


def table_jobs(profile: str = "quick", seeds=SEEDS, tables=None) -> list[tuple[str, str, dict]]:
    """(record folder, label, key) of every training run of the tables, seed-major; a run two tables share (the
    same configuration) is listed once."""
    from umlkit.experiments.records import normalise_key
    jobs, seen = [], set()
    specs = TABLES(profile)
    for seed in seeds:
        for name, spec in specs.items():
            if tables is not None and name not in tables:
                continue
            for row in spec.rows:
                key = spec.config(row, seed, profile, ())
                ident = json.dumps(normalise_key(key), sort_keys=True, default=str)
                if ident in seen:
                    continue
                seen.add(ident)
                jobs.append((spec.slug, f"{row.label}-seed{seed}", key))
    return jobs


def job_list(name: str, profile: str = "quick") -> list[tuple[str, str, dict]]:
    """A named job list: ``lr_sweep`` (the tuning protocol) or ``tables`` (every run of Tables 1, 4, 5 and 7)."""
    if name == "lr_sweep":
        return sweep_jobs(profile)
    if name == "tables":
        return table_jobs(profile)
    raise KeyError(f"unknown VPTSP job list {name!r}; choose lr_sweep or tables")


# ------------------------------------------------------------------------------------------------ prose
def _value(cmp, method: str, dataset: str, metric: str = "R@1", field: str = "measured") -> float:
    """One cell of a compared table by method and dataset; NaN when it was not measured."""
    if cmp is None or cmp.empty:
        return float("nan")
    hit = cmp[(cmp["method"] == method) & (cmp["dataset"] == dataset) & (cmp["metric"] == metric)]
    return float(hit[field].iloc[0]) if len(hit) == 1 else float("nan")


def chapter_facts(cmp: dict, claims, sweep, profile: str = "quick", measured: dict | None = None) -> dict:
    """The numbers the chapter's prose glues, from the compared tables (``{table: compare frame}``), the claims and
    the learning-rate sweep; "–" where a table has no records yet."""
    from umlkit.experiments.prose import number, verdict_counts
    facts = {"val_share": f"{100 * float(methods_config()['val_fraction']):.0f} %"}
    cfg = run_config(profile, row="VPT (B)", source="cub", lr=1e-3)
    splits = cfg["data"]["splits"]
    facts["proxy_params"] = f"{len(splits['cub']['train'])} x {cfg['model']['embed_dim']}" if splits else "–"
    recs = {r for m in (measured or {}).values() if not m.empty for r in m["record"]}
    facts["n_records"] = str(len(recs))
    if sweep is not None and not sweep.empty:
        chosen = sweep[sweep["chosen"]].set_index("row")
        facts["vptsp_val"] = number(float(chosen.loc["VPTSP-G (B)", "val MAP@R"]))
        facts["vpt_val"] = number(float(chosen.loc["VPT (B)", "val MAP@R"]))
        low = sweep[(sweep["lr"] == 1e-3)].set_index("row")
        facts["vptsp_val_1e3"] = number(float(low.loc["VPTSP-G (B)", "val MAP@R"]))
        facts["vpt_val_1e3"] = number(float(low.loc["VPT (B)", "val MAP@R"]))
    t1, t4 = cmp.get("Table 1", pd.DataFrame()), cmp.get("Table 4", pd.DataFrame())
    for metric, key in (("R@1", "r1"), ("MAP@R", "mapr")):
        for field, prefix in (("measured", ""), ("paper", "paper_")):
            facts[f"{prefix}sp_gap_cub_{key}"] = number(_value(t1, "VPTSP-G (B)", "CUB", metric, field)
                                                        - _value(t1, "VPT (B)", "CUB", metric, field), signed=True)
            facts[f"{prefix}sp_gap_cars_{key}"] = number(
                _value(t4, "VPTSP (GRU) + Bias", "Cars", metric, field)
                - _value(t4, "VPT+Bias (Baseline)", "Cars", metric, field), signed=True)
    plain = t1[(t1["metric"] == "MAP@R") & t1["method"].isin(_PLAIN)] if not t1.empty else t1
    if not plain.empty:
        best = plain.loc[plain["measured"].idxmax()]
        facts["best_plain"], facts["best_plain_mapr"] = str(best["method"]), number(float(best["measured"]))
    else:
        facts["best_plain"], facts["best_plain_mapr"] = "–", "–"
    for name, d in (("cars_vptsp", "VPTSP (GRU) + Bias"), ("cars_vpt", "VPT+Bias (Baseline)"),
                    ("cars_full", "Full Fine-tuning (PA)"), ("cars_ema", "VPTSP (EMA)")):
        facts[name] = number(_value(t4, d, "Cars"))
    facts["cars_sample"] = number(_value(cmp.get("Table 5", pd.DataFrame()), "Sample", "Cars"))
    if claims is None or claims.empty:
        for k in ("baseline_verdicts", "bitfit_verdicts", "proxy_verdicts", "gru_verdicts", "source_verdicts",
                  "acc_verdicts", "all_verdicts"):
            facts[k] = "not yet checked (no records)"
        return facts
    text = claims["claim"]
    facts["baseline_verdicts"] = verdict_counts(claims, text.str.startswith("VPT (B) beats"))
    facts["bitfit_verdicts"] = verdict_counts(claims, text.str.contains("(BitFit helps)", regex=False))
    facts["proxy_verdicts"] = verdict_counts(claims, text.str.contains("(semantic proxies)", regex=False))
    facts["gru_verdicts"] = verdict_counts(claims, text.str.contains("(GRU beats EMA)", regex=False))
    facts["source_verdicts"] = verdict_counts(claims, text.str.contains("(class prompts are needed)", regex=False))
    facts["acc_verdicts"] = verdict_counts(claims, text.str.startswith("GRU with Relu beats"))
    facts["all_verdicts"] = verdict_counts(claims, text.notna())
    facts["n_claims"] = str(len(claims))
    return facts
