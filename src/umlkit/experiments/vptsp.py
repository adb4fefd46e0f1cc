"""VPTSP (Ren et al., "Towards parameter-efficient metric learning: visual prompt tuning with semantic proxies",
ICLR 2024): configurations, the tuning protocol, tables and claims as data for the book's chapter.

* **Runs** (:func:`run_config`): one source at a time, as the paper (Sec. 4.1) and the official ``main.py`` train.
  ``configs/vptsp/vptsp.yaml`` holds the shared recipe (class-random batches of 64 with 2 images per class, AdamW,
  cosine schedule; official ``config/cars_small.yaml``), ``configs/vptsp/methods.yaml`` each row's method, options
  and loss, and each source's alpha, epochs and (full profile) the official ``config/<benchmark>_small.yaml``
  recipe. Baselines train Proxy-Anchor with learnable proxies (the paper's "(PA)"), Hyp-ViT the hyperbolic loss,
  VPTSP rows Proxy-Anchor over their semantic proxies (official ``criteria/dml_proxy_peft.py``: both terms averaged
  over all classes). Learnable proxies train at ``lr_mult.loss`` / ``lr_mult.proxy`` times the row's rate: the
  official second optimizer at ``lr_proxy`` for ``proxies_bias``. Quick: the tiny ViT v2 frozen on the large
  UML-Mini's default splits (the classes ooDML and the language-guidance chapter use; In-shop-like on its own
  train / query / gallery split), so the three chapters share their world.
* **Tuning** (:func:`sweep_jobs`, :func:`lr_sweep`): the paper searched "a pair of proper lr and lr for proxy" per
  method (Table 9) on each benchmark; here every row's learning rate is chosen, per source it is reported on, by
  validation MAP@R on the last ``val_fraction`` of that source's training classes (``evaluate: val`` where the
  classes are held out by ``data.val_fraction``), over a grid extended until the best value is interior; the proxy
  multiple is fixed at the official CUB and Cars configs' ratio (20) for every row.
* **Tables**: 1 (every parameter-efficient method on CUB), 2 (four benchmarks against Hyp-ViT), 3 (iNaturalist:
  status rows), 4 (components on CUB and Cars), 5 (proxy source), 6 (the CNN comparison: quoted, and its ViT rows
  from Table 2's runs), 7 (accumulators), 8 (pretrainings), 10 (step time, read from
  ``benchmarks/bench_vptsp_step.py``'s file), Fig. 3 (one setting at a time), and two views beyond the paper: the
  Cars-like rows at the CUB-like rates (*rate transfer*) and a *diagnosis* of the semantic proxies on validation
  classes. All runs are ``train_analysis`` records (last epoch; the official code prints the best epoch on the test
  set, which the book never selects on). MAP@R is the book's (Musgrave et al.: R excludes the query); VPTSP's
  ``mAP_R`` counts the query in R, a slightly lower number.
"""
from __future__ import annotations

import copy
import json
from functools import lru_cache, partial
from pathlib import Path

import pandas as pd
import yaml

from umlkit.experiments import oodml
from umlkit.experiments.runners import SOURCE_NAMES
from umlkit.experiments.prose import method_value as _value, number, verdict_counts
from umlkit.experiments.registry import Paper
from umlkit.experiments.tuning import chosen
from umlkit.experiments.tables import Claim, Floor, Row, Table, lr_sweep_frame

__all__ = ["PAPER", "SOURCES", "SEEDS", "methods_config", "run_config", "chosen_lr", "sweep_jobs", "lr_sweep",
           "TABLES", "table_jobs", "job_list", "chapter_facts"]

PAPER = "vptsp"
SOURCES = ("cub", "cars")   # the sources of Tables 4 and 5 (Table 2: ALL_SOURCES, the diagnosis: DIAGNOSIS_SOURCES)
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


def chosen_lr(row: str, profile: str, source: str = "cub") -> float:
    """The row's learning rate on ``source``: ``lr.<profile>.<source>.<row>`` in methods.yaml (chosen by that source's
    validation sweep), else ``lr.<profile>.<source>.default``, else ``lr.<profile>.default``."""
    return chosen(methods_config()["lr"], [(profile, source, row), (profile, source, "default"), (profile, "default")],
                  file="configs/vptsp/methods.yaml", what=f"{profile} learning rate for {row!r} on {source!r}",
                  sweep=f"run the lr sweep, umlkit records train vptsp lr_sweep, and enter the chosen rate under "
                  f"lr.{profile}.{source}")


def _classes(source: str, profile: str, validation: bool) -> dict | None:
    """Quick: the source's default train/test classes (ooDML's default split, as the language-guidance chapter);
    with ``validation`` the first (1 - val_fraction) training classes train and the rest are the test set. None for
    the full profile and for a source ooDML has no split of (In-shop): the dataset's own split, whose validation
    classes ``data.val_fraction`` holds out (and the analysis evaluates, ``evaluate: val``)."""
    if profile != "quick" or source not in oodml.SOURCES:
        return None
    s = oodml.split_of(source, oodml.default_split_id(source, profile), profile)
    train, test = list(s["train"]), list(s["test"])
    if validation:
        n_val = max(2, int(round(len(train) * float(methods_config()["val_fraction"]))))
        train, test = train[:-n_val], train[-n_val:]
    return {"train": train, "test": test}


