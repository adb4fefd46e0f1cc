# size: the training loop with checkpoints, resumption, DDP and evaluation, which share one state
"""``fit(config)``: a config in, a trained and evaluated model out (every chapter trains through this).

What it follows from the papers' code (implementation_notes.md): per-group learning-rate multipliers (PUMA
``utils.get_params_groups``: backbone x1, new modules x10, head x10, loss proxies their own), Proxy-Anchor's
warm-up epochs that train only the head and the proxies, step / multistep / cosine schedules stepped per epoch,
gradient clipping by value (PUMA: [-1, 1]) or norm (Hyp-ViT: 3), autocast in bf16/fp16, and evaluation every N
epochs with :func:`umlkit.metrics.unified_evaluation`. Both reporting rules are kept side by side: the **last
epoch** and the **best epoch on the test set** (what PUMA, VPTSP, Proxy-Anchor and Roth report - selection on
test, which the book flags), plus a validation split of training classes (``data.val_fraction``) for honest
tuning.

The objective is a list of weighted terms (``objective`` in the config); each loss declares the inputs it needs
(:func:`umlkit.losses.loss_inputs`) and :class:`_TrainStep` passes exactly those, so the engine names no loss or
model class. Class-level side information (a language-embedding file referenced by path and sha256) is resolved
when a term is built (:mod:`umlkit.data.side_info`), and ``data.splits`` lists a source's classes explicitly
(:func:`build_data`). Evaluation does not consume the global random stream (it runs under
``torch.random.fork_rng``), so evaluating every epoch trains the same model as evaluating once at the end.

Reliability: checkpoints after every epoch (``latest.pt``, rotated to ``previous.pt``; ``best.pt``), written
atomically and holding model / optimizer / scheduler / loss / sampler / RNG state, so ``resume=True`` continues
bit-exactly on CPU; a non-finite loss stops with :class:`TrainingDivergedError` naming epoch and step while the
last good checkpoint stays intact. Distributed: under ``torchrun`` the model and loss run in DDP, each rank takes
its slice of every global batch, embeddings are all-gathered (with gradient) before the loss, and rank 0
evaluates and writes.
"""
from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import numpy as np
import pandas as pd
import torch
from torch import nn

from umlkit._paths import data_root, results_root
from umlkit.data import build_sampler, build_transforms, few_shot_indices, load_dataset
from umlkit.data.few_shot import parse_few_shot, published_file, published_indices
from umlkit.data.mini import ensure_mini
from umlkit.data.shortcut import ShortcutDataset, check_shortcut
from umlkit.data.unified import UnifiedDataset
from umlkit.losses import create_loss, loss_entry, loss_inputs, model_requirements
from umlkit.losses._checks import NonFiniteEmbeddingsError
from umlkit.models import create_model, method_entry
from umlkit.models.backbones import backbone_data_config
from umlkit.results import atomic_write
from umlkit.train.checkpoint import load_checkpoint, rng_state, save_checkpoint, set_rng_state
from umlkit.train.config import config_hash, legacy_objective, resolve_config
from umlkit.train.evaluate import evaluate_model
from umlkit.train.runtime import AMP_DTYPES, check_batch, resolve_device, resolve_precision, resolve_workers
from umlkit.train.sparse import RowSparseOptimizer, sparse_grads
from umlkit.train.wise_ft import initial_state, wise_ft_curve

