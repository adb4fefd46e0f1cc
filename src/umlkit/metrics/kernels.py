"""Which kernel the exact search runs (fp32, bf16 or int8): the one that finished a representative whole search
first on this machine, where the search is large enough for the choice to matter, cached per machine.

Why not a GEMM micro-benchmark: the kernel cache used to rank kernels by one 2,048 x ``d`` tile product (int8 x4.5
and bf16 x2.1 over fp32 on this project's AMD EPYC, a Zen 4), but a search is more than its GEMM: candidate
blocks, top-k and the exact fp32 re-score. End to end (``benchmarks/bench_kernels.py``, 2026-11-29, quiet, the
evaluation's depths) the kernels ranked by size, not by the tile: self-searches of 4,455 / 16,335 / 32,670 /
65,340 / 148,500 UML-like items took fp32 0.14 / 0.62 / 2.96 / 7.84 / 48.1 s, bf16 0.13 / 0.90 / 2.21 / 3.76 /
14.0 s, int8 0.10 / 0.73 / 1.44 / 3.68 / 13.3 s (a second run gave the same order from 32,670 items on). Below
about 20,000 items the three are within 0.3 s of each other and the block structure does not pay (at 16,335 bf16
and int8 ran at 0.7-1.04x fp32); at 32,670 int8 was 1.5-2.1x faster than fp32 and bf16 1.0-1.3x, and from 65,340 on
both were 2.1-4.2x faster. Plain searches (half the items against the other half) ranked fp32 first at 16,335 x
16,335 (0.79-0.88 s against bf16's 0.97-1.00 s) and bf16 at 74,250 x 74,250 (11.5-12.3 s against 13.5-14.5 s). So:

1. **Instruction set first.** On x86 Linux the CPU flags (``/proc/cpuinfo``) decide whether a kernel can be fast at
   all: bf16 needs ``avx512_bf16`` or ``amx_bf16`` (without them oneDNN emulates it: 0.09-0.10x fp32 on a Zen 3
   EPYC), int8 needs VNNI (``avx512_vnni``, ``avx_vnni`` or ``amx_int8``; ``torch._int_mm`` ran at 0.04x fp32 on the
   same Zen 3). ``ONEDNN_MAX_CPU_ISA`` below ``AVX512_CORE_BF16`` takes bf16 away as well (0.08-0.46x fp32 when
   limited). A kernel the CPU cannot run fast is never timed. Only a self-search has an int8 path.
2. **Small searches run fp32.** A search with fewer query x gallery pairs than the representative one
   (:data:`REPRESENTATIVE_ITEMS` squared for a self-search, half of them against the other half for a plain one)
   runs fp32 without measuring: there the low-precision paths' block structure does not pay (above), and fp32 is
   exact and at most a few seconds.
3. **Larger ones: the fastest whole search.** Each kernel runs the engine's own search (:mod:`umlkit.metrics.knn`,
   same block sizes) on :data:`REPRESENTATIVE_ITEMS` UML-like embeddings of the search's dimension
   (:func:`umlkit.metrics.synthetic.uml_like_embeddings`: classes of 2-100 items) to the depth the evaluation asks
   of each query (R, the rest of its class, and at least 8 for R@8), after a warm-up on a small set; fp32 on a
   quarter of the rows, scaled by four (its cost is linear in the rows), in a child process (the evaluation's own
   heap stays as it was; a child that fails leaves nothing stored). The fastest wins. At 65,536 items this
   costs about 11 s once per machine, about what the first search of that size it serves takes. Why that size:
   at 32,768 the three kernels lie within the machine's run-to-run noise (fp32 2.1-3.0 s, bf16 2.0-2.2 s, int8
   1.4-2.4 s in three runs), and one measurement there chose fp32, which is 3.8x slower than int8 at 148,500
   items. At 65,536 fp32 took 7.8-11.8 s against 3.7-4.0 s for the other two, the order they keep at full size.
   The plain ranking (32,768 x 32,768) is a near-tie and can pick fp32 where bf16 is 1.1-1.26x faster at 2.3
   times the side.
4. **Within the memory budget.** A bf16 or int8 self-search holds the maxima of every row's 128-item blocks,
   n x ceil(m / 128) int16 values (0.34 GB at 148,500 items), besides memory bounded by its group and slab constants
   and the n x k results. Measured at 148,500 items with the evaluation's depths, the search alone added 0.97 GiB
   (int8) and 1.05 GiB (bf16) to a process holding torch, faiss and the embeddings (0.67 GiB); fp32, with every row
   at depth 100, added 0.2 GiB (``benchmarks/results/eval_cpu.txt``, session 38, scratch (b)).
   The default takes the block paths only while the maxima stay within :data:`MAXIMA_BUDGET` (384 MiB: up to about
   160,000 items against themselves), so the evaluation stays under 2 GB; larger self-searches run fp32, whose
   memory is bounded by its chunk of 1,024 rows.
5. **Per machine, quiet only.** The seconds are stored in ``<cache>/search_kernels.json`` (``UMLKIT_CACHE``, else
   ``$XDG_CACHE_HOME/umlkit``, else ``~/.cache/umlkit``) under the CPU model, torch version, configured thread
   count, oneDNN's ISA limit, the dimension and the kind of search. Before timing, the other processes' load is
   read (:func:`umlkit.metrics.threads.busy_cores`): on a busy machine (more than a quarter of a core used by
   others) nothing is timed and the instruction set's order decides (int8, then bf16, then fp32) for this process
   only; a machine that turns busy during the timing gets its timing used by this process and never stored (with
   two training processes and a spinning one on this 2-core machine, a GEMM timing came out 4x off). Delete the
   file to measure again. An entry without positive finite seconds for every kernel counts as not measured
   (measured again and replaced); a file that is not a JSON object reads as empty, with a one-line warning.

:func:`choose` returns the kernel and a sentence saying why (``umlkit evaluate --explain``, the benchmark's header,
the Evaluation chapter). ``UMLKIT_SEARCH_DTYPE`` overrides it (:func:`umlkit.metrics.knn.forced_search_dtype`).
"""
from __future__ import annotations