def run_config(profile: str = "quick", *, row: str = "VPTSP-G (B)", source: str = "cub", seed: int = 0,
               lr: float | None = None, validation: bool = False, options: dict | None = None,
               loss_options: dict | None = None, overrides=()) -> dict:
    """The resolved ``fit`` configuration of one run: ``vptsp.yaml`` (profile block) <- the row's method, loss and
    options <- ``options`` (a table's variation, e.g. another accumulator) and ``loss_options`` <- the source's alpha
    and epochs <- the classes. ``lr`` defaults to the row's chosen rate on the source."""
    from umlkit.train.config import resolve_config
    block, mc = _row_block(row), methods_config()
    if source not in mc["sources"]:
        raise KeyError(f"no VPTSP settings for source {source!r}; configs/vptsp/methods.yaml has {list(mc['sources'])}")
    src = mc["sources"][source]
    from umlkit.train.config import merge
    here = src.get(profile) or {}          # the source's own recipe in this profile (full: the official config)
    cfg = merge(merge(copy.deepcopy(_base_config(profile)), here.get("config") or {}),
                (block.get("config") or {}).get(profile) or {})
    cfg["data"]["datasets"] = [source]
    cfg["data"]["splits"] = {}
    opts = {**((block.get("options") or {}).get("all") or {}), **((block.get("options") or {}).get(profile) or {}),
            **(here.get("vptsp") or {} if block["method"] == "vptsp" else {}), **(options or {})}
    if block["method"] == "vptsp":
        opts.setdefault("proxy_bias_ratio", float(src["alpha"]))
    cfg["model"]["method"] = block["method"]
    cfg["model"]["options"] = opts
    cfg["objective"] = [{"name": block["loss"], "weight": 1.0, "options": dict(loss_options or {})}]
    cfg["optimizer"]["lr"] = float(lr) if lr is not None else chosen_lr(row, profile, source)
    cfg["train"]["epochs"] = int(src["epochs"][profile])
    cfg["train"]["eval_every"] = cfg["train"]["epochs"]
    cfg["train"]["progress"] = False
    cfg["seed"] = int(seed)
    cfg["name"] = f"vptsp-{source}-{row}"
    classes = _classes(source, profile, validation)
    if validation and classes is None:
        cfg["data"]["val_fraction"] = float(mc["val_fraction"])
    out = resolve_config(cfg, overrides=list(overrides))
    if classes is not None:
        out["data"]["splits"] = {source: classes}
    return out


def _key(cfg: dict, metrics=None) -> dict:
    """A ``train_analysis`` record key; a run that holds validation classes out by ``data.val_fraction`` is scored
    on them (``evaluate: val``), never on the test classes."""
    ana = {"metrics": list(metrics or METRICS)}
    if cfg["data"].get("val_fraction"):
        ana["evaluate"] = "val"
    return {"config": cfg, "analysis": ana}


# ------------------------------------------------------------------------------------------------ tuning
def sweep_rows(source: str) -> list[str]:
    """The rows whose rate is searched on ``source`` (methods.yaml ``sweep``: the rows its tables train)."""
    mc = methods_config()
    rows = (mc.get("sweep") or {}).get(source, [])
    return list(mc["rows"]) if rows == "all" else list(rows)


def sweep_jobs(profile: str = "quick", rows=None, seed: int = 0, sources=None) -> list[tuple[str, str, dict]]:
    """(record folder, label, key) of every validation run: per source of methods.yaml's ``sweep``, each of its
    rows x each rate of the row's grid (``lr_grid`` in methods.yaml, else the shared one), trained on the source's
    training classes less the validation share and scored on that share."""
    mc = methods_config()
    jobs = []
    for source in sources or (mc.get("sweep") or {"cub": "all"}):
        tag = "" if source == "cub" else f"-{source}"   # the CUB-like labels predate the other sources
        for row in sweep_rows(source):
            if rows is not None and row not in rows:
                continue
            grid = _row_block(row).get("lr_grid") or mc["lr_grid"]
            jobs += [("lr_sweep", f"{row}-lr{float(lr):g}{tag}-seed{seed}",
                      _key(run_config(profile, row=row, source=source, seed=seed, lr=float(lr), validation=True)))
                     for lr in grid]
    return jobs


def lr_sweep(profile: str = "quick", train: bool = False, select_on: str = "MAP@R", sources=None) -> pd.DataFrame:
    """Per source, row and learning rate, the validation R@1 and MAP@R; ``chosen`` marks each row's best on each
    source by ``select_on`` and ``interior`` says whether it lies inside the grid."""
    parts = []
    for source in sources or (methods_config().get("sweep") or {"cub": "all"}):
        part = lr_sweep_frame(PAPER, sweep_jobs(profile, sources=[source]), profile, train, name="row",
                              metrics=METRICS, dataset=SOURCE_NAMES[source], select_on=select_on)
        if not part.empty:
            parts.append(part.assign(source=source)[["source", *part.columns]])
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


