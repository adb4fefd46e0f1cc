"""PUMA (Kim et al., "Learning Unified Distance Metric Across Diverse Data Distributions with Parameter-Efficient
Transfer Learning", WACV'25): the training runs behind Tables 2-5 and Figure 3, and their comparison with the paper.

What each table needs (paper section / official code, see ``shared/reference/implementation_notes.md`` §1):

* Table 2 (a): one fully fine-tuned model per dataset (``unified_eval.py``). Each column is the dataset's own
  model on its own test set; *Harmonic* is the harmonic mean of those 8 numbers; *Unified* is the ensemble of the
  8 models, whose L2-normalised embeddings of every test image are averaged (cosine search, so re-normalising does
  not change the ranking).
* Table 2 (b): one model fully fine-tuned on the union, for each of 9 losses (pair losses use 4 images per class,
  the official ``UniqueClassSampler``; proxy losses use random batches, ``--IPC 0``).
* Table 2 (c): parameter-efficient methods on the frozen backbone with CurricularFace (VPTSP-G with its own
  Proxy-Anchor on the generated semantic proxies).
* Table 3: single vs conditional prompt x static vs stochastic adapter; Table 4: dataset-specific vs unified
  training (CurricularFace, Proxy-Anchor, PUMA); Table 5: backbones; Figure 3: the prompt pool's weights averaged
  per source (the raw cosine weights of ``PromptPool.weights``).

The quick profile trains the tiny ViT on UML-Mini with the ``configs/puma`` quick settings. Model selection follows
neither the paper (best epoch on test) nor a validation split: every number is the *last* epoch, and learning
rates are chosen on a validation split of training classes (:func:`lr_sweep`). Each run is stored as a record
(:mod:`umlkit.experiments.records`), so the chapters read stored results and retrain only what is missing.
"""
from __future__ import annotations

import copy
import json
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from umlkit._paths import data_root, repo_root
from umlkit.data import build_transforms, load_unified
from umlkit.data.mini import ensure_mini
from umlkit.data.unified import PUMA_ORDER
from umlkit.experiments.records import cached_record
from umlkit.metrics import harmonic_mean, unified_evaluation
from umlkit.models import count_trainable, create_model
from umlkit.paper import paper_table
from umlkit.train.config import load_config, resolve_config
from umlkit.train.evaluate import extract_embeddings

__all__ = [
    "LOSSES", "PEFT_ROWS", "ABLATION_ROWS", "BACKBONES_QUICK", "PAPER_NAMES", "SECTIONS", "DATASET_COLUMNS",
    "run_config", "train_run", "train_specialists", "ensemble_embeddings", "zero_shot_run", "lr_sweep",
    "table2", "table3", "table4", "table5", "figure3_weights",
    "compare", "side_by_side", "paper_harmonic_check", "check_claims", "trainable_breakdown",
    "TABLE2_CLAIMS", "TABLE3_CLAIMS", "TABLE4_CLAIMS", "table5_claims",
    "plot_measured_vs_paper", "plot_cross_matrix", "plot_seeds", "plot_deltas", "plot_backbones", "plot_prompt_weights",
]

PAPER_NAMES = {"cub": "CUB", "cars": "Cars", "sop": "SOP", "inshop": "InShop", "nabirds": "NABirds", "dogs": "Dogs",
               "flowers": "Flowers", "aircraft": "Aircraft"}
DATASET_COLUMNS = [*PAPER_NAMES.values(), "Unified", "Harmonic"]

SECTIONS = {
    "zero-shot": "",
    "a": "(a) Dataset-specific metric learning (Full fine-tuning)",
    "b": "(b) Unified metric learning (Full fine-tuning)",
    "c": "(c) Unified metric learning (Parameter-efficient fine-tuning)",
}

# paper row name -> umlkit loss name (Table 2 (a)/(b))
LOSSES = {"Triplet": "triplet", "MS": "multisimilarity", "Margin": "margin", "Proxy-Anchor": "proxy_anchor",
          "CosFace": "cosface", "ArcFace": "arcface", "SoftTriple": "softtriple", "Hyp": "hyp",
          "CurricularFace": "curricularface"}
_PAIR_LOSSES = {"triplet", "multisimilarity", "margin", "hyp"}
# the loss options PUMA sets on the command line (the other losses keep umlkit's defaults, see loss_table())
_LOSS_OPTIONS = {"curricularface": {"margin": 0.3, "scale": 32.0}}

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

# Table 3 rows, keyed by the paper's setting string
ABLATION_ROWS = {
    "prompt=Sing.;adapter=none": {"method": "prompt_pool", "options": {"pool_size": 1}},
    "prompt=Cond.;adapter=none": {"method": "prompt_pool"},
    "prompt=none;adapter=Stat.": {"method": "adapter"},
    "prompt=none;adapter=Stoc.": {"method": "stochastic_adapter"},
    "prompt=Sing.;adapter=Stat.": {"method": "puma", "options": {"pool_size": 1, "keep_prob": 1.0}},
    "prompt=Cond.;adapter=Stoc.": {"method": "puma"},
}

