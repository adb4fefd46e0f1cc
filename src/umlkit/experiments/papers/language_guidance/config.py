"""Language guidance (Roth, Vinyals and Akata, "Integrating language guidance into vision-based deep metric
learning", CVPR 2022): configurations, language files, tables and claims as data for the book's chapter.

* **Runs** (:func:`run_config`): the paper trains on Roth's pipeline, the one ooDML runs, so a row is ooDML's
  configuration of its base method on the source's default split (:func:`umlkit.experiments.papers.oodml.run_config`:
  the same loss, chosen learning rate, sampler and epochs) plus, for a guided row, the language term
  ``omega x LanguageGuidanceLoss`` (Eq. 2; :mod:`umlkit.losses.language_guidance` follows the official
  ``LanguageGuide.regularize``). Every run is a ``train_analysis`` record keyed by the resolved configuration,
  with the language file referred to by its sha256 and its path ``results/<profile>/language/<file>`` (resolved
  against the results folder, so that keys are the same on every machine).
* **Language files** (:func:`language_ref`): ELG embeds each class's cleaned name (the loaders' ``language_names``,
  as the official ``language_conversion``); PLG embeds the top-k pseudolabels of a classifier averaged over each
  class's images (official ``relabel``). Quick: the sentence model all-MiniLM-L6-v2 and the tiny ViT v2's named
  320-way pretraining classifier; full: CLIP ViT-B/32's text encoder and torchvision's ImageNet ResNet-50
  (timm ``resnet50.tv_in1k``, the official ``pretrainedmodels`` weights) with the ImageNet class names.
* **Tuning** (:func:`omega_jobs`): on each source, the learning rate is the base method's as ooDML's protocol chose
  it on that source's validation classes (``lr_sources``, else the CUB-like choice where the source's own sweep
  agreed); omega is chosen on the same validation split from ``omega_grid``, for every (row, source) a table trains
  - the paper's protocol of adding guidance to a tuned baseline (its official scripts set omega per dataset),
  applied to every guided row alike.
* **Tables**: Table 2 (R@1 of every method with and without ELG / PLG on the CUB-, Cars- and SOP-like sources)
  and Table S1 (the same runs with NMI and mAP@1000), with the paper's claims.
"""
from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Sequence
from functools import lru_cache

import pandas as pd

from umlkit.experiments.papers.language_guidance.language_store import (
    UNIFIED,
    class_similarity,
    guidance_spec,
    language_ref,
    lg_config,
)
from umlkit.experiments.recipes import source as source_recipe
from umlkit.experiments.recipes import unified as unified_recipe
from umlkit.experiments.recipes.tuning import Sweep, chosen
from umlkit.experiments.runs.runners import SOURCE_NAMES
from umlkit.experiments.tables.builder import build_tables
from umlkit.experiments.tables.declarations import load_declarations
from umlkit.experiments.tables.paper_cells import paper_table
from umlkit.experiments.tables.table import Row, Table

PAPER = "language_guidance"
DECLARED = load_declarations(__file__)   # tables.yaml: the paper's rows, claims and reasons
SOURCES = ("cub", "cars", "sop")
SEEDS = (0, 1, 2)
# "about as good" in the paper's text is tested as "within 1 R@1 point" (TOST, tables.claim_test); the paper's own
# gaps behind those readings (PLG vs ELG in Table 2, the language models of Table 3 (a)) are computed by
# paper_equivalence_gaps and shown beside it in the chapter
MARGIN = DECLARED["margin"]
BASELINE = DECLARED["baseline"]  # the ablation tables' "Baseline" (the paper's Tables 3-5 and S3 vary ELG on it)


def variant_rows(profile: str = "quick") -> list[str]:
    """The ablation rows a profile runs: "Multisimilarity + <variant>" (Tables 3-5, S3 and the controls)."""
    return [f"{BASELINE} + {v}" for v in (lg_config().get("variants") or {}) if profile in guidance_spec(v)["profiles"]]


def split_row(method: str) -> tuple[str, str | None]:
    """'Margin + PLG Top-5' -> ('Margin', 'PLG Top-5'); 'Multisimilarity + S2SD' -> (that, None)."""
    for g in [*lg_config()["guidance"], *(lg_config().get("variants") or {})]:
        if method.endswith(f" + {g}"):
            return method[: -len(g) - 3], g
    return method, None