__all__ = ["FitResult", "TrainingDivergedError", "fit", "build_data", "build_model", "build_optimizer", "param_groups",
           "plot_history", "run_dir_for", "read_log", "plugin_files", "check_registered"]


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite."""


@dataclass
class FitResult:
    run_dir: Path
    config: dict
    history: list[dict]
    last: pd.DataFrame | None
    best: pd.DataFrame | None
    best_epoch: int | None
    model: nn.Module = field(repr=False)
    loss: nn.Module = field(repr=False)
    seconds: float = 0.0
    wise_ft: list[dict] | None = None   # train.wise_ft: [{"alpha", "test", "val"}, ...] (umlkit.train.wise_ft)

    def summary(self, metric: str = "R@1") -> pd.DataFrame:
        """Last-epoch and best-on-test columns side by side for ``metric``."""
        if self.last is None:
            return pd.DataFrame()
        out = pd.DataFrame({"last epoch": self.last[metric]})
        if self.best is not None:
            out[f"best on test (epoch {self.best_epoch})"] = self.best[metric]
        return out


# ------------------------------------------------------------------------------------------------- data
def data_root_of(cfg: dict) -> Path:
    """The data folder of a resolved configuration: ``data.root``; when it is unset, UML-Mini (generated on first
    use) in the quick profile and the data folder (``UMLKIT_DATA``, :func:`umlkit.data_root`) in the full one;
    UML-Mini also when ``data.root`` names it symbolically (``uml_mini:large``, :func:`umlkit.data.mini.mini_alias`)."""
    from umlkit.data.mini import mini_alias
    root = cfg["data"]["root"]
    if root is None:
        if cfg["profile"] == "quick":
            return ensure_mini()
        folder = data_root()
        if not folder.is_dir():
            raise FileNotFoundError(f"the full profile reads its datasets from {folder} (UMLKIT_DATA, or data.root), "
                                    f"which does not exist; set UMLKIT_DATA to the folder holding CUB_200_2011/, "
                                    f"cars196/, ... and run `umlkit data check` to see what is there")
        return folder
    size = mini_alias(root)
    return ensure_mini(size=size) if size else Path(root)


def build_data(cfg: dict, data_config: dict):
    """(train UnifiedDataset, test UnifiedDataset, validation UnifiedDataset or None) for a resolved config.

    Per source, the classes split as PUMA does (the first half of the sorted class ids trains, the rest tests),
    or as ``data.splits.<source>`` lists them: ``{train: [class keys], test: [...], val: [...]}`` or ``{file:
    PATH, sha256: HEX}`` naming a JSON file with that mapping (:func:`umlkit.data.side_info.write_split_file`).
    Class keys are the annotation's class ids (see :func:`umlkit.data.load_dataset`'s ``classes``). An explicit
    ``val`` list replaces ``data.val_fraction`` for that source; without one, ``val_fraction`` holds out the last
    training classes as for the default split. ``few_shot`` then subsamples the training images: k per class drawn,
    or the official PUMA subset files (``"published:k"``, :mod:`umlkit.data.few_shot`). ``data.shortcut`` (optional)
    paints a class-predicting mark on the training images (:mod:`umlkit.data.shortcut`).
    """
    d = cfg["data"]
    root = data_root_of(cfg)
    splits = d["splits"] or {}
    unknown = sorted(set(splits) - set(d["datasets"]))
    if unknown:
        raise ValueError(f"data.splits names source(s) {unknown} that are not in data.datasets {d['datasets']}")
    train_tf = build_transforms(d["transform"], data_config, train=bool(d["augment"]))
    eval_tf = build_transforms(d["transform"], data_config, train=False)
    train_parts, val_parts, test_parts = [], [], []
    for name in d["datasets"]:
        va = None
        if name in splits:
            spec = _class_split(name, splits[name])
            tr, te = (_load_listed(name, root, part, spec[part], d) for part in ("train", "test"))
            if spec.get("val") is not None:
                va = _load_listed(name, root, "val", spec["val"], d)
        else:
            tr = load_dataset(name, root, "train", expected=d["expected"], cache=d["cache"])
            te = None
        if va is None and d["val_fraction"]:
            n_val = max(1, int(round(tr.num_classes * d["val_fraction"])))
            is_val = tr.labels >= tr.num_classes - n_val  # the last classes: class-disjoint from training
            va = tr.subset(np.flatnonzero(is_val))
            tr = tr.subset(np.flatnonzero(~is_val))
        _require_images(tr, "train", name, d, root)
        if va is not None:
            _require_images(va, "val", name, d, root)
            val_parts.append(va)
        shot = parse_few_shot(d["few_shot"])
        if shot is not None:
            k, published = shot
            held_out = va.paths if va is not None else ()   # validation classes' images: not in the subset
            idx = (published_indices(tr.paths, published_file(root, name, k), held_out) if published
                   else few_shot_indices(tr.labels, k, seed=cfg["seed"]))
            tr = tr.subset(idx, relabel=False)
            _require_images(tr, "train", name, d, root)
        train_parts.append(tr)
        te = te if te is not None else load_dataset(name, root, "test", expected=d["expected"], cache=d["cache"])
        _require_images(te, "test", name, d, root)
        test_parts.append(te)
    train = UnifiedDataset(train_parts, transform=train_tf)
    if d.get("shortcut") is not None:    # a class-predicting mark on the training images only (umlkit.data.shortcut)
        train = ShortcutDataset(train, **check_shortcut(d["shortcut"]), seed=cfg["seed"])
    test = UnifiedDataset(test_parts, transform=eval_tf)
    val = UnifiedDataset(val_parts, transform=eval_tf) if val_parts else None
    return train, test, val


def _require_images(part, which: str, name: str, d: dict, root: Path) -> None:
    """Refuse an empty train, test or validation part of source ``name`` before any training (an empty part would
    otherwise fail, or drop the source from the results, only after an epoch), naming the config keys that made it."""
    if len(part):
        return
    splits = d["splits"] or {}
    keys = [f"data.splits.{name}.{which}" if name in splits else
            f"the {name} annotation's own {'train' if which == 'val' else which} split under {root} (data.root)"]
    if which != "test" and d["val_fraction"] and not (which == "val" and name in splits and splits[name].get("val")):
        keys.append(f"data.val_fraction = {d['val_fraction']}")
    if which == "train" and d["few_shot"] is not None:
        keys.append(f"data.few_shot = {d['few_shot']!r}")
    if d["expected"] is None:
        keys.append("data.expected = null (the image count check is off)")
    from umlkit.data.datasets import DATASETS
    title = DATASETS[name].title if name in DATASETS else name
    raise ValueError(f"the {which!r} part of source {name!r} ({title}) has no images, from {'; '.join(keys)}: every "
                     f"source of data.datasets {d['datasets']} needs images in train and test (and in validation "
                     f"where one is asked for)")


def _class_split(name: str, spec) -> dict:
    """``data.splits.<name>`` as ``{train: [...], test: [...], val: [...] or None}``, read from its file when it
    is a ``{file, sha256}`` reference, with disjoint lists."""
    from umlkit.data.side_info import read_split_file
    where = f"data.splits.{name}"
    if isinstance(spec, dict) and "file" in spec:
        spec = read_split_file(spec, where=where)
    if not isinstance(spec, dict):
        raise ValueError(f"{where} must be {{train: [...], test: [...], val: [...]}} or {{file, sha256}}, got {spec!r}")
    unknown_keys = set(spec) - {"train", "test", "val"}
    if unknown_keys or not spec.get("train") or not spec.get("test"):
        raise ValueError(f"{where} must give non-empty 'train' and 'test' class lists (and optionally 'val'), got "
                         f"keys {sorted(spec)}")
    seen: dict[str, str] = {}
    for part in ("train", "test", "val"):
        for c in spec.get(part) or []:
            if str(c) in seen and seen[str(c)] != part:
                raise ValueError(f"{where}: class {c!r} is in both {seen[str(c)]} and {part}")
            seen[str(c)] = part
    return {"train": list(spec["train"]), "test": list(spec["test"]),
            "val": list(spec["val"]) if spec.get("val") else None}


def _load_listed(name: str, root: Path, part: str, keys: list, d: dict):
    try:
        return load_dataset(name, root, part, classes=keys, cache=d["cache"])
    except ValueError as err:
        raise ValueError(f"data.splits.{name}.{part}: {err}") from None


# -------------------------------------------------------------------------------------------- optimizer
def param_groups(model: nn.Module, loss: nn.Module) -> dict[str, list[nn.Parameter]]:
    """Trainable parameters by role: ``backbone`` (pretrained timm weights, incl. BitFit biases), ``new``
    (adapters, prompts, LoRA, VPTSP proxy branch), ``head`` (embedding + auxiliary heads), ``loss`` (proxies,
    discriminators), and ``proxy``: model parameters that carry ``_umlkit_group = "proxy"`` (VPTSP's learnable
    proxy bias, which the official code trains with its own optimizer at ``lr_proxy``). Without an
    ``optimizer.lr_mult.proxy`` entry the ``proxy`` group takes the ``new`` group's multiple (see
    :func:`build_optimizer`)."""
    body = getattr(model.backbone, "vit", model.backbone)
    backbone_ids = {id(p) for n, p in body.named_parameters() if not getattr(p, "_umlkit_new", False)}
    head_ids = ({id(p) for p in model.head.parameters()}
                | {id(p) for p in getattr(model, "aux_heads", nn.Module()).parameters()})
    groups = {"backbone": [], "new": [], "head": [], "loss": [], "proxy": []}
    for p in model.parameters():
        if not p.requires_grad:
            continue
        if getattr(p, "_umlkit_group", None) == "proxy":
            groups["proxy"].append(p)
        else:
            groups["backbone" if id(p) in backbone_ids else "head" if id(p) in head_ids else "new"].append(p)
    groups["loss"] = [p for p in loss.parameters() if p.requires_grad]
    return groups


def build_optimizer(cfg: dict, groups: dict[str, list[nn.Parameter]]) -> torch.optim.Optimizer:
    o = cfg["optimizer"]
    mult = dict(o["lr_mult"])
    mult.setdefault("proxy", mult.get("new", 1.0))
    pg = [{"params": ps, "lr": o["lr"] * float(mult.get(name, 1.0)), "name": name}
          for name, ps in groups.items() if ps]
    if not pg:
        raise ValueError("the model and loss have no trainable parameters")
    cls, options = _optimizer_type(o)
    return cls(pg, lr=o["lr"], **options)


def _optimizer_type(o: dict) -> tuple[type, dict]:
    """The torch optimizer class of the config's ``optimizer`` section and its settings other than ``lr``."""
    if o["name"] == "adamw":
        return torch.optim.AdamW, {"weight_decay": o["weight_decay"]}
    if o["name"] == "adam":
        return torch.optim.Adam, {"weight_decay": o["weight_decay"]}
    if o["name"] == "sgd":
        return torch.optim.SGD, {"weight_decay": o["weight_decay"], "momentum": o["momentum"]}
    raise ValueError(f"optimizer.name must be adamw, adam or sgd, got {o['name']!r}")


