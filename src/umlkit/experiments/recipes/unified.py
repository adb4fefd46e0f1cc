"""The unified training recipe: one model trained on the union of eight sources (PUMA's setting) and its few-shot
variant.

PUMA (Kim, Kim, Kwak, WACV 2025) trains one embedding on the union of CUB, Cars, SOP, In-shop, NABirds, Dogs, Flowers
and Aircraft: full fine-tuning from ``configs/puma/full_finetune.yaml`` (official ``train_unified.py`` with
``--model full``), every parameter-efficient method from ``configs/puma/puma.yaml``; ``configs/puma/methods.yaml``
gives each method's options, each loss's sampler (pair losses: 4 images per class, the official
``UniqueClassSampler``; proxy losses: random batches, ``--IPC 0``), the quick profile's second pass (backbone, per
method budgets, chosen rates) and the few-shot recipe (official ``few_shot.py``: k images per class, Proxy-Anchor
with alpha 64 / margin 0.1, cosine schedule over ``32 // k + 1`` epochs).

The PUMA chapters, the language-guidance chapter's unified section and the regime map all start from this recipe,
so they read it from here: the same arguments give the same run in every chapter.
"""
from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from functools import lru_cache

from umlkit.experiments.recipes.paper_configs import base_config, read_yaml
from umlkit.experiments.recipes.tuning import chosen

__all__ = ["methods_blocks", "second_pass", "tables_stage", "run_config", "unit_name", "tables_config", "stage_lr",
           "chosen_lr", "few_shot_block", "few_shot_lr", "few_shot_config"]


def methods_blocks() -> dict:
    """``configs/puma/methods.yaml``, parsed once per process."""
    return read_yaml("puma", "methods.yaml")


def second_pass() -> dict:
    """methods.yaml's ``second_pass`` block (quick profile): backbone, per-epoch evaluation, budgets, tuning."""
    return methods_blocks().get("second_pass") or {}


def tables_stage(profile: str = "quick") -> str:
    """Which protocol the tables use in ``profile``: "second" once methods.yaml says ``second_pass.tables: second``
    (quick only; the full profile has one protocol), else "first"."""
    return "second" if profile == "quick" and second_pass().get("tables") == "second" else "first"


def _method_and_loss(cfg: dict, profile: str, method: str, loss: str, options: dict | None, second: bool) -> None:
    """The method's options (profile, then second pass, then ``options``) and the loss's options and sampler."""
    blocks = methods_blocks()
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


def run_config(profile: str = "quick", *, method: str = "full", loss: str = "curricularface",
               datasets: Sequence[str] | None = None, seed: int = 0, options: dict | None = None,
               lr: float | None = None, overrides: Iterable[str] = (), stage: str = "first") -> dict:
    """The fully resolved ``fit`` configuration of one unified run, composed from ``configs/puma``.

    ``method="full"`` starts from ``full_finetune.yaml``, every other method from ``puma.yaml``; then
    ``methods.yaml`` gives the method's options for the profile (the base file's own method keeps the base file's
    options) and sampler, and the loss's options and sampler; ``options`` are merged over the method's; then the
    datasets (default: all 8; class-grouped batches shrink to what the fewest classes can fill), the seed and
    ``overrides``. Evaluation runs once, after the last epoch. ``stage="second"`` (quick) applies methods.yaml's
    ``second_pass``: its backbone and its method budgets.
    """
    from umlkit.train.config import resolve_config
    if stage not in ("first", "second"):
        raise ValueError(f"stage must be 'first' or 'second', got {stage!r}")
    base_name = "full_finetune.yaml" if method == "full" else "puma.yaml"
    cfg = copy.deepcopy(base_config("puma", base_name, profile))
    _method_and_loss(cfg, profile, method, loss, options, second=stage == "second" and profile == "quick")
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
    (the engine's rule: the last max(1, round(n x fraction)) classes). The full profile takes the datasets'
    documented class counts (:data:`umlkit.data.datasets.DATASETS`), so that its keys never depend on what a
    machine has on disk (and nothing generates UML-Mini for it)."""
    from umlkit.data.datasets import DATASETS
    from umlkit.data.mini import ensure_mini, mini_alias
    root = cfg["data"]["root"]
    vf = float(cfg["data"].get("val_fraction") or 0.0)
    if cfg["profile"] == "full" and not mini_alias(root):
        counts = [DATASETS[n].counts["train"][1] for n in cfg["data"]["datasets"]]
    else:
        counts = [_train_classes(str(root or ensure_mini()), n) for n in cfg["data"]["datasets"]]
    return min(n - (max(1, int(round(n * vf))) if vf else 0) for n in counts)


@lru_cache(maxsize=256)
def _train_classes(root: str, name: str) -> int:
    """Training classes of one source under ``root``, read once per process (a table asks for every row and seed;
    a tree regenerated with other class counts in the same process needs ``_train_classes.cache_clear()``)."""
    from umlkit.data import load_dataset
    return load_dataset(name, root, "train", expected=None, check_files=False).num_classes


def unit_name(method: str, loss: str = "curricularface", options: dict | None = None,
              specialists: bool = False) -> str | None:
    """What one learning rate is chosen for in the second pass: the method (full fine-tuning: with its loss), its
    options, and "spec-" for a set of dataset-specific models; the frozen backbone (``zero_shot``) has none."""
    if method in (None, "zero_shot"):
        return None
    name = method + (f"-{loss}" if method == "full" else "")
    opts = "_".join(f"{k}{v}" for k, v in sorted((options or {}).items()))
    return ("spec-" if specialists else "") + name + (f"-{opts}" if opts else "")


def tables_config(profile: str = "quick", *, method: str = "full", loss: str = "curricularface", seed: int = 0,
                  options: dict | None = None, overrides: Iterable[str] = ()) -> dict:
    """One unified row as the PUMA tables train it in the profile's current stage (:func:`tables_stage`): in the
    second pass, its backbone and budgets and the rate its unit chose (:func:`chosen_lr`); else the base files'."""
    stage = tables_stage(profile)
    lr = stage_lr(unit_name(method, loss, options), stage)
    return run_config(profile, method=method, loss=loss, seed=seed, options=options, lr=lr, overrides=overrides,
                      stage=stage)


def stage_lr(unit: str | None, stage: str) -> float | None:
    """The rate a row of tuning unit ``unit`` trains at in ``stage``: the unit's chosen rate in the second pass;
    ``None`` (the base files' rate) in the first, and for the frozen backbone, which has no unit."""
    return chosen_lr(unit) if stage == "second" and unit is not None else None


def chosen_lr(unit: str) -> float:
    """The second pass's rate of a tuning unit (methods.yaml ``second_pass.lr``, chosen by the PUMA chapter's
    tuning sweep)."""
    return chosen(second_pass(), [("lr", unit)], file="configs/puma/methods.yaml",
                  what=f"second-pass rate for {unit!r}", sweep="train `umlkit records train puma tuning`, then enter "
                  f"the choice of puma.tuning_frame() under second_pass.lr.{unit}")


def few_shot_block() -> dict:
    """methods.yaml's ``few_shot`` block: the official few-shot recipe and the book's rows."""
    return methods_blocks()["few_shot"]


def few_shot_lr(method: str, profile: str = "quick") -> float:
    """A method's few-shot rate: ``few_shot.lr.<profile>.<method>`` (quick: chosen by the few-shot tuning runs)."""
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