def chosen_omega(method: str, guidance: str, source: str, profile: str) -> float:
    """The configured omega of "<method> + <guidance>" in a profile; a variant the profile gives none (full: the
    official scripts tune no ablation) takes its base guidance's."""
    rows = [f"{method} + {guidance}"]
    base = guidance_spec(guidance)["base"]
    if profile == "full" and base != guidance:
        rows.append(f"{method} + {base}")
    paths = [p for r in rows for p in ((profile, r, source), (profile, r))]   # per source, or one for every source
    return chosen(lg_config()["omega"], paths, file="configs/language_guidance/language_guidance.yaml",
                  what=f"{profile} omega for {method + ' + ' + guidance!r}", sweep="run the omega sweep (`umlkit "
                  "records train language_guidance omega_sweep`) and enter the chosen omega")


def run_config(profile: str = "quick", *, method: str = "Multisimilarity", source: str = "cub", seed: int = 0,
               omega: float | None = None, validation: bool = False, language: dict | None = None,
               overrides=()) -> dict:
    """The resolved configuration of one row (``method`` as the paper spells it, e.g. "Margin + ELG"): ooDML's
    configuration of the base method on the default split, the row's loss options, and for a guided row the
    language term with weight ``omega`` (default: the chosen one) and the file ``language`` (default:
    :func:`language_ref`)."""
    cfg = lg_config()
    base, guidance = split_row(method)
    if base not in cfg["methods"]:
        raise KeyError(f"unknown language-guidance method {base!r}; choose from {list(cfg['methods'])} (optionally "
                       f"with ' + ' and one of {list(cfg['guidance'])})")
    block = cfg["methods"][base]
    extra = (cfg.get("profile_overrides") or {}).get(profile) or []
    # the base method's rate as ooDML's protocol chose it on this source's validation classes
    out = source_recipe.run_config(profile, method=block["base"], source=source, seed=seed, validation=validation,
                                   overrides=[*extra, *overrides])
    out = copy.deepcopy(out)
    out["objective"][0]["options"].update(block.get("options") or {})
    if guidance is not None:
        w = float(omega) if omega is not None else chosen_omega(base, guidance, source, profile)
        ref = language if language is not None else language_ref(source, guidance, profile)
        out["objective"].append(_guidance_term(out, guidance, w, ref))
    out["name"] = f"language_guidance-{source}-{method}"
    return out


# the terms of the ablation rows (a variant's loss option ``term``; default the row-wise KL of Eq. 2) and whether
# they take the shared ``loss`` block (shift, temperature, direction)
_KL_TERMS = ("language_guidance", "language_guidance_slots")


def _guidance_term(run: dict, guidance: str, weight: float, ref: dict) -> dict:
    """The language term of a guided row: the variant's loss (``term``) with its options, the language file, and
    for the token-prediction term the width of the backbone's last feature map."""
    opts = dict(guidance_spec(guidance)["loss"])
    name = opts.pop("term", "language_guidance")
    shared = lg_config()["loss"] if name in _KL_TERMS else {}
    opts = {**shared, **opts, "language_embeddings": ref}
    if name == "language_token_prediction" and "feature_width" not in opts:
        opts["feature_width"] = feature_width(run["model"]["backbone"])
    return {"name": name, "weight": weight, "options": opts}


@lru_cache(maxsize=8)
def feature_width(backbone: str) -> int:
    """Channels of a backbone's last feature map (timm's ``feature_info``), from an untrained copy (built once per
    process: job lists build this row's configuration many times)."""
    from umlkit.models.backbones import create_backbone
    return int(create_backbone(backbone).feature_info[-1]["num_chs"])


def _analysis() -> dict:
    return {"metrics": list(lg_config()["metrics"])}


def guided_rows() -> list[str]:
    """Every row of Table 2 in the paper's order: each method, then with each guidance."""
    cfg = lg_config()
    return [m if g is None else f"{m} + {g}" for m in cfg["methods"] for g in (None, *cfg["guidance"])]


