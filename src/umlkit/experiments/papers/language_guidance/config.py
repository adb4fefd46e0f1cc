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
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from umlkit.experiments import source_recipe, unified_recipe
from umlkit.experiments.declarations import expand, load_declarations
from umlkit.experiments.language_store import UNIFIED, guidance_spec, language_ref, lg_config
from umlkit.experiments.runners import SOURCE_NAMES
from umlkit.experiments.tables import Claim, Floor, Row, Table
from umlkit.experiments.tuning import chosen
from umlkit.paper import paper_table

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
        out["objective"].append({"name": "language_guidance", "weight": w,
                                 "options": {**cfg["loss"], **guidance_spec(guidance)["loss"],
                                             "language_embeddings": ref}})
    out["name"] = f"language_guidance-{source}-{method}"
    return out


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


def omega_jobs(profile: str = "quick", seed: int = 0) -> list[tuple[str, str, dict]]:
    """(record folder, label, key) of the sweep: per source (:func:`tuned_rows`), every guided row x its
    ``omega_grid`` and each base method without guidance. The CUB-like labels carry no source prefix."""
    jobs = []
    for source, rows in tuned_rows(profile).items():
        prefix = "" if source == "cub" else f"{source}-"
        for row in rows:
            if split_row(row)[1] is None:
                jobs.append(("omega_sweep", f"{prefix}{row}-seed{seed}", omega_key(row, None, profile, seed, source)))
            else:
                jobs += [("omega_sweep", f"{prefix}{row}-w{w:g}-seed{seed}", omega_key(row, w, profile, seed, source))
                         for w in omega_grid(row, source=source)]
    return jobs


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


def _rows() -> list[Row]:
    return _floor_rows(SOURCES) + [Row(method=m, setting="beta=1.2" if m.startswith("Margin") else "",
                                       spec={"method": m, "source": s}, runner="train_analysis", group=s,
                                       label=_label(s, m))
                                   for s in SOURCES for m in guided_rows()]


def _claims(metric: str = "R@1") -> list[Claim]:
    """"<method> + <guidance> beats <method>" on every source where the paper prints both cells (Table 2, completed
    from Table S1: :data:`umlkit.paper.FILL_FROM`) and guidance wins there (Sec. 4.2: clear gains on CUB and Cars,
    small ones on SOP, where MS + ELG equals MS), and "PLG matches ELG within MARGIN" for every method and source."""
    p = paper_table(PAPER, "Table 2").fillna({"section": "", "setting": ""})
    p = p[p["metric"] == metric]
    value = {(r["method"], r["dataset"]): r["value"] for _, r in p.iterrows()}
    out = []
    for m in lg_config()["methods"]:
        for g in lg_config()["guidance"]:
            for s in SOURCES:
                d = SOURCE_NAMES[s]
                a, b = value.get((f"{m} + {g}", d)), value.get((m, d))
                if a is not None and b is not None and a > b:
                    out.append(Claim(f"{m} + {g} beats {m} ({d})", _cell(f"{m} + {g}", d), _cell(m, d), metric))
    for m in lg_config()["methods"]:   # Sec. 4.2: PLG is about as good as ELG
        for s in SOURCES:
            d = SOURCE_NAMES[s]
            if (f"{m} + PLG Top-5", d) in value and (f"{m} + ELG", d) in value:
                out.append(Claim(f"{m} + PLG Top-5 matches {m} + ELG within {MARGIN:g} ({d})",
                                 _cell(f"{m} + PLG Top-5", d), _cell(f"{m} + ELG", d), metric, margin=MARGIN))
    return out


def table(name: str = "Table 2", profile: str = "quick") -> Table:
    """Table 2 (R@1) or Table S1 (R@1, NMI, mAP@1000) - the same runs -, an ablation table (3, S2, 4, 5, S3) or the
    controls (:func:`ablation_table`)."""
    if name in ABLATIONS:
        return ablation_table(name, profile)
    if name not in ("Table 2", "Table S1"):
        raise KeyError(f"language-guidance tables: Table 2, Table S1, {', '.join(ABLATIONS)}; not {name!r}")
    return Table(PAPER, name, _rows(), config_for, seeds=SEEDS, scores=_scores_in(("R@1", "NMI", "mAP@1000")),
                 claims=_claims() if name == "Table 2" else [], params=False,
                 unmeasured={"quick": "not measured in this profile"}, floor=Floor(frozen=ZERO_SHOT, per_setting=False))


