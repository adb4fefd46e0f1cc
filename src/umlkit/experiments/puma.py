"""PUMA (Kim et al., "Learning Unified Distance Metric Across Diverse Data Distributions with Parameter-Efficient
Transfer Learning", WACV'25): Tables 2-5 and Figure 3 as data for :mod:`umlkit.experiments.tables`.

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

Settings come from ``configs/puma/{full_finetune,puma,methods}.yaml`` (:func:`run_config` only composes them). In
the quick profile the tiny ViT on UML-Mini stands in for ViT-S/16 on the real data: its rows are keyed by the
paper's ViT-S/16 cells, so that the long results join the paper; the chapters say which profile measured them.
Every number is the *last* epoch; learning rates are chosen on a validation split of training classes
(:func:`lr_sweep`), never on test.
"""
from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from functools import lru_cache, partial
from pathlib import Path

import pandas as pd
import yaml

from umlkit._paths import repo_folder
from umlkit.data.mini import ensure_mini
from umlkit.data.unified import PUMA_ORDER
from umlkit.experiments.records import cached_record, load_record
from umlkit.experiments.runners import SOURCE_NAMES, ensemble_embeddings
from umlkit.experiments.registry import Paper
from umlkit.experiments.tuning import chosen
from umlkit.experiments.tables import Claim, Floor, Row, Table, check_claims, compare, mark_choice, measure, side_by_side
from umlkit.experiments.tables import table_claims as _table_claims
from umlkit.metrics import harmonic_mean
from umlkit.paper import paper_table
from umlkit.train.config import load_config, resolve_config

__all__ = ["PAPER", "SECTIONS", "LOSSES", "PEFT_ROWS", "ABLATION_ROWS", "BACKBONES_QUICK", "BACKBONES_FULL",
           "DATASET_COLUMNS", "TABLE2", "TABLE3", "TABLE4", "TABLE5", "TABLES", "run_config", "config_for",
           "lr_sweep", "figure3_weights", "figure3_pairs", "figure3_observation", "cross_matrix", "trainable_breakdown",
           "paper_harmonic_check",
           "table_claims", "compare", "side_by_side", "check_claims", "measure", "ensemble_embeddings"]

PAPER = "puma"
DATASET_COLUMNS = [*SOURCE_NAMES.values(), "Unified", "Harmonic"]
SECTIONS = {
    "zero-shot": "",
    "a": "(a) Dataset-specific metric learning (Full fine-tuning)",
    "b": "(b) Unified metric learning (Full fine-tuning)",
    "c": "(c) Unified metric learning (Parameter-efficient fine-tuning)",
}
VIT_S = "arch=ViT-S/16;dim=128"  # the paper's setting cell of every trained Table 2 row

# paper row name -> umlkit loss name (Table 2 (a)/(b))
LOSSES = {"Triplet": "triplet", "MS": "multisimilarity", "Margin": "margin", "Proxy-Anchor": "proxy_anchor",
          "CosFace": "cosface", "ArcFace": "arcface", "SoftTriple": "softtriple", "Hyp": "hyp",
          "CurricularFace": "curricularface"}

# Table 2 (c) rows: method and loss (CurricularFace unless given)
PEFT_ROWS = {
    "Linear Embedding": {"method": "linear"},
    "MLP-3 Embedding": {"method": "mlp3"},
    "VPT": {"method": "vpt"},
    "LoRA": {"method": "lora"},
    "AdaptFormer": {"method": "adaptformer"},
    "VPTSP-G": {"method": "vptsp", "loss": "proxy_anchor_external"},
    "Ours": {"method": "puma"},
}

# Table 3 rows, keyed by the paper's setting cell
ABLATION_ROWS = {
    "prompt=Sing.;adapter=none": {"method": "prompt_pool", "options": {"pool_size": 1}},
    "prompt=Cond.;adapter=none": {"method": "prompt_pool"},
    "prompt=none;adapter=Stat.": {"method": "adapter"},
    "prompt=none;adapter=Stoc.": {"method": "stochastic_adapter"},
    "prompt=Sing.;adapter=Stat.": {"method": "puma", "options": {"pool_size": 1, "keep_prob": 1.0}},
    "prompt=Cond.;adapter=Stoc.": {"method": "puma"},
}

# Table 5. Quick: the same tiny ViT under different pretraining (``weights`` is a recipe name that the runners
# turn into a file, never a machine's path). The shipped backbone stands in for the paper's ViT-S/16 (the backbone
# of every other table); the other two have no paper cell.
_VIT_S_PRE = "pretraining=IN-21K & IN-1K (Sup.)"
_VIT_S_CELLS = ("arch=ViT-S/16;dim=384;" + _VIT_S_PRE, "arch=ViT-S/16;dim=128;" + _VIT_S_PRE)
BACKBONES_QUICK = {   # "fact": the prefix of the backbone's glued numbers in the chapter (t5_<fact>_<method>)
    "attribute heads, 12 epochs (shipped)": {"pretrained": True, "weights": None, "paper": _VIT_S_CELLS,
                                             "fact": "attr12"},
    "attribute heads, 2 epochs": {"pretrained": False, "weights": "recipe:pretrain_epochs=2", "paper": None,
                                  "fact": "attr2"},
    "none (random init)": {"pretrained": False, "weights": None, "paper": None, "fact": "none0"},
}
# the second pass: the v2 backbone stands in for ViT-S/16; the first pass's v1 becomes a shorter-pretrained row
BACKBONES_QUICK_SECOND = {
    "v2: attribute heads, 24 epochs on 57.6K images (shipped)": {"pretrained": True, "weights": None,
                                                                 "paper": _VIT_S_CELLS, "fact": "v2"},
    "v1: attribute heads, 12 epochs on 19.2K images": {"pretrained": True, "weights": None, "paper": None,
                                                       "backbone": "vit_tiny_uml", "fact": "v1"},
    "attribute heads, 2 epochs": {"pretrained": False, "weights": "recipe:pretrain_epochs=2", "paper": None,
                                  "fact": "attr2"},
    "none (random init)": {"pretrained": False, "weights": None, "paper": None, "fact": "none0"},
}


def backbones_quick(profile: str = "quick") -> dict:
    """Table 5's quick backbones in the profile's current stage (:func:`tables_stage`)."""
    return BACKBONES_QUICK_SECOND if tables_stage(profile) == "second" else BACKBONES_QUICK