# The tiny ViT is 96 wide with 6 blocks, so the paper's module sizes (adapter 128, pool 20 x 8, LoRA 128) are scaled
# down by about the width ratio 96/384 in the quick profile; the full profile uses the paper's sizes (the defaults).
_QUICK_OPTIONS = {
    "puma": {"adapter_dim": 16, "pool_size": 8, "prompt_length": 2},
    "prompt_pool": {"pool_size": 8, "prompt_length": 2},
    "adapter": {"adapter_dim": 16},
    "stochastic_adapter": {"adapter_dim": 16},
    "vpt": {"num_prompts": 2},
    "lora": {"rank": 8},
    "adaptformer": {"adapter_dim": 32},
    "vptsp": {"num_prompts": 2, "prompt_depth": 6, "accumulator": "gru_relu"},
}
_FULL_OPTIONS = {"vptsp": {"accumulator": "gru_relu"}}

# Table 5 in the quick profile: the same tiny ViT under different pretraining. ``weights`` is a recipe name that
# :func:`_weights_for` turns into a file (never a machine-specific path inside a record's configuration).
BACKBONES_QUICK = {
    "attribute heads, 12 epochs (shipped)": {"pretrained": True, "weights": None},
    "attribute heads, 2 epochs": {"pretrained": False, "weights": "recipe:pretrain_epochs=2"},
    "none (random init)": {"pretrained": False, "weights": None},
}
BACKBONES_FULL = {  # paper row setting -> timm backbone (umlkit.models.BACKBONES)
    "arch=ViT-S/16": "vit_s16_in21k_ft_in1k",
    "arch=DeiT-S/16": "deit_s16",
    "arch=DINO-S/16": "dino_s16",
    "arch=CLIP-B/32": "clip_b32_laion2b",
}


# ------------------------------------------------------------------------------------------------ configs
def _config_dir() -> Path:
    root = repo_root()
    if root is None or not (root / "configs" / "puma").is_dir():
        raise FileNotFoundError("the PUMA experiments read configs/puma/*.yaml from an umlkit checkout; clone the "
                                "repository (git clone ...; pip install -e .) and run from inside it")
    return root / "configs" / "puma"


def run_config(profile: str = "quick", *, method: str = "full", loss: str = "curricularface",
               datasets: Sequence[str] | None = None, seed: int = 0, options: dict | None = None,
               lr: float | None = None, overrides: Iterable[str] = ()) -> dict:
    """The fully resolved ``fit`` configuration of one PUMA run.

    ``method="full"`` starts from ``configs/puma/full_finetune.yaml``, every other method from ``puma.yaml``;
    the profile's module sizes for ``method`` are applied, then ``options``, the loss, its sampler (4 images per
    class for pair losses), the datasets (default: all 8) and the seed. Evaluation runs once, after the last epoch.
    """
    base = load_config(_config_dir() / ("full_finetune.yaml" if method == "full" else "puma.yaml"), profile)
    cfg = copy.deepcopy(base)
    m = cfg["model"]
    m["method"] = method
    sized = (_QUICK_OPTIONS if profile == "quick" else _FULL_OPTIONS).get(method, {})
    m["options"] = {**sized, **(options or {})}
    cfg["loss"]["name"] = loss
    cfg["loss"]["options"] = dict(_LOSS_OPTIONS.get(loss, {}))
    if loss in _PAIR_LOSSES:
        cfg["data"]["sampler"], cfg["data"]["samples_per_class"] = "m_per_class", 4
    elif method == "vptsp":  # the semantic proxies are built from class-grouped batches (VPTSP's sampler)
        cfg["data"]["sampler"], cfg["data"]["samples_per_class"] = "class_random", 4
    else:
        cfg["data"]["sampler"] = "random"
    if datasets is not None:
        cfg["data"]["datasets"] = list(datasets)
        if cfg["data"]["sampler"] != "random":  # a class-grouped batch cannot hold more classes than exist
            per_class = cfg["data"]["samples_per_class"]
            cfg["data"]["batch_size"] = min(cfg["data"]["batch_size"], per_class * _fewest_train_classes(cfg))
    if lr is not None:
        cfg["optimizer"]["lr"] = float(lr)
    cfg["seed"] = int(seed)
    cfg["train"]["eval_every"] = int(cfg["train"]["epochs"])
    cfg["train"]["progress"] = False
    cfg["name"] = f"puma-{method}-{loss}"
    return resolve_config(cfg, overrides=list(overrides))


def _fewest_train_classes(cfg: dict) -> int:
    from umlkit.data import load_dataset
    root = cfg["data"]["root"] or ensure_mini()
    return min(load_dataset(n, root, "train", expected=None, check_files=False).num_classes
               for n in cfg["data"]["datasets"])


def _weights_for(cfg: dict) -> dict:
    """The config ``fit`` runs: a ``recipe:pretrain_epochs=N`` weights entry becomes a file, pretrained once and
    kept under ``<data root>/tiny_vit_pretrain_<N>ep``."""
    w = cfg["model"]["weights"]
    if not (isinstance(w, str) and w.startswith("recipe:")):
        return cfg
    epochs = int(w.split("=", 1)[1])
    out = data_root() / f"tiny_vit_pretrain_{epochs}ep"
    path = out / "vit_tiny_uml_patch8_32.safetensors"
    if not path.is_file():
        from umlkit.models.pretrain import pretrain_tiny_vit
        pretrain_tiny_vit(out, epochs=epochs, progress=False, log=lambda *_: None)
    run = copy.deepcopy(cfg)
    run["model"]["weights"] = str(path)
    return run