# ------------------------------------------------------------------------------------------------ tuning
def omega_grid(row: str, block: dict | None = None, source: str = "cub") -> list[float]:
    """The omega values a guided row is validated at on ``source``: the shared grid, extended where the row's best
    value lay on its edge (``omega_grid_extra`` on the CUB-like source and in the unified setting, whose ``block``
    is passed; ``omega_grid_extra_sources.<source>`` on the others)."""
    cfg = lg_config() if block is None else block
    extra = cfg.get("omega_grid_extra") if source == "cub" else (cfg.get("omega_grid_extra_sources") or {}).get(source)
    return sorted({float(w) for w in [*cfg["omega_grid"], *(extra or {}).get(row, [])]})


def omega_key(method: str, omega: float | None, profile: str = "quick", seed: int = 0, source: str = "cub") -> dict:
    """The record key of one validation run of the omega sweep (the source's default split, held-out training
    classes); ``omega=None`` for an unguided row (the reference the sweep's gain is read against)."""
    return {"config": run_config(profile, method=method, source=source, seed=seed, omega=omega, validation=True),
            "analysis": {"metrics": ["R@1", "MAP@R"]}}


def tuned_rows(profile: str = "quick") -> dict[str, list[str]]:
    """Per source, the rows whose omega is chosen there: on the CUB-like source every guided row of Table 2 and every
    variant the profile runs (quick); on the others the guided rows that a table of the profile trains there."""
    out = {"cub": [*guided_rows(), *(variant_rows(profile) if profile == "quick" else [])]}
    if profile != "quick":
        return out
    spec = [table("Table 2", profile), *(ablation_table(n, profile) for n in ABLATIONS)]
    for s in SOURCES[1:]:
        runs = {r.spec["method"] for t in spec for r in t.rows if r.spec.get("source") == s and "method" in r.spec}
        out[s] = [r for r in out["cub"] if r in runs and (split_row(r)[1] is not None or f"{r} + ELG" in runs)]
    return out


def omega_sweep() -> Sweep:
    """The omega sweep: per source (:func:`tuned_rows`), every guided row x its ``omega_grid`` and each base method
    without guidance (the reference). The CUB-like labels carry no source prefix."""
    return Sweep("omega_sweep", units=lambda profile: [(s, r) for s, rows in tuned_rows(profile).items() for r in rows],
                 grid=lambda sr: None if split_row(sr[1])[1] is None else omega_grid(sr[1], source=sr[0]),
                 key=lambda sr, w, profile, seed: omega_key(sr[1], w, profile, seed, sr[0]),
                 name=lambda sr: ("" if sr[0] == "cub" else f"{sr[0]}-") + sr[1], label="{name}-w{value:g}-seed{seed}")


def omega_jobs(profile: str = "quick", seed: int = 0) -> list[tuple[str, str, dict]]:
    """(record folder, label, key) of every run of :func:`omega_sweep`."""
    return omega_sweep().jobs(profile, seed)


# ------------------------------------------------------------------------------------------------ tables
ZERO_SHOT = "Zero-shot (frozen backbone)"   # a row beyond the paper: the floor every trained row is checked against


def _zero_shot_config(profile: str, source: str, overrides=()) -> dict:
    """The frozen pretrained backbone on the source's test classes, evaluated as every row is (same data, split and
    analysis; ``train_analysis`` trains nothing for ``model.method: zero_shot``): the baseline's configuration with
    the objective and rate cleared, so that no tuned value enters its key; its seed does not matter."""
    cfg = copy.deepcopy(run_config(profile, method=BASELINE, source=source, seed=0, overrides=overrides))
    cfg["model"].update(method="zero_shot", options={})
    cfg["objective"] = []
    cfg["optimizer"]["lr"] = 0.0
    cfg["name"] = f"language_guidance-{source}-zero_shot"
    return cfg


def config_for(row: Row, seed: int, profile: str = "quick", overrides=()) -> dict:
    sp = row.spec
    if sp.get("zero_shot"):
        return {"config": _zero_shot_config(profile, sp["source"], overrides), "analysis": _analysis()}
    return {"config": run_config(profile, method=sp["method"], source=sp["source"], seed=seed, overrides=overrides),
            "analysis": _analysis()}


