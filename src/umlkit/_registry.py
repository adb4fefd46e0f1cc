"""The one rule umlkit's name registries share (losses: :mod:`umlkit.losses._registry`; methods:
:mod:`umlkit.models._factory`), in the manner of timm's ``register_model``: a name belongs to one builder. The
same builder registered again (a module imported a second time: the same module and qualified name) replaces its
entry; another builder under a taken name is an error naming both - a plugin's function that merely shares a
built-in's qualified name is another builder."""
from __future__ import annotations

__all__ = ["add_entry"]


def _origin(build) -> str:
    """Where a builder comes from: its module and qualified name (``umlkit.losses.pml_backed.triplet``)."""
    return f"{getattr(build, '__module__', '?')}.{getattr(build, '__qualname__', repr(build))}"


def add_entry(registry: dict, kind: str, name: str, entry) -> None:
    """Put ``entry`` (with a ``build`` callable) under ``name`` in ``registry``, refusing a different builder."""
    old = registry.get(name)
    if old is not None and _origin(old.build) != _origin(entry.build):
        raise ValueError(f"{kind} {name!r} is already registered (by {_origin(old.build)}); "
                         f"{_origin(entry.build)} cannot take its name: register it under another name")
    registry[name] = entry