# ------------------------------------------------------------------------------------------------ ablations
_NO_CAPTIONS = DECLARED["no_captions"]
_HUB_ONLY = DECLARED["hub_only"]
ABLATIONS: dict[str, dict] = DECLARED["ablations"]   # rows, columns, metrics and reasons per ablation table
ABLATIONS["Table S2"] = {**ABLATIONS["Table 3"], "rows": [r for r in ABLATIONS["Table 3"]["rows"]
                                                            if not r[0].startswith(("(b)", "(c)"))]}


def _ablation_claims(name: str) -> list[Claim]:
    """The paper's readings of an ablation table as claims (tables.yaml ``ablation_claims``), each cell one of the
    table's rows on one dataset."""
    section = {r[1]: r[0] for r in ABLATIONS[name]["rows"]}

    def cell(row: str, dataset: str) -> dict:
        return {"section": section[row], "setting": "", "method": row, "dataset": dataset}
    return [Claim(e["text"], cell(e["a"], e["dataset"]), cell(e["b"], e["dataset"]),
                  **({"margin": MARGIN} if e.get("equivalent") else {}))
            for e in expand(DECLARED["ablation_claims"].get(name) or [], {"margin": f"{MARGIN:g}"})]


def ablation_table(name: str, profile: str = "quick") -> Table:
    """One of Tables 3, S2, 4, 5, S3 (CUB- and Cars-like sources, R@1 and mAP@1000) or the book's controls
    (every source): the rows of :data:`ABLATIONS` that ``profile`` measures; the paper's other rows get its reason."""
    spec = ABLATIONS[name]
    columns = spec.get("columns", ["CUB", "Cars"])
    metrics = spec.get("metrics", ("R@1", "mAP@1000"))
    sources = [s for s in SOURCES if SOURCE_NAMES[s] in columns]
    rows = [Row(method=m, section=sec, setting=rest[0] if rest else "", spec={"method": run, "source": s},
                runner="train_analysis", group=s, label=_label(s, run))
            for s in sources for sec, m, run, profiles, *rest in spec["rows"] if profile in profiles]
    return Table(PAPER, name, _floor_rows(sources) + rows, config_for, seeds=SEEDS, scores=_scores_in(metrics),
                 claims=_ablation_claims(name) if profile == "quick" or name not in ("Controls", "Table 3") else [],
                 params=False, floor=Floor(frozen=ZERO_SHOT, per_setting=False),
                 unmeasured=spec.get("unmeasured", {}), columns=columns if name == "Controls" else None)


CURVE_ROWS = (BASELINE, f"{BASELINE} + ELG", f"{BASELINE} + PLG Top-5")


def first_epoch(profile: str = "quick") -> int:
    """The first epoch the Table 2 runs evaluate (their ``train.eval_every``)."""
    return int(run_config(profile, method=BASELINE, source="cub")["train"]["eval_every"])


def convergence_table(profile: str = "quick") -> Table:
    """Fig. S1 as a table: R@1 on the test classes at every evaluated epoch (the records' curves) of Multi-Similarity
    without and with guidance - the same runs as Table 2 -, and the training time; the claim is the paper's reading
    that guidance helps early ("faster convergence"), checked at the first evaluated epoch."""
    rows = [r for r in _rows() if r.method in CURVE_ROWS]

    def scores(result: dict, row: Row) -> dict:
        out = {(d, f"R@1 epoch {c['epoch']}"): v for c in result.get("curves", []) for d, v in c["test"].items()
               if d == SOURCE_NAMES[row.group]}
        out[(SOURCE_NAMES[row.group], "train seconds")] = result["train_seconds"]
        return out
    first = first_epoch(profile)
    claims = [Claim(f"{m} is ahead of {BASELINE} at epoch {first} ({d})", _cell(m, d), _cell(BASELINE, d),
                    metric=f"R@1 epoch {first}") for m in CURVE_ROWS[1:] for d in ("CUB", "Cars")]
    return Table(PAPER, "Fig. S1", rows, config_for, seeds=SEEDS, scores=scores, claims=claims, params=False,
                 columns=[SOURCE_NAMES[s] for s in SOURCES])


