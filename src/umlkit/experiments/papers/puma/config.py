"""PUMA (Kim et al., "Learning Unified Distance Metric Across Diverse Data Distributions with Parameter-Efficient
Transfer Learning", WACV'25): Tables 2-5 and Figure 3 as data for :mod:`umlkit.experiments.tables.table`.

What each table needs (paper section / official code):

* Table 2 (a): one fully fine-tuned model per dataset (``unified_eval.py``; runner ``specialists``). Each column is
  the dataset's own model on its own test set; *Harmonic* is the harmonic mean of those 8 numbers; *Unified* is the
  ensemble of the 8 models (the mean of their L2-normalised embeddings).
* Table 2 (b): one model fully fine-tuned on the union, for each of 9 losses (pair losses see 4 images per class,
  the official ``UniqueClassSampler``; proxy losses random batches, ``--IPC 0``).
* Table 2 (c): parameter-efficient methods on the frozen backbone with CurricularFace (VPTSP-G with its own
  Proxy-Anchor on the generated semantic proxies).
* Table 3: single vs conditional prompt x static vs stochastic adapter; Table 4: dataset-specific vs unified
  training (CurricularFace, Proxy-Anchor, PUMA); Table 5: backbones; Figure 3: the prompt pool's weights averaged
  per source (the raw cosine weights of ``PromptPool.weights``, stored by the ``train`` runner).

The rows, claims, grids and reasons are ``tables.yaml`` beside this module; run settings come from
``configs/puma/{full_finetune,puma,methods}.yaml`` (the unified recipe, :mod:`umlkit.experiments.recipes.unified`,
only composes them; it is shared with language guidance's unified section and the regime map). In
the quick profile the tiny ViT on UML-Mini stands in for ViT-S/16 on the real data: its rows are keyed by the
paper's ViT-S/16 cells, so that the long results join the paper; the chapters say which profile measured them.
Every number is the *last* epoch; learning rates are chosen on a validation split of training classes
(:func:`lr_sweep`), never on test.
"""
from __future__ import annotations

import sys
from collections.abc import Sequence

import pandas as pd

from umlkit.data.unified import PUMA_ORDER
from umlkit.experiments.recipes.tuning import Sweep
from umlkit.experiments.recipes.unified import (  # noqa: F401
    chosen_lr,
    few_shot_block,
    few_shot_config,
    few_shot_lr,
    run_config,
    second_pass,
    stage_lr,
    tables_stage,
    unit_name,
)
from umlkit.experiments.runs.runners import SOURCE_NAMES
from umlkit.experiments.tables import builder as table_builder
from umlkit.experiments.tables.declarations import load_declarations
from umlkit.experiments.tables.table import Row, Table
from umlkit.experiments.tables.table import table_claims as _table_claims
from umlkit.metrics import harmonic_mean
from umlkit.train.config import resolve_config

PAPER = "puma"
DECLARED = load_declarations(__file__)   # tables.yaml: rows, claims, grids and reasons of the paper's tables
REASONS = DECLARED["reasons"]
DATASET_COLUMNS = [*SOURCE_NAMES.values(), "Unified", "Harmonic"]
SECTIONS = DECLARED["sections"]
VIT_S = DECLARED["vit_s"]
LOSSES, PEFT_ROWS, ABLATION_ROWS = DECLARED["losses"], DECLARED["peft_rows"], DECLARED["ablation_rows"]
BACKBONES_QUICK, BACKBONES_QUICK_SECOND = DECLARED["backbones_quick"]["first"], DECLARED["backbones_quick"]["second"]
BACKBONES_FULL = DECLARED["backbones_full"]
T5_METHODS = DECLARED["t5_methods"]


def backbones_quick(profile: str = "quick") -> dict:
    """Table 5's quick backbones in the profile's current stage (:func:`tables_stage`)."""
    return BACKBONES_QUICK_SECOND if tables_stage(profile) == "second" else BACKBONES_QUICK