# ------------------------------------------------------------------------------------------------ tables
def config_for(row: Row, seed: int, profile: str = "quick", overrides=()) -> dict:
    """The record key of a table row (``spec``: the methods.yaml row, the source, options on top, ``overrides``
    such as another backbone, ``metrics`` when the table reports others than R@1 and MAP@R)."""
    sp = row.spec
    if sp.get("zero_shot"):
        return _key(_zero_shot_config(profile, sp["source"], overrides), sp.get("metrics"))
    return _key(run_config(profile, row=sp["row"], source=sp["source"], seed=seed, lr=sp.get("lr"),
                           validation=bool(sp.get("validation", False)), options=dict(sp.get("options", {})),
                           loss_options=sp.get("loss_options"), overrides=[*sp.get("overrides", ()), *overrides]),
                sp.get("metrics"))


ZERO_SHOT = "Zero-shot (frozen backbone)"   # a row beyond the paper: the floor every trained row is checked against


def _zero_shot_config(profile: str, source: str, overrides=()) -> dict:
    """The frozen pretrained backbone's feature on the source's test classes, evaluated as every row of the table
    is (same data, transforms and split; ``train_analysis`` trains nothing for ``model.method: zero_shot``). The
    configuration is VPT (B)'s with the method, its options, the objective and the rate cleared, so that no tuned
    value enters its key; its seed does not matter."""
    cfg = copy.deepcopy(run_config(profile, row="VPT (B)", source=source, seed=0, overrides=overrides))
    cfg["model"].update(method="zero_shot", options={})
    cfg["objective"] = []
    cfg["optimizer"]["lr"] = 0.0
    cfg["name"] = f"vptsp-{source}-zero_shot"
    return cfg


def _scores(result: dict, row: Row) -> dict:
    name, metrics = SOURCE_NAMES[row.spec["source"]], row.spec.get("metrics") or METRICS
    return {(name, m): v[name] for m, v in result["test"].items() if m in metrics}


@lru_cache(maxsize=None)
def _paper_setting(table: str, method: str) -> str:
    """The paper's setting cell of a row (Table 1 spells the modules' sizes there, e.g. "L=12;N=10")."""
    from umlkit.paper import paper_table
    p = paper_table(PAPER, table)
    settings = p.loc[p["method"] == method, "setting"].fillna("").unique()
    return str(settings[0]) if len(settings) == 1 else ""


def _rows(table: str, names: dict[str, tuple[str, dict]], sources=("cub",), setting: str | None = None,
          metrics: dict | None = None, **spec) -> list[Row]:
    """Rows of a table: paper method name -> (methods.yaml row, options), one Row per source; ``setting`` when the
    paper's method name has several settings, ``metrics`` per source when the table reports other recalls."""
    return [Row(method=paper_name, setting=_paper_setting(table, paper_name) if setting is None else setting,
                spec={"row": base, "source": s, "options": opts, **spec,
                      **({"metrics": metrics[s]} if metrics else {})},
                runner="train_analysis", label=f"{s}-{paper_name}")
            for paper_name, (base, opts) in names.items() for s in sources]


def _cell(method: str, dataset: str = "CUB", metric: str = "R@1", table: str = "Table 1",
          setting: str | None = None) -> dict:
    return {"section": "", "method": method, "setting": _paper_setting(table, method) if setting is None else setting,
            "dataset": dataset, "metric": metric}


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
# Table 7's GRU-ReLU row prints Table 1's VPTSP-G without BitFit (86.1 / 52.1): the accumulators are compared there
TABLE7 = {"LSTM": ("VPTSP-G", {"accumulator": "lstm"}), "RNN Unit": ("VPTSP-G", {"accumulator": "rnn"}),
          "Cross Attention": ("VPTSP-G", {"accumulator": "cross_attention"}),
          "GRU with Tanh": ("VPTSP-G", {"accumulator": "gru"}),
          "GRU with Relu": ("VPTSP-G", {})}
_PLAIN = ("Full Fine-tuning (PA)", "Linear Prob", "BitFit", "Adapter", "Adapter (B)", "VPT", "VPT (B)")


def _beats(a: str, b: str, dataset: str = "CUB", metric: str = "R@1", what: str = "", table: str = "Table 1",
           settings: dict | None = None) -> Claim:
    st = settings or {}
    return Claim(f"{a} beats {b}{what} ({dataset}, {metric})", _cell(a, dataset, metric, table, st.get(a)),
                 _cell(b, dataset, metric, table, st.get(b)), metric=metric)


