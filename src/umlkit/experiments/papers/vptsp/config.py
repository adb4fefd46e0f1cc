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
import sys
from functools import lru_cache
from pathlib import Path

import pandas as pd

from umlkit.experiments.recipes.paper_configs import base_config, read_yaml
from umlkit.experiments.recipes.tuning import Sweep, chosen
from umlkit.experiments.runs.runners import SOURCE_NAMES
from umlkit.experiments.splits import committed as class_splits
from umlkit.experiments.tables.builder import build_tables
from umlkit.experiments.tables.declarations import load_declarations
from umlkit.experiments.tables.table import Row, Table
from umlkit.results import load_benchmark

PAPER = "vptsp"
DECLARED = load_declarations(__file__)   # tables.yaml: the paper's rows, claims and reasons
REASONS = DECLARED["reasons"]
SOURCES = ("cub", "cars")   # the sources of Tables 4 and 5 (Table 2: ALL_SOURCES, the diagnosis: DIAGNOSIS_SOURCES)
SEEDS = (0, 1, 2)
METRICS = ["R@1", "MAP@R"]


def methods_config() -> dict:
    """``configs/vptsp/methods.yaml``, parsed once per process."""
    return read_yaml("vptsp", "methods.yaml", numbers=True)


def _base_config(profile: str) -> dict:
    return base_config("vptsp", "vptsp.yaml", profile)


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
    if profile != "quick" or source not in class_splits.SPLIT_SOURCES:
        return None
    return class_splits.default_classes(source, profile, methods_config()["val_fraction"] if validation else None)


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


def sweep(rows=None, sources=None, backbone: str | None = None) -> Sweep:
    """The validation sweep: per source of methods.yaml's ``sweep``, each of its rows (those in ``rows``) x each rate
    of the row's grid (``lr_grid`` in methods.yaml, else the shared one), trained on the source's training classes
    less the validation share and scored on that share; with ``backbone`` (a short name), on that backbone instead
    (Table 8's v1 rows: folder ``table8_tuning``, the grid extended by ``table8_v1_extra``)."""
    mc = methods_config()
    over = [f"model.backbone={backbone}"] if backbone else []

    def units(profile: str) -> list[tuple[str, str]]:
        return [(source, row) for source in sources or (mc.get("sweep") or {"cub": "all"})
                for row in sweep_rows(source) if rows is None or row in rows]

    def grid(unit) -> list:
        source, row = unit
        return [*(_row_block(row).get("lr_grid") or mc["lr_grid"]),
                *((DECLARED.get("table8_v1_extra") or {}).get(source, []) if backbone else [])]

    def label(unit, lr, seed) -> str:   # the CUB-like labels predate the other sources: no source tag
        source, row = unit
        tag = "" if source == "cub" else f"-{source}"
        return f"{row}{' on ' + backbone if backbone else ''}-lr{float(lr):g}{tag}-seed{seed}"

    def key(unit, lr, profile, seed) -> dict:
        return _key(run_config(profile, row=unit[1], source=unit[0], seed=seed, lr=float(lr), validation=True,
                               overrides=over))
    return Sweep("table8_tuning" if backbone else "lr_sweep", units=units, grid=grid, key=key, label=label)


def sweep_jobs(profile: str = "quick", rows=None, seed: int = 0, sources=None,
               backbone: str | None = None) -> list[tuple[str, str, dict]]:
    """(record folder, label, key) of every run of :func:`sweep`."""
    return sweep(rows, sources, backbone).jobs(profile, seed)


def table8_sweep_jobs(profile: str = "quick", seed: int = 0) -> list[tuple[str, str, dict]]:
    """The quick Table 8's other backbone (v1) tuned on itself: VPTSP-G (B)'s grid on each source's validation
    classes (its rows once ran at the rates chosen on v2, a protocol that favoured v2 in the table's claims)."""
    if profile != "quick":
        return []
    return sweep_jobs(profile, rows=["VPTSP-G (B)"], seed=seed, sources=ALL_SOURCES, backbone=TABLE8_V1)