BACKBONES_FULL = {  # paper backbone -> (timm backbone in umlkit.models.BACKBONES, zero-shot dim, pretraining)
    "arch=ViT-S/16": ("vit_s16_in21k_ft_in1k", 384, _VIT_S_PRE),
    "arch=DeiT-S/16": ("deit_s16", 384, "pretraining=IN-1K (Sup.)"),
    "arch=DINO-S/16": ("dino_s16", 384, "pretraining=IN-1K (Self-Sup.)"),
    "arch=CLIP-B/32": ("clip_b32_laion2b", 512, "pretraining=LAION-2B (Language Sup.)"),
}
_T5_METHODS = {"Zero-Shot": "zero_shot", "CurricularFace": "full", "Ours": "puma"}


# ------------------------------------------------------------------------------------------------ configs
def _config_dir() -> Path:
    return repo_folder("configs", "puma", what="the PUMA experiments")


@lru_cache(maxsize=1)
def _blocks() -> dict:
    return yaml.safe_load((_config_dir() / "methods.yaml").read_text())


def second_pass() -> dict:
    """methods.yaml's ``second_pass`` block (quick profile): backbone, per-epoch evaluation, budgets, tuning."""
    return _blocks().get("second_pass") or {}


def tables_stage(profile: str = "quick") -> str:
    """Which protocol the tables use in ``profile``: "second" once methods.yaml says ``second_pass.tables: second``
    (quick only; the full profile has one protocol), else "first"."""
    return "second" if profile == "quick" and second_pass().get("tables") == "second" else "first"


def run_config(profile: str = "quick", *, method: str = "full", loss: str = "curricularface",
               datasets: Sequence[str] | None = None, seed: int = 0, options: dict | None = None,
               lr: float | None = None, overrides: Iterable[str] = (), stage: str = "first") -> dict:
    """The fully resolved ``fit`` configuration of one PUMA run, composed from ``configs/puma``.

    ``method="full"`` starts from ``full_finetune.yaml``, every other method from ``puma.yaml``; then
    ``methods.yaml`` gives the method's options for the profile (the base file's own method keeps the base file's
    options) and sampler, and the loss's options and sampler; ``options`` are merged over the method's; then the
    datasets (default: all 8; class-grouped batches shrink to what the fewest classes can fill), the seed and
    ``overrides``. Evaluation runs once, after the last epoch. ``stage="second"`` (quick) applies methods.yaml's
    ``second_pass``: its backbone and its method budgets.
    """
    if stage not in ("first", "second"):
        raise ValueError(f"stage must be 'first' or 'second', got {stage!r}")
    second = stage == "second" and profile == "quick"
    base_name = "full_finetune.yaml" if method == "full" else "puma.yaml"
    cfg = copy.deepcopy(load_config(_config_dir() / base_name, profile))
    blocks = _blocks()
    m = cfg["model"]
    method_block = blocks["methods"].get(method, {})
    if method != m["method"]:
        m["options"] = dict(method_block.get(profile) or {})
    if second:
        m["backbone"] = second_pass()["backbone"]
        m["options"].update((second_pass().get("methods") or {}).get(method) or {})
    m["method"] = method
    m["options"] = {**m["options"], **(options or {})}
    loss_block = blocks["losses"].get(loss, {})
    regulariser = [t for t in cfg["objective"][1:]]
    cfg["objective"] = [{"name": loss, "weight": 1.0, "options": dict(loss_block.get("options") or {})},
                        *regulariser]
    sampler = loss_block.get("sampler") or method_block.get("sampler") or {"name": "random"}
    cfg["data"]["sampler"] = sampler["name"]
    if "samples_per_class" in sampler:
        cfg["data"]["samples_per_class"] = sampler["samples_per_class"]
    if datasets is not None:
        cfg["data"]["datasets"] = list(datasets)
    if lr is not None:
        cfg["optimizer"]["lr"] = float(lr)
    cfg["seed"] = int(seed)
    cfg["train"]["eval_every"] = int(cfg["train"]["epochs"])
    cfg["train"]["progress"] = False
    cfg["name"] = f"puma-{method}-{loss}"
    out = resolve_config(cfg, overrides=list(overrides))
    if datasets is not None and out["data"]["sampler"] != "random":
        # a class-grouped batch cannot hold more classes than train (after any validation classes are held out)
        per_class = out["data"]["samples_per_class"]
        out["data"]["batch_size"] = min(out["data"]["batch_size"], per_class * _fewest_train_classes(out))
    return out


def _fewest_train_classes(cfg: dict) -> int:
    """The fewest classes any source trains on: its training classes less those ``data.val_fraction`` holds out
    (the engine's rule: the last max(1, round(n x fraction)) classes)."""
    root = cfg["data"]["root"] or ensure_mini()
    vf = float(cfg["data"].get("val_fraction") or 0.0)
    counts = [_train_classes(str(root), n) for n in cfg["data"]["datasets"]]
    return min(n - (max(1, int(round(n * vf))) if vf else 0) for n in counts)


@lru_cache(maxsize=256)
def _train_classes(root: str, name: str) -> int:
    """Training classes of one source under ``root``, read once per process (``config_for`` asks for every row and
    seed; a tree regenerated with other class counts in the same process needs ``_train_classes.cache_clear()``)."""
    from umlkit.data import load_dataset
    return load_dataset(name, root, "train", expected=None, check_files=False).num_classes


def chosen_lr(unit: str) -> float:
    """The second pass's rate of a tuning unit (methods.yaml ``second_pass.lr``, chosen by :func:`tuning_frame`)."""
    return chosen(second_pass(), [("lr", unit)], file="configs/puma/methods.yaml",
                  what=f"second-pass rate for {unit!r}", sweep="train `umlkit records train puma tuning`, then enter "
                  f"the choice of puma.tuning_frame() under second_pass.lr.{unit}")


def config_for(row: Row, seed: int, profile: str, overrides: Sequence[str] = (), stage: str | None = None) -> dict:
    """A row's record key: one configuration, or ``{source: configuration}`` for the ``specialists`` runner. In the
    second pass (quick) every trained row runs at its tuning unit's chosen rate. ``stage`` defaults to the profile's
    current one (:func:`tables_stage`); the full profile has only the first."""
    s = dict(row.spec)
    stage = tables_stage(profile) if stage is None else (stage if profile == "quick" else "first")
    lr = s.get("lr")
    if lr is None and stage == "second" and tuning_unit(row) is not None:
        lr = chosen_lr(tuning_unit(row))
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


def _per_source_harmonic(result: dict, row: Row) -> dict:
    """Table 4: per-source R@1 (own-source for specialists) and their harmonic mean; no Unified column."""
    scores = result["own"] if "own" in result else {d: result["test"][d] for d in SOURCE_NAMES.values()}
    return {**scores, "Harmonic": harmonic_mean(list(scores.values()))}