def table1(profile: str = "quick") -> Table:
    # the strongest plain baseline (VPT itself is the "BitFit helps" claim below)
    claims = [_beats("VPT (B)", m) for m in _PLAIN if m not in ("VPT (B)", "VPT")]
    claims += [_beats(f"{m} (B)", m, what=" (BitFit helps)") for m in ("Adapter", "VPT", "VPTSP-M", "VPTSP-G")]
    claims += [_beats("VPTSP-G (B)", "VPT (B)", metric=m, what=" (semantic proxies)") for m in METRICS]
    claims += [_beats("VPTSP-G (B)", "Linear Prob")]
    return Table(PAPER, "Table 1", _rows("Table 1", TABLE1), config_for, seeds=SEEDS, scores=_scores, claims=claims,
                 unmeasured={"quick": {"*": "full-profile only: GPU memory (the quick profile trains on the CPU)"},
                             "full": {"*": "not measured: GPU memory of a training step (benchmarks/"
                                           "bench_vptsp_step.py --profile full --device cuda records peak_mb; not "
                                           "joined to this table)"}},
                 params=True, params_dataset="CUB")


def table4(profile: str = "quick") -> Table:
    # semantic proxies on CUB are Table 1's claims (the same runs); Table 4 adds Cars
    claims = [_beats("VPTSP (GRU) + Bias", "VPT+Bias (Baseline)", "Cars", m, " (semantic proxies)", "Table 4")
              for m in METRICS]
    for d in ("CUB", "Cars"):
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


# Table 2: the paper's ViT-S/16 rows (VPT-Base is VPT with BitFit: its Cars value is Table 4's VPT+Bias); each source
# reports its own recalls (and MAP@R, which Table 6 prints for CUB)
ALL_SOURCES = ("cub", "cars", "sop", "inshop")
TABLE2_METRICS = {"cub": ["R@1", "R@2", "R@4", "MAP@R"], "cars": ["R@1", "R@2", "R@4", "MAP@R"],
                  "sop": ["R@1", "R@10", "R@100", "MAP@R"], "inshop": ["R@1", "R@10", "R@20", "MAP@R"]}
TABLE2 = {"Hyp-ViT": ("Hyp-ViT", {}), "VPT-Base": ("VPT (B)", {}), "VPTSP-M": ("VPTSP-M (B)", {}),
          "VPTSP-G": ("VPTSP-G (B)", {})}
_T2_SMALL = "batch_size=64/32;arch=ViT-S16;dim=384"
T2_SETTINGS = {"Hyp-ViT": "batch_size=882/900;arch=ViT-S16;dim=384", "VPT-Base": _T2_SMALL, "VPTSP-M": _T2_SMALL,
               "VPTSP-G": _T2_SMALL}


def table2(profile: str = "quick") -> Table:
    rows = [Row(method=ZERO_SHOT, spec={"zero_shot": True, "source": s, "metrics": TABLE2_METRICS[s]},
                runner="train_analysis", label=f"{s}-zero_shot", seed_free=True) for s in ALL_SOURCES]
    rows += [r for name, spec in TABLE2.items()
             for r in _rows("Table 2", {name: spec}, ALL_SOURCES, T2_SETTINGS[name], TABLE2_METRICS)]
    # each comparison of the same runs is declared once: VPTSP-G vs VPT-Base and VPTSP-G vs VPTSP-M on CUB and Cars
    # are Tables 1 and 4's claims (the same configurations), so Table 2 adds them on SOP and In-shop only
    claims = [_beats("VPTSP-M", "VPT-Base", SOURCE_NAMES[s], what=" (semantic proxies)", table="Table 2",
                     settings=T2_SETTINGS) for s in ALL_SOURCES]
    for d in ("SOP", "InShop"):
        claims += [_beats("VPTSP-G", "VPT-Base", d, what=" (semantic proxies)", table="Table 2", settings=T2_SETTINGS),
                   _beats("VPTSP-G", "VPTSP-M", d, what=" (GRU beats EMA)", table="Table 2", settings=T2_SETTINGS)]
    claims += [_beats("VPTSP-G", "Hyp-ViT", d, what=" (beats full fine-tuning)", table="Table 2", settings=T2_SETTINGS)
               for d in ("CUB", "Cars")]
    claims += [_beats("Hyp-ViT", "VPTSP-G", d, what=" (the gain turns on many-class sources)", table="Table 2",
                      settings=T2_SETTINGS) for d in ("SOP", "InShop")]
    return Table(PAPER, "Table 2", rows, config_for, seeds=SEEDS, scores=_scores, claims=claims, params=False,
                 floor=Floor(frozen=ZERO_SHOT, per_setting=False),
                 unmeasured={p: {"RS@K": "quoted: Patel et al. (2022), ViT-B/16 with batches over 200 (another "
                                         "work's number)",
                                 "VPTSP-G": why} for p, why in (
                     ("quick", "full-profile only: ViT-B/16 with a 512-d embedding (the quick profile has one tiny "
                               "backbone)"),
                     ("full", "not built: the ViT-B/16 (512-d) rows need the official *_basic configurations"))})