def _sparse_optimizer(cfg: dict, opt: torch.optim.Optimizer, sparse: list, world: int,
                      precision: str) -> RowSparseOptimizer:
    """The row-sparse optimizer of a model's off-device parameters (``model.sparse_parameters()``, e.g. VPTSP's
    CPU-resident class prompts): the configured optimizer's type and settings, the learning rate of the ``new``
    parameter group as the schedule sets it, each row updated only when its class is in the batch."""
    if world > 1:
        raise ValueError("parameters kept off the training device (model.options.class_prompts_device='cpu') are not "
                         "synchronised across processes; train them in one process or leave class_prompts_device unset")
    if precision == "fp16":   # the resolved precision: "auto" is fp16 on a GPU without bf16
        raise ValueError(f"precision fp16 (config precision={cfg['precision']!r}) scales gradients the sparse "
                         "optimizer of model.options.class_prompts_device='cpu' does not see; use bf16 or fp32")
    group = next((g for g in opt.param_groups if g["name"] == "new"), None)
    if group is None:
        raise ValueError("model.sparse_parameters() needs a 'new' parameter group to take its learning rate from")
    cls, options = _optimizer_type(cfg["optimizer"])
    return RowSparseOptimizer(sparse, lambda ps: cls(ps, lr=group["lr"], **options), lambda: group["lr"])


def _scheduler(cfg: dict, opt):
    s, epochs = cfg["schedule"], cfg["train"]["epochs"]
    if s["name"] == "none":
        return torch.optim.lr_scheduler.LambdaLR(opt, lambda e: 1.0)
    if s["name"] == "step":
        return torch.optim.lr_scheduler.StepLR(opt, s["step_size"], s["gamma"])
    if s["name"] == "multistep":
        return torch.optim.lr_scheduler.MultiStepLR(opt, s["milestones"], s["gamma"])
    if s["name"] == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs, eta_min=s["eta_min"])
    raise ValueError(f"schedule.name must be none, step, multistep or cosine, got {s['name']!r}")


def build_model(cfg: dict, num_classes: int | None = None, load_weights: bool = False) -> nn.Module:
    """The model a resolved config describes, with the auxiliary heads its objective's terms declare (S2SD, DiVA;
    :func:`umlkit.losses.model_requirements`) and, for a method that needs them (VPTSP), the training classes.
    ``load_weights`` loads the config's pretrained weights (``fit``); ``umlkit eval`` leaves them out because the
    checkpoint replaces every weight."""
    m = cfg["model"]
    options = dict(m["options"])
    objective = cfg["objective"] if "objective" in cfg else legacy_objective(cfg.get("loss"))  # old run folders
    for key, value in model_requirements(objective, m["embed_dim"]).items():  # heads the terms need
        if key == "aux_heads":
            options[key] = value
        else:
            options.setdefault(key, value)
    if method_entry(m["method"]).needs_num_classes:
        options.setdefault("num_classes", num_classes)
    return create_model(m["backbone"], m["method"], embed_dim=m["embed_dim"],
                        pretrained=bool(m["pretrained"]) and load_weights,
                        weights=m["weights"] if load_weights else None, **options)


def _named_builders(cfg: dict) -> list[tuple[str, str, object]]:
    """``(kind, name, registry entry or None)`` of the method and of each objective term a configuration names."""
    objective = cfg["objective"] if "objective" in cfg else legacy_objective(cfg.get("loss"))
    out = []
    for kind, name, lookup in [("method", cfg["model"]["method"], method_entry),
                               *(("loss", t["name"], loss_entry) for t in objective)]:
        try:
            out.append((kind, name, lookup(name)))
        except ValueError:   # not registered in this process
            out.append((kind, name, None))
    return out


def plugin_files(cfg: dict) -> dict[str, str]:
    """``{"method:NAME" or "loss:NAME": file}``: the files outside umlkit (``--plugin`` files) that registered the
    method and objective terms ``cfg`` names; a run's ``config.json`` records them (``plugins``) so that
    ``umlkit eval`` can name the file a checkpoint needs."""
    out = {}
    for kind, name, entry in _named_builders(cfg):
        module = sys.modules.get(getattr(entry.build, "__module__", None) or "") if entry is not None else None
        file = getattr(module, "__file__", None)
        if file and module.__name__.partition(".")[0] != "umlkit":
            out[f"{kind}:{name}"] = str(Path(file).resolve())
    return out


def check_registered(cfg: dict, config_file: str | Path, recorded: dict | None = None) -> None:
    """Refuse a run's configuration (``config_file``, a run folder's ``config.json``) that names a method or loss
    not registered in this process: the run was trained with a plugin, and the ValueError says to pass it with
    ``--plugin``, naming the file when ``recorded`` (the ``plugins`` entry :func:`plugin_files` wrote) has it."""
    missing = [(kind, name) for kind, name, entry in _named_builders(cfg) if entry is None]
    if not missing:
        return
    what = " and ".join(f"the {kind} {name!r}" for kind, name in missing)
    files = sorted({(recorded or {}).get(f"{kind}:{name}") for kind, name in missing} - {None})
    where = (f" ({config_file} records the file: --plugin {' --plugin '.join(files)})" if files
             else " (its config.json does not record which file)")
    raise ValueError(f"{config_file} names {what}, which {'is' if len(missing) == 1 else 'are'} not registered: "
                     f"this run was trained with a plugin; pass --plugin FILE, the file that registers "
                     f"{'it' if len(missing) == 1 else 'them'}{where}")


