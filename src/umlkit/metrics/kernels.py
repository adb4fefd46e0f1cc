"""Which products the exact search can run fast on this machine: bf16 and int8 GEMM speed-ups over fp32, decided by
the CPU's instruction set first and then by a measurement at the search's own scale, cached per machine.

Why not a one-off timing: :mod:`umlkit.metrics.knn` used to time a 512 x 128 x 512 product once per process. On a
busy 2-core machine that timing moved with every run (this project's AMD EPYC, two training processes running:
bf16 x2.0-3.8 and int8 x2.0-7.8 over three processes), so the choice between the int8 and bf16 self-searches
flipped from one process to the next. Now:

1. **Instruction set.** On x86 Linux the CPU flags (``/proc/cpuinfo``) decide whether a kernel can be fast at all:
   bf16 needs ``avx512_bf16`` or ``amx_bf16`` (without them oneDNN emulates it: 0.09-0.10x fp32 on a Zen 3 EPYC),
   int8 needs VNNI (``avx512_vnni``, ``avx_vnni`` or ``amx_int8``; ``torch._int_mm`` ran at 0.04x fp32 on the same
   Zen 3). A kernel the CPU lacks gets speed-up 0 without being timed. Elsewhere (other systems, ARM) every kernel is
   timed.
2. **Measurement at scale.** The product the self-search computes, a 2,048 x ``d`` tile times its transpose, in
   fp32, bf16 and int8, interleaved over rounds; each kernel's fastest round counts (a competing process only ever
   adds time).
3. **Per machine.** The speed-ups are stored in ``<cache>/gemm_speedups.json`` (``UMLKIT_CACHE``, else
   ``$XDG_CACHE_HOME/umlkit``, else ``~/.cache/umlkit``) under the CPU model, torch version, thread count, oneDNN's
   ISA limit and ``d`` (the configured thread count, also while a busy machine runs the search on fewer); later
   processes read them instead of timing. Only a measurement taken while the machine was quiet (other processes
   busy on at most a quarter of a core, :func:`umlkit.metrics.threads.busy_cores`, before and after it) is stored:
   with two training processes and a spinning one on this 2-core machine, the fastest of five rounds gave bf16
   x15.9 and int8 x28.2, against x3.7 and x7.7 quiet. A busy process uses its own timing and leaves the file alone.
   Delete the file to measure again.
"""
from __future__ import annotations

import functools
import json
import os
import platform
import threading
import time
from pathlib import Path

import torch

__all__ = ["cpu_flags", "native", "speedups", "cache_file"]

_BF16_FLAGS = {"avx512_bf16", "amx_bf16"}
_INT8_FLAGS = {"avx512_vnni", "avx_vnni", "amx_int8"}
_TILE_ROWS = 2048
_ROUNDS = 5
_QUIET = 0.25            # cores other processes may keep busy for a measurement to be cached
_MEMO: dict[str, dict[str, float]] = {}


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> tuple[str | None, frozenset[str] | None]:
    """The CPU's model name and x86 feature flags from /proc/cpuinfo (each None where absent), read once: the
    search asks for them on every call."""
    model = flags = None
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if model is None and line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                elif flags is None and line.startswith("flags"):
                    flags = frozenset(line.split(":", 1)[1].split())
                if model is not None and flags is not None:
                    break
    except OSError:
        pass
    return model, flags


def cpu_flags() -> set[str] | None:
    """The x86 CPU's feature flags from /proc/cpuinfo, or None where they cannot be read (not Linux, not x86)."""
    flags = _cpuinfo()[1]
    return None if flags is None else set(flags)


def native(kind: str, flags: set[str] | None) -> bool:
    """Whether ``kind`` ("bf16" or "int8") can run natively: the CPU has its instructions, or its flags are unknown
    (then the measurement alone decides)."""
    if flags is None:
        return True
    return bool(flags & (_BF16_FLAGS if kind == "bf16" else _INT8_FLAGS))


def cache_file() -> Path:
    base = os.environ.get("UMLKIT_CACHE") or (Path(os.environ["XDG_CACHE_HOME"]) / "umlkit"
                                              if os.environ.get("XDG_CACHE_HOME")
                                              else Path.home() / ".cache" / "umlkit")
    return Path(base) / "gemm_speedups.json"


def _machine_key(dim: int) -> str:
    model = _cpuinfo()[0] or platform.processor() or platform.machine()
    from umlkit.metrics.threads import configured_threads  # a busy moment's reduced count would miss the entry
    isa = os.environ.get("ONEDNN_MAX_CPU_ISA", "native")
    return f"{model} | torch {torch.__version__} | {configured_threads()} threads | oneDNN {isa} | d={dim}"


def _products(dim: int, kinds: list[str]) -> dict:
    a = torch.randn(_TILE_ROWS, dim, generator=torch.Generator().manual_seed(0))
    out = {"fp32": lambda: a @ a.T}
    if "bf16" in kinds:
        b = a.to(torch.bfloat16)
        out["bf16"] = lambda: b @ b.T
    if "int8" in kinds:
        c = (a * 40).round().clamp(-127, 127).to(torch.int8)
        out["int8"] = lambda: torch._int_mm(c, c.T)
    return out


def _measure(dim: int, kinds: list[str]) -> dict[str, float]:
    """fp32 seconds over each kind's, the fastest of ``_ROUNDS`` interleaved rounds per kernel after one warm-up
    round; 0 for a kernel this torch lacks on the CPU."""
    products = _products(dim, kinds)
    best = {name: float("inf") for name in products}
    for name, product in list(products.items()):   # warm-up; a missing int8 GEMM raises here
        try:
            product()
        except (RuntimeError, AttributeError):
            del products[name]
    for _ in range(_ROUNDS):
        for name, product in products.items():
            start = time.perf_counter()
            product()
            best[name] = min(best[name], time.perf_counter() - start)
    return {k: (best["fp32"] / best[k] if k in products else 0.0) for k in ("bf16", "int8")}


def _read_cache(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):   # missing, unreadable or corrupt: measure again
        return {}


def _write_cache(path: Path, key: str, value: dict) -> None:
    """Add one machine's speed-ups to the cache file (atomic replace; a cache that cannot be written is skipped)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = _read_cache(path)
        data[key] = value
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
            os.replace(tmp, path)   # two writers at once: the last one wins, the other's entry is measured again
        finally:
            tmp.unlink(missing_ok=True)
    except OSError:
        pass


def speedups(dim: int = 128) -> dict[str, float]:
    """{"bf16": x, "int8": y}: each kernel's GEMM speed-up over fp32 on this machine (0 where the CPU lacks it),
    from this process's memo, the per-machine cache, or a measurement (then cached)."""
    key = _machine_key(dim)
    if key in _MEMO:
        return _MEMO[key]
    path = cache_file()
    cached = _read_cache(path).get(key)
    try:
        _MEMO[key] = {k: float(cached[k]) for k in ("bf16", "int8")}
        return _MEMO[key]
    except (TypeError, KeyError, ValueError):   # no entry, or one that is not two numbers: measure
        pass
    from umlkit.metrics.threads import busy_cores
    flags = cpu_flags()
    kinds = [k for k in ("bf16", "int8") if native(k, flags)]
    before = busy_cores()
    value = _measure(dim, kinds)
    after = busy_cores()
    if all(b is None or b <= _QUIET for b in (before, after)):   # a timing taken while others ran is used, not kept
        _write_cache(path, key, {**value, "measured": time.strftime("%Y-%m-%d %H:%M")})
    _MEMO[key] = value
    return value
