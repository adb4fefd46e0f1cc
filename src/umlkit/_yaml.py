"""YAML for umlkit's configuration files, read with PyYAML's safe loader but refusing a key given twice in one
mapping (issue 65, item 4): plain YAML keeps the last value silently, so a second ``backbone:`` under ``model:``
would train a model the first line does not name. Also a "did you mean" helper for the config checks.

Why by hand: PyYAML has no switch for duplicate keys (ruamel.yaml refuses them, but reads numbers and tags
differently from the loader every record key was resolved with).
"""
from __future__ import annotations

import difflib
from collections.abc import Iterable

import yaml

__all__ = ["DuplicateKey", "safe_load_unique", "nearest"]


class DuplicateKey(yaml.constructor.ConstructorError):
    """A mapping gives one key twice."""


class _UniqueKeyLoader(yaml.SafeLoader):
    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
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


def nearest(name: str, known: Iterable[str]) -> str:
    """" (did you mean 'quick'?)" for the closest known name, "" when none is close."""
    match = difflib.get_close_matches(str(name), [str(k) for k in known], n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""