def table3(profile: str = "quick") -> Table:
    """iNaturalist: UML-Mini has no iNaturalist-like source, so every cell is the paper's (status rows only)."""
    why = ("full-profile only: UML-Mini has no iNaturalist-like source; the full profile reads iNaturalist 2018 with "
           "the Smooth-AP split (umlkit data check lists the layout), ViT-B/16 with a 512-d embedding")
    full = ("not built: the iNaturalist rows need ViT-B/16 (512-d) and the official inaturalist_basic "
            "configuration; the data loader (inat) exists")
    return Table(PAPER, "Table 3", [], config_for, seeds=SEEDS, scores=_scores, params=False,
                 unmeasured={p: {"SAP": "quoted: Brown et al. (2020), another work's number",
                                 "Recall@K": "quoted: Patel et al. (2022), another work's number", "*": reason}
                             for p, reason in (("quick", why), ("full", full))})


# Table 6: the CNN rows are other works' numbers; its ViT-S/16 rows are Table 2's CUB runs (Hyp = Hyp-ViT, VPTSP =
# VPTSP-G with BitFit) and full fine-tuning with Proxy-Anchor, all with Table 2's CUB metrics
TABLE6 = {"Hyp": ("Hyp-ViT", {}), "Full fine-tuning (PA)": ("Full Fine-tuning (PA)", {}),
          "VPTSP": ("VPTSP-G (B)", {})}


def table6(profile: str = "quick") -> Table:
    rows = _rows("Table 6", TABLE6, ("cub",), "arch=ViT-S/16", TABLE2_METRICS)
    st = {m: "arch=ViT-S/16" for m in TABLE6}
    claims = [_beats("VPTSP", "Full fine-tuning (PA)", "CUB", m, table="Table 6", settings=st) for m in METRICS]
    claims += [_beats("VPTSP", "Hyp", "CUB", table="Table 6", settings=st)]
    cnn = "quoted: a CNN backbone of another work (ResNet-50 or Inception-BN); the quick profile has no CNN"
    params = "not measured: the paper prints Params(M) here (the parameter-budget chapter counts them)"
    return Table(PAPER, "Table 6", rows, config_for, seeds=SEEDS, scores=_scores, claims=claims, params=False,
                 unmeasured={p: {"*": cnn, **{m: params for m in TABLE6}} for p in ("quick", "full")})


# Table 8: VPTSP on other pretrainings. Full: the paper's four backbones; quick: the two shipped tiny ViTs (v1: 12
# epochs on the synthetic set, texture not learned; v2: 24 epochs on 4.8x the images), each row at the learning
# rate VPTSP-G (B) was tuned to on v2
TABLE8_FULL = {"arch=Vit-S/16;model=DINO;pretraining=ImageNet 1K": ("dino_s16", 384),
               "arch=Vit-S/16;model=DeiT;pretraining=ImageNet 1K": ("deit_s16", 384),
               "arch=Vit-B/16;model=MAE;pretraining=ImageNet 1K": ("mae_b16", 768),
               "arch=Vit-L/14;model=CLIP (vision);pretraining=Laion2b": ("vit_large_patch14_clip_224.laion2b", 768)}
TABLE8_QUICK = {"model=tiny ViT v1;pretraining=UML synthetic, 12 epochs": "vit_tiny_uml",
                "model=tiny ViT v2;pretraining=UML synthetic, 24 epochs": "vit_tiny_uml_v2"}


def table8(profile: str = "quick") -> Table:
    metrics = TABLE2_METRICS   # the same keys as Table 2: v2's rows are its VPTSP-G runs
    if profile == "quick":
        backbones = {k: [f"model.backbone={b}"] for k, b in TABLE8_QUICK.items()}
    else:
        backbones = {k: [f"model.backbone={b}", f"model.embed_dim={d}"] for k, (b, d) in TABLE8_FULL.items()}
    def model_name(setting):
        return dict(part.split("=", 1) for part in setting.split(";"))["model"]
    rows = [Row(method="VPTSP", setting=setting, name=model_name(setting),
                spec={"row": "VPTSP-G (B)", "source": s, "options": {}, "overrides": ov, "metrics": metrics[s]},
                runner="train_analysis", label=f"{s}-{model_name(setting)}")
            for setting, ov in backbones.items() for s in ALL_SOURCES]
    v1, v2 = (_cell("VPTSP", "", "R@1", "Table 8", k) for k in TABLE8_QUICK)
    claims = []
    if profile == "quick":
        claims = [Claim(f"the longer-pretrained tiny ViT (v2) gives VPTSP the higher R@1 ({SOURCE_NAMES[s]})",
                        {**v2, "dataset": SOURCE_NAMES[s]}, {**v1, "dataset": SOURCE_NAMES[s]}) for s in ALL_SOURCES]
    return Table(PAPER, "Table 8", rows, config_for, seeds=SEEDS, scores=_scores, claims=claims, params=False,
                 columns=[SOURCE_NAMES[s] for s in ALL_SOURCES],
                 unmeasured={"quick": "full-profile only: the paper's ImageNet / LAION backbones (hub weights, ViT-S "
                                      "to ViT-L at 224 px)"})


