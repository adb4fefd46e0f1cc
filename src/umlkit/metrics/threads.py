"""How many threads a large search runs on: the cores other processes leave idle.

Why: the engine's search is many parallel regions (tiles, tens of thousands of batched GEMMs, gathers, sorts), each
ending in a barrier. When another process keeps one of the cores busy, the thread that shares that core is
descheduled for whole time slices and every barrier waits for it. Measured on this project's 2-core AMD EPYC while
two single-thread training processes ran (44,550 UML-like items, R@1/2/4/8, MAP@R and RP, int8 search, two runs
each): the evaluation on 2 threads took 11.2-12.3 s, on 1 thread 5.5-5.7 s; PML's AccuracyCalculator (faiss, OpenMP)
17.3-19.4 s on 2 threads and 13.5-13.7 s on 1. ``benchmarks/bench_eval.py --compete N`` measures it with N
competing processes. So before a large search the engine looks at how busy the cores it may run on are and uses
only the idle ones (at least one), then restores the thread counts of torch and faiss.

How busy: the per-CPU counters of ``/proc/stat`` for the CPUs in this process's affinity set, read twice
``interval`` apart while this process sleeps, give the cores other processes kept busy (Linux only; elsewhere, or
where the counters cannot be read, nothing changes). The answer is reused for ``_REUSE_S`` seconds.
``UMLKIT_SEARCH_THREADS=N`` pins the count (``0`` or unset: measure). Results do not depend on the thread count:
every path of the search is exact and ties are broken by index (:mod:`umlkit.metrics.knn`); only the time does.
No library does this: torch and faiss take a thread count, and OpenMP's dynamic adjustment (``OMP_DYNAMIC``) is not
implemented by the runtimes torch ships.
"""
from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator

__all__ = ["busy_cores", "search_threads", "limited_threads", "configured_threads"]

LARGE_SEARCH = 1 << 28   # query x gallery pairs from which a search adapts its threads (e.g. 16,384 x 16,384)
_REUSE_S = 10.0
_LAST: dict[str, float] = {}
_CONFIGURED: list[int] = []   # torch's thread count before a limited_threads block reduced it (innermost last)


def configured_threads() -> int:
    """torch's thread count as configured, also inside a :func:`limited_threads` block that reduced it (the
    per-machine kernel speed-ups are keyed by it: :mod:`umlkit.metrics.kernels`)."""
    import torch
    return _CONFIGURED[0] if _CONFIGURED else torch.get_num_threads()


def _cpu_times(cpus: set[int], path: str = "/proc/stat") -> tuple[float, float] | None:
    """(busy, total) jiffies summed over ``cpus`` from ``path`` (/proc/stat), or None where it cannot be read."""
    try:
        with open(path) as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    busy = total = 0.0
    seen = 0
    for line in lines:
        name, *fields = line.split()
        if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cpus:
            continue
        v = [float(x) for x in fields[:8]]   # user nice system idle iowait irq softirq steal
        busy += v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
        total += sum(v)
        seen += 1
    return (busy, total) if seen else None


def busy_cores(interval: float = 0.1) -> float | None:
    """The number of this process's CPUs that other processes kept busy over ``interval`` seconds (this process
    sleeps meanwhile), or None where /proc/stat cannot be read."""
    try:
        cpus = set(os.sched_getaffinity(0))
    except AttributeError:   # not Linux
        return None
    first = _cpu_times(cpus)
    if first is None:
        return None
    time.sleep(interval)
    second = _cpu_times(cpus)
    if second is None or second[1] <= first[1]:
        return None
    return len(cpus) * (second[0] - first[0]) / (second[1] - first[1])


def search_threads(current: int) -> int:
    """The threads a large search should use: ``UMLKIT_SEARCH_THREADS`` if set, else the cores of this process's
    affinity set that other processes leave idle (rounded to the nearest core, at least 1), never more than
    ``current``."""
    pinned = os.environ.get("UMLKIT_SEARCH_THREADS", "").strip()
    if pinned not in ("", "0"):
        if not pinned.isdigit():
            raise ValueError(f"UMLKIT_SEARCH_THREADS={pinned!r}: expected a whole number of threads (0: measure)")
        return int(pinned)
    if current <= 1:
        return current
    now = time.monotonic()
    if "busy" not in _LAST or now - _LAST["at"] > _REUSE_S:
        busy = busy_cores()
        _LAST.update(busy=-1.0 if busy is None else busy, at=now)
    if _LAST["busy"] < 0:
        return current
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:   # pragma: no cover - busy_cores returned None there
        return current
    return max(1, min(current, int(cores - _LAST["busy"] + 0.5)))


@contextlib.contextmanager
def limited_threads(pairs: int) -> Iterator[int]:
    """Run a search of ``pairs`` query x gallery pairs on :func:`search_threads` threads (torch's and faiss's) when
    it is large (``LARGE_SEARCH``); restore both counts afterwards. Yields the count used."""
    import torch
    current = torch.get_num_threads()
    n = search_threads(current) if pairs >= LARGE_SEARCH else current
    if n == current:
        yield current
        return
    import faiss
    faiss_before = faiss.omp_get_max_threads()
    _CONFIGURED.append(current)
    try:
        torch.set_num_threads(n)
        faiss.omp_set_num_threads(n)
        yield n
    finally:
        _CONFIGURED.pop()
        torch.set_num_threads(current)
        faiss.omp_set_num_threads(faiss_before)
