"""Training configurations: defaults, YAML files under ``configs/<paper>/<experiment>.yaml``, ``--set`` overrides.

The objective is a list of weighted terms, ``objective: [{name, weight, options}, ...]``: each ``name`` is a loss
of :func:`umlkit.losses.create_loss` (or ``model_regularizer``, the model's own penalty such as PUMA's prompt
orthogonality), and the training loss is the weighted sum. A legacy ``loss: {name, options, extra_weight}``
section is read as ``[{name, 1.0, options}, {model_regularizer, extra_weight}]``, and the overrides
``loss.name=``, ``loss.options.K=`` and ``loss.extra_weight=`` address those two terms; list items are addressed by
index (``objective.1.weight=10``), and ``objective=[{name: ..., weight: ..., options: {...}}, ...]`` replaces the
list. ``data.splits`` gives a source's classes explicitly as annotation class ids, ``{source: {train: [...], test:
[...], val: [...]}}`` or ``{source: {file: PATH, sha256: HEX}}`` (see :func:`umlkit.train.engine.build_data`);
the default ``{}`` keeps PUMA's first-half split. Side-information files (``{file, sha256}`` in a term's options
or in ``data.splits``) given with a relative path in a YAML file are resolved against that file's folder when it
is loaded; elsewhere (dicts, ``--set``) against the current directory.

A config file may hold ``profiles: {quick: {...}, full: {...}}``; the selected profile's block is merged over the
file's top level, which is merged over :data:`DEFAULTS`. Overrides use dotted keys with YAML values
(``optimizer.lr=1e-4``, ``data.datasets=[cub,cars]``). The config hash (stored with every result) is computed on
the fully resolved config.
"""
from __future__ import annotations

import copy
import math
import re
from pathlib import Path

import yaml

from umlkit._yaml import DuplicateKey, nearest, read_yaml, safe_load_unique
from umlkit.results import config_hash

__all__ = ["DEFAULTS", "load_config", "apply_overrides", "merge", "resolve_config", "config_hash", "legacy_objective"]

DEFAULTS: dict = {
    "name": "run",
    "profile": "quick",
    "seed": 0,
    "device": "auto",            # auto | cpu | cuda | cuda:N
    "precision": "fp32",         # fp32 | bf16 | fp16 (autocast; fp16 with a GradScaler on GPU) | auto (from the device)
    "data": {
        "root": None,            # quick: <data root>/uml_mini (generated on first use); full: UMLKIT_DATA
        "datasets": ["cub", "cars", "sop", "inshop", "nabirds", "dogs", "flowers", "aircraft"],
        "transform": "mini",     # umlkit.data.TRANSFORMS
        "augment": True,         # False: train on the eval transform (no random crops/flips)
        "sampler": "random",     # umlkit.data.SAMPLERS
        "samples_per_class": 4,
        "batch_size": 128,
        "num_workers": 0,        # loader processes, or auto (one per core but one, at most 8)
        "cache": True,           # decode images once (UML-Mini); set False for the real datasets
        "few_shot": None,        # k images per training class (drawn), or "published:k" (PUMA's files; data.few_shot)
        "val_fraction": 0.0,     # hold out this fraction of each source's *training classes* for validation
        "expected": "auto",      # dataset count check (None: off)
        "splits": {},            # {source: {train: [class ids], test: [...], val: [...]} or {file, sha256}}; {}: PUMA's
    },
    "model": {"backbone": "vit_tiny_uml", "method": "puma", "embed_dim": 128, "pretrained": True, "weights": None,
              "options": {}},
    "objective": [{"name": "curricularface", "weight": 1.0, "options": {}},
                  {"name": "model_regularizer", "weight": 1.0, "options": {}}],
    "optimizer": {"name": "adamw", "lr": 1e-4, "weight_decay": 1e-4, "momentum": 0.9,
                  "lr_mult": {"backbone": 1.0, "new": 10.0, "head": 10.0, "loss": 10.0}},
    "schedule": {"name": "none", "step_size": 20, "gamma": 0.5, "milestones": [], "eta_min": 0.0},
    "clip": {"mode": None, "max": 1.0},   # value | norm | None
    "train": {"epochs": 10, "warmup_epochs": 0, "eval_every": 1, "metrics": ["R@1"], "eval_batch_size": 512,
              "select_on": "Unified", "progress": True},
}


# train.compile (optional; absent = off, so the keys of runs that never asked for it stay as they were):
# torch.compile's mode for the model's training forward (default: fused kernels; reduce-overhead: and CUDA graphs).
COMPILE_MODES = ("off", "default", "reduce-overhead")

