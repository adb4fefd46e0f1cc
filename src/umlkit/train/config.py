"""Training configurations: defaults, YAML files under ``configs/<paper>/<experiment>.yaml``, ``--set`` overrides.

A config file may hold ``profiles: {quick: {...}, full: {...}}``; the selected profile's block is merged over the
file's top level, which is merged over :data:`DEFAULTS`. Overrides use dotted keys with YAML values
(``optimizer.lr=1e-4``, ``data.datasets=[cub,cars]``). The config hash (stored with every result) is computed on
the fully resolved config.
"""
from __future__ import annotations

import copy
import re
from pathlib import Path

import yaml

from umlkit.results import config_hash

__all__ = ["DEFAULTS", "load_config", "apply_overrides", "merge", "resolve_config", "config_hash"]

DEFAULTS: dict = {
    "name": "run",
    "profile": "quick",
    "seed": 0,
    "device": "auto",            # auto | cpu | cuda | cuda:N
    "precision": "fp32",         # fp32 | bf16 | fp16 (autocast; fp16 with a GradScaler on GPU)
    "data": {
        "root": None,            # quick: <data root>/uml_mini (generated on first use); full: the real data root
        "datasets": ["cub", "cars", "sop", "inshop", "nabirds", "dogs", "flowers", "aircraft"],
        "transform": "mini",     # umlkit.data.TRANSFORMS
        "augment": True,         # False: train on the eval transform (no random crops/flips)
        "sampler": "random",     # umlkit.data.SAMPLERS
        "samples_per_class": 4,
        "batch_size": 128,
        "num_workers": 0,
        "cache": True,           # decode images once (UML-Mini); set False for the real datasets
        "few_shot": None,        # k images per training class (PUMA few-shot subsets)
        "val_fraction": 0.0,     # hold out this fraction of each source's *training classes* for validation
        "expected": "auto",      # dataset count check (None: off)
    },
    "model": {"backbone": "vit_tiny_uml", "method": "puma", "embed_dim": 128, "pretrained": True, "weights": None,
              "options": {}},
    "loss": {"name": "curricularface", "options": {}, "extra_weight": 1.0},
    "optimizer": {"name": "adamw", "lr": 1e-4, "weight_decay": 1e-4, "momentum": 0.9,
                  "lr_mult": {"backbone": 1.0, "new": 10.0, "head": 10.0, "loss": 10.0}},
    "schedule": {"name": "none", "step_size": 20, "gamma": 0.5, "milestones": [], "eta_min": 0.0},
    "clip": {"mode": None, "max": 1.0},   # value | norm | None
    "train": {"epochs": 10, "warmup_epochs": 0, "eval_every": 1, "metrics": ["R@1"], "eval_batch_size": 512,
              "select_on": "Unified", "progress": True},
}


_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)$")


def _coerce(value):
    """YAML 1.1 reads ``1e-4`` as a string; numbers in scientific notation become floats."""
    if isinstance(value, str) and _NUMBER.match(value.strip()):
        return float(value)
    if isinstance(value, dict):
        return {k: _coerce(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_coerce(v) for v in value]
    return value


def merge(base: dict, update: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in (update or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


_FREE_FORM = ("model.options.", "loss.options.", "optimizer.lr_mult.")


def apply_overrides(config: dict, overrides) -> dict:
    """``["optimizer.lr=1e-4", "data.datasets=[cub,cars]"]`` -> updated copy (values parsed as YAML)."""
    out = copy.deepcopy(config)
    for item in overrides or []:
        if "=" not in item:
            raise ValueError(f"override {item!r} must look like key.sub=value")
        key, raw = item.split("=", 1)
        value = _coerce(yaml.safe_load(raw))
        key = key.strip()
        free_form = key.startswith(_FREE_FORM)  # method / loss options and lr multipliers take any key
        node = out
        parts = key.split(".")
        for depth, p in enumerate(parts):
            if not free_form and p not in node:
                where = ".".join(parts[:depth]) or "the config"
                raise KeyError(f"override {key!r}: unknown key {p!r} in {where} (known: {', '.join(sorted(node))})")
            if depth < len(parts) - 1:
                node = node.setdefault(p, {})
                if not isinstance(node, dict):
                    raise KeyError(f"override {key!r}: {'.'.join(parts[:depth + 1])} is not a section")
        node[parts[-1]] = value
    return out


def resolve_config(config: dict | None = None, profile: str | None = None, overrides=None) -> dict:
    """DEFAULTS <- config (with its ``profiles[profile]`` block) <- overrides; validates the top-level keys."""
    config = copy.deepcopy(config or {})
    profiles = config.pop("profiles", {}) or {}
    profile = profile or config.get("profile", DEFAULTS["profile"])
    if profile not in ("quick", "full"):
        raise ValueError(f"profile must be 'quick' or 'full', got {profile!r}")
    unknown = set(config) - set(DEFAULTS)
    if unknown:
        raise KeyError(f"unknown config section(s) {sorted(unknown)}; known: {sorted(DEFAULTS)}")
    out = merge(DEFAULTS, config)
    out = merge(out, profiles.get(profile, {}))
    out["profile"] = profile
    return apply_overrides(out, overrides)


def load_config(path: str | Path, profile: str | None = None, overrides=None) -> dict:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file {path} does not exist")
    try:
        raw = _coerce(yaml.safe_load(path.read_text()) or {})
    except yaml.YAMLError as err:
        raise ValueError(f"{path} is not valid YAML: {err}") from err
    if not isinstance(raw, dict):
        raise ValueError(f"{path} must hold a mapping at the top level, got {type(raw).__name__}")
    return resolve_config(raw, profile, overrides)