def build_objective(cfg: dict, train_set, embed_dim: int) -> nn.ModuleList:
    """One module per objective term (in order); a ``language_embeddings`` reference ``{file, sha256}`` becomes
    the matrix of the training classes' rows (matched by class key, then by class name), or with the term's option
    ``per_sample`` the training images' rows (matched by image key, :meth:`UnifiedDataset.sample_keys`)."""
    from umlkit.data.side_info import load_class_embeddings, load_sample_embeddings
    terms = []
    for i, term in enumerate(cfg["objective"]):
        opts = dict(term["options"])
        ref = opts.get("language_embeddings")
        where = f"objective.{i}.options.language_embeddings"
        if isinstance(ref, dict) and opts.get("per_sample"):   # one row per training image, by the image's key
            opts["language_embeddings"] = load_sample_embeddings(ref, train_set.sample_keys(), where=where)
        elif isinstance(ref, dict):
            opts["language_embeddings"] = load_class_embeddings(ref, train_set.class_names(), where=where,
                                                                class_keys=train_set.class_keys())
        try:
            module = create_loss(term["name"], num_classes=train_set.num_classes, embedding_size=embed_dim, **opts)
        except (TypeError, ValueError) as err:   # e.g. an option the loss does not take: name the term
            raise type(err)(f"config key objective.{i} ({term['name']}): {err}") from err
        loss_inputs(module)  # an undeclared or unknown input fails here, before training starts
        terms.append(module)
    return nn.ModuleList(terms)


# ------------------------------------------------------------------------------------------------ steps
class _TrainStep(nn.Module):
    """model.forward_train + (all-gather) + the weighted objective terms in one module, so DDP synchronises model
    and loss parameters. Each term receives exactly the inputs it declares (``loss_inputs``)."""

    def __init__(self, model: nn.Module, terms: nn.ModuleList, weights: list[float], world_size: int):
        super().__init__()
        self.model, self.terms = model, terms
        self.weights, self.world_size = weights, world_size
        for term in terms:   # a term that reads more of the model than forward_train returns (a hook)
            if hasattr(term, "attach_model"):
                term.attach_model(model)

    def _gather(self, t: torch.Tensor) -> torch.Tensor:
        if self.world_size == 1:
            return t
        import torch.distributed.nn.functional as dnn
        return torch.cat(dnn.all_gather(t))

    def forward(self, x: torch.Tensor, y: torch.Tensor, indices: torch.Tensor | None = None) -> torch.Tensor:
        out = self.model.forward_train(x, y)
        cache: dict = {}

        def provide(name: str):
            """One input of the vocabulary umlkit.losses.INPUTS, computed once per step when a term asks."""
            if name not in cache:
                if name in ("embeddings", "features"):
                    cache[name] = self._gather(out[name])
                elif name == "labels":
                    cache[name] = self._gather(y)
                elif name == "indices":  # the training set's index of each image (the loader adds it on request)
                    if indices is None:
                        raise ValueError("a loss asks for the images' indices but the batch carries none")
                    cache[name] = self._gather(indices)
                elif name == "aux":
                    cache[name] = {k: self._gather(v) for k, v in out["aux"].items()}
                elif name == "proxies":  # the model's class proxies are the same on every rank
                    cache[name] = out["proxies"]
                elif name == "views":    # a second view of the batch through the self-supervised head, drawn
                    # after the first forward (the random stream of the one-loss engine)
                    cache[name] = self._gather(self.model.forward_train(_second_view(x), y)["aux"]["selfsup"])
                elif name == "model":
                    cache[name] = self.model
                else:  # pragma: no cover - loss_inputs checked the names when the objective was built
                    raise KeyError(f"a loss asks for input {name!r}")
            return cache[name]

        total = None
        for weight, term in zip(self.weights, self.terms):
            value = weight * term(**{n: provide(n) for n in loss_inputs(term)})
            total = value if total is None else total + value  # from the first term: 1.0 * v is v, bit for bit
        return total


def _objective_state(state: dict) -> dict:
    """A checkpoint's loss state for the objective's ModuleList: checkpoints written before the objective list
    held the single loss's state (keys without the ``0.`` term prefix)."""
    if state and not all(k.split(".", 1)[0].isdigit() for k in state):
        return {f"0.{k}": v for k, v in state.items()}
    return state


def _flat(d, prefix: str = "") -> dict:
    out = {}
    for k, v in (d or {}).items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flat(v, key + "."))
        else:
            out[key] = v
    return out


# what a resumed run may change: where and how fast it runs, and how long it trains (train.epochs extends a run)
RESUMABLE_CHANGES = ("device", "data.root", "data.num_workers", "train.epochs", "train.progress",
                     "train.eval_batch_size")


def _config_changes(old_config: Path, cfg: dict) -> list[str]:
    """The dotted keys whose values differ between the run folder's config.json and ``cfg`` ([] when the file is
    missing or unreadable)."""
    try:
        before = _flat(json.loads(old_config.read_text())["config"])
    except (OSError, ValueError, KeyError, TypeError):
        return []
    now = _flat(json.loads(json.dumps(cfg, default=str)))
    return [k for k in sorted(set(before) | set(now)) if before.get(k) != now.get(k)]


def _resume_mismatch(what: str, path: Path, err: Exception, old_config: Path, cfg: dict) -> RuntimeError:
    """The error for a checkpoint whose ``what`` state does not fit the configured run: it names the checkpoint,
    the first line of torch's message and the configuration keys that differ from the run folder's config.json."""
    changed = [k for k in _config_changes(old_config, cfg)
               if k.split(".")[0] in ("model", "objective", "loss", "optimizer", "data")]
    from umlkit.models.backbones import state_dict_mismatch
    first = state_dict_mismatch(err)
    hint = (f" The configuration differs from the one in {old_config} in: {', '.join(changed[:8])}"
            f"{' ...' if len(changed) > 8 else ''}." if changed else "")
    return RuntimeError(f"cannot resume from {path}: the checkpoint's {what} state does not fit the configured "
                        f"{what} ({first}).{hint} Resume with the configuration the checkpoint was written with, or "
                        f"train into a new run folder.")


