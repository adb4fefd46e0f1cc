"""The checks every dataset index goes through where ``datasets.py`` builds its (id -> path / label) mappings, so
that the loaders and ``umlkit data check`` refuse the same inputs: an id or image listed twice
(:func:`keyed`), a label outside the dataset's class list (:func:`known_classes`), and the fields of a MATLAB
annotation file read whatever nesting ``scipy.io.loadmat`` gives them (:func:`mat_field`, :func:`mat_items`,
:func:`mat_scalar`). Each refusal is one ``ValueError`` line naming the file, the line (or the entry of a .mat
file), the id or label and what was expected.
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

__all__ = ["keyed", "known_classes", "mat_field", "mat_items", "mat_scalar"]


def _place(path: Path, no: int, unit: str, first: tuple | None = None) -> str:
    if first is None:
        return f"{path}, {unit} {no}"
    return f"{unit} {first[1]}" + ("" if first[0] == path else f" of {first[0]}")


def keyed(entries: Iterable[tuple], what: str, unit: str = "line") -> dict:
    """``{key: value}`` of ``(file, number, key, value)`` entries, in their order; a key given a second time (in the
    same file or another one of the same index) raises ``ValueError`` naming both places."""
    out, first = {}, {}
    for path, no, key, value in entries:
        if key in first:
            raise ValueError(f"{_place(path, no, unit)}: {what} {key!r} listed twice (first on "
                             f"{_place(path, no, unit, first[key])}); expected each {what} once")
        first[key] = (path, no)
        out[key] = value
    return out


def _span(classes: list) -> str:
    ordered = sorted(classes, key=lambda c: (str(type(c)), c))
    if ordered and all(isinstance(c, int) for c in ordered) and ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"{ordered[0]}..{ordered[-1]}"
    return ", ".join(repr(c) for c in ordered[:5]) + (", ..." if len(ordered) > 5 else "")


def known_classes(entries: Iterable[tuple], classes, source: str, unit: str = "line") -> None:
    """Each ``(file, number, image id, label)`` entry's label is one of ``classes`` (declared by ``source``, e.g.
    ``"classes.txt"``); the first one that is not raises ``ValueError``."""
    declared = set(classes)
    for path, no, key, label in entries:
        if label not in declared:
            raise ValueError(f"{_place(path, no, unit)}: class {label!r} of {key!r} is not in {source}; expected "
                             f"one of its {len(declared)} classes ({_span(list(declared))})")


def mat_scalar(value):
    """A MATLAB cell or 1x1 array unwrapped to the one value inside (however deep ``loadmat`` nests it); a char
    array or bytes as ``str``."""
    while isinstance(value, np.ndarray) and value.size == 1:
        value = value.reshape(-1)[0]
    if isinstance(value, np.ndarray) and value.dtype.kind == "U" and value.ndim == 1:
        value = "".join(value)   # a char array kept one character per element
    if isinstance(value, bytes):
        value = value.decode()
    return value.item() if isinstance(value, np.generic) else value


def mat_items(value) -> list:
    """The elements of a MATLAB array, struct array or cell array as a flat list (a lone struct or value as one)."""
    if isinstance(value, np.ndarray):
        flat = value.reshape(-1)
        if value.dtype == object and flat.size == 1 and isinstance(flat[0], np.ndarray):
            return mat_items(flat[0])   # an array wrapped in a cell
        return list(flat)
    return [value]


def _fields(record) -> list[str]:
    if isinstance(record, dict):
        return [k for k in record if not str(k).startswith("__")]
    names = getattr(getattr(record, "dtype", None), "names", None)
    if names:
        return list(names)
    return list(getattr(record, "_fieldnames", None) or vars(record))


def mat_field(record, name: str, path: Path, where: str = "", expected: str = ""):
    """Field ``name`` of a loaded .mat file (a dict), a ``mat_struct`` or a structured record, unwrapped when it sits
    alone in a cell; a missing field raises ``ValueError`` naming ``path`` (and ``where``, e.g. ``"annotation 3"``),
    the fields present and ``expected``."""
    fields = _fields(record)
    if name not in fields:
        raise ValueError(f"{path}{', ' + where if where else ''}: no field {name!r} (it has "
                         f"{', '.join(fields) or 'no fields'}){'; expected ' + expected if expected else ''}")
    value = record[name] if isinstance(record, dict) or getattr(record, "dtype", None) is not None else \
        getattr(record, name)
    while isinstance(value, np.ndarray) and value.dtype == object and value.size == 1 and \
            isinstance(value.reshape(-1)[0], np.ndarray):
        value = value.reshape(-1)[0]
    return value