def config_for(row: Row, seed: int, profile: str, overrides: Sequence[str] = (), stage: str | None = None) -> dict:
    """A row's record key: one configuration, or ``{source: configuration}`` for the ``specialists`` runner. In the
    second pass (quick) every trained row runs at its tuning unit's chosen rate. ``stage`` defaults to the profile's
    current one (:func:`tables_stage`); the full profile has only the first."""
    s = dict(row.spec)
    stage = tables_stage(profile) if stage is None else (stage if profile == "quick" else "first")
    lr = s.get("lr")
    if lr is None:
        lr = stage_lr(tuning_unit(row), stage)
    kw = dict(method=s.get("method", "full"), loss=s.get("loss", "curricularface"), seed=seed,
              options=s.get("options"), lr=lr, overrides=[*s.get("overrides", ()), *overrides], stage=stage)
    if row.runner == "specialists":
        return {src: run_config(profile, datasets=[src], **kw) for src in PUMA_ORDER}
    return run_config(profile, **kw)


# ------------------------------------------------------------------------------------------------ scores
def _own_and_ensemble(result: dict, row: Row) -> dict:
    """Table 2 (a): own-source R@1, the ensemble's Unified and the harmonic mean of the own-source values."""
    own = result["own"]
    return {**own, "Unified": result["ensemble"]["Unified"], "Harmonic": harmonic_mean(list(own.values()))}


def per_source_harmonic(result: dict, row: Row) -> dict:
    """Table 4: per-source R@1 (own-source for specialists) and their harmonic mean; no Unified column."""
    scores = result["own"] if "own" in result else {d: result["test"][d] for d in SOURCE_NAMES.values()}
    return {**scores, "Harmonic": harmonic_mean(list(scores.values()))}


def table2_scores(result: dict, row: Row) -> dict:
    return _own_and_ensemble(result, row) if "own" in result else result["test"]


# ------------------------------------------------------------------------------------------------ tables
_B_COMPARED = tuple(DECLARED["b_compared"])   # (b) rows that claims compare (Table 2; Table 4's unified PA)


def table2_stage_rows(stage: str = "first") -> list[Row]:
    rows = [Row(method="Zero-Shot", setting="arch=ViT-S/16", spec={"method": "zero_shot"}, runner="zero_shot",
                group="zero-shot", label="zero-shot", seed_free=True)]
    rows += [Row(section=SECTIONS["a"], method=n, setting=VIT_S, spec={"method": "full", "loss": loss},
                 runner="specialists", group="a", label=f"full-{loss}") for n, loss in LOSSES.items()]
    # second pass: every cell a claim compares has 3 seeds (the table's); the (b) losses no claim compares keep one
    one = {"seeds": (0,)} if stage == "second" else {}
    rows += [Row(section=SECTIONS["b"], method=n, setting=VIT_S, group="b",
                 spec={"method": "full", "loss": loss, **(one if loss not in _B_COMPARED else {})})
             for n, loss in LOSSES.items()]
    rows += [Row(section=SECTIONS["c"], method=n, setting=VIT_S, spec=s, group="c") for n, s in PEFT_ROWS.items()]
    return rows


def table3_rows() -> list[Row]:
    out = []
    for setting, spec in ABLATION_ROWS.items():
        opts = "_".join(f"{k}{v}" for k, v in sorted((spec.get("options") or {}).items())) or "default"
        out.append(Row(setting=setting, spec=spec, label=f"{spec['method']}-{opts}"))
    return out


def table4_rows() -> list[Row]:
    rows = []
    for name, (method, loss) in DECLARED["table4_rows"].items():
        spec = {"method": method, "loss": loss}
        rows += [Row(method=name, setting="training=Spec.", spec=spec, runner="specialists", label=f"{method}-{loss}",
                     name=f"{name} (dataset-specific)"),
                 Row(method=name, setting="training=Univ.", spec=spec, label=f"{name}-univ", name=f"{name} (unified)")]
    return rows