import functools
import json
import math
import os
import platform
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = ["Choice", "MAXIMA_BUDGET", "REPRESENTATIVE_ITEMS", "cache_file", "choose", "cpu_flags", "native",
           "representative_pairs"]

REPRESENTATIVE_ITEMS = 65_536   # items of the representative self-search (512 blocks of 128)
_BF16_FLAGS = {"avx512_bf16", "amx_bf16"}
_INT8_FLAGS = {"avx512_vnni", "avx_vnni", "amx_int8"}
_NO_BF16_ISA = {"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI"}
_FP32_ROW_SHARE = 4        # fp32 is timed on 1/4 of the representative rows
_WARM_ITEMS = 4096         # the warm-up search (first-call costs: oneDNN's kernel generation, allocations)
_QUIET = 0.25              # cores other processes may keep busy for a measurement to be stored
MAXIMA_BUDGET = 384 << 20  # bytes of a self-search's block maxima (n x m / 128 int16) the default allows
_MEMO: dict[str, dict[str, float] | None] = {}


@dataclass(frozen=True)
class Choice:
    """The kernel a search runs and why: ``seconds`` holds each kernel's time on the representative search when
    that decided (None otherwise)."""
    kernel: str
    reason: str
    seconds: dict[str, float] | None = None


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
    """Whether ``kind`` ("bf16" or "int8") can run natively: the CPU has its instructions (bf16 also needs oneDNN
    not limited below them by ``ONEDNN_MAX_CPU_ISA``), or its flags are unknown (then the measurement decides)."""
    if kind == "bf16" and os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper() in _NO_BF16_ISA:
        return False
    if flags is None:
        return True
    return bool(flags & (_BF16_FLAGS if kind == "bf16" else _INT8_FLAGS))


def cache_file() -> Path:
    base = os.environ.get("UMLKIT_CACHE") or (Path(os.environ["XDG_CACHE_HOME"]) / "umlkit"
                                              if os.environ.get("XDG_CACHE_HOME")
                                              else Path.home() / ".cache" / "umlkit")
    return Path(base) / "search_kernels.json"


def representative_pairs(self_search: bool) -> int:
    """Query x gallery pairs of the representative search: from this size on the measured ranking decides."""
    half = REPRESENTATIVE_ITEMS // 2
    return REPRESENTATIVE_ITEMS ** 2 if self_search else half * half