# Fig. 3: VPTSP-G (B) on the CUB-like source with one setting changed (the paper's panels a, b, d, e, f: prompts per
# layer, prompted layers, batch size, alpha); the table runs' values are 2 prompts in 6 layers, batch 64, alpha 0.5
FIG3 = {"prompts per layer": ("num_prompts", [1, 2, 4, 8]), "prompted layers": ("prompt_depth", [2, 4, 6]),
        "batch size": ("batch_size", [32, 64, 128]), "alpha": ("proxy_bias_ratio", [0.2, 0.5, 0.8])}
FIG3_FULL = {"prompts per layer": ("num_prompts", [5, 10, 20, 50]), "prompted layers": ("prompt_depth", [3, 6, 9, 12]),
             "batch size": ("batch_size", [32, 64, 128]), "alpha": ("proxy_bias_ratio", [0.2, 0.5, 0.8])}


def fig3(profile: str = "quick") -> Table:
    rows = []
    for panel, (option, values) in (FIG3 if profile == "quick" else FIG3_FULL).items():
        for v in values:
            spec = {"row": "VPTSP-G (B)", "source": "cub", "options": {}, "overrides": []}
            if option == "batch_size":
                spec["overrides"] = [f"data.batch_size={v}"]
            else:
                spec["options"] = {option: v}
            rows.append(Row(method="VPTSP-G (B)", setting=f"{option}={v}", section=panel, spec=spec,
                            runner="train_analysis", label=f"cub-{option}{v}", name=f"{option}={v}"))
    return Table(PAPER, "Fig. 3", rows, config_for, seeds=SEEDS, scores=_scores, params=False, columns=["CUB"])


def rate_transfer(profile: str = "quick") -> Table:
    """Not a paper table: Table 4's rows on the Cars-like source at the rate chosen on the CUB-like validation
    classes beside the rate chosen on the Cars-like ones (the second are Table 4's runs)."""
    rows = []
    for name, (base, opts) in TABLE4.items():
        for where in ("cub", "cars"):
            rows.append(Row(method=name, setting=f"lr chosen on {SOURCE_NAMES[where]}", name=name,
                            section=f"rate chosen on the {SOURCE_NAMES[where]}-like validation classes",
                            spec={"row": base, "source": "cars", "options": opts,
                                  "lr": chosen_lr(base, profile, where)},
                            runner="train_analysis", label=f"cars-{name}-lr-{where}"))
    return Table(PAPER, "Rate transfer", rows, config_for, seeds=SEEDS, scores=_scores, params=False,
                 columns=["Cars"])


# Diagnosis: why VPTSP-G (B) does not beat VPT (B) here. Its proxies differ from VPT (B)'s learnable Proxy-Anchor
# proxies in two ways at once: they mix the semantic memory in (alpha < 1) and the loss averages both terms over all
# classes (the official normalisation). Each row removes one or both, on the validation classes of the CUB-, Cars-
# and SOP-like sources at VPTSP-G (B)'s rate there (VPT (B) at its own); alpha = 1 leaves the learnable bias alone.
# The last VPTSP row also draws that bias as PML draws VPT (B)'s proxies (the official bias starts ~12x shorter, and
# the loss normalises it, so the same Adam step turns it further); what then still separates it from VPT (B) is the
# LayerNorm in the head and the proxy branch's forward pass, which at alpha = 1 has no effect on the loss. The row
# after it puts the semantic memory back (the source's alpha) on top of those two repairs.
DIAGNOSIS_SOURCES = ("cub", "cars", "sop")
DIAGNOSIS = {"VPTSP-G (B)": ("VPTSP-G (B)", {}, {}),
             "alpha = 1 (no semantic memory)": ("VPTSP-G (B)", {"proxy_bias_ratio": 1.0}, {}),
             "original normalisation": ("VPTSP-G (B)", {}, {"normalisation": "original"}),
             "alpha = 1, original normalisation": ("VPTSP-G (B)", {"proxy_bias_ratio": 1.0},
                                                   {"normalisation": "original"}),
             "alpha = 1, original normalisation, PML's proxy init": (
                 "VPTSP-G (B)", {"proxy_bias_ratio": 1.0, "proxy_bias_init": "pml"}, {"normalisation": "original"}),
             "original normalisation, PML's proxy init": ("VPTSP-G (B)", {"proxy_bias_init": "pml"},
                                                          {"normalisation": "original"}),
             "VPT (B)": ("VPT (B)", {}, {})}


# shorter names for the chapter's display of the diagnosis rows
DIAGNOSIS_LABELS = {"alpha = 1 (no semantic memory)": "α = 1", "original normalisation": "PA normalisation",
                    "alpha = 1, original normalisation": "α = 1 + PA normalisation",
                    "alpha = 1, original normalisation, PML's proxy init": "α = 1 + PA normalisation + PML init",
                    "original normalisation, PML's proxy init": "PA normalisation + PML init"}