_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)$")


def coerce_numbers(value):
    """YAML 1.1 reads ``1e-4`` as a string; numbers in scientific notation become floats."""
    if isinstance(value, str) and _NUMBER.match(value.strip()):
        return float(value)
    if isinstance(value, dict):
        return {k: coerce_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [coerce_numbers(v) for v in value]
    return value


def merge(base: dict, update: dict) -> dict:
    """``update`` merged over ``base`` recursively (mappings merge, anything else replaces), as a new mapping that
    shares nothing with either; keys keep ``base``'s order, new ones follow. Each value is copied once (a copy of
    ``base`` merged again level by level made resolving a configuration quadratic in its depth)."""
    update = update or {}
    out = {}
    for k, v in base.items():
        if k not in update:
            out[k] = copy.deepcopy(v)
        elif isinstance(v, dict) and isinstance(update[k], dict):
            out[k] = merge(v, update[k])
        else:
            out[k] = copy.deepcopy(update[k])
    out.update({k: copy.deepcopy(v) for k, v in update.items() if k not in base})
    return out


_FREE_FORM = ("model.options.", "optimizer.lr_mult.", "data.splits.", "data.shortcut", "train.compile", "train.wise_ft")

# Keys a configuration may give that DEFAULTS leaves out, so that an earlier configuration resolves (and hashes)
# as before: data.shortcut, a class-predicting mark on the training images (umlkit.data.shortcut).
OPTIONAL = {"data": ("shortcut",), "train": ("compile", "wise_ft")}


def legacy_objective(loss: dict) -> list[dict]:
    """``loss: {name, options, extra_weight}`` (configurations before the objective list) as objective terms."""
    loss = {"name": "curricularface", "options": {}, "extra_weight": 1.0, **(loss or {})}
    return [{"name": loss["name"], "weight": 1.0, "options": dict(loss["options"] or {})},
            {"name": "model_regularizer", "weight": float(loss["extra_weight"]), "options": {}}]


def _legacy_key(key: str, objective: list) -> str:
    """Map ``loss.name`` / ``loss.options.K`` / ``loss.extra_weight`` onto the objective's terms."""
    if key == "loss.extra_weight":
        idx = next((i for i, t in enumerate(objective) if t.get("name") == "model_regularizer"), None)
        if idx is None:
            raise KeyError("override 'loss.extra_weight': the objective has no model_regularizer term")
        return f"objective.{idx}.weight"
    if key == "loss.name" or key.startswith("loss.options."):
        return "objective.0." + key[len("loss."):]
    raise KeyError(f"override {key!r}: the loss section became the objective list; use loss.name, "
                   "loss.options.KEY, loss.extra_weight or objective.N.KEY")


def apply_overrides(config: dict, overrides) -> dict:
    """``["optimizer.lr=1e-4", "data.datasets=[cub,cars]", "objective.1.weight=10"]`` -> updated copy (values
    parsed as YAML)."""
    out = copy.deepcopy(config)
    for item in overrides or []:
        if "=" not in item:
            raise ValueError(f"override {item!r} must look like key.sub=value")
        key, raw = item.split("=", 1)
        try:
            value = coerce_numbers(safe_load_unique(raw))
        except yaml.YAMLError as err:
            raise ValueError(f"override {item!r}: the value is not valid YAML ({' '.join(str(err).split())})") from None
        key = key.strip()
        if key.startswith("loss."):
            key = _legacy_key(key, out.get("objective", []))
        parts = key.split(".")
        free_form = key.startswith(_FREE_FORM) or (len(parts) > 3 and parts[0] == "objective" and parts[2] == "options")
        node = out
        for depth, p in enumerate(parts[:-1]):
            if isinstance(node, list):
                if not p.isdigit() or int(p) >= len(node):
                    raise KeyError(f"override {key!r}: {'.'.join(parts[:depth])} has {len(node)} items, no item {p!r}")
                node = node[int(p)]
            else:
                if not free_form and p not in node:
                    where = ".".join(parts[:depth]) or "the config"
                    raise KeyError(f"override {key!r}: unknown key {p!r} in {where}{nearest(p, node)} (known: "
                                   f"{', '.join(sorted(node))})")
                node = node.setdefault(p, {})
            if not isinstance(node, (dict, list)):
                raise KeyError(f"override {key!r}: {'.'.join(parts[:depth + 1])} is not a section")
        last = parts[-1]
        if isinstance(node, list):
            if not last.isdigit() or int(last) >= len(node):
                raise KeyError(f"override {key!r}: the list has {len(node)} items, no item {last!r}")
            node[int(last)] = value
            continue
        if not free_form and last not in node and not (len(parts) == 3 and parts[0] == "objective"):
            where = ".".join(parts[:-1]) or "the config"
            raise KeyError(f"override {key!r}: unknown key {last!r} in {where}{nearest(last, node)} (known: "
                           f"{', '.join(sorted(node))})")
        node[last] = value
    return out


def resolve_config(config: dict | None = None, profile: str | None = None, overrides=None) -> dict:
    """DEFAULTS <- config (with its ``profiles[profile]`` block) <- overrides; validates the top-level keys."""
    config = copy.deepcopy(config or {})
    profiles = config.pop("profiles", {}) or {}
    if not isinstance(profiles, dict) or not all(isinstance(b, dict) for b in profiles.values()):
        raise ValueError(f"profiles = {profiles!r}: expected {{quick: {{...}}, full: {{...}}}}, a mapping of config "
                         f"sections per profile")
    odd = sorted(set(profiles) - {"quick", "full"})
    if odd:
        raise KeyError(f"unknown profile block(s) {odd} under profiles{nearest(odd[0], ('quick', 'full'))}; known: "
                       f"quick, full (a misspelt block would never be applied)")
    for block in (config, *profiles.values()):
        if "loss" in block:
            if "objective" in block:
                raise KeyError("a configuration gives both 'loss' and 'objective'; keep the objective list only")
            block["objective"] = legacy_objective(block.pop("loss"))
    profile = profile or config.get("profile", DEFAULTS["profile"])
    if profile not in ("quick", "full"):
        raise ValueError(f"profile must be 'quick' or 'full', got {profile!r}")
    unknown = set(config) - set(DEFAULTS)
    for block in profiles.values():
        unknown |= set(block) - set(DEFAULTS)
    if unknown:
        raise KeyError(f"unknown config section(s) {sorted(unknown)}{nearest(sorted(unknown)[0], DEFAULTS)}; known: "
                       f"{sorted(DEFAULTS)}")
    out = merge(DEFAULTS, config)
    out = merge(out, profiles.get(profile, {}))
    out["profile"] = profile
    out = apply_overrides(out, overrides)
    _check_keys(out)
    _check_objective(out["objective"])
    _check_values(out)
    return out


# parameter groups of umlkit.train.engine.param_groups, the only keys optimizer.lr_mult can address
LR_GROUPS = ("backbone", "new", "head", "loss", "proxy")


def _check_keys(cfg: dict) -> None:
    """Every key inside a section must be one of :data:`DEFAULTS`' (a misspelt ``train.epoch`` would otherwise be
    kept beside the default ``epochs`` and ignored); ``model.options`` and ``data.splits`` are free-form (checked by
    the model factory and the split reader), ``optimizer.lr_mult`` takes the parameter groups."""
    for section, known in DEFAULTS.items():
        if not isinstance(known, dict):
            continue
        given = cfg.get(section)
        if not isinstance(given, dict):
            raise ValueError(f"config section {section} = {given!r}: expected a mapping of {', '.join(sorted(known))}")
        unknown = sorted(set(given) - set(known) - set(OPTIONAL.get(section, ())))
        if unknown:
            known = sorted({*known, *OPTIONAL.get(section, ())})
            raise KeyError(f"unknown key(s) {unknown} in config section {section}{nearest(unknown[0], known)}; "
                           f"known: {', '.join(known)}")
    for key, value, expected in (("model.options", cfg["model"]["options"], "a mapping of method options"),
                                 ("data.splits", cfg["data"]["splits"], "a mapping {source: split}"),
                                 ("optimizer.lr_mult", cfg["optimizer"]["lr_mult"], "a mapping {group: multiple}")):
        if not isinstance(value, dict):
            raise ValueError(f"config key {key} = {value!r}: expected {expected}")
    unknown = sorted(set(cfg["optimizer"]["lr_mult"]) - set(LR_GROUPS))
    if unknown:
        raise KeyError(f"unknown parameter group(s) {unknown} in optimizer.lr_mult; known: {', '.join(LR_GROUPS)}")


# (dotted key, kind, lower bound): the settings whose wrong type or range would otherwise surface as a library
# error far from the configuration (a torch size error for embed_dim="abc", "Invalid learning rate" for lr=-1, a
# silent zero-epoch run). A learning rate of 0 is allowed (losses of a model that does not move). Values are
# checked, never converted, so a valid configuration resolves unchanged.
_VALUE_CHECKS = [
    ("seed", "int", 0), ("data.batch_size", "int", 1), ("data.samples_per_class", "int", 1),
    ("data.num_workers", "int|auto", 0), ("data.val_fraction", "fraction", None),
    ("model.embed_dim", "int?", 1), ("model.pretrained", "bool", None), ("optimizer.lr", "number", 0.0),
    ("optimizer.weight_decay", "number", 0.0), ("optimizer.momentum", "number", 0.0), ("train.epochs", "int", 1),
    ("train.warmup_epochs", "int", 0), ("train.eval_every", "int", 1), ("train.eval_batch_size", "int", 1),
    ("data.augment", "bool", None), ("data.cache", "bool", None), ("train.progress", "bool", None),
    ("schedule.step_size", "int", 1), ("schedule.gamma", "positive", None), ("schedule.eta_min", "number", 0.0),
    ("clip.max", "positive", None),
]


def _check_values(cfg: dict) -> None:
    def fail(key, value, expected):
        raise ValueError(f"config key {key} = {value!r}: expected {expected}")
    if cfg["data"].get("shortcut") is not None:
        from umlkit.data.shortcut import check_shortcut
        check_shortcut(cfg["data"]["shortcut"])
    for key, kind, low in _VALUE_CHECKS:
        node = cfg
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        value, is_int = node, isinstance(node, int) and not isinstance(node, bool)
        is_number = is_int or isinstance(node, float)
        if (kind == "int?" and value is None) or (kind == "int|auto" and value == "auto"):
            continue
        if kind == "int|auto" and not (is_int and value >= low):
            fail(key, value, f"an integer >= {low} or auto")
        if kind in ("int", "int?") and not (is_int and value >= low):
            fail(key, value, f"an integer >= {low}" + (" or null" if kind == "int?" else ""))
        if kind == "bool" and not isinstance(value, bool):
            fail(key, value, "true or false")
        if kind == "fraction" and not (is_number and 0 <= value < 1):
            fail(key, value, "a number in [0, 1)")
        if kind == "number" and not (is_number and math.isfinite(value) and value >= low):
            fail(key, value, f"a finite number >= {low:g}")
        if kind == "positive" and not (is_number and math.isfinite(value) and value > 0):
            fail(key, value, "a finite number > 0")
    train, data, clip = cfg["train"], cfg["data"], cfg["clip"]
    if train["warmup_epochs"] > train["epochs"]:
        fail("train.warmup_epochs", train["warmup_epochs"], f"at most train.epochs = {train['epochs']} (the epochs "
             "that train the heads only)")
    metrics = train["metrics"]
    if not (isinstance(metrics, list) and metrics and all(isinstance(m, str) for m in metrics)):
        fail("train.metrics", metrics, "a non-empty list of metric names, e.g. [R@1, MAP@R] (the first selects the "
             "best epoch)")
    from umlkit.metrics.retrieval import KNOWN_METRICS, parse_metrics
    for name in metrics:   # the evaluation's own parser, here at load and not after hours of training
        try:
            parse_metrics([name], ())
        except ValueError:
            fail("train.metrics", metrics, f"metric names: R@<k> (k >= 1) or one of {', '.join(KNOWN_METRICS)}; "
                 f"{name!r} is none{nearest(name, (*KNOWN_METRICS, 'R@1'))}")
    datasets = data["datasets"]
    if not (isinstance(datasets, list) and datasets and all(isinstance(d, str) for d in datasets)):
        fail("data.datasets", datasets, "a non-empty list of dataset names, e.g. [cub, cars]")
    if not (data["expected"] in (None, "auto") or isinstance(data["expected"], dict)):
        fail("data.expected", data["expected"], "auto, null (no count check) or a mapping of counts")
    if clip["mode"] not in (None, "value", "norm"):
        fail("clip.mode", clip["mode"], "value, norm or null")
    milestones = cfg["schedule"]["milestones"]
    if not (isinstance(milestones, list) and all(isinstance(m, int) and not isinstance(m, bool) and m >= 1
                                                   for m in milestones)):
        fail("schedule.milestones", milestones, "a list of epochs (integers >= 1), e.g. [10, 20]")
    from umlkit.data.few_shot import parse_few_shot
    parse_few_shot((cfg.get("data") or {}).get("few_shot"))   # an integer >= 1, "published:k" or null
    if isinstance(cfg.get("seed"), int) and cfg["seed"] >= 2**32:
        fail("seed", cfg["seed"], "an integer in [0, 2**32) (numpy's seed range)")
    if train.get("compile", "off") not in COMPILE_MODES:
        fail("train.compile", train["compile"], f"one of {', '.join(COMPILE_MODES)} (torch.compile of the model's "
             "training forward; reduce-overhead adds CUDA graphs; absent means off)")
    if train.get("wise_ft") is not None:
        from umlkit.train.wise_ft import check_alphas
        check_alphas(train["wise_ft"])
    if cfg.get("precision") not in ("fp32", "bf16", "fp16", "auto"):
        fail("precision", cfg.get("precision"), "fp32, bf16, fp16 or auto (bf16 or fp16 on a GPU, fp32 on the CPU)")
    device = cfg.get("device")
    if not (device == "auto" or (isinstance(device, str) and re.fullmatch(r"cpu|cuda(:\d+)?", device))):
        fail("device", device, "auto, cpu, cuda or cuda:N")
    for group, mult in (cfg.get("optimizer", {}).get("lr_mult") or {}).items():
        if isinstance(mult, bool) or not isinstance(mult, (int, float)) or not (math.isfinite(mult) and mult >= 0):
            fail(f"optimizer.lr_mult.{group}", mult, "a finite number >= 0")


def _check_objective(objective) -> None:
    if not isinstance(objective, list) or not objective:
        raise ValueError(f"objective must be a non-empty list of {{name, weight, options}} terms, got {objective!r}")
    for i, term in enumerate(objective):
        if not isinstance(term, dict) or "name" not in term:
            raise ValueError(f"objective.{i} must be a mapping with at least a name, got {term!r}")
        unknown = set(term) - {"name", "weight", "options"}
        if unknown:
            raise KeyError(f"objective.{i} ({term['name']}): unknown key(s) {sorted(unknown)}; "
                           "known: name, weight, options")
        term.setdefault("weight", 1.0)
        term.setdefault("options", {})
        try:
            term["weight"] = float(term["weight"])
        except (TypeError, ValueError):
            raise ValueError(f"config key objective.{i}.weight = {term['weight']!r}: expected a number") from None
        if not (math.isfinite(term["weight"]) and term["weight"] >= 0):
            raise ValueError(f"config key objective.{i}.weight = {term['weight']!r}: expected a finite number >= 0 "
                             "(a negative weight would maximise the term)")
        if not isinstance(term["options"], dict):
            raise ValueError(f"config key objective.{i}.options = {term['options']!r}: expected a mapping of "
                             f"{term['name']}'s options")


def _is_file_ref(value) -> bool:
    return isinstance(value, dict) and "file" in value and "sha256" in value


def _anchor_file_refs(block: dict, base: Path) -> None:
    """Make the relative ``file`` of every ``{file, sha256}`` reference in ``block`` (term options, a legacy loss
    section's options, data.splits) relative to ``base`` (a YAML file's folder), in place."""
    option_sets = [t.get("options") for t in (block.get("objective") or []) if isinstance(t, dict)]
    if isinstance(block.get("loss"), dict):
        option_sets.append(block["loss"].get("options"))
    splits = (block.get("data") or {}).get("splits") if isinstance(block.get("data"), dict) else None
    option_sets.append(splits)
    for options in option_sets:
        for value in (options or {}).values() if isinstance(options, dict) else ():
            if _is_file_ref(value) and not Path(str(value["file"])).expanduser().is_absolute():
                value["file"] = str((base / str(value["file"])).resolve())


_PARSED: dict[str, tuple[tuple, dict]] = {}


def _parsed(path: Path) -> dict:
    """A config file's parsed mapping, with its file references anchored, parsed once per process while the file
    keeps its size and modification time (a table's keys load the same few files thousands of times); a copy."""
    st = path.stat()
    stamp = (st.st_mtime_ns, st.st_size)
    hit = _PARSED.get(str(path))
    if hit is None or hit[0] != stamp:
        try:
            raw = coerce_numbers(read_yaml(path, {}))
        except DuplicateKey as err:
            raise ValueError(f"{path}: {err.problem}") from None
        except yaml.YAMLError as err:
            raise ValueError(f"{path} is not valid YAML: {err}") from err
        if not isinstance(raw, dict):
            raise ValueError(f"{path} must hold a mapping at the top level, got {type(raw).__name__}")
        for block in (raw, *((raw.get("profiles") or {}).values())):
            if isinstance(block, dict):
                _anchor_file_refs(block, path.resolve().parent)
        _PARSED[str(path)] = hit = (stamp, raw)
    return copy.deepcopy(hit[1])


def load_config(path: str | Path, profile: str | None = None, overrides=None) -> dict:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file {path} does not exist")
    return resolve_config(_parsed(path), profile, overrides)
