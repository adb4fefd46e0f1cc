"""The single-source training recipe: one conventional deep-metric-learning run on one source's class split.

This is ooDML's protocol (Milbich, Roth et al., NeurIPS 2021, Sec. C of the supplementary; official ``ood_main.py``
and ``OOD-Study_ZeroShot.sh``): a backbone fully fine-tuned with one of the eight DML objectives on the train classes
of a split, tested on its test classes. Its settings are ``configs/oodml/oodml.yaml`` (per profile) and
``configs/oodml/methods.yaml`` (each method's loss, options and chosen learning rate). The ooDML chapter runs it on
every split; the language-guidance chapter adds its language term on top of the same recipe on the default split
(Roth, Vinyals, Akata, CVPR 2022, train their base methods with the same pipeline), so both read it from here and a
base row of one is the same run as the other's.
"""
from __future__ import annotations

import copy

from umlkit.experiments.recipes import paper_configs
from umlkit.experiments.recipes.paper_configs import read_yaml
from umlkit.experiments.recipes.tuning import chosen
from umlkit.experiments.splits.committed import default_split_id, split_of, validation_classes

__all__ = ["methods_config", "base_config", "tuned_methods", "chosen_lr", "lr_grid", "run_config"]


def methods_config() -> dict:
    """``configs/oodml/methods.yaml``: methods, learning rates, epochs, few-shot settings and the split layout."""
    return read_yaml("oodml", "methods.yaml")


def base_config(profile: str) -> dict:
    """``oodml.yaml`` for a profile, parsed once per process (a chapter builds ~3,000 record keys from it)."""
    return paper_configs.base_config("oodml", "oodml.yaml", profile)


def tuned_methods(profile: str) -> list[str]:
    """The methods with a chosen learning rate for ``profile`` (a table has rows only for these)."""
    lrs = methods_config()["lr"].get(profile) or {}
    return [m for m in methods_config()["methods"] if m in lrs or "default" in lrs]


def chosen_lr(method: str, profile: str, source: str | None = None) -> float:
    """The method's rate: ``lr_sources.<profile>.<source>.<method>`` (chosen on that source's validation classes),
    else ``lr.<profile>.<method>`` (chosen on the CUB-like ones), else ``lr.<profile>.default``."""
    paths = [("lr", profile, method), ("lr", profile, "default")]
    if source is not None:
        paths.insert(0, ("lr_sources", profile, source, method))
    return chosen(methods_config(), paths, file="configs/oodml/methods.yaml",
                  what=f"{profile} learning rate for {method!r}" + (f" on {source!r}" if source else ""),
                  sweep="run the lr sweep (`umlkit records train oodml lr_sweep`, or lr_sweep_<source>) and enter "
                  "the chosen rate")


def lr_grid(method: str, source: str = "cub") -> list[float]:
    """The rates a method's sweep on ``source`` tries: its ``lr_grid`` (else the shared one) plus the source's
    ``lr_grid_sources.<source>.<method>`` extension, where the best rate sat on the edge."""
    mc = methods_config()
    extra = ((mc.get("lr_grid_sources") or {}).get(source) or {}).get(method) or []
    base = [float(x) for x in (mc["methods"][method].get("lr_grid") or mc["lr_grid"])]
    return base + sorted({float(x) for x in extra} - set(base))


def _objective(cfg: dict, method: str, source: str, profile: str, lr: float | None, rate_from: str) -> None:
    """The method's loss and options (shared, profile, source), its learning rate and loss-parameter multiple."""
    mc = methods_config()
    block = mc["methods"][method]
    options = {**(block.get("options") or {}), **(block.get(profile) or {}),
               **((block.get("sources") or {}).get(source) or {})}
    cfg["objective"] = [{"name": block["loss"], "weight": 1.0, "options": options}]
    cfg["optimizer"]["lr"] = float(lr) if lr is not None else chosen_lr(method, profile, rate_from)
    loss_mult = (block.get("loss_lr_mult") or {}).get(profile)
    if loss_mult is not None:
        cfg["optimizer"]["lr_mult"]["loss"] = float(loss_mult)


def run_config(profile: str = "quick", *, method: str = "Margin (D)", source: str = "cub", split: int | None = None,
               seed: int = 0, lr: float | None = None, validation: bool = False, overrides=(),
               rate_from: str | None = None) -> dict:
    """The resolved ``fit`` configuration of one run: ``oodml.yaml`` (profile block), the method's loss, the
    source and the classes of its split ``split`` (default: the default split), the seed and learning rate (default:
    the rate chosen on ``rate_from``'s validation classes - the run's own source unless given - else the
    CUB-chosen one). ``validation=True`` trains on the split's first (1 - val_fraction) training classes and
    tests on the rest (on the published ``split_train`` / ``split_val`` where the split file has them): the tuning
    protocol, which never sees a test class."""
    from umlkit.train.config import resolve_config
    mc = methods_config()
    if method not in mc["methods"] and method != "zero_shot":
        raise KeyError(f"unknown ooDML method {method!r}; choose from {list(mc['methods'])}")
    cfg = copy.deepcopy(base_config(profile))
    cfg["data"]["datasets"] = [source]
    s = split_of(source, default_split_id(source, profile) if split is None else split, profile)
    train, test = list(s["train"]), list(s["test"])
    if validation:   # the published split_train / split_val where the split has them (the full profile's files)
        train, test = validation_classes(s, mc["val_fraction"])
    cfg["data"]["splits"] = {}  # set after resolving: merging copies every list, ~5 ms a key for SOP's 1,000 classes
    if method == "zero_shot":
        cfg["model"]["method"] = "zero_shot"
    else:
        _objective(cfg, method, source, profile, lr, rate_from or source)
    epochs = (mc.get("epochs", {}).get(profile) or {}).get(source)
    if epochs:
        cfg["train"]["epochs"] = int(epochs)
    cfg["seed"] = int(seed)
    cfg["train"]["progress"] = False
    cfg["name"] = f"oodml-{source}-{method}"
    out = resolve_config(cfg, overrides=list(overrides))
    if out["data"]["splits"]:
        raise ValueError("ooDML configurations take their classes from the split id, not from data.splits overrides")
    out["data"]["splits"] = {source: {"train": train, "test": test}}
    return out