def _scores_in(metrics) -> Callable[[dict, Row], dict]:
    """A table's scores: ``{(dataset, metric): value}`` of a record's test scores in ``metrics``."""
    def scores(result: dict, row: Row) -> dict:
        return {(d, m): v for m, per in result["test"].items() for d, v in per.items() if m in metrics}
    return scores


def table2_scores(result: dict, row: Row) -> dict:
    """Table 2's and Table S1's cells: R@1, NMI and mAP@1000 of a record's test scores."""
    return _scores_in(("R@1", "NMI", "mAP@1000"))(result, row)


def _label(source: str, run: str) -> str:
    """A record label: "cub-Margin+PLG_Top-5"."""
    return f"{source}-{run.replace(' + ', '+').replace(' ', '_')}"


def _cell(method: str, dataset: str) -> dict:
    setting = "beta=1.2" if method.startswith("Margin") else ""
    return {"section": "", "method": method, "setting": setting, "dataset": dataset}


def _floor_rows(sources) -> list[Row]:
    """The frozen backbone of each source (one seed-free record, shared by Table 2 and the ablations): the floor a
    trained row of the same source is checked against."""
    return [Row(method=ZERO_SHOT, spec={"zero_shot": True, "source": s}, runner="train_analysis", group=s,
                label=f"{s}-zero_shot", seed_free=True) for s in sources]


def table2_rows() -> list[Row]:
    """Table 2's rows (and Table S1's, the same runs): each source's frozen backbone, then every guided row."""
    return _floor_rows(SOURCES) + [Row(method=m, setting="beta=1.2" if m.startswith("Margin") else "",
                                       spec={"method": m, "source": s}, runner="train_analysis", group=s,
                                       label=_label(s, m))
                                   for s in SOURCES for m in guided_rows()]


def table2_env(metric: str = "R@1") -> dict:
    """Table 2's claim environment: the (guided, unguided) pairs where the paper prints both cells (Table 2,
    completed from Table S1: :data:`umlkit.experiments.tables.paper_cells.FILL_FROM`) and guidance wins there
    (``gains``; Sec. 4.2: clear
    gains on CUB and Cars, small ones on SOP, where MS + ELG equals MS), and the (PLG Top-5, ELG) pairs the paper
    prints (``matches``), each with its cells' settings."""
    p = paper_table(PAPER, "Table 2").fillna({"section": "", "setting": ""})
    p = p[p["metric"] == metric]
    value = {(r["method"], r["dataset"]): r["value"] for _, r in p.iterrows()}

    def pair(a: str, b: str, d: str) -> dict:
        return {"a": a, "b": b, "d": d, "sa": _cell(a, d)["setting"], "sb": _cell(b, d)["setting"]}
    gains = [pair(f"{m} + {g}", m, d) for m in lg_config()["methods"] for g in lg_config()["guidance"]
             for d in (SOURCE_NAMES[s] for s in SOURCES)
             if value.get((f"{m} + {g}", d)) is not None and value.get((m, d)) is not None
             and value[(f"{m} + {g}", d)] > value[(m, d)]]
    matches = [pair(f"{m} + PLG Top-5", f"{m} + ELG", d) for m in lg_config()["methods"]
               for d in (SOURCE_NAMES[s] for s in SOURCES)
               if (f"{m} + PLG Top-5", d) in value and (f"{m} + ELG", d) in value]
    return {"gains": gains, "matches": matches, "margin": f"{MARGIN:g}"}


def table(name: str = "Table 2", profile: str = "quick") -> Table:
    """Table 2 (R@1) or Table S1 (R@1, NMI, mAP@1000) - the same runs -, an ablation table (3, S2, 4, 5, S3) or the
    controls, as tables.yaml declares them."""
    if name not in ("Table 2", "Table S1", *ABLATIONS):
        raise KeyError(f"language-guidance tables: Table 2, Table S1, {', '.join(ABLATIONS)}; not {name!r}")
    return table_of(name, profile)


# ------------------------------------------------------------------------------------------------ ablations
_NO_CAPTIONS = DECLARED["no_captions"]
_HUB_ONLY = DECLARED["hub_only"]
ABLATIONS: dict[str, dict] = DECLARED["ablations"]   # rows, columns, metrics and reasons per ablation table
ABLATIONS["Table S2"] = {**ABLATIONS["Table 3"], "rows": [r for r in ABLATIONS["Table 3"]["rows"]
                                                            if not r[0].startswith(("(b)", "(c)"))]}