def _table2_scores(result: dict, row: Row) -> dict:
    return _own_and_ensemble(result, row) if "own" in result else result["test"]


# ------------------------------------------------------------------------------------------------ claims
def _c(section="", method="", dataset="Harmonic", setting=VIT_S) -> dict:
    return {"section": SECTIONS.get(section, section), "method": method, "setting": setting, "dataset": dataset}


_ZS = {"section": "", "method": "Zero-Shot", "setting": "arch=ViT-S/16"}
TABLE2_CLAIMS = [
    Claim("fine-tuning beats zero-shot (unified full FT, CurricularFace, Unified)",
          _c("b", "CurricularFace", "Unified"), {**_ZS, "dataset": "Unified"}),
    Claim("dataset-specific models beat one unified model (CurricularFace, Harmonic)",
          _c("a", "CurricularFace"), _c("b", "CurricularFace")),
    Claim("one unified model beats the ensemble of specialists (CurricularFace, Unified)",
          _c("b", "CurricularFace", "Unified"), _c("a", "CurricularFace", "Unified")),
    Claim("PUMA beats unified full fine-tuning (Unified)", _c("c", "Ours", "Unified"), _c("b", "CurricularFace", "Unified")),
    Claim("PUMA beats unified full fine-tuning (Harmonic)", _c("c", "Ours"), _c("b", "CurricularFace")),
    *[Claim(f"PUMA beats {m} (Harmonic)", _c("c", "Ours"), _c("c", m))
      for m in ("Linear Embedding", "MLP-3 Embedding", "VPT", "LoRA", "AdaptFormer", "VPTSP-G")],
    # the abstract's headline: one PUMA model beats the dataset-specific models of (a), with ~69x fewer parameters
    *[Claim(f"PUMA beats the dataset-specific {m} models ({d})", _c("c", "Ours", d), _c("a", m, d))
      for m in LOSSES for d in ("Unified", "Harmonic")],
]


def _t3(setting, dataset="Harmonic"):
    return {"section": "", "method": "", "setting": setting, "dataset": dataset}


TABLE3_CLAIMS = [
    *[Claim(f"a conditional prompt beats a single prompt ({d})", _t3("prompt=Cond.;adapter=none", d),
            _t3("prompt=Sing.;adapter=none", d)) for d in ("Harmonic", "Unified")],
    *[Claim(f"a stochastic adapter beats a static one ({d})", _t3("prompt=none;adapter=Stoc.", d),
            _t3("prompt=none;adapter=Stat.", d)) for d in ("Harmonic", "Unified")],
    Claim("PUMA beats single prompt + static adapter", _t3("prompt=Cond.;adapter=Stoc."), _t3("prompt=Sing.;adapter=Stat.")),
    Claim("PUMA beats the stochastic adapter alone", _t3("prompt=Cond.;adapter=Stoc."), _t3("prompt=none;adapter=Stoc.")),
    Claim("PUMA beats the conditional prompt alone", _t3("prompt=Cond.;adapter=Stoc."), _t3("prompt=Cond.;adapter=none")),
]


def _t4(method, training):
    return {"section": "", "method": method, "setting": f"training={training}", "dataset": "Harmonic"}


TABLE4_CLAIMS = [
    *[Claim(f"{m}: dataset-specific training beats unified training (Harmonic)", _t4(m, "Spec."), _t4(m, "Univ."))
      for m in ("CurricularFace", "PA")],
    Claim("Ours: unified training beats dataset-specific training (Harmonic)", _t4("Ours", "Univ."), _t4("Ours", "Spec.")),
    Claim("unified PUMA beats unified CurricularFace (Harmonic)", _t4("Ours", "Univ."), _t4("CurricularFace", "Univ.")),
]


# ------------------------------------------------------------------------------------------------ tables
_B_COMPARED = ("curricularface", "proxy_anchor")   # (b) rows that claims compare (Table 2; Table 4's unified PA)


def _table2_rows(stage: str = "first") -> list[Row]:
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


def _table3_rows() -> list[Row]:
    out = []
    for setting, spec in ABLATION_ROWS.items():
        opts = "_".join(f"{k}{v}" for k, v in sorted((spec.get("options") or {}).items())) or "default"
        out.append(Row(setting=setting, spec=spec, label=f"{spec['method']}-{opts}"))
    return out


def _table4_rows() -> list[Row]:
    methods = {"CurricularFace": ("full", "curricularface"), "PA": ("full", "proxy_anchor"),
               "Ours": ("puma", "curricularface")}
    rows = []
    for name, (method, loss) in methods.items():
        spec = {"method": method, "loss": loss}
        rows += [Row(method=name, setting="training=Spec.", spec=spec, runner="specialists", label=f"{method}-{loss}",
                     name=f"{name} (dataset-specific)"),
                 Row(method=name, setting="training=Univ.", spec=spec, label=f"{name}-univ", name=f"{name} (unified)")]
    return rows


def _table5_rows(profile: str, stage: str | None = None) -> list[Row]:
    rows = []
    if profile == "quick":
        stage = stage or tables_stage(profile)
        for b, bb in (BACKBONES_QUICK_SECOND if stage == "second" else BACKBONES_QUICK).items():
            over = [f"model.pretrained={str(bb['pretrained']).lower()}"]
            if bb.get("backbone"):
                over.append(f"model.backbone={bb['backbone']}")
            if bb["weights"]:
                over.append(f"model.weights={bb['weights']}")
            for name, method in _T5_METHODS.items():
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
            for name, method in _T5_METHODS.items():
                dim = zs_dim if method == "zero_shot" else 128
                rows.append(Row(method=name, setting=f"{arch};dim={dim};{pre}",
                                spec={"method": method, "overrides": [f"model.backbone={timm_name}"]},
                                runner="zero_shot" if method == "zero_shot" else "train",
                                name=f"{name} / {arch[5:]}", group=arch, label=f"{method}-{arch[5:]}",
                                seed_free=method == "zero_shot"))
    return rows


def table5_claims(profile: str, stage: str | None = None) -> list[Claim]:
    """For every backbone of the profile: PUMA beats full fine-tuning, and fine-tuning beats zero-shot (Unified)."""
    rows = _table5_rows(profile, stage)
    out = []
    for b in dict.fromkeys(r.group for r in rows):
        cell = {r.method: {"section": "", "method": r.method, "setting": r.setting, "dataset": "Unified"}
                for r in rows if r.group == b}
        out += [Claim(f"{b}: PUMA beats full fine-tuning (Unified)", cell["Ours"], cell["CurricularFace"]),
                Claim(f"{b}: full fine-tuning beats zero-shot (Unified)", cell["CurricularFace"], cell["Zero-Shot"])]
    return out