# ------------------------------------------------------------------------------------------------ Fig. 3
SEMANTIC = DECLARED["semantic"]
"""Fig. 3 (Sec. 4.3): the top-``neighbours`` retrieved images of every test image of ``source``, counted per
retrieved class; the ``related`` test classes closest to a query class by the ``judge`` guidance's language rows
(the sentence model on the class names, for every row alike) are its semantically related classes."""


def semantic_config(row: Row, seed: int, profile: str = "quick", overrides=()) -> dict:
    """A Table 2 run's key with the neighbour counts of Fig. 3 added to its analysis (so a run of its own)."""
    key = config_for(row, seed, profile, overrides)
    return {**key, "analysis": {**key["analysis"], "neighbour_classes": SEMANTIC["neighbours"]}}


def class_similarity(source: str, guidance: str = "ELG", profile: str = "quick") -> "pd.DataFrame":  # noqa: F821
    """Cosine similarity of every class row of ``source``'s language file for ``guidance`` (PLG: averaged over the
    pseudolabel slots), indexed by row name ("cub#017")."""
    import numpy as np
    import pandas as pd

    from umlkit._paths import results_root
    ref = language_ref(source, guidance, profile)
    with np.load(results_root(profile) / "language" / Path(ref["file"]).name, allow_pickle=False) as f:
        names, emb = [str(x) for x in f["class_names"]], np.array(f["embeddings"], dtype=np.float64)
    e = emb[:, None, :] if emb.ndim == 2 else emb
    e = e / np.linalg.norm(e, axis=-1, keepdims=True)
    return pd.DataFrame(np.einsum("ikd,jkd->ijk", e, e).mean(-1), index=names, columns=names)


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


def semantic_table(profile: str = "quick") -> Table:
    """Fig. 3 as a table: per row, the share of retrieved neighbours from the query's own class and from its
    semantically related classes, with the claims that guidance raises the related share (the paper's reading:
    "language-guided models retrieve more samples from semantically related classes")."""
    src = SEMANTIC["source"]
    d = SOURCE_NAMES[src]
    rows = [r for r in _rows() if r.method in CURVE_ROWS and r.group == src]
    judge: dict = {}   # the language similarities, read once per table when the first record is scored

    def scores(result: dict, row: Row) -> dict:
        if not judge:
            judge["sim"] = class_similarity(src, SEMANTIC["judge"], profile)
        counts = result["neighbour_classes"]
        rel = related_classes(counts, judge["sim"], SEMANTIC["related"])
        return {(d, m): v for m, v in semantic_shares(counts, rel).items()}
    claims = [Claim(f"{m} retrieves more from semantically related classes than {BASELINE} ({d})", _cell(m, d),
                    _cell(BASELINE, d), metric="related classes") for m in CURVE_ROWS[1:]]
    return Table(PAPER, "Fig. 3", rows, semantic_config, seeds=SEEDS, scores=scores, claims=claims, params=False,
                 columns=[d])


def TABLES(profile: str = "quick") -> dict[str, Table]:  # noqa: N802 - same signature as the other papers
    """The language-guidance tables: Table 1 (the state of the art: quoted, no rows run), Tables 2 / S1, the ablation
    tables, Fig. S1 and, beyond the paper, the controls and the unified setting."""
    return {"Table 2": table("Table 2"), "Table S1": table("Table S1"),
            **{n: ablation_table(n, profile) for n in ABLATIONS}, "Fig. S1": convergence_table(profile),
            "Fig. 3": semantic_table(profile), "Unified setting": unified_table(profile)}


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