def diagnosis(profile: str = "quick") -> Table:
    rows = [Row(method=name, setting="validation classes", name=name,
                spec={"row": base, "source": s, "options": opts, "loss_options": loss, "validation": True},
                runner="train_analysis", label=f"{s}-{name}")
            for name, (base, opts, loss) in DIAGNOSIS.items() for s in DIAGNOSIS_SOURCES]

    def cell(m, d):
        return {"section": "", "method": m, "setting": "validation classes", "dataset": d}
    claims = []
    for d in (SOURCE_NAMES[s] for s in DIAGNOSIS_SOURCES):
        for metric in METRICS:
            claims += [Claim(f"the semantic memory helps: VPTSP-G (B) beats alpha = 1 ({d} validation, {metric})",
                             cell("VPTSP-G (B)", d), cell("alpha = 1 (no semantic memory)", d), metric=metric),
                       Claim(f"VPTSP-G (B) with the original normalisation beats the official one ({d} validation, "
                             f"{metric})", cell("original normalisation", d), cell("VPTSP-G (B)", d), metric=metric),
                       Claim(f"the semantic memory helps once normalisation and proxy init are PML's ({d} validation, "
                             f"{metric})", cell("original normalisation, PML's proxy init", d),
                             cell("alpha = 1, original normalisation, PML's proxy init", d), metric=metric),
                       Claim(f"VPTSP-G (B) with PML's normalisation and proxy init beats VPT (B) ({d} validation, "
                             f"{metric})", cell("original normalisation, PML's proxy init", d), cell("VPT (B)", d),
                             metric=metric)]
    return Table(PAPER, "Diagnosis", rows, config_for, seeds=SEEDS, scores=_scores, claims=claims, params=False,
                 columns=[SOURCE_NAMES[s] for s in DIAGNOSIS_SOURCES])


# Table 10 (step time): a benchmark, not a training record (benchmarks/bench_vptsp_step.py writes the file)
TABLE10_ROWS = {"Full Fine-tuning (PA)": "Full Fine-tuning (PA)", "linear": "Linear Prob", "BitFit": "BitFit",
                "Adapter": "Adapter", "VPT": "VPT", "VPTSP": "VPTSP-G (B)"}


def table10_file(profile: str = "quick", device: str | None = None) -> Path:
    """The benchmark file a profile's chapter reads: the quick profile's CPU run, the full profile's GPU run."""
    device = device or ("cpu" if profile == "quick" else "cuda")
    from umlkit._paths import repo_folder
    return repo_folder("benchmarks", "results", what="the benchmark results") / f"vptsp_table10_{profile}_{device}.json"


def table10_lines(results: list[dict], source: str = "") -> pd.DataFrame:
    """The measured long format of a step-time benchmark's raw results (``[{method, row, batch_size, round, ms}]``):
    one line per method, batch size, metric and round (the rounds play the part of seeds), the step time
    (``Latency(ms)``) and its ratio to full fine-tuning's in the same round and batch size (``Latency (x full)``).
    ``source`` names where the results came from (the ``record`` column)."""
    res = pd.DataFrame(results)
    unknown = sorted(set(res["method"]) - set(TABLE10_ROWS))
    if unknown:
        raise ValueError(f"{source or 'step-time results'}: methods {unknown} are not Table 10's {list(TABLE10_ROWS)}")
    full = res[res["method"] == "Full Fine-tuning (PA)"].set_index(["batch_size", "round"])["ms"]
    res["ratio"] = res["ms"] / full.reindex(list(zip(res["batch_size"], res["round"]))).to_numpy()
    return pd.DataFrame([{"table": "Table 10", "section": "", "method": r["method"],
                          "setting": f"batch_size={int(r['batch_size'])}", "row": r["method"], "seed": int(r["round"]),
                          "dataset": "Cars", "metric": metric, "value": float(r[col]), "record": source, "stale": "",
                          "seed_free": False}
                         for _, r in res.iterrows()
                         for metric, col in (("Latency(ms)", "ms"), ("Latency (x full)", "ratio"))])


def table10_measured(path: str | Path) -> tuple[pd.DataFrame, dict]:
    """Table 10 from a step-time benchmark file (:func:`table10_lines`) and the file's header (machine, backbone,
    ...); an empty frame when the file does not exist."""
    path = Path(path)
    if not path.is_file():
        return pd.DataFrame(), {}
    raw = json.loads(path.read_text())
    return table10_lines(raw["results"], str(path)), {k: v for k, v in raw.items() if k != "results"}


def table10_claims() -> list[Claim]:
    """The paper's reading of Table 10 (Appendix): VPTSP's step takes longer than every other parameter-efficient
    method's and less long than full fine-tuning's, at both batch sizes (on the step-time ratio to full
    fine-tuning, the number that carries across machines)."""
    claims = []
    for b in (32, 64):
        st = f"batch_size={b}"

        def cell(m):
            return {"section": "", "method": m, "setting": st, "dataset": "Cars"}
        claims += [Claim(f"VPTSP's step takes longer than {m}'s (batch {b})", cell("VPTSP"), cell(m),
                         metric="Latency (x full)") for m in ("linear", "BitFit", "Adapter", "VPT")]
        claims.append(Claim(f"full fine-tuning's step takes longer than VPTSP's (batch {b})",
                            cell("Full Fine-tuning (PA)"), cell("VPTSP"), metric="Latency (x full)"))
    return claims