def table5_rows(profile: str, stage: str | None = None) -> list[Row]:
    rows = []
    if profile == "quick":
        stage = stage or tables_stage(profile)
        for b, bb in (BACKBONES_QUICK_SECOND if stage == "second" else BACKBONES_QUICK).items():
            over = [f"model.pretrained={str(bb['pretrained']).lower()}"]
            if bb.get("backbone"):
                over.append(f"model.backbone={bb['backbone']}")
            if bb["weights"]:
                over.append(f"model.weights={bb['weights']}")
            for name, method in T5_METHODS.items():
                if bb["paper"]:
                    setting = bb["paper"][0] if method == "zero_shot" else bb["paper"][1]
                else:
                    setting = f"backbone=tiny ViT, {b}"
                rows.append(Row(method=name, setting=setting, spec={"method": method, "overrides": over},
                                runner="zero_shot" if method == "zero_shot" else "train", name=f"{name} / {b}",
                                group=b, label=f"{method}-{b}",
                                seed_free=method == "zero_shot" and bool(bb["pretrained"])))
    else:
        for arch, (timm_name, zs_dim, pre) in BACKBONES_FULL.items():
            for name, method in T5_METHODS.items():
                dim = zs_dim if method == "zero_shot" else 128
                rows.append(Row(method=name, setting=f"{arch};dim={dim};{pre}",
                                spec={"method": method, "overrides": [f"model.backbone={timm_name}"]},
                                runner="zero_shot" if method == "zero_shot" else "train",
                                name=f"{name} / {arch[5:]}", group=arch, label=f"{method}-{arch[5:]}",
                                seed_free=method == "zero_shot"))
    return rows


def table5_env(profile: str, stage: str | None = None) -> dict:
    """Table 5's claim environment: per backbone group but Table 2's own (ViT-S/16, or the quick profile's stand-in
    for it), its name and the setting cell of each method's row (``groups``)."""
    rows = table5_rows(profile, stage)
    if profile == "quick":
        own = [b for b, bb in (BACKBONES_QUICK_SECOND if (stage or tables_stage(profile)) == "second"
                               else BACKBONES_QUICK).items() if bb["paper"]]
    else:
        own = [next(iter(BACKBONES_FULL))]
    return {"groups": [{"name": b, **{r.method: r.setting for r in rows if r.group == b}}
                       for b in dict.fromkeys(r.group for r in rows if r.group not in own)]}


def stage_seeds(stage: str | None = None) -> tuple[int, ...]:
    """The seeds of Tables 2, 4 and 5 in a pass: the first pass trained one, the second three."""
    return (0, 1, 2) if stage == "second" else (0,)


def build_tables(stage: str) -> dict[str, Table]:
    """Tables 2-4 and the quick Table 5 of a stage (the module's TABLE2-4 and TABLES("quick") are the current one's),
    as tables.yaml declares them."""
    return table_builder.build_tables(PAPER, sys.modules[__name__], DECLARED, "quick",
                                      names=["Table 2", "Table 3", "Table 4", "Table 5"], context={"stage": stage})


_CURRENT = build_tables(tables_stage("quick"))
TABLE2, TABLE3, TABLE4 = _CURRENT["Table 2"], _CURRENT["Table 3"], _CURRENT["Table 4"]


def TABLE5(profile: str = "quick") -> Table:  # noqa: N802 - the rows depend on the profile
    if profile == "quick":
        return _CURRENT["Table 5"]
    return table_builder.build_tables(PAPER, sys.modules[__name__], DECLARED, profile, names=["Table 5"],
                                      context={"stage": None})["Table 5"]


def table_jobs(profile: str = "quick", specs: dict[str, Table] | None = None) -> list[tuple]:
    """(record folder, label, key, runner) of every run of Tables 2-5 in the profile's current stage (or of
    ``specs``), each configuration once (Table 3's PUMA is Table 2's, Table 4's unified rows are Table 2 (b)'s)."""
    from umlkit.experiments.tables.table import distinct_jobs
    return distinct_jobs(specs or TABLES(profile), profile)


def TABLES(profile: str = "quick") -> dict[str, Table]:  # noqa: N802
    return {"Table 2": TABLE2, "Table 3": TABLE3, "Table 4": TABLE4, "Table 5": TABLE5(profile)}


def table_claims(spec: Table, cmp: pd.DataFrame) -> pd.DataFrame:
    """The table's declared claims whose two cells were measured, with verdicts
    (:func:`umlkit.experiments.tables.table.table_claims`)."""
    return _table_claims(spec, cmp)


# ------------------------------------------------------------------------------------------------ tuning (second pass)
def tuning_unit(row: Row) -> str | None:
    """What one learning rate is chosen for (:func:`unified_recipe.unit_name`). Rows that differ only by
    ``overrides`` (Table 5's backbones) share the unit of the shipped backbone; the frozen backbone has none."""
    s = row.spec
    return unit_name(s.get("method"), s.get("loss", "curricularface"), s.get("options"),
                     specialists=row.runner == "specialists")


