"""Retrain a sample of stored records on this machine and compare them with what is stored
(``umlkit records verify --sample N``).

Why: a record retrained on another kind of CPU need not come back bit for bit. torch picks its vectorised kernels
by instruction set (AVX2, AVX-512), MKL and oneDNN their GEMM code paths, and the summation orders they use differ
in the last bits. Training amplifies such bits over its steps, so a reader who reruns a record on a laptop sees a
different number and cannot tell a bug from a CPU. Three records stored on a Zen 4 (AVX-512) and retrained on a
Zen 3 (AVX2 only) differed in 16/40, 18/40 and 65/144 fields. Two retrains on one machine agree with each other.

So each sampled record is retrained in a temporary results folder (the repository is never written), on one thread
as the stored records were trained, and every numeric field of its result is compared with the stored one. A
difference is judged against the **seed spread** of the record's cell: the sample standard deviation ``s`` of
that field over the cell's stored seeds (records of the same paper, table and label but for the ``seed`` part).
Another CPU's numerics act on a run like another seed's noise, only smaller, so the difference of two retrains
of one seed should not exceed that of two independent seeds. The tolerance is the 95 % range of the difference of
two independent runs, ``1.96 * sqrt(2) * s`` (about 2.8 s). A field is

* **identical**: the same number (a record whose metrics are all identical but whose losses or timings differ is
  "metrics identical");
* **within the seed spread**: ``|retrained - stored| <= 1.96 * sqrt(2) * s``;
* **outside the seed spread**: larger; worth a look (a changed code path, data or weights would show here);
* **no spread**: different where the cell has fewer than two stored seeds, or they agree exactly.

Only the evaluation's metrics are judged (``test``, ``val``, ``own`` and the like: numbers under a dataset name);
losses and timings are counted but not judged. Written by hand: no library knows what a record is.
"""
from __future__ import annotations

import json
import math
import os
import random
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["TOLERANCE_SDS", "Comparison", "compare_results", "flatten", "sample_records", "seed_spread",
           "retrain_and_compare"]

TOLERANCE_SDS = 1.96 * math.sqrt(2)   # the 95 % range of the difference of two independent seeds, in seed s.d.s
_SEED = re.compile(r"-seed\d+")
_NOT_JUDGED = ("loss", "seconds", "curves", "trainable")   # fields counted, not judged against the seed spread


def flatten(value, prefix: str = "") -> dict[str, float]:
    """Every number in a result, by its dotted path (lists by index; booleans and strings left out)."""
    out: dict[str, float] = {}
    if isinstance(value, dict):
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}{k}."))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.update(flatten(v, f"{prefix}{i}."))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out[prefix[:-1]] = float(value)
    return out


def _judged(path: str) -> bool:
    return not any(word in part for part in path.split(".") for word in _NOT_JUDGED)


@dataclass
class Comparison:
    """One retrained record against its stored version."""
    path: Path
    label: str
    fields: int = 0
    differing: int = 0
    judged: list[tuple[str, float, float, float | None, str]] = field(default_factory=list)  # path, old, new, s, kind

    @property
    def worst(self) -> str:
        kinds = [k for *_, k in self.judged]
        for kind in ("outside the seed spread", "no spread", "within the seed spread"):
            if kind in kinds:
                return kind
        return "identical" if not self.differing else "metrics identical (losses or timings differ)"


def seed_spread(records: list[dict]) -> dict[str, float]:
    """Per judged field, the sample standard deviation over the stored seeds of one cell (records given)."""
    values: dict[str, list[float]] = {}
    for rec in records:
        for path, v in flatten(rec["result"]).items():
            if _judged(path) and math.isfinite(v):
                values.setdefault(path, []).append(v)
    out = {}
    for path, vs in values.items():
        if len(vs) >= 2:
            mean = sum(vs) / len(vs)
            out[path] = math.sqrt(sum((v - mean) ** 2 for v in vs) / (len(vs) - 1))
    return out


def compare_results(path: Path, label: str, stored: dict, retrained: dict, spread: dict[str, float]) -> Comparison:
    """Field-by-field comparison of a stored result with its retrained one (module docstring)."""
    old, new = flatten(stored), flatten(retrained)
    out = Comparison(Path(path), label, fields=len(old.keys() | new.keys()))
    for key in sorted(old.keys() | new.keys()):
        a, b = old.get(key), new.get(key)
        if a == b or (a is not None and b is not None and math.isnan(a) and math.isnan(b)):
            continue
        out.differing += 1
        if not _judged(key) or a is None or b is None:
            continue
        s = spread.get(key)
        if not s:
            kind = "no spread"
        else:
            kind = "within the seed spread" if abs(b - a) <= TOLERANCE_SDS * s else "outside the seed spread"
        out.judged.append((key, a, b, s, kind))
    return out


def sample_records(records: list[dict], n: int, seed: int = 0) -> list[dict]:
    """``n`` usable, current (not stale) records trained by a registered runner, drawn reproducibly by ``seed``."""
    pool = sorted((r for r in records if not r["stale"] and not r["runner"].startswith("callable:")),
                  key=lambda r: str(r["path"]))
    if n > len(pool):
        raise ValueError(f"--sample {n}: only {len(pool)} current record(s) can be retrained here")
    return random.Random(seed).sample(pool, n)


def _cell(rec: dict) -> tuple[str, str, str]:
    return rec["paper"], rec["table"], _SEED.sub("", rec["label"])


def retrain_and_compare(records: list[dict], sample: list[dict], log=print) -> list[Comparison]:
    """Retrain each record of ``sample`` (one thread, a temporary results folder) and compare it with the stored
    one, its cell's seed spread taken from ``records`` (every stored record of the profile)."""
    import torch

    from umlkit.experiments.runs.runners import run
    cells: dict[tuple, list[dict]] = {}
    for rec in records:
        cells.setdefault(_cell(rec), []).append(rec)
    threads = torch.get_num_threads()
    before = {name: os.environ.get(name) for name in ("UMLKIT_RESULTS", "UMLKIT_CHECKPOINTS")}
    out = []
    with tempfile.TemporaryDirectory(prefix="umlkit-verify-") as tmp:
        os.environ["UMLKIT_RESULTS"] = tmp
        os.environ.pop("UMLKIT_CHECKPOINTS", None)   # a retrain from scratch, never resumed from a checkpoint
        torch.set_num_threads(1)
        try:
            for i, rec in enumerate(sample, 1):
                log(f"[{i}/{len(sample)}] retraining {rec['paper']} {rec['table']}: {rec['label']} "
                    f"(stored: {rec.get('seconds') or '?'} s)")
                result = json.loads(json.dumps(run(rec["runner"], rec["key"])))   # as a record stores it
                out.append(compare_results(rec["path"], rec["label"], rec["result"], result,
                                           seed_spread(cells[_cell(rec)])))
        finally:
            torch.set_num_threads(threads)
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    return out