class _WithIndex(torch.utils.data.Dataset):
    """The training set with each item's index appended: ``(image, label, index)``, for losses that declare the
    input ``indices`` (per-image side information). Wrapping changes neither the items nor any random stream."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i: int):
        return (*self.dataset[i], i)


def _second_view(x: torch.Tensor) -> torch.Tensor:
    """DiVA's second view of a batch: a random translation of up to 1/16 of the side (tensor-level)."""
    shift = max(1, x.shape[-1] // 16)
    dx, dy = (int(v) for v in torch.randint(-shift, shift + 1, (2,)))
    return torch.roll(x, shifts=(dy, dx), dims=(-2, -1))


def _world() -> tuple[int, int]:
    """(world size, rank) from torchrun's environment variables, checked."""
    try:
        world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    except ValueError:
        raise ValueError(f"WORLD_SIZE={os.environ.get('WORLD_SIZE')!r} / RANK={os.environ.get('RANK')!r}: expected "
                         f"integers (torchrun sets them)") from None
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"WORLD_SIZE={world}, RANK={rank}: expected 0 <= RANK < WORLD_SIZE")
    return world, rank


def run_dir_for(cfg: dict) -> Path:
    return results_root(cfg["profile"]) / "runs" / f"{cfg['name']}-{config_hash(_hashable(cfg))}"


def _hashable(cfg: dict) -> dict:
    c = json.loads(json.dumps(cfg, default=str))
    c["train"].pop("progress", None)
    return c


def read_log(run_dir: str | Path) -> pd.DataFrame:
    """The per-epoch JSONL log of a run as a DataFrame (loss, learning rates, metrics, seconds)."""
    path = Path(run_dir) / "log.jsonl"
    rows = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
    return pd.json_normalize(rows)


def _evaluate(model, dataset, cfg, device, autocast_dtype):
    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):  # evaluation must not move the training's random stream
        return evaluate_model(model, dataset, cfg["train"]["metrics"], cfg["train"]["eval_batch_size"], device,
                              autocast_dtype=autocast_dtype, num_workers=resolve_workers(cfg["data"]["num_workers"]))


def _frame_to_json(df: pd.DataFrame) -> dict:
    return {src: {m: round(float(v), 4) for m, v in row.items()} for src, row in df.iterrows()}


def _frame_from_json(d: dict) -> pd.DataFrame:
    df = pd.DataFrame.from_dict(d, orient="index")
    df.index.name = "source"
    return df


# -------------------------------------------------------------------------------------------------- fit
_RUN_FILES = ("config.json", "log.jsonl", "metrics.json", "latest.pt", "previous.pt", "best.pt")


def _check_run_dir(run_dir: Path, resume) -> None:
    """Refuse, before anything is built or written, a run folder that training would overwrite without having
    written it: a file, a folder with files other than a run's (a user's own ``config.json`` included: a run's holds
    ``config_hash``), or, unless resuming, a folder that already holds a run's checkpoints or metrics."""
    if not run_dir.exists():
        return
    if not run_dir.is_dir():
        raise NotADirectoryError(f"run_dir {run_dir} is a file; expected a new or empty folder, or a run folder")
    names = sorted(p.name for p in run_dir.iterdir())
    if not names:
        return
    other = [n for n in names if n not in _RUN_FILES and not (n.startswith(".") and n.endswith(".tmp"))]
    try:
        ours = isinstance(saved := json.loads((run_dir / "config.json").read_text()), dict) and "config_hash" in saved
    except (OSError, ValueError):
        ours = False
    if other or not ours:
        what = f"files a run does not write ({', '.join(other[:5])})" if other else \
            "no config.json written by umlkit's training"
        raise FileExistsError(f"run_dir {run_dir} is not a umlkit run folder ({what}); training writes config.json, "
                              f"log.jsonl and checkpoints there, so it takes only a new or empty folder or one of its "
                              f"own runs. Choose another run_dir (CLI: --run-dir); nothing was changed.")
    done = [n for n in ("latest.pt", "best.pt", "metrics.json") if n in names]
    if done and not resume:
        raise FileExistsError(f"run_dir {run_dir} already holds a run ({', '.join(done)}); training from scratch "
                              f"would overwrite it. Resume it (resume=True; CLI: --resume) or choose another run_dir "
                              f"(CLI: --run-dir); nothing was changed.")


@dataclass
class _Run:
    """What one training run holds while it trains: its configuration and the objects :func:`_set_up` builds."""
    cfg: dict
    run_dir: Path
    device: torch.device
    world: int
    rank: int
    train_set: object
    test_set: object
    val_set: object
    model: nn.Module
    loss: nn.Module
    groups: dict
    opt: torch.optim.Optimizer
    sparse: list
    sparse_opt: object
    sched: object
    sampler: object
    loader: object
    runner: nn.Module
    wants_index: bool
    amp_dtype: object
    scaler: object
    initial: dict | None = None   # theta_0 for ``train.wise_ft`` (umlkit.train.wise_ft), else None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def ckpt_path(self) -> Path:
        return self.run_dir / "latest.pt"


@dataclass
class _Progress:
    """What a run has measured so far (restored from a checkpoint on resume)."""
    history: list = field(default_factory=list)
    best: pd.DataFrame | None = None
    best_epoch: int | None = None
    start_epoch: int = 0
    last: pd.DataFrame | None = None


def fit(config: dict | None = None, *, run_dir: str | Path | None = None, resume: bool | str | Path = False,
        overrides=None, resolved: bool = False, data: tuple | None = None, _fail_at_step: int | None = None,
        _poison_at_step: int | None = None) -> FitResult:
    """Train and evaluate one configuration (see :mod:`umlkit.train.config` for the keys).

    Args:
        config: a (partial) config dict; missing keys come from :data:`umlkit.train.config.DEFAULTS`.
        run_dir: where checkpoints, ``log.jsonl``, ``config.json`` and ``metrics.json`` go (default
            ``results/<profile>/runs/<name>-<hash>``).
        resume: ``True`` continues from ``run_dir/latest.pt`` when it exists; a path resumes from that file.
        overrides: dotted ``key=value`` strings applied on top of ``config``.
        resolved: ``config`` is already the output of :func:`~umlkit.train.config.resolve_config` (a record key's
            configuration): it is used as given, not resolved again (a partial configuration is refused).
        data: the ``(train, test, validation)`` datasets :func:`build_data` gives for this configuration, when the
            caller has built them already (a runner that also analyses them); they are not built again.

    The phases: :func:`_set_up` (data, model, objective, optimiser, sampler), :func:`_restore` (resume),
    :func:`_start_files`, then per epoch :func:`_train_epoch`, :func:`_evaluate_epoch` and :func:`_checkpoint`,
    and :func:`_finish`.
    """
    cfg = _as_given(config) if resolved and not overrides else resolve_config(config, overrides=overrides)
    run = _set_up(cfg, run_dir, resume, data)
    progress = _restore(run, resume)
    _start_files(run, progress)
    epochs = int(cfg["train"]["epochs"])
    bar = None
    if cfg["train"]["progress"] and run.is_main:
        from umlkit._progress import tqdm
        bar = tqdm(total=epochs * len(run.sampler), initial=progress.start_epoch * len(run.sampler), desc=cfg["name"],
                   unit="step")
    t0 = time.perf_counter()
    for epoch in range(progress.start_epoch, epochs):
        row = _train_epoch(run, epoch, bar, _fail_at_step, _poison_at_step)
        _evaluate_epoch(run, progress, epoch, row)
        progress.history.append(row)
        if run.is_main:
            _checkpoint(run, progress, epoch, row)
    if bar is not None:
        bar.close()
    return _finish(run, progress, time.perf_counter() - t0)


