"""A table's measured frame, computed once per process (issue 73, item 2): a chapter measures each table for its own
view, then the paper's Holm family on the scoreboard measures the same tables again; the second reading is served
from here while nothing it reads has changed.

The memo key is the table's declaration (its ``repr``: rows, claims, seeds and the functions that make keys and
scores, the functions kept alive with the entry so that no other object can take their place), the profile and
results folder, the seeds and overrides asked for, and a signature of what a reading depends on beyond the code: the
modification times of every folder below the profile's results folder (writing or replacing a record or a side file
such as a language file renames a file into its folder, which changes the folder's time) and of the files under
``configs/`` (tuned rates, seed plans, split files). A reading only is served (never a call that may train); a
training call stores its result for the readings after it. Callers get a copy. Written by hand:
``functools.lru_cache`` cannot key on a mutable table or check that the records it read are unchanged.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pandas as pd

__all__ = ["through", "key", "recall", "remember", "forget", "signature"]

_MEMO: dict[tuple, tuple[object, pd.DataFrame]] = {}
_MAX = 256


def _folder_times(root: Path, files: bool) -> tuple:
    out = []
    if not root.is_dir():
        return ()
    for folder, dirs, names in os.walk(root):
        dirs.sort()
        out.append((folder, os.stat(folder).st_mtime_ns))
        if files:
            out += [(n, os.stat(os.path.join(folder, n)).st_mtime_ns) for n in sorted(names)]
    return tuple(out)


def signature(profile: str) -> tuple:
    """What a reading of ``profile`` depends on besides the code: its results folders' and config files' times."""
    from umlkit._paths import repo_folder, results_root
    try:
        configs = repo_folder("configs", what="the configurations")
    except FileNotFoundError:
        configs = None
    root = results_root(profile)   # its subfolders: the tables' CSVs a chapter saves beside them change nothing read
    subfolders = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    return (tuple(_folder_times(p, files=False) for p in subfolders),
            _folder_times(configs, files=True) if configs is not None else ())


def key(spec, profile: str, seeds, overrides, rows) -> tuple:
    """The memo key of a reading of ``spec`` under the records as they are now (take it before reading, so that a
    record another process writes meanwhile makes the next reading read again)."""
    from umlkit._paths import results_root
    if rows is not None and list(rows) == list(spec.rows):   # every row, named one by one: the whole table
        rows = None
    text = repr((spec, seeds, tuple(overrides or ()), None if rows is None else list(rows)))
    return (hashlib.sha256(text.encode()).hexdigest(), profile, str(results_root(profile)), signature(profile))


def recall(memo_key: tuple) -> pd.DataFrame | None:
    """The stored frame under ``memo_key``, a copy, or None."""
    hit = _MEMO.get(memo_key)
    return None if hit is None else hit[1].copy()


def remember(memo_key: tuple, spec, frame: pd.DataFrame) -> None:
    """Store ``frame`` as the reading of ``spec`` under ``memo_key``."""
    if len(_MEMO) >= _MAX:
        _MEMO.pop(next(iter(_MEMO)))
    _MEMO[memo_key] = (spec, frame.copy())


def through(spec, profile: str, seeds, overrides, rows, reading: bool, compute) -> pd.DataFrame:
    """``compute()``'s frame: for a reading, the stored one while what it reads is unchanged (computed and stored
    otherwise, under the key taken before); for a call that may train, computed and stored under the records as it
    left them."""
    if reading:
        before = key(spec, profile, seeds, overrides, rows)
        known = recall(before)
        if known is None:
            known = compute()
            remember(before, spec, known)
        return known
    out = compute()
    remember(key(spec, profile, seeds, overrides, rows), spec, out)
    return out


def forget() -> None:
    """Drop every stored reading."""
    _MEMO.clear()