_NO_VIT = ("full-profile only: the quick profile has one tiny ViT architecture (no DeiT-S, DINO-S or CLIP-B/32 "
           "pretraining); it varies the tiny ViT's pretraining instead")
def build_tables(stage: str) -> dict[str, Table]:
    """Tables 2-4 and the quick Table 5 of a stage (the module's TABLE2-4 and TABLES("quick") are the current one's).
    The first pass trained one seed (Table 3: three); the second pass three for every cell a claim compares."""
    seeds = (0, 1, 2) if stage == "second" else (0,)
    config = partial(config_for, stage=stage)
    return {"Table 2": Table(PAPER, "Table 2", _table2_rows(stage), config, seeds=seeds, scores=_table2_scores,
                             claims=TABLE2_CLAIMS, floor=Floor(frozen="Zero-Shot", per_setting=False)),
            "Table 3": Table(PAPER, "Table 3", _table3_rows(), config, seeds=(0, 1, 2), claims=TABLE3_CLAIMS),
            "Table 4": Table(PAPER, "Table 4", _table4_rows(), config, seeds=seeds, scores=_per_source_harmonic,
                             claims=TABLE4_CLAIMS, params=False),
            "Table 5": Table(PAPER, "Table 5", _table5_rows("quick", stage), config, seeds=seeds,
                             claims=table5_claims("quick", stage), unmeasured={"quick": _NO_VIT}, params=False)}


_CURRENT = build_tables(tables_stage("quick"))
TABLE2, TABLE3, TABLE4 = _CURRENT["Table 2"], _CURRENT["Table 3"], _CURRENT["Table 4"]


def TABLE5(profile: str = "quick") -> Table:  # noqa: N802 - the rows depend on the profile
    if profile == "quick":
        return _CURRENT["Table 5"]
    return Table(PAPER, "Table 5", _table5_rows(profile), config_for, seeds=(0,), claims=table5_claims(profile),
                 unmeasured={"quick": _NO_VIT}, params=False)


def table_jobs(profile: str = "quick", specs: dict[str, Table] | None = None) -> list[tuple]:
    """(record folder, label, key, runner) of every run of Tables 2-5 in the profile's current stage (or of
    ``specs``), each configuration once (Table 3's PUMA is Table 2's, Table 4's unified rows are Table 2 (b)'s)."""
    from umlkit.experiments.tables import distinct_jobs
    return distinct_jobs(specs or TABLES(profile), profile)


def TABLES(profile: str = "quick") -> dict[str, Table]:  # noqa: N802
    return {"Table 2": TABLE2, "Table 3": TABLE3, "Table 4": TABLE4, "Table 5": TABLE5(profile)}


def table_claims(spec: Table, cmp: pd.DataFrame) -> pd.DataFrame:
    """The table's declared claims whose two cells were measured, with verdicts (:func:`umlkit.experiments.tables.table_claims`)."""
    return _table_claims(spec, cmp)


# ------------------------------------------------------------------------------------------------ other runs
# the learning-rate grids of the sweep, per profile: each brackets the profile's configured rate (quick: 1e-3 for
# both; full: the paper's 3e-5 for full fine-tuning and 1e-4 for PUMA, configs/puma/*.yaml); PUMA's new modules
# train at 10x the base rate
LR_GRIDS = {"quick": {"full": (3e-4, 1e-3, 3e-3), "puma": (1e-3, 3e-3, 1e-2)},
            "full": {"full": (1e-5, 3e-5, 1e-4), "puma": (3e-5, 1e-4, 3e-4)}}


def lr_sweep(profile: str = "quick", lrs: dict[str, Sequence[float]] | None = None, seed: int = 0,
             val_fraction: float = 0.2, rerun: bool = False, progress: bool = True, log=print,
             overrides: Sequence[str] = ()) -> pd.DataFrame:
    """Learning-rate choice on a validation split: the last ``val_fraction`` of each source's *training* classes
    are held out, the rest trains. Returns validation (and, for reference, test) Unified/Harmonic R@1 per
    (method, lr). The test columns are shown, never used for the choice."""
    lrs = lrs or LR_GRIDS[profile]
    jobs = [(m, lr) for m, values in lrs.items() for lr in values]
    if progress:
        from umlkit._progress import tqdm
        jobs = tqdm(jobs, desc="lr sweep", unit="run")
    rows = []
    for method, lr in jobs:
        cfg = run_config(profile, method=method, seed=seed, lr=lr,
                         overrides=[f"data.val_fraction={val_fraction}", *overrides])
        rec = cached_record(PAPER, "lr_sweep", f"{method}-lr{lr:g}-seed{seed}", cfg, "train", profile, rerun, log)
        r = rec["result"]
        rows.append({"method": method, "lr": lr, "val Unified": r["val"]["Unified"],
                     "val Harmonic": r["val"]["Harmonic"], "test Unified": r["test"]["Unified"],
                     "test Harmonic": r["test"]["Harmonic"], "seconds": rec["seconds"]})
    out = pd.DataFrame(rows)
    best = out.loc[out.groupby("method")["val Unified"].idxmax()]
    out["chosen (val Unified)"] = out.index.isin(best.index)
    return out


# ------------------------------------------------------------------------------------------------ tuning (second pass)
def tuning_unit(row: Row) -> str | None:
    """What one learning rate is chosen for: the row's method (full fine-tuning: with its loss), its options, and
    "spec-" for a set of dataset-specific models. Rows that differ only by ``overrides`` (Table 5's backbones) share
    the unit of the shipped backbone; the frozen backbone (zero-shot) has none."""
    s = row.spec
    if s.get("method") in (None, "zero_shot"):
        return None
    name = s["method"] + (f"-{s.get('loss', 'curricularface')}" if s["method"] == "full" else "")
    opts = "_".join(f"{k}{v}" for k, v in sorted((s.get("options") or {}).items()))
    return ("spec-" if row.runner == "specialists" else "") + name + (f"-{opts}" if opts else "")


# the order the sweep trains in: the units the headline and most claims compare first
_UNIT_PRIORITY = ("puma", "full-curricularface", "spec-full-curricularface", "linear", "mlp3", "vpt", "lora",
                  "adaptformer", "vptsp", "prompt_pool", "prompt_pool-pool_size1", "adapter", "stochastic_adapter",
                  "puma-keep_prob1.0_pool_size1", "spec-puma", "full-proxy_anchor", "spec-full-proxy_anchor")


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


