"""Reading a tuned value back: the learning rates, omegas and other hyperparameters that a paper's sweep chose and
its YAML configuration stores, for every paper alike.

Each paper keeps its choices as nested mappings in ``configs/<paper>/*.yaml`` (e.g. ``lr.quick.cars.VPT (B)``, or a
per-profile default). :func:`chosen` walks the candidate key paths in order - the most specific first, the
fallbacks after - and returns the first number found; when none is there it raises one error that names the file,
every path it tried and the sweep that makes the value. Written by hand: it is a lookup in this project's own
configuration layout. The sweeps themselves (which grid, on which validation classes, interior or not) are each
paper's (``lr_sweep_frame``, ``mark_choice`` in :mod:`umlkit.experiments.tables`).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["chosen", "NotTuned"]


class NotTuned(KeyError):
    """No tuned value is configured for what a row needs (its sweep has not been run or not entered)."""


def _walk(block: Mapping, path: Sequence[str]):
    node = block
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def chosen(block: Mapping | None, paths: Sequence[Sequence[str]], *, file: str, what: str, sweep: str) -> float:
    """The first number found at one of ``paths`` (key sequences) in ``block``; ``file`` and ``what`` name where
    and what was looked for, ``sweep`` how to make it. A path that ends on a mapping does not count."""
    for path in paths:
        node = _walk(block or {}, path)
        if isinstance(node, (int, float)) and not isinstance(node, bool):
            return float(node)
    tried = " or ".join(".".join(map(str, p)) for p in paths) or "(no path)"
    raise NotTuned(f"{file} has no {what} (looked for {tried}): {sweep}")