def ablation_env(table: str) -> dict:
    """An ablation table's claim environment: the paper's one margin and each row's section."""
    return {"margin": f"{MARGIN:g}", "sections": {r[1]: r[0] for r in ABLATIONS[table]["rows"]}}


def ablation_unmeasured(table: str) -> dict:
    return ABLATIONS[table].get("unmeasured", {})


def ablation_rows(table: str, profile: str = "quick") -> list[Row]:
    """One of Tables 3, S2, 4, 5, S3 (CUB- and Cars-like sources, R@1 and mAP@1000) or the book's controls
    (every source): the rows of :data:`ABLATIONS` that ``profile`` measures."""
    spec = ABLATIONS[table]
    columns = spec.get("columns", ["CUB", "Cars"])
    sources = [s for s in SOURCES if SOURCE_NAMES[s] in columns]
    return _floor_rows(sources) + [
        Row(method=m, section=sec, setting=rest[0] if rest else "", spec={"method": run, "source": s},
            runner="train_analysis", group=s, label=_label(s, run))
        for s in sources for sec, m, run, profiles, *rest in spec["rows"] if profile in profiles]


def ablation_scores(result: dict, row: Row, table: str) -> dict:
    return _scores_in(ABLATIONS[table].get("metrics", ("R@1", "mAP@1000")))(result, row)


def ablation_table(name: str, profile: str = "quick") -> Table:
    return table(name, profile)


CURVE_ROWS = (BASELINE, f"{BASELINE} + ELG", f"{BASELINE} + PLG Top-5")


def first_epoch(profile: str = "quick") -> int:
    """The first epoch the Table 2 runs evaluate (their ``train.eval_every``)."""
    return int(run_config(profile, method=BASELINE, source="cub")["train"]["eval_every"])


def curve_rows() -> list[Row]:
    return [r for r in table2_rows() if r.method in CURVE_ROWS]


def convergence_scores(result: dict, row: Row) -> dict:
    """Fig. S1's cells: R@1 on the test classes at every evaluated epoch, and the training time."""
    out = {(d, f"R@1 epoch {c['epoch']}"): v for c in result.get("curves", []) for d, v in c["test"].items()
           if d == SOURCE_NAMES[row.group]}
    out[(SOURCE_NAMES[row.group], "train seconds")] = result["train_seconds"]
    return out


def curve_env(profile: str = "quick") -> dict:
    return {"guided": list(CURVE_ROWS[1:]), "baseline": BASELINE, "first": first_epoch(profile),
            "semantic_d": SOURCE_NAMES[SEMANTIC["source"]]}


def convergence_table(profile: str = "quick") -> Table:
    return table_of("Fig. S1", profile)


# ------------------------------------------------------------------------------------------------ Fig. 3
SEMANTIC = DECLARED["semantic"]
"""Fig. 3 (Sec. 4.3): the top-``neighbours`` retrieved images of every test image of ``source``, counted per
retrieved class; the ``related`` test classes closest to a query class by the ``judge`` guidance's language rows
(the sentence model on the class names, for every row alike) are its semantically related classes."""


def semantic_config(row: Row, seed: int, profile: str = "quick", overrides=()) -> dict:
    """A Table 2 run's key with the neighbour counts of Fig. 3 added to its analysis (so a run of its own)."""
    key = config_for(row, seed, profile, overrides)
    return {**key, "analysis": {**key["analysis"], "neighbour_classes": SEMANTIC["neighbours"]}}


def related_classes(counts: dict, sim: "pd.DataFrame", n: int) -> dict[str, list[str]]:  # noqa: F821
    """For every query class of a record's ``neighbour_classes``, the ``n`` other test classes (those the record
    lists as queries) closest to it by ``sim``, closest first (ties by name)."""
    test = sorted(counts)
    out = {}
    for q in test:
        others = sorted((c for c in test if c != q), key=lambda c: (-float(sim.at[q, c]), c))
        out[q] = others[:n]
    return out