def sweep_jobs(profile: str = "quick", units: Sequence[str] | None = None, seed: int = 0) -> list[tuple]:
    """(record folder, label, key, runner) of every tuning run (second pass, quick): each unit x each rate of its
    grid, trained with the validation share of every source's training classes held out."""
    if profile != "quick":
        raise ValueError("the second-pass tuning protocol is the quick profile's (the full profile uses the paper's "
                         f"rates), got profile={profile!r}")
    vf = float(second_pass()["tuning"]["val_fraction"])
    every = int(second_pass()["tuning"]["eval_every"])
    jobs = []
    for unit, row in tuning_units().items():
        if units is not None and unit not in units:
            continue
        s = row.spec
        for lr in tuning_grid(unit):
            kw = dict(method=s.get("method", "full"), loss=s.get("loss", "curricularface"), seed=seed,
                      options=s.get("options"), lr=lr, stage="second",
                      overrides=[f"data.val_fraction={vf}", f"train.eval_every={every}"])
            key = ({src: run_config(profile, datasets=[src], **kw) for src in PUMA_ORDER}
                   if row.runner == "specialists" else run_config(profile, **kw))
            jobs.append(("tuning", f"{unit}-lr{lr:g}-seed{seed}", key, row.runner))
    return jobs


def tuning_frame(profile: str = "quick", train: bool = False) -> pd.DataFrame:
    """The second pass's tuning records: per unit and rate, the validation Harmonic (and, for models trained on the
    union, Unified) R@1; ``chosen`` marks each unit's best by ``select_on`` and ``interior`` whether it lies strictly
    inside the rates tried. Missing records are skipped unless ``train``."""
    return _selection_frame(sweep_jobs(profile), profile, train)


def _selection_frame(jobs, profile: str, train: bool) -> pd.DataFrame:
    from umlkit.experiments.records import find_record, normalise_key
    select = second_pass()["tuning"]["select_on"]
    lines = []
    for table, label, key, runner in jobs:
        if not train and find_record(normalise_key(key), profile) is None:
            continue
        rec = cached_record(PAPER, table, label, key, runner, profile, log=None)
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


# ------------------------------------------------------------------------------------------------ few-shot
def few_shot_block() -> dict:
    """methods.yaml's ``few_shot`` block: the official few-shot recipe and the book's rows."""
    return _blocks()["few_shot"]


def few_shot_lr(method: str, profile: str = "quick") -> float:
    """A method's few-shot rate: ``few_shot.lr.<profile>.<method>`` (quick: chosen by :func:`few_shot_tuning`)."""
    return chosen(few_shot_block(), [("lr", profile, method)], file="configs/puma/methods.yaml",
                  what=f"few-shot {profile} rate for {method!r}", sweep="train `umlkit records train puma "
                  f"few_shot_tuning`, then enter the chosen rate under few_shot.lr.{profile}.{method}")


def few_shot_config(profile: str, method: str, shots: int, seed: int = 0, lr: float | None = None,
                    validation: bool = False) -> dict:
    """One few-shot run: :func:`run_config` (quick: the second pass) with the official recipe on top: k images per
    training class (quick: drawn per seed; full: the published files), Proxy-Anchor (alpha 64, margin 0.1), a cosine
    schedule over ``32 // k + 1`` epochs and one evaluation at the end; ``validation`` holds out the tuning classes."""
    fs = few_shot_block()
    if int(shots) < 1:
        raise ValueError(f"shots must be >= 1, got {shots}")
    epochs = int(fs["epochs_numerator"]) // int(shots) + 1
    over = [f"train.epochs={epochs}", "schedule.name=cosine",
            f"data.few_shot={shots}" if profile == "quick" else f"data.few_shot=published:{shots}"]
    if profile in (fs.get("embed_dim") or {}):
        over.append(f"model.embed_dim={fs['embed_dim'][profile]}")
    if validation:
        over.append(f"data.val_fraction={second_pass()['tuning']['val_fraction']}")
    options = (fs["options"].get(profile) or {}) if method == "puma" else None
    cfg = run_config(profile, method=method, loss=fs["loss"]["name"], seed=seed, options=options,
                     lr=lr if lr is not None else few_shot_lr(method, profile), overrides=over,
                     stage="second" if profile == "quick" else "first")
    cfg["objective"][0]["options"] = dict(fs["loss"]["options"])
    cfg["train"]["eval_every"] = epochs
    cfg["name"] = f"puma-fewshot{shots}-{method}"
    return cfg


def few_shot_tuning_jobs(profile: str = "quick", seed: int = 0) -> list[tuple]:
    """The few-shot tuning runs (quick): each method x its grid kind's rates at ``tune_shots``, validation held out."""
    fs = few_shot_block()
    k = int(fs["tune_shots"])
    jobs = []
    for method in fs["methods"].values():
        unit = f"fewshot{k}-{method}"
        grid = sorted({*_grid_kind(method), *(float(x) for x in (fs.get("extra") or {}).get(method) or ())})
        jobs += [("few_shot_tuning", f"{unit}-lr{lr:g}-seed{seed}",
                  few_shot_config(profile, method, k, seed, lr=lr, validation=True), "train") for lr in grid]
    return jobs


def few_shot_tuning(profile: str = "quick", train: bool = False) -> pd.DataFrame:
    """Validation Harmonic / Unified R@1 of the few-shot tuning runs, the chosen rate per method and whether it is
    interior (the tables' selection rule, :func:`tuning_frame`)."""
    return _selection_frame(few_shot_tuning_jobs(profile), profile, train)


def _few_shot_rows() -> list[Row]:
    fs = few_shot_block()
    rows = [Row(method="Zero-Shot", setting="shots=all", spec={"method": "zero_shot", "seeds": (0,)},
                runner="zero_shot", label="zero-shot", name="Zero-Shot", seed_free=True)]
    for k in fs["shots"]:
        rows += [Row(method=name, setting=f"shots={k}", spec={"method": m, "shots": int(k)}, name=f"{name}, k={k}",
                     label=f"fewshot{k}-{m}", group=str(k)) for name, m in fs["methods"].items()]
    return rows


def _few_shot_config(row: Row, seed: int, profile: str, overrides: Sequence[str] = ()) -> dict:
    if row.runner == "zero_shot":
        return run_config(profile, method="zero_shot", seed=seed, overrides=list(overrides),
                          stage="second" if profile == "quick" else "first")
    cfg = few_shot_config(profile, row.spec["method"], row.spec["shots"], seed)
    return resolve_config(cfg, overrides=list(overrides)) if overrides else cfg


