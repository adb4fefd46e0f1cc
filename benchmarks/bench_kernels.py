"""Benchmark: the exact search's three kernels (fp32, bf16, int8) end to end at several sizes, the evidence behind
``umlkit.metrics.kernels``' rule (small searches fp32; larger ones the kernel that finished a representative search
first).

Data: UML-like 128-d embeddings (``uml_like_embeddings``: classes of 2-100 items) at fractions of the 148,500-item
unified test set. A self-search (query set = gallery, the self-match left out) or a plain one (the first half
against the second) to the depth the evaluation asks of each query: R, the rest of its class, at least 8. Each
kernel is forced (``search_dtype``) and timed with ``knn_search_checked`` alone, the fastest of ``--repeats`` runs;
the CPU is printed first.

    python benchmarks/bench_kernels.py                       # self-searches, 4,455 to 148,500 items (~2 min)
    python benchmarks/bench_kernels.py --mode plain --scales 0.11,0.22,0.44,1
    python benchmarks/bench_kernels.py --kernels fp32,bf16,int8  # also the kernels this CPU would emulate

A kernel this CPU has no native instructions for (bf16 without avx512_bf16/amx_bf16, int8 without VNNI: the kernel
rule, ``umlkit.metrics.kernels.native``) is left out unless ``--kernels`` names it, with a line saying so: oneDNN
emulates it at a tenth of fp32's speed, and the largest sizes would run for many minutes.
"""
from __future__ import annotations

import argparse
import time

import torch
from _machine import describe

from umlkit.metrics.examples import uml_like_embeddings
from umlkit.metrics.knn import knn_search_checked

KERNELS = {"fp32": torch.float32, "bf16": torch.bfloat16, "int8": torch.int8}


def _kernels(mode: str, asked: str | None) -> list[str]:
    """The kernels to time: ``asked`` as given (an unknown name is an error), else every kernel the mode can use
    that this CPU runs natively (fp32 always), printing the ones left out."""
    from umlkit.metrics.kernels import cpu_flags, native
    usable = ["fp32", "bf16", "int8"] if mode == "self" else ["fp32", "bf16"]
    if asked is not None:
        names = [k.strip() for k in asked.split(",") if k.strip()]
        if bad := [k for k in names if k not in usable]:
            raise SystemExit(f"--kernels {asked!r}: {bad} not among {usable} for --mode {mode}")
        return names
    flags = cpu_flags()
    left = [k for k in usable[1:] if not native(k, flags)]
    if left:
        print(f"# left out: {', '.join(left)} (no native kernel on this CPU; name them in --kernels to time them)")
    return [k for k in usable if k not in left]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("self", "plain"), default="self")
    parser.add_argument("--scales", default="0.03,0.06,0.11,0.22,0.44,1")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--kernels", default=None,
                        help="comma-separated, of fp32, bf16, int8 (default: those this CPU runs natively)")
    args = parser.parse_args()
    print(describe(), flush=True)
    kernels = _kernels(args.mode, args.kernels)
    for scale in (float(s) for s in args.scales.split(",")):
        x, y = uml_like_embeddings(scale, dim=128)
        n = x.shape[0]
        depth = (torch.bincount(y)[y] - 1).clamp(min=8)
        if args.mode == "self":
            q, g, d, si = x, x, depth, torch.arange(n)
        else:
            q, g, d, si = x[: n // 2], x[n // 2:], depth[: n // 2], None
        seconds = {}
        for name in kernels:
            runs = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                knn_search_checked(q, g, d, self_index=si, search_dtype=KERNELS[name])
                runs.append(time.perf_counter() - start)
            seconds[name] = min(runs)
        best = min(seconds, key=seconds.get)
        base = seconds.get("fp32", next(iter(seconds.values())))
        cells = "  ".join(f"{k} {v:7.2f} s (x{base / v:.2f})" for k, v in seconds.items())
        print(f"{args.mode} {len(q):>7,} x {len(g):>7,}:  {cells}   fastest {best}", flush=True)


if __name__ == "__main__":
    main()
