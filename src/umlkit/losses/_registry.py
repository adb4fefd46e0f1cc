"""The loss registry: name -> how to build the loss, where its defaults come from, what the model must add for it.

Like timm's ``register_model``, a builder registers itself under a name (``@register_loss("margin", ...)``) and
:func:`umlkit.losses.create_loss` looks the name up instead of walking an if-chain; :func:`umlkit.losses.loss_table`
lists the same entries. An entry also carries what a model needs for the loss (``aux_heads``: the auxiliary heads
of S2SD and DiVA; ``eval_concat_aux``: evaluate on the concatenation of all heads, DiVA), so the training engine
asks the registry and names no loss. Written by hand: a dictionary and a decorator, nothing a library would add.

The inputs a loss's ``forward`` takes are declared by the loss module itself (its ``inputs`` attribute, checked
against :data:`INPUTS` by :func:`loss_inputs`).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from torch import nn

from umlkit._registry import add_entry

__all__ = ["INPUTS", "LossEntry", "LOSSES", "TERMS", "register_loss", "loss_entry", "loss_inputs", "aux_heads_for",
           "model_requirements"]

# what the training engine can pass to a loss (umlkit.train.engine._TrainStep): ``embeddings`` (B, E) and
# ``labels`` (B,) gathered over ranks, ``aux`` {head: (B, d)}, ``features`` (backbone output), ``views`` (the
# self-supervised head on a second view of the batch), ``proxies`` (the model's class proxies, VPTSP) and
# ``model`` (the model itself, for its own regulariser) and ``indices`` (each image's index in the training set,
# for per-image side information such as captions)
INPUTS = ("embeddings", "labels", "aux", "features", "views", "proxies", "model", "indices")


@dataclass(frozen=True)
class LossEntry:
    name: str
    build: Callable[..., nn.Module] = field(repr=False)  # build(num_classes, embedding_size, **options)
    implementation: str
    source: str
    defaults: dict
    term: bool = False  # an objective term that is not a loss over embeddings (model_regularizer)
    aux_heads: Callable[..., dict] | None = field(default=None, repr=False)  # (embedding_size, **options) -> heads
    eval_concat_aux: bool = False


_REGISTRY: dict[str, LossEntry] = {}
# the tables as the package has always exposed them: name -> (implementation, source of the defaults, defaults);
# LOSSES holds the losses over embeddings, TERMS the other objective terms (filled by register_loss)
LOSSES: dict[str, tuple[str, str, dict]] = {}
TERMS: dict[str, tuple[str, str, dict]] = {}


def register_loss(name: str, build: Callable | None = None, *, implementation: str, source: str,
                  defaults: dict | None = None, term: bool = False, aux_heads: Callable | None = None,
                  eval_concat_aux: bool = False, override: bool = False):
    """Register ``build(num_classes, embedding_size, **options) -> nn.Module`` under ``name``.

    Used as a decorator (``@register_loss("x", implementation=..., source=...)``) or called with ``build``.
    ``defaults`` are the options :func:`create_loss` fills in (the paper's settings); ``aux_heads(embedding_size,
    **options)`` returns the heads ``create_model(aux_heads=...)`` must build for the loss (unknown options are
    to be ignored). A name registered twice by different builders is an error (the same builder again, as when a
    module is imported a second time, replaces the entry), unless ``override=True`` (recorded in the run's
    ``config.json``: :func:`umlkit._registry.overrides`).
    """
    def add(fn: Callable) -> Callable:
        entry = LossEntry(name, fn, implementation, source, dict(defaults or {}), term, aux_heads, eval_concat_aux)
        add_entry(_REGISTRY, "loss", name, entry, override)
        (TERMS if term else LOSSES)[name] = (implementation, source, entry.defaults)
        return fn

    return add(build) if build is not None else add


def loss_entry(name: str) -> LossEntry:
    if name not in _REGISTRY:
        raise ValueError(f"unknown loss {name!r}; choose one of {', '.join([*LOSSES, *TERMS])}")
    return _REGISTRY[name]


def loss_inputs(loss: nn.Module) -> tuple[str, ...]:
    """The names ``loss`` must be called with (as keywords), from its ``inputs`` attribute."""
    names = getattr(loss, "inputs", None)
    if names is None:
        raise TypeError(f"{type(loss).__name__} declares no inputs; give it an attribute inputs = (...) with names "
                        f"from {INPUTS}")
    names = tuple(names)
    unknown = [n for n in names if n not in INPUTS]
    if unknown:
        raise ValueError(f"{type(loss).__name__} asks for input(s) {unknown}; the training engine provides "
                         f"{', '.join(INPUTS)}")
    return names


def aux_heads_for(loss_name: str, embedding_size: int = 128, **options) -> dict[str, tuple[int, str]]:
    """The auxiliary heads ``create_model(aux_heads=...)`` must build for ``loss_name`` (empty for most losses)."""
    entry = loss_entry(loss_name)
    return dict(entry.aux_heads(embedding_size, **options)) if entry.aux_heads is not None else {}


def model_requirements(objective: list[dict], embedding_size: int) -> dict:
    """What the model needs for a configuration's objective terms: ``{"aux_heads": {...}, "eval_concat_aux":
    bool}`` when any term declares auxiliary heads, else ``{}`` (heads of all terms together, in term order)."""
    heads: dict = {}
    concat = False
    for term in objective:
        entry = loss_entry(term["name"])
        heads.update(aux_heads_for(term["name"], embedding_size, **(term.get("options") or {})))
        concat = concat or entry.eval_concat_aux
    return {"aux_heads": heads, "eval_concat_aux": concat} if heads else {}