FEW_SHOT_CLAIMS = [Claim(f"PUMA beats full fine-tuning with {k} image(s) per class (Harmonic)",
                         {"section": "", "method": "PUMA", "setting": f"shots={k}", "dataset": "Harmonic"},
                         {"section": "", "method": "Full fine-tuning", "setting": f"shots={k}", "dataset": "Harmonic"})
                   for k in (1, 2, 4, 8, 16)]


def FEW_SHOT() -> Table:  # noqa: N802 - like TABLE5, built from the configuration
    """The few-shot experiment as a table: zero-shot, and each method at each k (Unified, Harmonic, per source)."""
    return Table(PAPER, "Few-shot", _few_shot_rows(), _few_shot_config, seeds=(0, 1, 2), claims=FEW_SHOT_CLAIMS,
                 params=False, columns=DATASET_COLUMNS)


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
            jobs.append((spec.slug, f"{row.label}-seed{seed}", _few_shot_config(row, seed, profile), row.runner))
    return jobs


def few_shot_facts(cmp: pd.DataFrame, claims: pd.DataFrame, tuning: pd.DataFrame | None = None) -> dict[str, str]:
    """The numbers the few-shot discussion states (glued): each method's Unified / Harmonic at every k, the floor,
    PUMA's Harmonic gap to full fine-tuning per k, the verdicts and the tuned rates."""
    from umlkit.experiments.prose import cell, fmt, verdict, verdict_counts
    f: dict[str, str] = {}
    f["fs_zs"] = f"{fmt(cell(cmp, 'Zero-Shot', 'Unified'))} / {fmt(cell(cmp, 'Zero-Shot', 'Harmonic'))}"
    gaps = {}
    for k in few_shot_block()["shots"]:
        for name in few_shot_block()["methods"]:
            row = f"{name}, k={k}"
            tag = "puma" if name == "PUMA" else "ft"
            f[f"fs_{tag}_{k}"] = (f"{fmt(cell(cmp, row, 'Unified'))} / "
                                  f"{fmt(cell(cmp, row, 'Harmonic'), spread=cell(cmp, row, 'Harmonic', field='spread'))}")
        gaps[k] = cell(cmp, f"PUMA, k={k}", "Harmonic") - cell(cmp, f"Full fine-tuning, k={k}", "Harmonic")
        f[f"fs_gap_{k}"] = f"{gaps[k]:+.1f}"
        f[f"fs_v_{k}"] = verdict(claims, f"PUMA beats full fine-tuning with {k} image(s) per class (Harmonic)")
    f["fs_verdicts"] = verdict_counts(claims, claims["claim"].str.startswith("PUMA beats full fine-tuning with"))
    f["fs_seeds"] = str(int(cmp[cmp["method"] != "Zero-Shot"]["seeds"].min()))
    if tuning is not None and not tuning.empty:
        for _, line in tuning[tuning["chosen"]].iterrows():
            f[f"fs_lr_{line['unit'].split('-')[-1]}"] = f"{line['lr']:g}"
    return f


def tuning_curves(profile: str = "quick", chosen_only: bool = True) -> pd.DataFrame:
    """Per tuning unit (at its chosen rate, or every rate), the validation Unified and Harmonic R@1 and the training
    loss after every epoch, from the tuning records (dataset-specific units: the harmonic mean of their models'
    held-out scores, and the mean of their losses)."""
    from umlkit.experiments.records import find_record, normalise_key
    sweep = tuning_frame(profile)
    if sweep.empty:
        return pd.DataFrame()
    pick = set(map(tuple, sweep[sweep["chosen"] | (not chosen_only)][["unit", "lr"]].to_numpy()))
    lines = []
    for table, label, key, runner in sweep_jobs(profile):
        unit = label.rsplit("-lr", 1)[0]
        lr = next(iter(key.values()))["optimizer"]["lr"] if runner == "specialists" else key["optimizer"]["lr"]
        if (unit, lr) not in pick or find_record(normalise_key(key), profile) is None:
            continue
        r = cached_record(PAPER, table, label, key, runner, profile, log=None)["result"]
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


# the epoch budgets of the longer-training comparison (second pass): the tables' 15 and three times as many
BUDGET_EPOCHS = (15, 45)
_BUDGET_ROWS = {"Ours": {"method": "puma"}, "CurricularFace": {"method": "full", "loss": "curricularface"}}


def _budget_rows() -> list[Row]:
    rows = []
    for e in BUDGET_EPOCHS:
        for name, spec in _BUDGET_ROWS.items():
            over = [] if e == 15 else [f"train.epochs={e}", "train.eval_every=15"]   # test R@1 at 15, 30, 45
            rows.append(Row(method=name, setting=f"epochs={e}", spec={**spec, "overrides": over},
                            name=f"{'PUMA' if name == 'Ours' else 'full fine-tuning'}, {e} epochs",
                            label=f"{spec['method']}-{e}ep", group=str(e)))
    return rows


def _budget_config(row: Row, seed: int, profile: str, overrides: Sequence[str] = ()) -> dict:
    # the rate of the row's tuning unit at 15 epochs (Table 2's PUMA / unified CurricularFace rows)
    unit = tuning_unit(Row(spec={k: v for k, v in row.spec.items() if k != "overrides"}))
    return run_config(profile, method=row.spec["method"], loss=row.spec.get("loss", "curricularface"), seed=seed,
                      lr=chosen_lr(unit), overrides=[*row.spec["overrides"], *overrides], stage="second")


BUDGET_CLAIMS = [Claim(f"PUMA beats unified full fine-tuning after {e} epochs ({d})",
                       {"section": "", "method": "Ours", "setting": f"epochs={e}", "dataset": d},
                       {"section": "", "method": "CurricularFace", "setting": f"epochs={e}", "dataset": d})
                 for e in BUDGET_EPOCHS for d in ("Unified", "Harmonic")]


def BUDGET() -> Table:  # noqa: N802 - built from the configuration
    """PUMA against unified full fine-tuning at 15 and 45 epochs (second pass, quick; the 15-epoch runs are Table
    2's): does the ordering change when the slower method gets the time to converge?"""
    return Table(PAPER, "Budget", _budget_rows(), _budget_config, seeds=(0, 1, 2), claims=BUDGET_CLAIMS,
                 params=False, columns=DATASET_COLUMNS)


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