def job_list(name: str, profile: str = "quick") -> list[tuple]:
    """A named job list for ``umlkit records train language_guidance NAME``: ``omega_sweep``, ``tables``,
    ``semantic`` (Fig. 3), ``unified_sweep`` or ``unified`` (the unified setting, beyond the paper). A job is (record folder, label, key)
    for the default runner (``train_analysis``), or (folder, label, key, runner)."""
    if name == "omega_sweep":
        return omega_jobs(profile)
    if name == "tables":
        return table_jobs(profile)
    if name == "unified_sweep":
        return unified_sweep_jobs(profile)
    if name == "semantic":
        spec = semantic_table(profile)
        return [("fig3", f"{r.label}-seed{s}", spec.config(r, s, profile)) for s in SEEDS for r in spec.rows]
    if name == "unified":
        spec = unified_table(profile)
        return [("unified", f"{r.label}-seed{s}", spec.config(r, s, profile), r.runner) for s in SEEDS for r in spec.rows]
    raise KeyError(f"unknown language-guidance job list {name!r}; choose omega_sweep, tables, semantic, unified_sweep "
                   f"or unified")


# ------------------------------------------------------------------------------------------------ unified setting
def unified_config(profile: str = "quick", *, method: str = "PUMA", guidance: str | None = None, seed: int = 0,
                   omega: float | None = None, validation: bool = False) -> dict:
    """Beyond the paper: one row of the unified setting - the PUMA tables' configuration of ``method`` ("PUMA" or
    "full fine-tuning", :func:`umlkit.experiments.unified_recipe.tables_config`: in the quick profile's second pass
    the v2 backbone at the method's chosen rate) and, with ``guidance``, the language term over the eight sources'
    training classes with weight ``omega`` (default: the chosen one). Without guidance the configuration is PUMA
    Table 2's own, so the PUMA chapter's records serve."""
    u = lg_config()["unified"]
    if method not in u["methods"]:
        raise KeyError(f"unified method must be one of {list(u['methods'])}, got {method!r}")
    overrides = [f"data.val_fraction={u['val_fraction']}"] if validation else []
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


def unified_sweep_jobs(profile: str = "quick", seed: int = 0) -> list[tuple[str, str, dict]]:
    """The unified setting's omega sweep: every guided row x ``unified.omega_grid`` on PUMA's validation split,
    and each method without guidance (the reference; PUMA's own learning-rate sweep has the same run)."""
    u = lg_config()["unified"]
    jobs = []
    for m, g in unified_rows():
        name = _unified_label(m, g).replace(" ", "_")
        if g is None:
            jobs.append(("unified_sweep", f"{name}-seed{seed}", unified_config(profile, method=m, seed=seed,
                                                                                 validation=True), "train"))
        else:
            grid = omega_grid(_unified_label(m, g), u)
            jobs += [("unified_sweep", f"{name}-w{w:g}-seed{seed}",
                      unified_config(profile, method=m, guidance=g, seed=seed, omega=w, validation=True),
                      "train") for w in grid]
    return jobs


def unified_table(profile: str = "quick") -> Table:
    """Beyond the paper: PUMA and unified full fine-tuning with and without ELG / PLG over the eight sources
    (per-source R@1, Unified and Harmonic), with the claims that guidance raises Unified and Harmonic R@1. A guided
    row is part of the table once the unified sweep's omega for it is configured."""
    from umlkit.data.unified import PUMA_ORDER
    chosen = lg_config()["unified"]["omega"].get(profile) or {}
    rows = [Row(method=_unified_label(m, g), spec={"method": m, "guidance": g}, runner="train", group=m,
                label=f"unified-{_unified_label(m, g).replace(' + ', '+').replace(' ', '_')}")
            for m, g in unified_rows() if g is None or f"{m} + {g}" in chosen]   # a guided row joins once its
                                                                                 # omega is chosen

    def config(row: Row, seed: int, profile: str = "quick", overrides=()) -> dict:
        return unified_config(profile, method=row.spec["method"], guidance=row.spec["guidance"], seed=seed)
    claims = [Claim(f"{m} + {g} beats {m} in the unified setting ({d})",
                    {"section": "", "method": f"{m} + {g}", "setting": "", "dataset": d},
                    {"section": "", "method": m, "setting": "", "dataset": d})
              for m, g in unified_rows() if g is not None for d in ("Unified", "Harmonic")]
    return Table(PAPER, "Unified setting", rows, config, seeds=SEEDS, claims=claims, params=False,
                 columns=[SOURCE_NAMES[s] for s in PUMA_ORDER] + ["Unified", "Harmonic"])
