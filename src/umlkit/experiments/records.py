"""Run records: the measured outcome of one training run (or group of runs), stored under its configuration hash.

A table row in the book is the mean over a few *run records*. Each record is a small JSON file
``results/<profile>/records/<kind>/<label>-<hash>.json`` holding the fully resolved configuration, its hash, what
was measured (per-source R@1, the loss curve, trainable parameters, wall time) and the software it ran on. A
chapter asks for a row; if a record with the same configuration hash exists it is read, otherwise the run is
trained now and its record written (atomically). ``rerun=True`` trains again and overwrites.

Why: the PUMA tables need ~100 quick-profile training runs (about an hour on 2 CPU cores), while the book must
build in minutes. The records of the quick profile are committed with the repository; ``tests/test_records.py``
retrains one of them from its stored configuration and checks that the same numbers come out, so a stored record
can always be traced to, and reproduced from, its configuration. Nothing is typed in by hand.
"""
from __future__ import annotations

import json
import platform
import re
import time
from collections.abc import Callable
from pathlib import Path

import torch

from umlkit._paths import results_root
from umlkit.results import _atomic_write, config_hash

__all__ = ["record_path", "load_record", "cached_record", "list_records", "records_summary", "RecordError"]


class RecordError(RuntimeError):
    """A stored record is unreadable or does not belong to the configuration that names it."""


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", label).strip("_") or "run"


def record_path(kind: str, label: str, key: dict, profile: str) -> Path:
    """Where the record of ``key`` (a JSON-serialisable configuration) lives."""
    return results_root(profile) / "records" / _slug(kind) / f"{_slug(label)}-{config_hash(key)}.json"


def load_record(path: str | Path) -> dict:
    path = Path(path)
    try:
        rec = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise RecordError(f"run record {path} cannot be read ({err}); delete it or pass rerun=True") from err
    for field in ("key", "key_hash", "result"):
        if field not in rec:
            raise RecordError(f"run record {path} has no {field!r} field; delete it or pass rerun=True")
    if config_hash(rec["key"]) != rec["key_hash"]:
        raise RecordError(f"run record {path}: its stored configuration hashes to {config_hash(rec['key'])}, "
                          f"not to the recorded {rec['key_hash']}; the file was edited. Delete it or rerun.")
    return rec


def cached_record(kind: str, label: str, key: dict, compute: Callable[[], dict], profile: str,
                  rerun: bool = False, log: Callable[[str], None] | None = print) -> dict:
    """The record of ``key``: read from disk when present (and ``rerun`` is False), else ``compute()`` it.

    A record is found by its configuration hash, under any kind and label: one run serves every table that needs
    the same configuration.

    ``compute`` returns the measured result (JSON-serialisable). The returned record has ``result``,
    ``seconds`` (of the computation that produced it), ``cached`` (True when read from disk) and provenance.
    """
    key = json.loads(json.dumps(key, default=str))
    path = record_path(kind, label, key, profile)
    if not rerun:
        # the same configuration may have been stored for another table (e.g. PUMA's run serves Tables 2, 3, 4, 5)
        found = [path] if path.is_file() else sorted(path.parents[1].glob(f"*/*-{config_hash(key)}.json"))
        if found:
            rec = load_record(found[0])
            rec["cached"] = True
            return rec
    if log is not None:
        log(f"training {kind}/{label} (no stored record {path.name})")
    t0 = time.perf_counter()
    result = compute()
    rec = {
        "kind": kind, "label": label, "profile": profile, "key": key, "key_hash": config_hash(key),
        "result": result, "seconds": round(time.perf_counter() - t0, 1),
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
        "software": {"torch": torch.__version__, "python": platform.python_version(),
                     "threads": torch.get_num_threads(), "machine": platform.machine()},
    }
    _atomic_write(path, json.dumps(rec, indent=1, sort_keys=True))
    rec["cached"] = False
    return rec


def list_records(profile: str, kind: str | None = None) -> list[Path]:
    base = results_root(profile) / "records"
    pattern = f"{_slug(kind)}/*.json" if kind else "*/*.json"
    return sorted(base.glob(pattern))


def records_summary(profile: str, kinds: list[str] | None = None):
    """Stored records per kind: how many, their total training time and when the newest was written."""
    import pandas as pd
    rows = []
    for path in list_records(profile):
        kind = path.parent.name
        if kinds is not None and kind not in kinds:
            continue
        rec = load_record(path)
        rows.append({"kind": kind, "seconds": rec.get("seconds", float("nan")), "created": rec.get("created", "")})
    if not rows:
        return pd.DataFrame(columns=["records", "minutes", "newest"])
    df = pd.DataFrame(rows)
    out = df.groupby("kind").agg(records=("seconds", "size"), minutes=("seconds", "sum"), newest=("created", "max"))
    out["minutes"] = (out["minutes"] / 60).round(1)
    out.loc["total"] = [out["records"].sum(), out["minutes"].sum().round(1), out["newest"].max()]
    return out