def budget_facts(cmp: pd.DataFrame, claims: pd.DataFrame) -> dict[str, str]:
    """The longer-budget section's numbers (glued): each method's Unified / Harmonic at every budget, the gap and the
    verdict of "PUMA beats unified full fine-tuning" per budget and dataset."""
    from umlkit.experiments.prose import cell, fmt, verdict
    f: dict[str, str] = {}
    for e in BUDGET_EPOCHS:
        for name, tag in (("Ours", "puma"), ("CurricularFace", "ft")):
            row = _row(BUDGET(), method=name, setting=f"epochs={e}").title
            f[f"bud_{tag}_{e}"] = " / ".join(fmt(cell(cmp, row, d), spread=cell(cmp, row, d, field="spread"))
                                             for d in ("Unified", "Harmonic"))
        for d in ("Unified", "Harmonic"):
            text = f"PUMA beats unified full fine-tuning after {e} epochs ({d})"
            f[f"bud_v_{e}_{d[:3].lower()}"] = verdict(claims, text)
            f[f"bud_gap_{e}_{d[:3].lower()}"] = f"{float(claims.set_index('claim').loc[text, 'gap']):+.1f}"
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


_DIRECTION = {"supported": 1, "holds": 1, "inconclusive": 0, "contradicted": -1, "not reproduced": -1}