def semantic_shares(counts: dict, related: dict) -> dict[str, float]:
    """Percent of the retrieved neighbours, averaged over query classes: ``same class`` and ``related classes`` (of
    the neighbours from another class, the share from the query's related classes)."""
    import numpy as np
    same, rel = [], []
    for q, row in counts.items():
        total = sum(row.values())
        wrong = total - row.get(q, 0)
        same.append(row.get(q, 0) / total)
        if wrong:
            rel.append(sum(row.get(c, 0) for c in related[q]) / wrong)
    return {"same class": 100.0 * float(np.mean(same)), "related classes": 100.0 * float(np.mean(rel))}


def semantic_rows() -> list[Row]:
    return [r for r in table2_rows() if r.method in CURVE_ROWS and r.group == SEMANTIC["source"]]


def semantic_columns() -> list[str]:
    return [SOURCE_NAMES[SEMANTIC["source"]]]


def semantic_scores(result: dict, row: Row, profile: str = "quick") -> dict:
    """Fig. 3's cells of a record: the shares of :func:`semantic_shares` under the ``judge`` guidance's language
    similarities (read once per profile and results folder)."""
    from umlkit._paths import results_root
    counts = result["neighbour_classes"]
    sim = _judge(SEMANTIC["source"], SEMANTIC["judge"], profile, str(results_root(profile)))
    rel = related_classes(counts, sim, SEMANTIC["related"])
    return {(SOURCE_NAMES[SEMANTIC["source"]], m): v for m, v in semantic_shares(counts, rel).items()}


@lru_cache(maxsize=4)
def _judge(source: str, guidance: str, profile: str, results: str):
    return class_similarity(source, guidance, profile)


def semantic_table(profile: str = "quick") -> Table:
    return table_of("Fig. 3", profile)


def TABLES(profile: str = "quick") -> dict[str, Table]:  # noqa: N802 - same signature as the other papers
    """The language-guidance tables as tables.yaml declares them: Table 1 (the state of the art: quoted, no rows
    run), Tables 2 / S1, the ablation tables, Fig. S1, Fig. 3 and, beyond the paper, the controls and the unified
    setting."""
    return build_tables(PAPER, sys.modules[__name__], DECLARED, profile)


def table_of(name: str, profile: str = "quick") -> Table:
    return build_tables(PAPER, sys.modules[__name__], DECLARED, profile, names=[name])[name]


def table_jobs(profile: str = "quick", seeds=SEEDS) -> list[tuple[str, str, dict]]:
    """Every run of the tables, each once (a run that several tables list, e.g. the baseline, is one job)."""
    jobs, seen = [], set()
    for name, spec in TABLES(profile).items():
        if name in ("Table S1", "Fig. S1", "Fig. 3", "Unified setting"):   # Table 2's runs; job lists of their own
            continue
        folder = "table2" if name == "Table 2" else "ablations"
        for s in seeds:
            for r in spec.rows:
                label = f"{r.label}-seed{s}"
                if label in seen or (r.seed_free and s != seeds[0]):   # a frozen backbone: one record is exact
                    continue
                seen.add(label)
                jobs.append((folder, label, config_for(r, s, profile)))
    return jobs


def semantic_jobs(profile: str = "quick") -> list[tuple]:
    """Fig. 3's runs (Table 2's Multi-Similarity runs with the neighbour counts added to their analysis)."""
    spec = semantic_table(profile)
    return [("fig3", f"{r.label}-seed{s}", spec.config(r, s, profile)) for s in SEEDS for r in spec.rows]


def unified_jobs(profile: str = "quick") -> list[tuple]:
    """The unified setting's runs (beyond the paper), each with its runner."""
    spec = unified_table(profile)
    return [("unified", f"{r.label}-seed{s}", spec.config(r, s, profile), r.runner)
            for s in SEEDS for r in spec.rows]