def _as_given(config: dict) -> dict:
    """A configuration the caller resolved: every section and setting of DEFAULTS (no ``profiles`` block), except
    ``train.progress``, which a record key leaves out (no number depends on it) and which takes its default here."""
    from umlkit.train.config import DEFAULTS
    if not isinstance(config, dict) or set(config) != set(DEFAULTS):
        got = sorted(config) if isinstance(config, dict) else type(config).__name__
        raise ValueError(f"fit(resolved=True) takes a resolved configuration (umlkit.train.resolve_config) with the "
                         f"sections {sorted(DEFAULTS)}; got {got}")
    missing = [f"{s}.{k}" for s, block in DEFAULTS.items() if isinstance(block, dict) and isinstance(config[s], dict)
               for k in block if k not in config[s] and (s, k) != ("train", "progress")]
    if missing:
        raise ValueError(f"fit(resolved=True): the configuration lacks {', '.join(missing[:8])}; resolve it first "
                         f"(umlkit.train.resolve_config)")
    if "progress" not in config["train"]:
        config = {**config, "train": {**config["train"], "progress": DEFAULTS["train"]["progress"]}}
    return config


def _set_up(cfg: dict, run_dir, resume, data: tuple | None = None) -> _Run:
    """Seeds, data, model, objective, optimisers, schedule, sampler and loader, in the order that fixes the random
    streams (a change of this order changes every run's numbers)."""
    world, rank = _world()
    device = resolve_device(cfg["device"])
    precision = resolve_precision(cfg["precision"], device)   # fp16 on the CPU fails here, before the data loads
    workers = resolve_workers(cfg["data"]["num_workers"])
    from umlkit.metrics.knn import forced_search_dtype
    forced_search_dtype()   # a bad UMLKIT_SEARCH_DTYPE fails now, not at the first evaluation after an epoch
    if world > 1:
        import torch.distributed as dist
        if not dist.is_initialized():
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
        if device.type == "cuda":
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
            torch.cuda.set_device(device)
    run_dir = Path(run_dir) if run_dir is not None else run_dir_for(cfg)
    if rank == 0:
        _check_run_dir(run_dir, resume)
    seed = int(cfg["seed"])
    torch.manual_seed(seed)
    np.random.seed(seed)
    import random
    random.seed(seed)

    # model and loss (the loss needs the class count, the model needs its auxiliary heads)
    m = cfg["model"]
    train_set, test_set, val_set = data if data is not None else build_data(cfg, backbone_data_config(m["backbone"]))
    d = cfg["data"]
    check_batch(d["batch_size"], train_set, d["samples_per_class"], d["sampler"])
    rows = [*test_set.source_names, "Unified", "Harmonic"]
    if cfg["train"]["select_on"] not in rows:   # checked now, not at the first evaluation
        raise ValueError(f"config key train.select_on = {cfg['train']['select_on']!r}: expected one of {rows} (a "
                         f"test source of data.datasets, or a summary row)")
    torch.manual_seed(seed)
    model = build_model(cfg, train_set.num_classes, load_weights=True).to(device)
    loss = build_objective(cfg, train_set, model.embed_dim).to(device)
    groups = param_groups(model, loss)
    opt = build_optimizer(cfg, groups)
    sparse = [p for p in getattr(model, "sparse_parameters", lambda: [])() if p.requires_grad]
    sparse_opt = _sparse_optimizer(cfg, opt, sparse, world, precision) if sparse else None
    sched = _scheduler(cfg, opt)
    sampler = build_sampler(d["sampler"], train_set.labels, d["batch_size"], d["samples_per_class"],
                            train_set.sources, seed, rank, world)
    wants_index = any("indices" in loss_inputs(t) for t in loss)
    loader = torch.utils.data.DataLoader(_WithIndex(train_set) if wants_index else train_set, batch_sampler=sampler,
                                         num_workers=workers, pin_memory=device.type == "cuda")
    torch.manual_seed(seed + 1000 * rank)  # each rank augments its slice with its own random stream
    _compile_forward(model, cfg["train"].get("compile", "off"))
    step_module = _TrainStep(model, loss, [float(t["weight"]) for t in cfg["objective"]], world)
    runner = step_module
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP
        runner = DDP(step_module, device_ids=[device.index] if device.type == "cuda" else None,
                     find_unused_parameters=True)
    amp_dtype = AMP_DTYPES[precision]
    scaler = torch.amp.GradScaler("cuda") if amp_dtype is torch.float16 else None
    # WiSE-FT's theta_0: the model as built (a resumed run rebuilds the same one before its checkpoint is loaded)
    initial = initial_state(model) if cfg["train"].get("wise_ft") else None
    return _Run(cfg, run_dir, device, world, rank, train_set, test_set, val_set, model, loss, groups, opt, sparse,
                sparse_opt, sched, sampler, loader, runner, wants_index, amp_dtype, scaler, initial)


def _compile_forward(model: nn.Module, mode: str) -> None:
    """``train.compile``: the model's training forward through ``torch.compile`` (an attribute of this instance,
    so its state dict, checkpoints and the evaluation's eager forward are unchanged). Compiled on the first step;
    ``reduce-overhead`` also replays the forward and backward as CUDA graphs (a launch-bound step on a GPU)."""
    if mode == "off":
        return
    model.forward_train = torch.compile(model.forward_train, mode=None if mode == "default" else mode)