def table10(profile: str = "quick") -> Table:
    """Table 10 from the profile's benchmark file (:func:`table10_file`; no training records)."""
    return Table(PAPER, "Table 10", [], config_for, seeds=SEEDS, claims=table10_claims(), params=False,
                 derive=lambda prof, train: table10_measured(table10_file(prof))[0],
                 unmeasured={profile: "not measured: no step-time file for this profile (run "
                                      "benchmarks/bench_vptsp_step.py)"})


def TABLES(profile: str = "quick") -> dict[str, Table]:
    """The VPTSP tables by the paper's name (Table 10 reads a benchmark file, the others training records)."""
    return {"Table 1": table1(profile), "Table 2": table2(profile), "Table 3": table3(profile),
            "Table 4": table4(profile), "Table 5": table5(profile), "Table 6": table6(profile),
            "Table 7": table7(profile), "Table 8": table8(profile), "Table 10": table10(profile),
            "Fig. 3": fig3(profile), "Diagnosis": diagnosis(profile),
            "Rate transfer": rate_transfer(profile)}


def table_jobs(profile: str = "quick", seeds=SEEDS, tables=None) -> list[tuple]:
    """(record folder, label, key, runner) of every training run of the tables, seed-major; a run two tables share
    (the same configuration) is listed once."""
    from umlkit.experiments.tables import distinct_jobs
    specs = {n: t for n, t in TABLES(profile).items() if tables is None or n in tables}
    return distinct_jobs(specs, profile, seeds)


def job_list(name: str, profile: str = "quick") -> list[tuple[str, str, dict]]:
    """A named job list: ``lr_sweep`` (the tuning protocol, every source) or ``tables`` (every run of Tables 1, 2, 4-8,
    Fig. 3, the rate transfer and the diagnosis)."""
    if name == "lr_sweep":
        return sweep_jobs(profile)
    if name == "tables":
        return table_jobs(profile)
    raise KeyError(f"unknown VPTSP job list {name!r}; choose lr_sweep or tables")


# ------------------------------------------------------------------------------------------------ prose
def floor_facts(t2) -> dict[str, str]:
    """Table 2's floors for the prose: the frozen backbone's R@1 per source and VPTSP-G's / VPTSP-M's on the SOP- and
    In-shop-like sources, and which rows fell below it (:func:`umlkit.experiments.tables.mark_floors`)."""
    from umlkit.experiments.prose import number
    out = {f"t2_zs_{s}": number(_value(t2, ZERO_SHOT, SOURCE_NAMES[s])) for s in ALL_SOURCES}
    for m, tag in (("VPTSP-G", "g"), ("VPTSP-M", "m"), ("VPT-Base", "vpt"), ("Hyp-ViT", "hyp")):
        for s in ("sop", "inshop"):
            out[f"t2_{tag}_{s}"] = number(_value(t2, m, SOURCE_NAMES[s]))
    below = t2[(t2.get("floor", "") != "") & (t2["metric"] == "R@1")] if "floor" in t2 else t2.iloc[:0]
    out["t2_below"] = ", ".join(f"{r} ({d})" for r, d in below[["row", "dataset"]].drop_duplicates().to_numpy()) \
        or "none"
    return out


def _paper(table: str, method: str, dataset: str, metric: str = "R@1", setting: str | None = None) -> float:
    """One of the paper's cells (NaN when it has none): the prose quotes the paper whether or not a cell was run."""
    from umlkit.paper import paper_table
    p = paper_table(PAPER, table)
    hit = p[(p["method"] == method) & (p["dataset"] == dataset) & (p["metric"] == metric)
            & ((p["setting"].fillna("") == setting) if setting is not None else True)]
    return float(hit["value"].iloc[0]) if len(hit) == 1 else float("nan")


def _span(values, signed: bool = True) -> str:
    """"a to b" of the finite values (one decimal), one number when they round alike, "–" when there are none."""
    from umlkit.experiments.prose import number
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
    efficient = [m for m in _PLAIN if m != "Full Fine-tuning (PA)"]
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
        r1 = t8[t8["metric"] == "R@1"]
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
    facts["f3_seed_spread"] = number(_value(cmp.get("Table 1", pd.DataFrame()), "VPTSP-G (B)", "CUB", "MAP@R", "spread"))
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


# ------------------------------------------------------------------------------------------------ registry entry
# what the scoreboard, `umlkit records` and `umlkit reproduce --paper` need (registered by umlkit.experiments.catalog)
ENTRY = Paper(name=PAPER, title="VPTSP (Ren et al., ICLR 2024)", claim_tables=TABLES, chapters=("vptsp",),
              headline="VPTSP-G beats Hyp-ViT (beats full fine-tuning) (CUB, R@1)",
              job_lists={n: partial(job_list, n) for n in ("lr_sweep", "tables")})
