"""The one rule umlkit's name registries share (losses: :mod:`umlkit.losses._registry`; methods:
:mod:`umlkit.models._factory`), in the manner of timm's ``register_model``: a name belongs to one builder. The
same builder registered again (a module imported a second time) replaces its entry; another builder under a taken
name is an error."""
from __future__ import annotations

__all__ = ["add_entry"]


def add_entry(registry: dict, kind: str, name: str, entry) -> None:
    """Put ``entry`` (with a ``build`` callable) under ``name`` in ``registry``, refusing a different builder."""
    old = registry.get(name)
    if old is not None and getattr(old.build, "__qualname__", None) != getattr(entry.build, "__qualname__", ""):
        raise ValueError(f"{kind} {name!r} is already registered")
    registry[name] = entry