def _test_set(cfg: dict):
    """The unified test split of all 8 sources with the config's evaluation transform."""
    from umlkit.models.backbones import backbone_data_config
    root = cfg["data"]["root"] or ensure_mini()
    tf = build_transforms(cfg["data"]["transform"], backbone_data_config(cfg["model"]["backbone"]), train=False)
    return load_unified(root, "test", transform=tf, cache=cfg["data"]["cache"])


def _scores(frame: pd.DataFrame, metric: str = "R@1") -> dict:
    return {PAPER_NAMES.get(k, k): round(float(v), 3) for k, v in frame[metric].items()}


# ------------------------------------------------------------------------------------------------ runs
def train_run(cfg: dict) -> dict:
    """Train one configuration with :func:`umlkit.train.fit` (checkpoints in a temporary folder) and return what a
    record keeps: last-epoch R@1 per source (paper names), validation R@1 when a split was held out, the loss per
    epoch, trainable parameters (model, and model + loss), the training time and, for models with a prompt pool,
    the mean prompt weights per source (Figure 3)."""
    res = _fit(cfg)
    out = {"test": _scores(res.last), "loss": [round(h["loss"], 4) for h in res.history],
           "trainable_model": count_trainable(res.model), "trainable_total": count_trainable(res.model, res.loss),
           "train_seconds": round(res.seconds, 1)}
    if "val" in res.history[-1]:
        out["val"] = {PAPER_NAMES.get(k, k): round(v["R@1"], 3) for k, v in res.history[-1]["val"].items()}
    out.update(_prompt_weights(res.model, cfg))
    return out


def _fit(cfg: dict):
    """:func:`umlkit.train.fit` with checkpoints in a temporary folder (a record keeps the numbers, not weights)."""
    from umlkit.train import fit
    with tempfile.TemporaryDirectory() as tmp:
        return fit(_weights_for(cfg), run_dir=tmp)


def ensemble_embeddings(embeddings: Sequence[torch.Tensor]) -> torch.Tensor:
    """``unified_eval.py``'s ensemble: the mean of each model's L2-normalised embeddings (not re-normalised)."""
    if not embeddings:
        raise ValueError("ensemble_embeddings needs at least one (n, d) embedding matrix")
    shapes = {tuple(e.shape) for e in embeddings}
    if len(shapes) != 1:
        raise ValueError(f"all models must embed the same items to the same size, got shapes {sorted(shapes)}")
    return torch.stack([torch.nn.functional.normalize(e.float(), dim=1) for e in embeddings]).mean(0)


def train_specialists(cfgs: dict[str, dict]) -> dict:
    """PUMA Table 2 (a): one model per source (``cfgs``: source -> config training on that source only). Each
    model embeds the whole unified test set; returns own-source R@1 (paper names), the cross matrix (model x
    source R@1), the ensemble's scores (averaged L2-normalised embeddings) and the summed trainable counts."""
    test = None
    own, cross, embs, n_model, seconds = {}, {}, [], 0, 0.0
    for src, cfg in cfgs.items():
        if test is None:
            test = _test_set(cfg)
        res = _fit(cfg)
        emb, labels = extract_embeddings(res.model, test, batch_size=512)
        frame = unified_evaluation(emb, labels, test.sources, is_query=test.is_query, is_gallery=test.is_gallery,
                                   source_names=test.source_names)
        scores = _scores(frame)
        own[PAPER_NAMES[src]] = scores[PAPER_NAMES[src]]
        cross[PAPER_NAMES[src]] = scores
        embs.append(emb)
        n_model += count_trainable(res.model)
        seconds += res.seconds
    frame = unified_evaluation(ensemble_embeddings(embs), labels, test.sources, is_query=test.is_query,
                               is_gallery=test.is_gallery, source_names=test.source_names)
    return {"own": own, "cross": cross, "ensemble": _scores(frame), "trainable_model": n_model,
            "train_seconds": round(seconds, 1)}


def zero_shot_run(cfg: dict) -> dict:
    """The frozen backbone's CLS feature (no head), evaluated as the paper's Zero-Shot row."""
    from umlkit.train.evaluate import evaluate_model
    run = _weights_for(cfg)
    torch.manual_seed(int(cfg["seed"]))
    m = run["model"]
    model = create_model(m["backbone"], "zero_shot", pretrained=bool(m["pretrained"]), weights=m["weights"])
    return {"test": _scores(evaluate_model(model, _test_set(cfg), batch_size=512)), "trainable_model": 0}


def _prompt_weights(model, cfg) -> dict:
    """Figure 3: the pool's weights for every test image, averaged per source ({source: [M weights]})."""
    pool = getattr(model.backbone, "prompt_pool", None)
    if pool is None:
        return {}
    test = _test_set(cfg)
    loader = torch.utils.data.DataLoader(test, batch_size=512, shuffle=False)
    weights = []
    model.eval()
    with torch.no_grad():
        for x, _ in loader:
            model(x)
            weights.append(model.backbone.last_prompt_weights.float())
    w = torch.cat(weights).numpy()
    src = np.asarray(test.sources)
    return {"prompt_weights": {PAPER_NAMES[test.source_names[s]]: w[src == s].mean(0).round(5).tolist()
                               for s in np.unique(src)}}


