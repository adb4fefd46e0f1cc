"""Readable labels for configuration keys in tables, verdicts and boxes (issue 59, item 5): a row or cell that the
records name by its settings (``prompt=Sing.;adapter=none``, ``batch_size=64/32;arch=ViT-S16;dim=384``) is shown in
words. Each paper declares its own words in its ``tables.yaml`` (``labels: {setting: words}``, one map per paper);
a setting without declared words is spelled out generically ("batch size 64/32, arch ViT-S16, dim 384").

Only what is shown changes: the record keys, the saved CSVs' cells and the claims' cells keep the settings, so every
measured cell still joins its paper cell.

Why by hand: the words are the book's; the rule is a split on ``;`` and ``=``.
"""
from __future__ import annotations

import re
from functools import lru_cache

from umlkit._yaml import read_yaml

__all__ = ["readable", "label_map", "cell_label"]

_SETTING = re.compile(r"[\w.]+=[^;=]+(?:;[\w.]+=[^;=]+)*")


@lru_cache(maxsize=1)
def label_map() -> dict[str, str]:
    """Every paper's declared ``labels`` (the discovered paper packages' ``tables.yaml``), merged."""

    from umlkit.experiments.tables.registry import paper_packages
    merged: dict[str, str] = {}
    for _, folder in paper_packages():
        path = folder / "tables.yaml"
        data = read_yaml(path) if path.is_file() else None
        labels = (data or {}).get("labels") or {}
        if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
            raise ValueError(f"{path}: 'labels' must map a setting to its words, e.g. {{'prompt=Sing.': 'single "
                             f"prompt'}}")
        merged.update({str(k): v for k, v in labels.items()})
    return merged


def readable(text: str) -> str:
    """``text`` as a reader reads it: a paper's declared words for a setting, else "key value, key value" for a
    ``key=value;...`` string (underscores as spaces), else unchanged."""
    text = str(text)
    words = label_map().get(text)
    if words is not None:
        return words
    if not _SETTING.fullmatch(text):
        return text
    return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in (p.split("=", 1) for p in text.split(";")))


def cell_label(cell: str) -> str:
    """A regime-map second-edition cell's setting as a short column label: "v2 / values", "v2 / families + mark"."""
    parts = dict(p.split("=") if "=" in p else (p, "") for p in cell.split(";"))
    return f"{parts.get('backbone', '?')} / {parts.get('shift', '?')}" + (" + mark" if "shortcut" in parts else "")