# ------------------------------------------------------------------------------------------------ tables
def config_for(row: Row, seed: int, profile: str = "quick", overrides=()) -> dict:
    """The record key of a table row (``spec``: the methods.yaml row, the source, options on top, ``overrides``
    such as another backbone, ``metrics`` when the table reports others than R@1 and MAP@R)."""
    sp = row.spec
    if sp.get("zero_shot"):
        over = [*sp.get("overrides", ()), *overrides]   # e.g. Table 8's backbone: each row's own frozen feature
        return _key(_zero_shot_config(profile, sp["source"], over), sp.get("metrics"))
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


def scores(result: dict, row: Row) -> dict:
    name, metrics = SOURCE_NAMES[row.spec["source"]], row.spec.get("show") or row.spec.get("metrics") or METRICS
    return {(name, m): v[name] for m, v in result["test"].items() if m in metrics}


@lru_cache(maxsize=None)
def _paper_setting(table: str, method: str) -> str:
    """The paper's setting cell of a row (Table 1 spells the modules' sizes there, e.g. "L=12;N=10")."""
    from umlkit.experiments.tables.paper_cells import paper_table
    p = paper_table(PAPER, table)
    settings = p.loc[p["method"] == method, "setting"].fillna("").unique()
    return str(settings[0]) if len(settings) == 1 else ""


def table_rows(table: str, names: dict[str, tuple[str, dict]], sources=("cub",), setting: str | None = None,
               metrics: dict | None = None, settings: dict | None = None, **spec) -> list[Row]:
    """Rows of a table: paper method name -> (methods.yaml row, options), one Row per source; ``setting`` when the
    paper's method name has several settings (``settings``: one per method), ``metrics`` per source when the table
    reports other recalls."""
    def setting_of(name):
        given = (settings or {}).get(name, setting)
        return _paper_setting(table, name) if given is None else given
    return [Row(method=paper_name, setting=setting_of(paper_name),
                spec={"row": base, "source": s, "options": opts, **spec,
                      **({"metrics": metrics[s]} if metrics else {})},
                runner="train_analysis", label=f"{s}-{paper_name}")
            for paper_name, (base, opts) in names.items() for s in sources]


# Table 1's rows are methods.yaml's rows; "Memory(GB)" is a GPU measurement (Table 10's benchmark in the full profile)
TABLE1 = DECLARED["table1"]
TABLE4 = DECLARED["table4"]
TABLE5 = DECLARED["table5"]
# Table 7's GRU-ReLU row prints Table 1's VPTSP-G without BitFit (86.1 / 52.1): the accumulators are compared there
TABLE7 = DECLARED["table7"]
PLAIN = tuple(DECLARED["plain"])


def floor_rows(sources) -> list[Row]:
    """The frozen backbone of each source as a row of a table that reports R@1 and MAP@R: Table 2's zero-shot record
    (the same key: Table 2's metrics), showing the table's two metrics."""
    return [Row(method=ZERO_SHOT, spec={"zero_shot": True, "source": s, "metrics": TABLE2_METRICS[s], "show": METRICS},
                runner="train_analysis", label=f"{s}-zero_shot", seed_free=True) for s in sources]


def zero_shot_rows(sources) -> list[Row]:
    """Table 2's frozen backbone per source, with that source's own metrics."""
    return [Row(method=ZERO_SHOT, spec={"zero_shot": True, "source": s, "metrics": TABLE2_METRICS[s]},
                runner="train_analysis", label=f"{s}-zero_shot", seed_free=True) for s in sources]