def _record(kind, label, cfg, compute, profile, rerun, log):
    key = json.loads(json.dumps(cfg, default=str))
    if "train" in key:  # a single run's config (a specialists' key maps sources to configs)
        key["train"].pop("progress", None)
    return cached_record(kind, label, key, compute, profile, rerun=rerun, log=log)


def _progress(items, desc, progress):
    if not progress:
        return items
    from tqdm.auto import tqdm
    return tqdm(list(items), desc=desc, unit="run")


def _rows(table, section, method, setting, seed, scores: dict, metric="R@1"):
    """Long-format rows in the paper's column order (records store their keys sorted)."""
    order = {d: i for i, d in enumerate(DATASET_COLUMNS)}
    return [{"table": table, "section": section, "method": method, "setting": setting, "seed": seed,
             "dataset": d, "metric": metric, "value": scores[d]} for d in sorted(scores, key=lambda d: order.get(d, 99))]


def _params_row(table, section, method, setting, seed, n):
    return {"table": table, "section": section, "method": method, "setting": setting, "seed": seed,
            "dataset": "", "metric": "TrainableParams(M)", "value": n / 1e6}


# ------------------------------------------------------------------------------------------------ tables
def lr_sweep(profile: str = "quick", lrs: dict[str, Sequence[float]] | None = None, seed: int = 0,
             val_fraction: float = 0.2, rerun: bool = False, progress: bool = True, log=print,
             overrides: Sequence[str] = ()) -> pd.DataFrame:
    """Learning-rate choice on a validation split: the last ``val_fraction`` of each source's *training* classes
    are held out, the rest trains. Returns validation (and, for reference, test) Unified/Harmonic R@1 per
    (method, lr). The test columns are shown, never used for the choice."""
    lrs = lrs or {"full": (3e-4, 1e-3, 3e-3), "puma": (1e-3, 3e-3, 1e-2)}  # PUMA's new modules train at 10x
    rows = []
    jobs = [(m, lr) for m, values in lrs.items() for lr in values]
    for method, lr in _progress(jobs, "lr sweep", progress):
        cfg = run_config(profile, method=method, seed=seed, lr=lr,
                         overrides=[f"data.val_fraction={val_fraction}", *overrides])
        rec = _record("lr_sweep", f"{method}-lr{lr:g}-seed{seed}", cfg, lambda c=cfg: train_run(c), profile,
                      rerun, log)
        r = rec["result"]
        rows.append({"method": method, "lr": lr, "val Unified": r["val"]["Unified"],
                     "val Harmonic": r["val"]["Harmonic"], "test Unified": r["test"]["Unified"],
                     "test Harmonic": r["test"]["Harmonic"], "seconds": rec["seconds"]})
    out = pd.DataFrame(rows)
    best = out.loc[out.groupby("method")["val Unified"].idxmax()]
    out["chosen (val Unified)"] = out.index.isin(best.index)
    return out


def table2(profile: str = "quick", sections: Sequence[str] = ("zero-shot", "a", "b", "c"),
           losses: Sequence[str] | None = None, peft: Sequence[str] | None = None, seeds: Sequence[int] = (0,),
           peft_seeds: Sequence[int] | None = None, rerun: bool = False, progress: bool = True,
           log=print, overrides: Sequence[str] = ()) -> pd.DataFrame:
    """Measured PUMA Table 2 in the paper's long format (one row per cell and seed). ``losses``/``peft`` select
    rows by the paper's names; ``peft_seeds`` (default ``seeds``) are the seeds of section (c)."""
    losses = list(losses or LOSSES)
    peft = list(peft or PEFT_ROWS)
    rows, T = [], "Table 2"
    if "zero-shot" in sections:
        cfg = run_config(profile, method="zero_shot", overrides=overrides)
        rec = _record("table2", "zero-shot", cfg, lambda: zero_shot_run(cfg), profile, rerun, log)
        rows += _rows(T, "", "Zero-Shot", "", 0, rec["result"]["test"])
    jobs = []
    if "a" in sections:
        jobs += [("a", name, s) for name in losses for s in seeds]
    if "b" in sections:
        jobs += [("b", name, s) for name in losses for s in seeds]
    if "c" in sections:
        jobs += [("c", name, s) for name in peft for s in (peft_seeds or seeds)]
    for sec, name, seed in _progress(jobs, "Table 2 runs", progress):
        if sec == "a":
            rec = _specialist_record(profile, "full", LOSSES[name], seed, rerun, log, overrides)
            r = rec["result"]
            scores = {**r["own"], "Unified": r["ensemble"]["Unified"], "Harmonic": harmonic_mean(list(r["own"].values()))}
            rows += _rows(T, SECTIONS["a"], name, "", seed, scores)
        else:
            if sec == "b":
                cfg = run_config(profile, method="full", loss=LOSSES[name], seed=seed, overrides=overrides)
            else:  # "Ours" has the configuration of Table 3's PUMA row, so both read one record
                spec = PEFT_ROWS[name]
                cfg = run_config(profile, method=spec["method"], loss=spec.get("loss", "curricularface"), seed=seed,
                                 overrides=overrides)
            rec = _record(f"table2{sec}", f"{name}-seed{seed}", cfg, lambda c=cfg: train_run(c), profile, rerun, log)
            r = rec["result"]
            rows += _rows(T, SECTIONS[sec], name, "", seed, r["test"])
        rows.append(_params_row(T, SECTIONS[sec], name, "", seed, r["trainable_model"]))
    return pd.DataFrame(rows)