# the order the sweep trains in: the units the headline and most claims compare first
_UNIT_PRIORITY = tuple(DECLARED["unit_priority"])


def tuning_units() -> dict[str, Row]:
    """Every unit of Tables 2-4 (one representative row each), in the order the sweep trains them."""
    units: dict[str, Row] = {}
    for spec in (TABLE2, TABLE3, TABLE4):
        for row in spec.rows:
            u = tuning_unit(row)
            if u is not None and u not in units:
                units[u] = row
    order = [u for u in _UNIT_PRIORITY if u in units] + [u for u in units if u not in _UNIT_PRIORITY]
    return {u: units[u] for u in order}


def _grid_kind(method: str) -> list[float]:
    t = second_pass()["tuning"]
    return [float(x) for x in t["grids"]["full" if method == "full" else t["kinds"].get(method, "peft")]]


def tuning_grid(unit: str) -> list[float]:
    """The rates a unit tries: its kind's grid (methods.yaml ``second_pass.tuning.grids``) plus ``extra.<unit>``."""
    extra = (second_pass()["tuning"].get("extra") or {}).get(unit) or ()
    return sorted({*_grid_kind(unit.removeprefix("spec-").split("-")[0]), *(float(x) for x in extra)})


def sweep() -> Sweep:
    """The second pass's tuning sweep (quick): each unit of Tables 2-4 x each rate of its grid, trained with the
    validation share of every source's training classes held out, evaluated every ``eval_every`` epochs."""
    units = tuning_units()

    def key(unit: str, lr: float, profile: str, seed: int) -> dict:
        s = units[unit].spec
        vf, every = float(second_pass()["tuning"]["val_fraction"]), int(second_pass()["tuning"]["eval_every"])
        kw = dict(method=s.get("method", "full"), loss=s.get("loss", "curricularface"), seed=seed,
                  options=s.get("options"), lr=lr, stage="second",
                  overrides=[f"data.val_fraction={vf}", f"train.eval_every={every}"])
        return ({src: run_config(profile, datasets=[src], **kw) for src in PUMA_ORDER}
                if units[unit].runner == "specialists" else run_config(profile, **kw))
    return Sweep("tuning", units=lambda profile: list(units), grid=tuning_grid, key=key,
                 runner=lambda unit: units[unit].runner)


def sweep_jobs(profile: str = "quick", units: Sequence[str] | None = None, seed: int = 0) -> list[tuple]:
    """(record folder, label, key, runner) of every run of :func:`sweep` (the quick profile's only)."""
    if profile != "quick":
        raise ValueError("the second-pass tuning protocol is the quick profile's (the full profile uses the paper's "
                         f"rates), got profile={profile!r}")
    return sweep().jobs(profile, seed, units)


def few_shot_sweep() -> Sweep:
    """The few-shot tuning sweep (quick): each method x its grid kind's rates at ``tune_shots``, validation held
    out."""
    fs = few_shot_block()
    k = int(fs["tune_shots"])
    return Sweep("few_shot_tuning", units=lambda profile: list(fs["methods"].values()),
                 grid=lambda m: sorted({*_grid_kind(m), *(float(x) for x in (fs.get("extra") or {}).get(m) or ())}),
                 key=lambda m, lr, profile, seed: few_shot_config(profile, m, k, seed, lr=lr, validation=True),
                 name=lambda m: f"fewshot{k}-{m}", runner=lambda m: "train")


def few_shot_tuning_jobs(profile: str = "quick", seed: int = 0) -> list[tuple]:
    return few_shot_sweep().jobs(profile, seed)


def few_shot_rows() -> list[Row]:
    fs = few_shot_block()
    rows = [Row(method="Zero-Shot", setting="shots=all", spec={"method": "zero_shot", "seeds": (0,)},
                runner="zero_shot", label="zero-shot", name="Zero-Shot", seed_free=True)]
    for k in fs["shots"]:
        rows += [Row(method=name, setting=f"shots={k}", spec={"method": m, "shots": int(k)}, name=f"{name}, k={k}",
                     label=f"fewshot{k}-{m}", group=str(k)) for name, m in fs["methods"].items()]
    return rows


def few_shot_config_for(row: Row, seed: int, profile: str, overrides: Sequence[str] = ()) -> dict:
    if row.runner == "zero_shot":
        return run_config(profile, method="zero_shot", seed=seed, overrides=list(overrides),
                          stage="second" if profile == "quick" else "first")
    cfg = few_shot_config(profile, row.spec["method"], row.spec["shots"], seed)
    return resolve_config(cfg, overrides=list(overrides)) if overrides else cfg


