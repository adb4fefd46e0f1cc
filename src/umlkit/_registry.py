"""The one rule umlkit's name registries share (losses: :mod:`umlkit.losses._registry`; methods:
:mod:`umlkit.models._factory`), in the manner of timm's ``register_model``: a name belongs to one builder. The
same builder registered again (a module imported a second time: the same module and qualified name) replaces its
entry; another builder under a taken name is an error naming both - a plugin's function that merely shares a
built-in's qualified name is another builder - unless it asks with ``override=True``: then it replaces the entry,
and :func:`overrides` lists the replacement, which a training run writes into its ``config.json``
(``registry_overrides``) so that a run never claims a built-in it did not use."""
from __future__ import annotations

__all__ = ["add_entry", "overrides"]

_OVERRIDES: dict[str, dict[str, str]] = {}


def _origin(build) -> str:
    """Where a builder comes from: its module and qualified name (``umlkit.losses.pml_backed.triplet``)."""
    return f"{getattr(build, '__module__', '?')}.{getattr(build, '__qualname__', repr(build))}"


def add_entry(registry: dict, kind: str, name: str, entry, override: bool = False) -> None:
    """Put ``entry`` (with a ``build`` callable) under ``name`` in ``registry``, refusing a different builder unless
    ``override`` (then recorded: :func:`overrides`)."""
    old = registry.get(name)
    if old is not None and _origin(old.build) != _origin(entry.build):
        if not override:
            raise ValueError(f"{kind} {name!r} is already registered (by {_origin(old.build)}); "
                             f"{_origin(entry.build)} cannot take its name: register it under another name, or "
                             f"pass override=True to replace it (the run's config.json then records that)")
        first = _OVERRIDES.get(f"{kind}:{name}", {}).get("replaced", _origin(old.build))
        _OVERRIDES[f"{kind}:{name}"] = {"replaced": first, "by": _origin(entry.build)}
    registry[name] = entry


def overrides() -> dict[str, dict[str, str]]:
    """``{"kind:name": {"replaced": built-in origin, "by": the replacing builder}}`` of this process."""
    return {k: dict(v) for k, v in _OVERRIDES.items()}