def _specialist_record(profile, method, loss, seed, rerun, log, overrides=()):
    cfgs = {s: run_config(profile, method=method, loss=loss, datasets=[s], seed=seed, overrides=overrides)
            for s in PUMA_ORDER}
    return _record("specialists", f"{method}-{loss}-seed{seed}", cfgs, lambda: train_specialists(cfgs), profile,
                   rerun, log)


def _ablation_record(profile, setting, seed, rerun, log, overrides=()):
    spec = ABLATION_ROWS[setting]
    cfg = run_config(profile, method=spec["method"], options=spec.get("options"), seed=seed, overrides=overrides)
    opts = "_".join(f"{k}{v}" for k, v in sorted((spec.get("options") or {}).items())) or "default"
    return _record("table3", f"{spec['method']}-{opts}-seed{seed}", cfg, lambda: train_run(cfg), profile, rerun,
                   log)


def table3(profile: str = "quick", seeds: Sequence[int] = (0, 1, 2), rows: Sequence[str] | None = None,
           rerun: bool = False, progress: bool = True, log=print, overrides: Sequence[str] = ()) -> pd.DataFrame:
    """Measured PUMA Table 3 (prompt x adapter ablation), long format; the PUMA row also keeps its prompt weights
    (Figure 3, see :func:`figure3_weights`)."""
    out = []
    jobs = [(setting, s) for setting in (rows or ABLATION_ROWS) for s in seeds]
    for setting, seed in _progress(jobs, "Table 3 runs", progress):
        rec = _ablation_record(profile, setting, seed, rerun, log, overrides)
        out += _rows("Table 3", "", "", setting, seed, rec["result"]["test"])
        out.append(_params_row("Table 3", "", "", setting, seed, rec["result"]["trainable_model"]))
    return pd.DataFrame(out)


def table4(profile: str = "quick", seeds: Sequence[int] = (0,), rerun: bool = False, progress: bool = True,
           log=print, overrides: Sequence[str] = ()) -> pd.DataFrame:
    """Measured PUMA Table 4: dataset-specific (own-source R@1 of 8 models) vs unified training, for
    CurricularFace, Proxy-Anchor (paper: PA) and PUMA (Ours); Harmonic over the 8 sources. Long format with
    ``setting`` = ``training=Spec.`` / ``training=Univ.``."""
    rows = []
    methods = {"CurricularFace": ("full", "curricularface"), "PA": ("full", "proxy_anchor"), "Ours": ("puma", "curricularface")}
    jobs = [(name, s) for name in methods for s in seeds]
    for name, seed in _progress(jobs, "Table 4 runs", progress):
        method, loss = methods[name]
        spec = _specialist_record(profile, method, loss, seed, rerun, log, overrides)["result"]["own"]
        cfg = run_config(profile, method=method, loss=loss, seed=seed, overrides=overrides)  # Table 2 (b) / 3 runs
        uni = _record("table4", f"{name}-univ-seed{seed}", cfg, lambda c=cfg: train_run(c), profile, rerun, log)
        univ = {d: uni["result"]["test"][d] for d in PAPER_NAMES.values()}
        for setting, scores in (("training=Spec.", spec), ("training=Univ.", univ)):
            rows += _rows("Table 4", "", name, setting, seed, {**scores, "Harmonic": harmonic_mean(list(scores.values()))})
    return pd.DataFrame(rows)


def table5(profile: str = "quick", seeds: Sequence[int] = (0,), backbones: Sequence[str] | None = None,
           rerun: bool = False, progress: bool = True, log=print, overrides: Sequence[str] = ()) -> pd.DataFrame:
    """Measured PUMA Table 5: Zero-Shot, CurricularFace (unified full FT) and PUMA per backbone. Quick profile:
    the tiny ViT with the pretraining recipes of :data:`BACKBONES_QUICK`; full: the paper's four backbones."""
    rows = []
    names = list(backbones or (BACKBONES_QUICK if profile == "quick" else BACKBONES_FULL))
    jobs = [(b, row, s) for b in names for row in ("Zero-Shot", "CurricularFace", "Ours") for s in seeds]
    for b, row, seed in _progress(jobs, "Table 5 runs", progress):
        if profile == "quick":
            bb = BACKBONES_QUICK[b]
            over = [f"model.pretrained={str(bb['pretrained']).lower()}"]
            if bb["weights"]:
                over.append(f"model.weights={bb['weights']}")
        else:
            over = [f"model.backbone={BACKBONES_FULL[b]}"]
        method = {"Zero-Shot": "zero_shot", "CurricularFace": "full", "Ours": "puma"}[row]
        cfg = run_config(profile, method=method, seed=seed, overrides=[*over, *overrides])
        run = zero_shot_run if method == "zero_shot" else train_run  # the shipped backbone's runs are Table 2/3's
        rec = _record("table5", f"{method}-{b}-seed{seed}", cfg, lambda c=cfg, f=run: f(c), profile, rerun, log)
        rows += _rows("Table 5", "", row, b, seed, rec["result"]["test"])
    return pd.DataFrame(rows)