def FEW_SHOT() -> Table:  # noqa: N802 - like TABLE5, built from the configuration
    """The few-shot experiment as a table: zero-shot, and each method at each k (Unified, Harmonic, per source)."""
    return table_builder.build_tables(PAPER, sys.modules[__name__], DECLARED, "quick", names=["Few-shot"])[
        "Few-shot"]


def few_shot_seeds(seeds: Sequence[int]) -> dict[str, Sequence[int]]:
    """``measure``'s seeds for the few-shot table: ``seeds`` for every trained row (one group per k); the frozen
    backbone keeps its one record."""
    return {str(k): list(seeds) for k in few_shot_block()["shots"]}


def few_shot_jobs(profile: str = "quick", seeds: Sequence[int] = (0, 1, 2)) -> list[tuple]:
    spec = FEW_SHOT()
    jobs = []
    for seed in seeds:
        for row in spec.rows:
            if row.seed_free and seed != seeds[0]:
                continue
            jobs.append((spec.slug, f"{row.label}-seed{seed}", few_shot_config_for(row, seed, profile), row.runner))
    return jobs


# the epoch budgets of the longer-training comparison (second pass): the tables' 15 and three times as many
BUDGET_EPOCHS = tuple(DECLARED["budget"]["epochs"])
_BUDGET_ROWS = DECLARED["budget"]["rows"]


def budget_rows() -> list[Row]:
    rows = []
    for e in BUDGET_EPOCHS:
        for name, spec in _BUDGET_ROWS.items():
            over = [] if e == 15 else [f"train.epochs={e}", "train.eval_every=15"]   # test R@1 at 15, 30, 45
            rows.append(Row(method=name, setting=f"epochs={e}", spec={**spec, "overrides": over},
                            name=f"{'PUMA' if name == 'Ours' else 'full fine-tuning'}, {e} epochs",
                            label=f"{spec['method']}-{e}ep", group=str(e)))
    return rows


def budget_config(row: Row, seed: int, profile: str, overrides: Sequence[str] = ()) -> dict:
    # the rate of the row's tuning unit at 15 epochs (Table 2's PUMA / unified CurricularFace rows)
    unit = tuning_unit(Row(spec={k: v for k, v in row.spec.items() if k != "overrides"}))
    return run_config(profile, method=row.spec["method"], loss=row.spec.get("loss", "curricularface"), seed=seed,
                      lr=chosen_lr(unit), overrides=[*row.spec["overrides"], *overrides], stage="second")


def BUDGET() -> Table:  # noqa: N802 - built from the configuration
    """PUMA against unified full fine-tuning at 15 and 45 epochs (second pass, quick; the 15-epoch runs are Table
    2's): does the ordering change when the slower method gets the time to converge?"""
    return table_builder.build_tables(PAPER, sys.modules[__name__], DECLARED, "quick", names=["Budget"])["Budget"]


def claim_tables(profile: str = "quick") -> dict[str, Table]:
    """Every PUMA table with declared claims, for the scoreboard: the paper's Tables 2-5 and the book's few-shot
    and longer-budget experiments (quick). The regime map, built on PUMA's configuration, is registered apart
    (:mod:`umlkit.experiments.papers.regime`)."""
    out = dict(TABLES(profile))
    if profile == "quick":
        out["Few-shot"] = FEW_SHOT()
        out["Budget"] = BUDGET()
    return out


def budget_jobs(profile: str = "quick") -> list[tuple]:
    """PUMA and full fine-tuning at 15 and 45 epochs (the Budget table's runs)."""
    return table_jobs(profile, {"Budget": BUDGET()})


def second_table_jobs(profile: str) -> list[tuple]:
    if profile != "quick":
        raise ValueError("the second pass is the quick profile's; the full profile's tables are job list 'tables'")
    return table_jobs(profile, build_tables("second"))


def row_of(spec: Table, **match) -> Row:
    found = [r for r in spec.rows if all(getattr(r, k) == v for k, v in match.items())]
    if len(found) != 1:
        raise KeyError(f"{spec.table}: {match} matches {len(found)} rows")
    return found[0]