def _restore(run: _Run, resume) -> _Progress:
    """The progress to continue from: empty, or the checkpoint's (model, objective, optimisers, schedule, sampler,
    random state, history), after checking that the configuration is the one the checkpoint trained."""
    progress = _Progress()
    if not resume:
        return progress
    cfg, run_dir = run.cfg, run.run_dir
    path = Path(resume) if not isinstance(resume, bool) else run.ckpt_path
    if not (path.exists() or not isinstance(resume, bool)):
        return progress
    changed = [k for k in _config_changes(run_dir / "config.json", cfg) if k not in RESUMABLE_CHANGES]
    if changed:   # checked before the checkpoint is read and before config.json is rewritten
        raise ValueError(
            f"cannot resume {run_dir}: the configuration differs from {run_dir / 'config.json'} in "
            f"{', '.join(changed[:8])}{' ...' if len(changed) > 8 else ''}. A resumed run continues the same "
            f"training (it may change only {', '.join(RESUMABLE_CHANGES)}); train the new configuration into "
            f"another run folder. Nothing was changed.")
    state = load_checkpoint(path, map_location=run.device)
    for what, target, saved in (("model", run.model, state["model"]),
                                ("objective", run.loss, _objective_state(state["loss"])),
                                ("optimizer", run.opt, state["optimizer"])):
        try:
            target.load_state_dict(saved)
        except (RuntimeError, ValueError, KeyError) as err:
            raise _resume_mismatch(what, path, err, run_dir / "config.json", cfg) from err
    if run.sparse_opt is not None:
        try:
            run.sparse_opt.load_state_dict(state.get("sparse_optimizer"))
        except (ValueError, TypeError) as err:
            raise _resume_mismatch("sparse optimizer", path, err, run_dir / "config.json", cfg) from err
    run.sched.load_state_dict(state["scheduler"])
    run.sampler.load_state_dict(state["sampler"])
    set_rng_state(state["rng"])
    progress.history, progress.start_epoch = list(state["history"]), int(state["epoch"])
    if cfg["train"]["epochs"] < progress.start_epoch:
        raise ValueError(f"cannot resume {path} with train.epochs = {cfg['train']['epochs']}: the checkpoint "
                         f"has trained {progress.start_epoch} epochs already; give at least {progress.start_epoch}. "
                         f"Nothing was changed.")
    progress.best_epoch = state.get("best_epoch")
    progress.best = _frame_from_json(state["best"]) if state.get("best") else None
    if run.scaler is not None and "scaler" in state:
        run.scaler.load_state_dict(state["scaler"])
    return progress


def _start_files(run: _Run, progress: _Progress) -> None:
    """``config.json`` (atomically) and ``log.jsonl`` (rewritten from the restored history) on the main rank."""
    if not run.is_main:
        return
    run.run_dir.mkdir(parents=True, exist_ok=True)
    header = {"config": run.cfg, "config_hash": config_hash(_hashable(run.cfg))}
    from umlkit._registry import overrides
    if overrides():   # a plugin replaced a built-in loss or method: the run says so beside its configuration
        header["registry_overrides"] = overrides()
    if plugins := plugin_files(run.cfg):   # the files that registered its method or loss: umlkit eval names them
        header["plugins"] = plugins
    atomic_write(run.run_dir / "config.json", json.dumps(header, indent=1, default=str))
    with open(run.run_dir / "log.jsonl", "w") as fh:
        fh.writelines(json.dumps(h) + "\n" for h in progress.history)


def _train_epoch(run: _Run, epoch: int, bar, fail_at: int | None, poison_at: int | None) -> dict:
    """One pass over the sampler's batches; the epoch's log row (mean loss, learning rates, seconds, of them
    ``data_seconds`` waiting for the loader, steps)."""
    model, opt, sparse_opt, sampler = run.model, run.opt, run.sparse_opt, run.sampler
    model.train()
    sampler.set_epoch(epoch)
    te = time.perf_counter()
    total, n_steps, waited = 0.0, 0, [0.0]
    for step, batch in enumerate(_waiting(run.loader, waited)):
        x, y = batch[0].to(run.device, non_blocking=True), batch[1].to(run.device, non_blocking=True)
        idx = batch[2].to(run.device, non_blocking=True) if run.wants_index else None
        if poison_at is not None and epoch * len(sampler) + step == poison_at:
            with torch.no_grad():  # test hook: the weights diverged, so the embeddings are NaN
                next(p for p in model.parameters() if p.requires_grad).fill_(float("nan"))
        value = _forward(run, x, y, idx, epoch, step, bar,
                         fail=fail_at is not None and epoch * len(sampler) + step == fail_at)
        opt.zero_grad(set_to_none=True)
        if sparse_opt is not None:
            sparse_opt.zero_grad()
        _backward_and_step(run, value, epoch)
        # The step's one read of a device value, taken once the backward and the update are queued, so that a GPU
        # has work while the host waits for the loss; a non-finite loss stops the run here, its update discarded
        # with the run (the last checkpoint was written before it).
        loss = float(value.detach())
        if not math.isfinite(loss):
            _diverged(run, f"the loss became {loss}", epoch, step, bar)
        total += loss
        n_steps += 1
        if bar is not None:
            bar.update(1)
            bar.set_postfix(epoch=epoch + 1, loss=f"{loss:.3f}",
                            data=f"{waited[0] / max(time.perf_counter() - te, 1e-9):.0%}")
    lrs = {g["name"]: g["lr"] for g in opt.param_groups}
    run.sched.step()
    return {"epoch": epoch + 1, "loss": total / max(n_steps, 1), "lr": lrs,
            "seconds": round(time.perf_counter() - te, 2), "data_seconds": round(waited[0], 2), "steps": n_steps}


def _waiting(loader, waited: list[float]):
    """The loader's batches, adding to ``waited[0]`` the seconds the loop spent waiting for each: the epoch's
    ``data_seconds`` and the progress bar's ``data`` share. A large share means the loader, not the model, sets the
    pace (more ``data.num_workers``, or faster storage, would help)."""
    batches = iter(loader)
    while True:
        t = time.perf_counter()
        batch = next(batches, None)
        waited[0] += time.perf_counter() - t
        if batch is None:
            return
        yield batch


def _forward(run: _Run, x, y, idx, epoch: int, step: int, bar, fail: bool) -> torch.Tensor:
    """The objective's value on one batch (autocast as configured). Embeddings that became NaN or inf stop the run
    here (the losses check their inputs); a non-finite value is caught after the step (:func:`_train_epoch`)."""
    try:
        with torch.autocast(run.device.type, dtype=run.amp_dtype, enabled=run.amp_dtype is not None):
            value = run.runner(x, y, idx)
    except NonFiniteEmbeddingsError as err:
        _diverged(run, f"the embeddings became NaN or inf ({err})", epoch, step, bar)
    if fail:
        value = value * float("nan")  # test hook: inject a NaN
    return value


def _diverged(run: _Run, what: str, epoch: int, step: int, bar) -> NoReturn:
    """Stop with :class:`TrainingDivergedError` naming the epoch, the step and the last good checkpoint."""
    if bar is not None:
        bar.close()
    good = f"; the last good checkpoint is {run.ckpt_path}" if run.ckpt_path.exists() else ""
    raise TrainingDivergedError(f"{what} at epoch {epoch + 1}, step {step + 1} (run {run.cfg['name']}){good}. "
                                "Lower the learning rate, enable gradient clipping (clip.mode) or use fp32.")