# ------------------------------------------------------------------------------------------------ unified setting
def unified_config(profile: str = "quick", *, method: str = "PUMA", guidance: str | None = None, seed: int = 0,
                   omega: float | None = None, validation: bool = False, overrides: Sequence[str] = ()) -> dict:
    """Beyond the paper: one row of the unified setting - the PUMA tables' configuration of ``method`` ("PUMA" or
    "full fine-tuning", :func:`umlkit.experiments.recipes.unified.tables_config`: in the quick profile's second pass
    the v2 backbone at the method's chosen rate) and, with ``guidance``, the language term over the eight sources'
    training classes with weight ``omega`` (default: the chosen one). Without guidance the configuration is PUMA
    Table 2's own, so the PUMA chapter's records serve. ``overrides`` apply to the base configuration (before the
    language term is added)."""
    u = lg_config()["unified"]
    if method not in u["methods"]:
        raise KeyError(f"unified method must be one of {list(u['methods'])}, got {method!r}")
    overrides = [*([f"data.val_fraction={u['val_fraction']}"] if validation else []), *overrides]
    cfg = unified_recipe.tables_config(profile, method=u["methods"][method], seed=seed, overrides=overrides)
    if guidance is None:
        return cfg
    if guidance not in u["guidance"]:
        raise KeyError(f"unified guidance must be one of {u['guidance']}, got {guidance!r}")
    if omega is None:
        chosen = (u["omega"].get(profile) or {}).get(f"{method} + {guidance}")
        if chosen is None:
            raise KeyError(f"configs/language_guidance/language_guidance.yaml has no unified {profile} omega for "
                           f"{method + ' + ' + guidance!r} (run the unified omega sweep)")
        omega = chosen
    out = copy.deepcopy(cfg)
    out["objective"].append({"name": "language_guidance", "weight": float(omega),
                             "options": {**lg_config()["loss"], **guidance_spec(guidance)["loss"],
                                         "language_embeddings": language_ref(UNIFIED, guidance, profile)}})
    out["name"] = f"language_guidance-unified-{method.replace(' ', '_')}+{guidance.replace(' ', '_')}"
    return out


def unified_rows() -> list[tuple[str, str | None]]:
    u = lg_config()["unified"]
    return [(m, g) for m in u["methods"] for g in (None, *u["guidance"])]


def _unified_label(method: str, guidance: str | None) -> str:
    return method if guidance is None else f"{method} + {guidance}"


def unified_omega_sweep() -> Sweep:
    """The unified setting's omega sweep: every guided row x ``unified.omega_grid`` on PUMA's validation split, and
    each method without guidance (the reference; PUMA's own learning-rate sweep has the same run)."""
    u = lg_config()["unified"]
    return Sweep("unified_sweep", units=lambda profile: unified_rows(),
                 grid=lambda mg: None if mg[1] is None else omega_grid(_unified_label(*mg), u),
                 key=lambda mg, w, profile, seed: unified_config(profile, method=mg[0], guidance=mg[1], seed=seed,
                                                                 omega=w, validation=True),
                 name=lambda mg: _unified_label(*mg).replace(" ", "_"), label="{name}-w{value:g}-seed{seed}",
                 runner=lambda mg: "train")


def unified_sweep_jobs(profile: str = "quick", seed: int = 0) -> list[tuple[str, str, dict]]:
    return unified_omega_sweep().jobs(profile, seed)


def unified_table_rows(profile: str = "quick") -> list[Row]:
    """The unified setting's rows: PUMA and unified full fine-tuning, and each with a guidance once the unified
    sweep's omega for it is configured."""
    chosen = lg_config()["unified"]["omega"].get(profile) or {}
    return [Row(method=_unified_label(m, g), spec={"method": m, "guidance": g}, runner="train", group=m,
                label=f"unified-{_unified_label(m, g).replace(' + ', '+').replace(' ', '_')}")
            for m, g in unified_rows() if g is None or f"{m} + {g}" in chosen]


def unified_key(row: Row, seed: int, profile: str = "quick", overrides=()) -> dict:
    return unified_config(profile, method=row.spec["method"], guidance=row.spec["guidance"], seed=seed,
                          overrides=list(overrides))


def unified_env() -> dict:
    return {"pairs": [{"m": m, "g": g} for m, g in unified_rows() if g is not None]}


def unified_columns() -> list[str]:
    from umlkit.data.unified import PUMA_ORDER
    return [SOURCE_NAMES[s] for s in PUMA_ORDER] + ["Unified", "Harmonic"]


def unified_table(profile: str = "quick") -> Table:
    """Beyond the paper: PUMA and unified full fine-tuning with and without ELG / PLG over the eight sources
    (per-source R@1, Unified and Harmonic), with the claims that guidance raises Unified and Harmonic R@1."""
    return table_of("Unified setting", profile)