def _machine_key(dim: int, self_search: bool) -> str:
    model = _cpuinfo()[0] or platform.processor() or platform.machine()
    from umlkit.metrics.threads import configured_threads  # a busy moment's reduced count would miss the entry
    isa = os.environ.get("ONEDNN_MAX_CPU_ISA", "native")
    kind = "self" if self_search else "plain"
    return (f"{model} | torch {torch.__version__} | {configured_threads()} threads | oneDNN {isa} | d={dim} | "
            f"{kind} search of {REPRESENTATIVE_ITEMS} items")


def _kernels(self_search: bool) -> list[str]:
    flags = cpu_flags()
    return ["fp32"] + [k for k in ("bf16", "int8") if native(k, flags) and (self_search or k != "int8")]


def choose(self_search: bool, pairs: int, dim: int, measure: bool = True, search=None) -> Choice:
    """The kernel for a search of ``pairs`` query x gallery pairs at dimension ``dim`` (module docstring).
    ``search`` is the engine's search (:func:`umlkit.metrics.knn.knn_search_checked`, passed in: this module is
    below it), timed where no measurement is stored. ``measure=False`` (or no ``search``) never times anything:
    without a stored measurement it says what the first search of that size would do (a page that explains the
    choice should not spend seconds on it)."""
    measure = measure and search is not None
    kernels = _kernels(self_search)
    if kernels == ["fp32"]:
        return Choice("fp32", "this CPU has no fast bf16 or int8 kernel for this search (no avx512_bf16/amx_bf16, "
                              "no VNNI, or oneDNN limited below them)")
    if self_search and pairs // 64 > MAXIMA_BUDGET:
        return Choice("fp32", f"the bf16 and int8 self-searches would hold {pairs // 64 / 2**20:,.0f} MiB of block "
                              f"maxima, over the {MAXIMA_BUDGET >> 20} MiB that keeps the evaluation under 2 GB: fp32, "
                              f"whose memory is bounded by its chunk of rows (UMLKIT_SEARCH_DTYPE lifts this)")
    if pairs < representative_pairs(self_search):
        side = REPRESENTATIVE_ITEMS if self_search else REPRESENTATIVE_ITEMS // 2
        return Choice("fp32", f"{pairs:,} query x gallery pairs, fewer than the representative search's {side:,} x "
                              f"{side:,}: fp32 without measuring (the low-precision paths' blocks do not pay at "
                              f"this size)")
    seconds = _seconds(dim, self_search, kernels, search if measure else None)
    if seconds is None and not measure:
        return Choice("unmeasured", f"not yet measured on this machine: the first search of this size times "
                                    f"{', '.join(kernels)} on a representative one of {REPRESENTATIVE_ITEMS:,} items "
                                    f"and runs the fastest")
    if seconds is None:
        best = kernels[-1]
        return Choice(best, f"nothing was timed (the machine was busy, or the timing failed): the instruction "
                            f"set's order ({', '.join(reversed(kernels))}) for this process")
    best = min(kernels, key=seconds.get)
    timings = ", ".join(f"{k} {seconds[k]:.2f} s" for k in kernels)
    kind = "self-search" if self_search else "search"
    return Choice(best, f"fastest on a representative {kind} of {REPRESENTATIVE_ITEMS:,} items at d={dim} on this "
                        f"machine ({timings})", seconds)


def _read_cache(path: Path, warn: bool = False) -> dict:
    """The cache file's machine entries; a file that is missing or unreadable, or whose text is not a JSON object
    (corrupt, a list, a string, ...), reads as empty (every kernel is measured again and the file rewritten),
    ``warn``: with a one-line warning naming the file when it exists but is not a JSON object."""
    try:
        text = path.read_text()
    except (OSError, ValueError):   # missing or unreadable (ValueError: not text): measure again
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        return data
    if warn:
        warnings.warn(f"kernel cache {path} is not a JSON object: read as empty, measured again and rewritten",
                      UserWarning, stacklevel=2)
    return {}


def _valid_seconds(entry, kernels: list[str]) -> dict[str, float] | None:
    """``entry``'s seconds for each of ``kernels``, or None where it is not a mapping or any kernel lacks positive
    finite seconds (a number, not a bool or a string): such an entry counts as not measured."""
    if not isinstance(entry, dict):
        return None
    out = {}
    for k in kernels:
        v = entry.get(k)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            return None
        out[k] = float(v)
    return out


