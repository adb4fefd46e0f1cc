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
"""
from __future__ import annotations

import argparse
import time

import torch
from _machine import describe

from umlkit.metrics.examples import uml_like_embeddings
from umlkit.metrics.knn import knn_search_checked

KERNELS = {"fp32": torch.float32, "bf16": torch.bfloat16, "int8": torch.int8}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("self", "plain"), default="self")
    parser.add_argument("--scales", default="0.03,0.06,0.11,0.22,0.44,1")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    print(describe(), flush=True)
    kernels = ["fp32", "bf16", "int8"] if args.mode == "self" else ["fp32", "bf16"]
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
        cells = "  ".join(f"{k} {v:7.2f} s (x{seconds['fp32'] / v:.2f})" for k, v in seconds.items())
        print(f"{args.mode} {len(q):>7,} x {len(g):>7,}:  {cells}   fastest {best}", flush=True)


if __name__ == "__main__":
    main()