def verdict_changes(profile: str = "quick") -> pd.DataFrame:
    """Every claim of Tables 2-5 under the first pass (shipped v1 backbone, one rate, mostly one seed) and the
    second (v2 backbone, one tuning protocol, three seeds per compared cell), from the stored records only: the
    measured gap and verdict of each, and whether the verdict's direction moved (supported or holds / inconclusive /
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
                out[(name, text)].update({f"{stage} gap": c.gap, f"{stage} seeds": c.seeds, stage: c.verdict})
    frame = pd.DataFrame(list(out.values()))
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
        f[f"conv_{k}_gain"] = f"{row['gain over the last 5 epochs']:+.1f}"
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


def claim_tables(profile: str = "quick") -> dict[str, Table]:
    """Every PUMA table with declared claims, for the scoreboard: the paper's Tables 2-5 and the book's few-shot
    experiment (quick). The regime map, built on PUMA's configuration, is registered apart
    (:mod:`umlkit.experiments.regime`)."""
    out = dict(TABLES(profile))
    if profile == "quick":
        out["Few-shot"] = FEW_SHOT()
    return out


def job_list(name: str, profile: str = "quick") -> list[tuple]:
    """A named job list for ``umlkit records train puma NAME``: ``tuning`` (the second pass's sweep),
    ``few_shot_tuning`` (the few-shot rates), ``few_shot`` (the few-shot table, 3 seeds), ``tables`` (Tables 2-5
    in the profile's current stage), ``second_tables`` (quick: the second pass's Tables 2-5 whatever the current
    stage, to train them before methods.yaml switches) and ``budget`` (PUMA and full fine-tuning at 15 and 45
    epochs)."""
    lists = {"tuning": sweep_jobs, "few_shot_tuning": few_shot_tuning_jobs, "few_shot": few_shot_jobs,
             "tables": table_jobs, "second_tables": _second_table_jobs,
             "budget": lambda p: table_jobs(p, {"Budget": BUDGET()})}
    if name not in lists:
        raise KeyError(f"unknown PUMA job list {name!r}; choose one of {', '.join(lists)}")
    return lists[name](profile)


def _second_table_jobs(profile: str) -> list[tuple]:
    if profile != "quick":
        raise ValueError("the second pass is the quick profile's; the full profile's tables are job list 'tables'")
    return table_jobs(profile, build_tables("second"))


def _row(spec: Table, **match) -> Row:
    found = [r for r in spec.rows if all(getattr(r, k) == v for k, v in match.items())]
    if len(found) != 1:
        raise KeyError(f"{spec.table}: {match} matches {len(found)} rows")
    return found[0]


def figure3_weights(profile: str = "quick", seed: int = 0, rerun: bool = False, log=print,
                    overrides: Sequence[str] = (), stage: str | None = None) -> pd.DataFrame:
    """Average prompt-pool weight per source (rows) and prompt (columns) of the PUMA run of Table 3 (in the
    profile's current stage, or ``stage``)."""
    row = _row(TABLE3, setting="prompt=Cond.;adapter=Stoc.")
    rec = cached_record(PAPER, TABLE3.slug, f"{row.label}-seed{seed}",
                        config_for(row, seed, profile, overrides, stage=stage), row.runner, profile, rerun, log)
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
    the book's rule (:func:`umlkit.experiments.tables.claim_test`, paired: both correlations come from the same
    runs)."""
    from umlkit.experiments.tables import claim_test
    a, b = pairs["CUB–NABirds"].to_dict(), pairs["CUB–InShop"].to_dict()
    return claim_test(a, b, paired=True)


def cross_matrix(profile: str = "quick", loss: str = "CurricularFace", seed: int = 0,
                 overrides: Sequence[str] = (), stage: str | None = None) -> pd.DataFrame:
    """Table 2 (a)'s eight specialists, each evaluated on every source (R@1): trained-on x evaluated-on (in the
    profile's current stage, or ``stage``)."""
    row = _row(TABLE2, section=SECTIONS["a"], method=loss)
    rec = cached_record(PAPER, TABLE2.slug, f"{row.label}-seed{seed}",
                        config_for(row, seed, profile, overrides, stage=stage), row.runner, profile, log=None)
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
    from umlkit.experiments.prose import cell
    paper_sizes = train_sizes("full")
    rows = []
    for d in SOURCE_NAMES.values():
        line = {"source": d, "train images (measured)": float(sizes[d]), "train images (paper)": paper_sizes[d]}
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
        f[f"bias_{who}_{tag}_rho"] = f"{line['Spearman rho (size, change)']:+.2f}"
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
def table2_rows(sections: Sequence[str] = ("zero-shot", "a", "b", "c"), losses: Sequence[str] | None = None,
                peft: Sequence[str] | None = None) -> list[Row]:
    """The rows a Table 2 chapter run selects: ``losses`` names rows of (a)/(b), ``peft`` rows of (c)."""
    return [r for r in TABLE2.rows if r.group in sections
            and (r.group not in ("a", "b") or losses is None or r.method in losses)
            and (r.group != "c" or peft is None or r.method in peft)]


def table2_facts(cmp: pd.DataFrame, claims: pd.DataFrame) -> dict[str, str]:
    """Every number the Table 2 discussion states (glued into the text)."""
    from scipy.stats import spearmanr

    from umlkit.experiments.prose import cell, fmt, verdict

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
    f["c_seeds"] = str(int(c["seeds"].min()))
    b = cmp[cmp["section"].str.startswith("(b)") & (cmp["metric"] == "R@1")].set_index(["row", "dataset"])["measured"]
    har = b.xs("Harmonic", level="dataset").sort_values()
    f["b_low"] = ", ".join(f"{n} {fmt(x)}" for n, x in har.iloc[:2].items())
    f["b_low_sop"] = ", ".join(f"{n} {fmt(b[(n, 'SOP')])}" for n in har.index[:2])
    f["b_low_cub"] = ", ".join(f"{n} {fmt(b[(n, 'CUB')])}" for n in har.index[:2])
    f["b_high"] = f"{har.index[-1]} {fmt(har.iloc[-1])}"
    p = cmp[(cmp["dataset"] == "Harmonic") & (cmp["metric"] == "R@1")].dropna(subset=["paper"])
    f["rho"], f["rho_rows"] = f"{spearmanr(p['paper'], p['measured']).statistic:.2f}", str(len(p))
    chk = paper_harmonic_check("Table 2")
    bad = chk[~chk["consistent (|diff| <= 0.1)"]]
    f["paper_bad_n"] = str(len(bad))
    f["paper_bad_range"] = f"{-bad['difference'].max():.1f} to {-bad['difference'].min():.1f}"
    for key, text in (("v_ft_zs", TABLE2_CLAIMS[0].text), ("v_uni_ens", TABLE2_CLAIMS[2].text),
                      ("v_puma_ft_uni", TABLE2_CLAIMS[3].text), ("v_puma_ft_har", TABLE2_CLAIMS[4].text),
                      ("v_spec_uni", TABLE2_CLAIMS[1].text)):
        f[key] = verdict(claims, text)
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
        from umlkit.experiments.prose import fmt
        pairs = figure3_pairs(weights)
        for col in pairs:
            a, b = col.split("–")
            f[f"f3_{a.lower()}_{b.lower()}"] = fmt(pairs[col].mean(), 2, pairs[col].std(ddof=1) if len(pairs) > 1 else None)
            f[f"f3_{a.lower()}_{b.lower()}_range"] = f"{pairs[col].min():.2f} to {pairs[col].max():.2f}"
        f["f3_seeds"] = str(len(pairs))
        obs = figure3_observation(pairs)
        f["f3_verdict"], f["f3_test"] = obs["verdict"], obs["test"]
    return f


def _table3_facts(cmp3, claims3) -> dict[str, str]:
    from umlkit.experiments.prose import cell, fmt, verdict
    f: dict[str, str] = {}
    t3 = {"sing": "prompt=Sing.;adapter=none", "cond": "prompt=Cond.;adapter=none", "stat": "prompt=none;adapter=Stat.",
          "stoc": "prompt=none;adapter=Stoc.", "singstat": "prompt=Sing.;adapter=Stat.", "puma": "prompt=Cond.;adapter=Stoc."}
    for k, s in t3.items():
        for ds in ("Unified", "Harmonic"):
            f[f"t3_{k}_{ds[:3].lower()}"] = fmt(cell(cmp3, s, ds), spread=cell(cmp3, s, ds, field="spread"))
        f[f"t3_{k}_params"] = f"{cell(cmp3, s, '', 'TrainableParams(M)') * 1e3:.1f}k"
    for src in ("SOP", "InShop", "Flowers"):
        f[f"t3_stat_{src}"], f[f"t3_stoc_{src}"] = fmt(cell(cmp3, t3["stat"], src)), fmt(cell(cmp3, t3["stoc"], src))
    f["t3_seeds"] = str(int(cmp3["seeds"].min()))
    for i, c in enumerate(claims3["claim"]):
        f[f"v3_{i}"] = verdict(claims3, c)
    return f


def _table4_facts(cmp4, claims4) -> dict[str, str]:
    from umlkit.experiments.prose import cell, fmt, verdict
    f: dict[str, str] = {}
    for name in ("CurricularFace", "PA", "Ours"):
        k = name.lower()
        spec, uni = cell(cmp4, f"{name} (dataset-specific)", "Harmonic"), cell(cmp4, f"{name} (unified)", "Harmonic")
        sd_spec = cell(cmp4, f"{name} (dataset-specific)", "Harmonic", field="spread")
        sd_uni = cell(cmp4, f"{name} (unified)", "Harmonic", field="spread")
        f[f"t4_{k}_spec"], f[f"t4_{k}_uni"] = fmt(spec, spread=sd_spec), fmt(uni, spread=sd_uni)
        f[f"t4_{k}_gap"] = f"{uni - spec:+.1f}"
        f[f"t4_{k}_paper_spec"] = fmt(cell(cmp4, f"{name} (dataset-specific)", "Harmonic", field="paper"))
        f[f"t4_{k}_paper_uni"] = fmt(cell(cmp4, f"{name} (unified)", "Harmonic", field="paper"))
    for i, c in enumerate(claims4["claim"]):
        f[f"v4_{i}"] = verdict(claims4, c)
    f["t4_seeds"] = str(int(cmp4["seeds"].min()))
    return f


def _table5_facts(cmp5, claims5, profile: str = "quick") -> dict[str, str]:
    from umlkit.experiments.prose import cell, fmt, verdict
    f: dict[str, str] = {}
    for b, bb in backbones_quick(profile).items():
        k = bb["fact"]
        for name in _T5_METHODS:
            row = f"{name} / {b}"
            if (cmp5["row"] == row).any():
                f[f"t5_{k}_{name[:4].lower()}"] = " / ".join(
                    fmt(cell(cmp5, row, d), spread=cell(cmp5, row, d, field="spread")) for d in ("Unified", "Harmonic"))
    for i, c in enumerate(claims5["claim"]):
        f[f"v5_{i}"] = verdict(claims5, c)
    trained = cmp5[cmp5["method"] != "Zero-Shot"]
    f["t5_seeds"] = str(int(trained["seeds"].min()))
    return f


# ------------------------------------------------------------------------------------------------ registry entry
# what the scoreboard, `umlkit records` and `umlkit reproduce --paper` need (registered by umlkit.experiments.catalog)
ENTRY = Paper(name=PAPER, title="PUMA (Kim, Kim, Kwak, WACV 2025)", claim_tables=claim_tables,
              chapters=("puma", "puma_ablations"), headline="PUMA beats unified full fine-tuning (Harmonic)",
              job_lists={n: partial(job_list, n) for n in ("tuning", "few_shot_tuning", "few_shot", "tables",
                                                           "second_tables", "budget")})