def _write_cache(path: Path, key: str, value: dict) -> None:
    """Add one machine's timings to the cache file (atomic replace; a cache that cannot be written is skipped)."""
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


def _seconds(dim: int, self_search: bool, kernels: list[str], search) -> dict[str, float] | None:
    """Each kernel's seconds on the representative search, from this process's memo, the cache or a measurement
    with ``search`` (stored only when the machine stayed quiet); None on a busy machine (nothing timed) or, without
    ``search``, where nothing is stored."""
    key = _machine_key(dim, self_search)
    if key in _MEMO:
        return _MEMO[key]
    path = cache_file()
    cached = _valid_seconds(_read_cache(path, warn=True).get(key), kernels)
    if cached is not None:
        _MEMO[key] = cached
        return cached
    if search is None:   # no entry, or one without positive finite seconds per kernel: measured when searched
        return None
    from umlkit.metrics.threads import busy_cores
    before = busy_cores()
    if before is not None and before > _QUIET:
        _MEMO[key] = None
        return None
    value = _measure(dim, self_search, kernels, search)
    if value is None:   # the timing failed: this process takes the instruction set's order, nothing is stored
        _MEMO[key] = None
        return None
    after = busy_cores()
    if after is None or after <= _QUIET:   # a timing taken while others ran is used, not kept
        _write_cache(path, key, {**value, "measured": time.strftime("%Y-%m-%d %H:%M")})
    _MEMO[key] = value
    return value


def _measure(dim: int, self_search: bool, kernels: list[str], search) -> dict[str, float] | None:
    """Seconds of the engine's ``search`` per kernel on UML-like embeddings (module docstring, point 3), timed in a
    child process: a first run on a machine timed the kernels in its own process and its full-size search then
    peaked 0.11-0.27 GiB higher than in later runs (2,093 MiB against 1,975-1,983 for bf16; 2,179 against
    1,909-1,911 for int8 with oneDNN limited to AVX2), the heap shaped by the measurement. None where the child
    fails (then nothing is stored and the instruction set's order decides)."""
    import json
    import subprocess
    import sys

    from umlkit.metrics.threads import configured_threads
    args = [dim, self_search, kernels, f"{search.__module__}:{search.__qualname__}", REPRESENTATIVE_ITEMS,
            _WARM_ITEMS, configured_threads()]
    code = "import json, sys; from umlkit.metrics.kernels import _time_kernels; " \
           "print(json.dumps(_time_kernels(*json.loads(sys.argv[1]))))"
    try:
        done = subprocess.run([sys.executable, "-c", code, json.dumps(args)], capture_output=True, text=True,
                              check=True)
        return _valid_seconds(json.loads(done.stdout.strip().splitlines()[-1]), kernels)
    except (OSError, subprocess.CalledProcessError, ValueError, IndexError):
        return None


def _time_kernels(dim: int, self_search: bool, kernels: list[str], search: str, items: int, warm_items: int,
                  threads: int) -> dict[str, float]:
    """The child process of :func:`_measure`: each kernel's seconds on ``items`` UML-like embeddings, searched by
    the function ``search`` names ("module:name")."""
    import importlib

    from umlkit.metrics.synthetic import UML_TEST_ITEMS, uml_like_embeddings
    torch.set_num_threads(threads)
    module, name = search.split(":")
    search = getattr(importlib.import_module(module), name)
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "int8": torch.int8}
    x, y = uml_like_embeddings(min(1.0, (items + 1) / UML_TEST_ITEMS), dim=dim)
    y = torch.as_tensor(y)
    depth = (torch.bincount(y)[y] - 1).clamp(min=8)   # the evaluation's depth: R (MAP@R, RP), at least R@8's
    warm = x[:warm_items]
    for k in kernels:
        search(warm, warm, depth[:warm_items].clamp(max=warm_items - 1), self_index=torch.arange(len(warm)),
               search_dtype=dtypes[k])
    q, g, si = (x, x, torch.arange(len(x))) if self_search else (x[: len(x) // 2], x[len(x) // 2:], None)
    out = {}
    for k in kernels:
        rows = len(q) // (_FP32_ROW_SHARE if k == "fp32" else 1)
        start = time.perf_counter()
        search(q[:rows], g, depth[:rows], self_index=None if si is None else si[:rows], search_dtype=dtypes[k])
        out[k] = (time.perf_counter() - start) * len(q) / rows
    return out
