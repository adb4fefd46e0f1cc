"""The one YAML reader: every file the project reads (configs, ``tables.yaml``, ``methods.yaml``, seed plans, the
cluster config, the weights pins, the book's table of contents) and every value given on a command line goes through
:func:`read_yaml` or :func:`safe_load_unique`, PyYAML's safe loader refusing a key given twice in one mapping (issue
65, item 4; issue 73, item 3): plain YAML keeps the last value silently, so a second ``backbone:`` under ``model:``
would train a model the first line does not name. The error names the file, the key and both lines. A test checks
that no other module calls ``yaml.safe_load`` or ``yaml.load``. Also a "did you mean" helper for the config checks.

Why by hand: PyYAML has no switch for duplicate keys (ruamel.yaml refuses them, but reads numbers and tags
differently from the loader every record key was resolved with; OmegaConf would change how overrides and
interpolations read, and so the resolved keys of 3,516 records).
"""
from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path

import yaml

__all__ = ["DuplicateKey", "safe_load_unique", "read_yaml", "nearest"]


class DuplicateKey(yaml.constructor.ConstructorError):
    """A mapping gives one key twice."""


class _UniqueKeyLoader(yaml.SafeLoader):
    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":   # ``<<: *defaults``: its keys may be overridden here
                continue
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                line, first = key_node.start_mark.line + 1, seen[key]
                raise DuplicateKey(None, None, f"key {key!r} appears twice in one mapping (lines {first} and "
                                               f"{line}); YAML would keep the last value silently, so write it "
                                               f"once", key_node.start_mark)
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def safe_load_unique(text: str):
    """``yaml.safe_load(text)``, except that a key repeated within one mapping raises :class:`DuplicateKey` (a
    :class:`yaml.YAMLError`) naming the key and both lines."""
    return yaml.load(text, Loader=_UniqueKeyLoader)   # noqa: S506 - a SafeLoader subclass


def read_yaml(path: str | Path, default=None):
    """The YAML file at ``path`` parsed as :func:`safe_load_unique` does (``default`` for an empty file); a
    duplicate key or a syntax error names the file and the line."""
    path = Path(path)
    loader = _UniqueKeyLoader(path.read_text(encoding="utf-8"))
    loader.name = str(path)   # the marks of every error name the file, not "<unicode string>"
    try:
        data = loader.get_single_data()
    finally:
        loader.dispose()
    return default if data is None else data


def nearest(name: str, known: Iterable[str]) -> str:
    """" (did you mean 'quick'?)" for the closest known name, "" when none is close."""
    match = difflib.get_close_matches(str(name), [str(k) for k in known], n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""