def figure3_weights(profile: str = "quick", seed: int = 0, rerun: bool = False, log=print,
                    overrides: Sequence[str] = ()) -> pd.DataFrame:
    """Average prompt-pool weight per source (rows) and prompt (columns) of the PUMA run of Table 3."""
    rec = _ablation_record(profile, "prompt=Cond.;adapter=Stoc.", seed, rerun, log, overrides)
    w = rec["result"]["prompt_weights"]
    df = pd.DataFrame(w).T
    df.columns = [f"prompt {i}" for i in range(df.shape[1])]
    return df.loc[[d for d in PAPER_NAMES.values() if d in df.index]]


# ------------------------------------------------------------------------------------------------ comparison
_KEYS = ["table", "section", "method", "setting", "dataset", "metric"]


def compare(measured: pd.DataFrame, paper: pd.DataFrame | None = None) -> pd.DataFrame:
    """Mean, spread and seed count of each measured cell beside the paper's value and the difference.

    ``spread`` is half the min-max range over seeds (0 for one seed)."""
    g = measured.groupby(_KEYS, sort=False)["value"]
    out = pd.DataFrame({"measured": g.mean(), "spread": (g.max() - g.min()) / 2, "seeds": g.count()}).reset_index()
    if paper is None:
        tables = measured["table"].unique().tolist()
        paper = pd.concat([paper_table("puma", t) for t in tables])
    p = paper[_KEYS + ["value"]].rename(columns={"value": "paper"}).fillna({"section": "", "method": "", "setting": "",
                                                                            "dataset": ""})
    if out["setting"].eq("").all():  # Table 2 rows carry arch/dim settings in the paper; match on the rest
        p = p.drop(columns="setting").drop_duplicates(_KEYS[:3] + _KEYS[4:])
        out = out.merge(p, on=[k for k in _KEYS if k != "setting"], how="left")
    else:
        out = out.merge(p, on=_KEYS, how="left")
    out["delta"] = out["measured"] - out["paper"]
    return out


def _short(label: str) -> str:
    """'(b) Unified metric learning (Full fine-tuning)' -> '(b)'; other labels unchanged."""
    return label.split(" ", 1)[0] if label.startswith("(") and label[1:3].endswith(")") else label


def side_by_side(cmp: pd.DataFrame, metric: str = "R@1", by: str = "method", digits: int = 1) -> pd.DataFrame:
    """One block of three lines per row (measured, paper, measured - paper) and one column per dataset."""
    sub = cmp[cmp["metric"] == metric]
    blocks = []
    for key, grp in sub.groupby(by if isinstance(by, list) else [by], sort=False):
        g = grp.set_index("dataset")
        cols = [c for c in DATASET_COLUMNS if c in g.index]
        key = key if isinstance(key, tuple) else (key,)
        name = " / ".join(_short(str(k)) for k in key if k)
        meas = g.loc[cols, "measured"].round(digits).astype(str)
        if g["seeds"].max() > 1:
            meas = meas + " ±" + g.loc[cols, "spread"].round(digits).astype(str)
        blocks.append(pd.DataFrame([meas.values, g.loc[cols, "paper"].values, g.loc[cols, "delta"].round(digits).values],
                                   columns=cols, index=pd.MultiIndex.from_tuples(
                                       [(name, "measured"), (name, "paper"), (name, "Δ")])))
    return pd.concat(blocks) if blocks else pd.DataFrame()


def paper_harmonic_check(table: str = "Table 2") -> pd.DataFrame:
    """The paper's printed Harmonic beside the harmonic mean of the row's 8 printed R@1 values."""
    p = paper_table("puma", table)
    p = p[p["metric"] == "R@1"].fillna({"section": "", "method": "", "setting": ""})
    rows = []
    for (sec, method, setting), g in p.groupby(["section", "method", "setting"], sort=False):
        vals = g.set_index("dataset")["value"]
        if "Harmonic" not in vals or not all(d in vals for d in PAPER_NAMES.values()):
            continue
        computed = harmonic_mean([vals[d] for d in PAPER_NAMES.values()])
        rows.append({"section": sec, "method": method or setting, "printed Harmonic": vals["Harmonic"],
                     "harmonic mean of the row": round(computed, 1),
                     "difference": round(vals["Harmonic"] - computed, 1)})
    out = pd.DataFrame(rows)
    out["consistent (|diff| <= 0.1)"] = out["difference"].abs() <= 0.1
    return out