def _backward_and_step(run: _Run, value: torch.Tensor, epoch: int) -> None:
    """Backward (scaled in fp16), the warm-up's frozen groups, gradient clipping, and the optimisers' steps."""
    opt, scaler, sparse_opt, clip = run.opt, run.scaler, run.sparse_opt, run.cfg["clip"]
    if scaler is not None:
        scaler.scale(value).backward()
        scaler.unscale_(opt)
    else:
        value.backward()
    if epoch < int(run.cfg["train"]["warmup_epochs"]):  # Proxy-Anchor warm-up: only the head and the loss proxies move
        for p in [p for g in ("backbone", "new", "proxy") for p in run.groups[g]] + run.sparse:
            p.grad = None
    params = [p for g in opt.param_groups for p in g["params"] if p.grad is not None]
    if sparse_opt is not None:
        params += sparse_grads(run.sparse)
    if clip["mode"] == "value":
        torch.nn.utils.clip_grad_value_(params, clip["max"])
    elif clip["mode"] == "norm":   # (resolve_config admits value, norm or null only)
        torch.nn.utils.clip_grad_norm_(params, clip["max"])
    if scaler is not None:
        scaler.step(opt)
        scaler.update()
    else:
        opt.step()
    if sparse_opt is not None:
        sparse_opt.step()


def _evaluate_epoch(run: _Run, progress: _Progress, epoch: int, row: dict) -> None:
    """Every ``train.eval_every`` epochs and after the last (main rank): test (and validation) metrics into ``row``,
    and the best epoch on ``train.select_on``."""
    t_cfg = run.cfg["train"]
    if not ((epoch + 1) % int(t_cfg["eval_every"]) == 0 or epoch + 1 == int(t_cfg["epochs"])) or not run.is_main:
        return
    progress.last = last = _evaluate(run.model, run.test_set, run.cfg, run.device, run.amp_dtype)
    row["test"] = _frame_to_json(last)
    if run.val_set is not None:
        row["val"] = _frame_to_json(_evaluate(run.model, run.val_set, run.cfg, run.device, run.amp_dtype))
    key = (t_cfg["select_on"], t_cfg["metrics"][0])
    if progress.best is None or float(last.loc[key]) > float(progress.best.loc[key]):
        progress.best, progress.best_epoch = last, epoch + 1


def _checkpoint(run: _Run, progress: _Progress, epoch: int, row: dict) -> None:
    """The epoch's log line, ``latest.pt`` (everything a resume needs) and, for a new best epoch, ``best.pt``."""
    with open(run.run_dir / "log.jsonl", "a") as fh:
        fh.write(json.dumps(row) + "\n")
    state = {"model": run.model.state_dict(), "loss": run.loss.state_dict(), "optimizer": run.opt.state_dict(),
             "scheduler": run.sched.state_dict(), "sampler": run.sampler.state_dict(), "rng": rng_state(),
             "epoch": epoch + 1, "history": progress.history, "best_epoch": progress.best_epoch,
             "best": _frame_to_json(progress.best) if progress.best is not None else None,
             "config_hash": config_hash(_hashable(run.cfg))}
    if run.scaler is not None:
        state["scaler"] = run.scaler.state_dict()
    if run.sparse_opt is not None:
        state["sparse_optimizer"] = run.sparse_opt.state_dict()
    save_checkpoint(state, run.ckpt_path)
    if progress.best_epoch == epoch + 1:
        save_checkpoint({"model": run.model.state_dict(), "epoch": epoch + 1,
                         "config_hash": state["config_hash"]}, run.run_dir / "best.pt", keep_previous=False)


def _wise_ft(run: _Run) -> list[dict] | None:
    """``train.wise_ft``: test (and validation) scores of the weight-space mixtures of the run's start and end."""
    if run.initial is None or not run.is_main:
        return None

    def scores(model) -> dict:
        out = {"test": _frame_to_json(_evaluate(model, run.test_set, run.cfg, run.device, run.amp_dtype))}
        if run.val_set is not None:
            out["val"] = _frame_to_json(_evaluate(model, run.val_set, run.cfg, run.device, run.amp_dtype))
        return out
    return wise_ft_curve(run.model, run.initial, run.cfg["train"]["wise_ft"], scores)


def _finish(run: _Run, progress: _Progress, seconds: float) -> FitResult:
    """The result, ``metrics.json`` (main rank) and, under torchrun, a barrier so that no rank leaves early."""
    last, history = progress.last, progress.history
    if last is None and history and "test" in history[-1]:
        last = _frame_from_json(history[-1]["test"])
    result = FitResult(run.run_dir, run.cfg, history, last, progress.best, progress.best_epoch, run.model, run.loss,
                       seconds, _wise_ft(run))
    if run.is_main and last is not None:
        atomic_write(run.run_dir / "metrics.json", json.dumps(
            {"last_epoch": _frame_to_json(last), "best_on_test": _frame_to_json(progress.best),
             "best_epoch": progress.best_epoch,
             "selection_note": "best_on_test selects the epoch on the test set, as the papers do"}, indent=1))
    if run.world > 1:
        import torch.distributed as dist
        dist.barrier()
    return result


def plot_history(run, metric: str = "R@1", sources=("Unified", "Harmonic"), ax=None):
    """Learning curves of a run (a run folder, a :class:`FitResult` or a ``read_log`` frame): training loss on
    the left axis, test ``metric`` of ``sources`` (and validation Unified, when present) on the right."""
    import matplotlib.pyplot as plt
    log = run if isinstance(run, pd.DataFrame) else read_log(run.run_dir if isinstance(run, FitResult) else run)
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(log["epoch"], log["loss"], color="black", marker="o", label="training loss")
    ax.set_xlabel("epoch")
    ax.set_ylabel("training loss")
    right = ax.twinx()
    for s in sources:
        col = f"test.{s}.{metric}"
        if col in log:
            right.plot(log["epoch"], log[col], marker=".", label=f"test {s} {metric}")
    if f"val.Unified.{metric}" in log:
        right.plot(log["epoch"], log[f"val.Unified.{metric}"], ls="--", label=f"validation Unified {metric}")
    right.set_ylabel(f"{metric} (%)")
    lines = ax.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    labels = ax.get_legend_handles_labels()[1] + right.get_legend_handles_labels()[1]
    ax.legend(lines, labels, fontsize=8, loc="center right")
    return ax