# Table 2: the paper's ViT-S/16 rows (VPT-Base is VPT with BitFit: its Cars value is Table 4's VPT+Bias); each source
# reports its own recalls (and MAP@R, which Table 6 prints for CUB)
ALL_SOURCES = ("cub", "cars", "sop", "inshop")
TABLE2_METRICS = DECLARED["table2_metrics"]
TABLE2 = DECLARED["table2"]
_T2_SMALL = "batch_size=64/32;arch=ViT-S16;dim=384"
T2_SETTINGS = DECLARED["t2_settings"]


TABLE6 = DECLARED["table6"]


# Table 8: VPTSP on other pretrainings. Full: the paper's four backbones; quick: the two shipped tiny ViTs (v1: 12
# epochs on the synthetic set, texture not learned; v2: 24 epochs on 4.8x the images), each row at the learning
# rate VPTSP-G (B) was tuned to on v2
TABLE8_FULL = DECLARED["table8_full"]
TABLE8_QUICK = DECLARED["table8_quick"]
TABLE8_V1 = "vit_tiny_uml"                                # the quick Table 8's other backbone, tuned on itself
TABLE8_V1_LR = DECLARED.get("table8_v1_lr") or {}         # its rate per source (validation MAP@R; a test checks)


def table8_rows(profile: str = "quick") -> list[Row]:
    """Table 8's rows: each backbone's frozen feature (its own floor) and VPTSP-G (B) on it, on every source. Full: the
    paper's four backbones; quick: the two shipped tiny ViTs, v1 at its own tuned rate where one was found."""
    metrics = TABLE2_METRICS   # the same keys as Table 2: v2's rows are its VPTSP-G runs
    if profile == "quick":
        backbones = {k: [f"model.backbone={b}"] for k, b in TABLE8_QUICK.items()}
    else:
        backbones = {k: [f"model.backbone={b}", f"model.embed_dim={d}"] for k, (b, d) in TABLE8_FULL.items()}

    def model_name(setting):
        return dict(part.split("=", 1) for part in setting.split(";"))["model"]
    rows = [Row(method=ZERO_SHOT, setting=setting, name=f"{ZERO_SHOT}, {model_name(setting)}",
                spec={"zero_shot": True, "source": s, "overrides": ov, "metrics": metrics[s]},
                runner="train_analysis", label=f"{s}-zero_shot-{model_name(setting)}", seed_free=True)
            for setting, ov in backbones.items() for s in ALL_SOURCES]   # each backbone's own floor

    def own_rate(ov, s):   # v1 at its own rate once tuned; v2 (and the full profile) at the row's chosen rate
        return {"lr": TABLE8_V1_LR[s]} if f"model.backbone={TABLE8_V1}" in ov and s in TABLE8_V1_LR else {}
    return rows + [Row(method="VPTSP", setting=setting, name=model_name(setting),
                       spec={"row": "VPTSP-G (B)", "source": s, "options": {}, "overrides": ov, "metrics": metrics[s],
                             **own_rate(ov, s)},
                       runner="train_analysis", label=f"{s}-{model_name(setting)}")
                   for setting, ov in backbones.items() for s in ALL_SOURCES]


# Fig. 3: VPTSP-G (B) on the CUB-like source with one setting changed (the paper's panels a, b, d, e, f: prompts per
# layer, prompted layers, batch size, alpha); the table runs' values are 2 prompts in 6 layers, batch 64, alpha 0.5
FIG3 = DECLARED["fig3"]
FIG3_FULL = DECLARED["fig3_full"]


def fig3_rows(panels: dict) -> list[Row]:
    """Fig. 3's rows: VPTSP-G (B) on the CUB-like source with one setting of a panel changed."""
    rows = []
    for panel, (option, values) in panels.items():
        for v in values:
            spec = {"row": "VPTSP-G (B)", "source": "cub", "options": {}, "overrides": []}
            if option == "batch_size":
                spec["overrides"] = [f"data.batch_size={v}"]
            else:
                spec["options"] = {option: v}
            rows.append(Row(method="VPTSP-G (B)", setting=f"{option}={v}", section=panel, spec=spec,
                            runner="train_analysis", label=f"cub-{option}{v}", name=f"{option}={v}"))
    return rows