def check_claims(cmp: pd.DataFrame, claims: Sequence[tuple[str, dict, dict]], metric: str = "R@1") -> pd.DataFrame:
    """Evaluate "A > B" claims on the paper's numbers and on the measured ones.

    Each claim is ``(text, a, b)`` where ``a``/``b`` select one cell by column values (e.g.
    ``{"method": "Ours", "dataset": "Harmonic"}``). The verdict is *supported* when the measured gap is positive and
    larger than the seed spread of both cells, *within noise* when its size is not larger than that spread, and *not
    reproduced* when it is negative beyond the spread.
    When either cell has a single seed the spread is unknown and the verdict says so (``holds, 1 seed``)."""
    sub = cmp[cmp["metric"] == metric]

    def cell(sel):
        mask = np.ones(len(sub), dtype=bool)
        for k, v in sel.items():
            mask &= (sub[k] == v).to_numpy()
        if mask.sum() != 1:
            raise KeyError(f"claim cell {sel} matches {int(mask.sum())} rows, expected exactly 1")
        return sub[mask].iloc[0]

    rows = []
    for text, a, b in claims:
        ca, cb = cell(a), cell(b)
        gap = ca["measured"] - cb["measured"]
        noise = max(ca["spread"], cb["spread"])
        if min(ca["seeds"], cb["seeds"]) < 2:
            verdict = "holds, 1 seed" if gap > 0 else "not reproduced, 1 seed"
        else:
            verdict = "supported" if gap > noise else ("within noise" if gap >= -noise else "not reproduced")
        rows.append({"claim": text, "paper A": ca["paper"], "paper B": cb["paper"],
                     "holds in paper": bool(ca["paper"] > cb["paper"]) if pd.notna(ca["paper"]) and pd.notna(cb["paper"]) else None,
                     "measured A": round(ca["measured"], 1), "measured B": round(cb["measured"], 1),
                     "gap": round(gap, 1), "seeds": int(min(ca["seeds"], cb["seeds"])), "seed spread": round(noise, 1),
                     "verdict": verdict})
    return pd.DataFrame(rows)


def _cell(section="", method="", dataset="Harmonic", setting=None):
    sel = {"section": SECTIONS.get(section, section), "method": method, "dataset": dataset}
    if setting is not None:
        sel["setting"] = setting
    return sel


# The papers' claims as "A > B" comparisons of two cells (evaluated by check_claims on paper and measured numbers)
TABLE2_CLAIMS = [
    ("fine-tuning beats zero-shot (unified full FT, CurricularFace, Unified)",
     _cell("b", "CurricularFace", "Unified"), _cell("zero-shot", "Zero-Shot", "Unified")),
    ("dataset-specific models beat one unified model (CurricularFace, Harmonic)",
     _cell("a", "CurricularFace"), _cell("b", "CurricularFace")),
    ("one unified model beats the ensemble of specialists (CurricularFace, Unified)",
     _cell("b", "CurricularFace", "Unified"), _cell("a", "CurricularFace", "Unified")),
    ("PUMA beats unified full fine-tuning (Unified)", _cell("c", "Ours", "Unified"),
     _cell("b", "CurricularFace", "Unified")),
    ("PUMA beats unified full fine-tuning (Harmonic)", _cell("c", "Ours"), _cell("b", "CurricularFace")),
    *[(f"PUMA beats {m} (Harmonic)", _cell("c", "Ours"), _cell("c", m))
      for m in ("Linear Embedding", "MLP-3 Embedding", "VPT", "LoRA", "AdaptFormer", "VPTSP-G")],
]
def _t3(setting, dataset="Harmonic"):
    return dict(section="", method="", dataset=dataset, setting=setting)


TABLE3_CLAIMS = [
    *[(f"a conditional prompt beats a single prompt ({d})", _t3("prompt=Cond.;adapter=none", d),
       _t3("prompt=Sing.;adapter=none", d)) for d in ("Harmonic", "Unified")],
    *[(f"a stochastic adapter beats a static one ({d})", _t3("prompt=none;adapter=Stoc.", d),
       _t3("prompt=none;adapter=Stat.", d)) for d in ("Harmonic", "Unified")],
    ("PUMA beats single prompt + static adapter", _t3("prompt=Cond.;adapter=Stoc."), _t3("prompt=Sing.;adapter=Stat.")),
    ("PUMA beats the stochastic adapter alone", _t3("prompt=Cond.;adapter=Stoc."), _t3("prompt=none;adapter=Stoc.")),
    ("PUMA beats the conditional prompt alone", _t3("prompt=Cond.;adapter=Stoc."), _t3("prompt=Cond.;adapter=none")),
]
TABLE4_CLAIMS = [
    *[(f"{m}: dataset-specific training beats unified training (Harmonic)",
       dict(section="", method=m, dataset="Harmonic", setting="training=Spec."),
       dict(section="", method=m, dataset="Harmonic", setting="training=Univ.")) for m in ("CurricularFace", "PA")],
    ("Ours: unified training beats dataset-specific training (Harmonic)",
     dict(section="", method="Ours", dataset="Harmonic", setting="training=Univ."),
     dict(section="", method="Ours", dataset="Harmonic", setting="training=Spec.")),
    ("unified PUMA beats unified CurricularFace (Harmonic)",
     dict(section="", method="Ours", dataset="Harmonic", setting="training=Univ."),
     dict(section="", method="CurricularFace", dataset="Harmonic", setting="training=Univ.")),
]


def table5_claims(backbones: Sequence[str]) -> list:
    """Table 5's claims for each backbone: PUMA beats full fine-tuning, and fine-tuning beats zero-shot."""
    out = []
    for b in backbones:
        cell = lambda m, b=b: dict(section="", method=m, dataset="Unified", setting=b)  # noqa: E731
        out += [(f"{b}: PUMA beats full fine-tuning (Unified)", cell("Ours"), cell("CurricularFace")),
                (f"{b}: full fine-tuning beats zero-shot (Unified)", cell("CurricularFace"), cell("Zero-Shot"))]
    return out


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


# ------------------------------------------------------------------------------------------------ figures
def plot_measured_vs_paper(cmp: pd.DataFrame, dataset: str = "Harmonic", hue: str = "section", ax=None):
    """Measured vs paper R@1 of one column for every row (a rank check: do the paper's orderings carry over?)."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    from scipy.stats import spearmanr
    sub = cmp[(cmp["dataset"] == dataset) & (cmp["metric"] == "R@1")].dropna(subset=["paper"])
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4.5))
    sub = sub.assign(**{hue: sub[hue].replace("", "zero-shot").str.slice(0, 40)})
    sns.scatterplot(data=sub, x="paper", y="measured", hue=hue, ax=ax, s=60)
    for _, r in sub.iterrows():
        ax.annotate(r["method"] or r["setting"], (r["paper"], r["measured"]), fontsize=7, xytext=(3, 3),
                    textcoords="offset points")
    rho = spearmanr(sub["paper"], sub["measured"]).statistic if len(sub) > 2 else float("nan")
    ax.set_title(f"{dataset} R@1: measured vs paper (Spearman ρ = {rho:.2f}, {len(sub)} rows)")
    ax.set_xlabel("paper (%)")
    ax.set_ylabel("measured (%)")
    ax.legend(fontsize=7)
    return ax


def plot_cross_matrix(profile: str = "quick", loss: str = "curricularface", method: str = "full", seed: int = 0,
                      ax=None, overrides: Sequence[str] = ()):
    """Table 2 (a)'s eight specialists, each evaluated on every source (R@1): the diagonal is the table."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    rec = _specialist_record(profile, method, loss, seed, False, None, overrides)
    order = [d for d in PAPER_NAMES.values() if d in rec["result"]["cross"]]
    df = pd.DataFrame(rec["result"]["cross"]).T.loc[order, order]
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 5))
    sns.heatmap(df, annot=True, fmt=".0f", cmap="viridis", ax=ax, cbar_kws={"label": "R@1 (%)"})
    ax.set_xlabel("evaluated on")
    ax.set_ylabel("trained on")
    ax.set_title(f"dataset-specific models ({loss}), R@1 on every source")
    return ax


def plot_seeds(measured: pd.DataFrame, by: str = "setting", datasets=("Unified", "Harmonic"), ax=None):
    """Every seed as a dot and the mean as a bar, per row, for the chosen columns."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    sub = measured[(measured["metric"] == "R@1") & measured["dataset"].isin(datasets)]
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    sns.barplot(data=sub, x=by, y="value", hue="dataset", ax=ax, errorbar=None, alpha=0.6)
    sns.stripplot(data=sub, x=by, y="value", hue="dataset", dodge=True, ax=ax, palette="dark:black", size=4,
                  legend=False)
    ax.set_ylabel("R@1 (%)")
    ax.set_xlabel("")
    ax.tick_params(axis="x", rotation=20, labelsize=8)
    return ax


def plot_deltas(cmp: pd.DataFrame, ax=None):
    """Table 4: unified minus dataset-specific R@1 per source and method, measured beside paper."""
    import seaborn as sns
    wide = cmp.pivot_table(index=["method", "dataset"], columns="setting", values=["measured", "paper"])
    d = pd.DataFrame({
        "measured": wide[("measured", "training=Univ.")] - wide[("measured", "training=Spec.")],
        "paper": wide[("paper", "training=Univ.")] - wide[("paper", "training=Spec.")],
    }).reset_index().melt(id_vars=["method", "dataset"], var_name="source of numbers", value_name="Univ. - Spec.")
    d["dataset"] = pd.Categorical(d["dataset"], DATASET_COLUMNS)
    g = sns.catplot(data=d, x="dataset", y="Univ. - Spec.", hue="source of numbers", col="method", kind="bar",
                    height=3.2, aspect=1.3)
    for a in g.axes.flat:
        a.axhline(0, color="black", lw=0.8)
        a.tick_params(axis="x", rotation=45, labelsize=8)
    return g


def plot_backbones(measured: pd.DataFrame, datasets=("Unified", "Harmonic"), ax=None):
    """Table 5: Unified and Harmonic R@1 of each row (zero-shot, full FT, PUMA) per backbone."""
    import seaborn as sns
    sub = measured[(measured["metric"] == "R@1") & measured["dataset"].isin(datasets)]
    sub = sub.assign(column=sub["dataset"])
    g = sns.catplot(data=sub, x="setting", y="value", hue="method", col="column", kind="bar", errorbar=None,
                    height=3.4, aspect=1.5)
    g.set_axis_labels("backbone pretraining", "R@1 (%)")
    for a in g.axes.flat:
        a.tick_params(axis="x", rotation=15, labelsize=8)
    return g


def plot_prompt_weights(weights: pd.DataFrame, ax=None):
    """Figure 3: average weight of each pool prompt per source."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    sns.heatmap(weights, annot=True, fmt=".2f", cmap="mako", ax=ax, cbar_kws={"label": "mean cosine weight"})
    ax.set_title("average prompt weights per source (PUMA, quick profile)")
    return ax