def rate_transfer_rows(profile: str = "quick") -> list[Row]:
    """Not a paper table: Table 4's rows on the Cars-like source at the rate chosen on the CUB-like validation
    classes beside the rate chosen on the Cars-like ones (the second are Table 4's runs)."""
    return [Row(method=name, setting=f"lr chosen on {SOURCE_NAMES[where]}", name=name,
                section=f"rate chosen on the {SOURCE_NAMES[where]}-like validation classes",
                spec={"row": base, "source": "cars", "options": opts, "lr": chosen_lr(base, profile, where)},
                runner="train_analysis", label=f"cars-{name}-lr-{where}")
            for name, (base, opts) in TABLE4.items() for where in ("cub", "cars")]


# Diagnosis: why VPTSP-G (B) does not beat VPT (B) here. Its proxies differ from VPT (B)'s learnable Proxy-Anchor
# proxies in two ways at once: they mix the semantic memory in (alpha < 1) and the loss averages both terms over all
# classes (the official normalisation). Each row removes one or both, on the validation classes of the CUB-, Cars-
# and SOP-like sources at VPTSP-G (B)'s rate there (VPT (B) at its own); alpha = 1 leaves the learnable bias alone.
# The last VPTSP row also draws that bias as PML draws VPT (B)'s proxies (the official bias starts ~12x shorter, and
# the loss normalises it, so the same Adam step turns it further); what then still separates it from VPT (B) is the
# LayerNorm in the head and the proxy branch's forward pass, which at alpha = 1 has no effect on the loss. The row
# after it puts the semantic memory back (the source's alpha) on top of those two repairs.
DIAGNOSIS_SOURCES = ("cub", "cars", "sop")
DIAGNOSIS = DECLARED["diagnosis"]


# shorter names for the chapter's display of the diagnosis rows
DIAGNOSIS_LABELS = DECLARED["diagnosis_labels"]


def diagnosis_rows() -> list[Row]:
    return [Row(method=name, setting="validation classes", name=name,
                spec={"row": base, "source": s, "options": opts, "loss_options": loss, "validation": True},
                runner="train_analysis", label=f"{s}-{name}")
            for name, (base, opts, loss) in DIAGNOSIS.items() for s in DIAGNOSIS_SOURCES]


# Table 10 (step time): a benchmark, not a training record (benchmarks/bench_vptsp_step.py writes the file)
TABLE10_ROWS = DECLARED["table10_rows"]


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
    results, header = load_benchmark(path, "a step-time benchmark file (benchmarks/bench_vptsp_step.py)")
    return (table10_lines(results, str(path)) if results else pd.DataFrame()), header


def table10_claims() -> list:
    """The paper's reading of Table 10 (declared in tables.yaml): VPTSP's step takes longer than every other
    parameter-efficient method's and less long than full fine-tuning's, at both batch sizes."""
    return TABLES("quick")["Table 10"].claims


def table10_derive(profile: str, train: bool = False) -> pd.DataFrame:
    """Table 10's measured cells from the profile's benchmark file (no training records)."""
    return table10_measured(table10_file(profile))[0]


def TABLES(profile: str = "quick") -> dict[str, Table]:
    """The VPTSP tables by the paper's name (Table 10 reads a benchmark file, the others training records)."""
    return build_tables(PAPER, sys.modules[__name__], DECLARED, profile)


def table_jobs(profile: str = "quick", seeds=SEEDS, tables=None) -> list[tuple]:
    """(record folder, label, key, runner) of every training run of the tables, seed-major; a run two tables share
    (the same configuration) is listed once."""
    from umlkit.experiments.tables.table import distinct_jobs
    specs = {n: t for n, t in TABLES(profile).items() if tables is None or n in tables}
    return distinct_jobs(specs, profile, seeds)
