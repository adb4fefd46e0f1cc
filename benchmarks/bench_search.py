"""Benchmark: umlkit's self-search (``knn_search``) against faiss's fp32 flat search, at several sizes.

The retrieval step alone, without the metrics: L2-normalised 128-d UML-like embeddings (as in ``bench_eval.py``),
each item's neighbours to the depth MAP@R needs (its class size - 1, at least 8), the item itself excluded. The
baseline is faiss ``IndexFlatIP`` (what PML's AccuracyCalculator calls), searched to the largest depth + 1 (faiss
has no per-query depth and returns the item itself), timed in the same process. umlkit's searches: the default
(chosen by start-up GEMM measurements) and each forced dtype. Printed: seconds, the ratio to faiss, and whether the
neighbours equal umlkit's fp32 search (faiss's own order of near-ties may differ, so it is compared only by how many
rows' neighbour sets agree).

    python benchmarks/bench_search.py                      # scales 0.05, 0.2, 1.0
    python benchmarks/bench_search.py --scales 0.2 --impls faiss,umlkit
    python benchmarks/bench_search.py --data collapsed --items 20000   # hard inputs, k = 10 (below)

``--data collapsed`` (all ones plus N(0, 0.02) noise, normalised: an untrained or collapsed model, every score
within the bf16 and int8 errors of every other) and ``--data random`` (Gaussian, ``--dim`` wide: high dimensions
loosen the int8 bound) are the inputs on which the fast paths lose their advantage; each item is searched to k = 10.

The machine (CPU model, torch, threads) is printed first: a ratio measured on one CPU does not hold on another.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from _machine import describe

from umlkit.metrics.examples import uml_like_embeddings

DTYPES = {"umlkit": None, "umlkit-int8": torch.int8, "umlkit-bf16": torch.bfloat16, "umlkit-fp32": torch.float32}


def problem(scale: float, data: str = "uml", dim: int = 128, items: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Embeddings and each item's search depth: UML-like at ``scale`` (MAP@R's depth: class size - 1, at least 8), or
    ``items`` collapsed or random ones (k = 10)."""
    if data != "uml":
        gen = torch.Generator().manual_seed(0)
        noise = torch.randn(items, dim, generator=gen)
        x = torch.nn.functional.normalize(1 + 0.02 * noise if data == "collapsed" else noise, dim=1)
        return x, torch.full((items,), 10)
    x, y = uml_like_embeddings(scale, dim=dim)
    x, y = torch.as_tensor(x).float(), torch.as_tensor(y)
    depth = torch.maximum(torch.full((x.shape[0],), 8), torch.bincount(y)[y] - 1)
    return x, depth


def run_faiss(x: torch.Tensor, depth: torch.Tensor) -> tuple[float, torch.Tensor]:
    import faiss

    start = time.perf_counter()
    index = faiss.IndexFlatIP(x.shape[1])
    index.add(x.numpy())
    _, idx = index.search(x.numpy(), int(depth.max()) + 1)
    seconds = time.perf_counter() - start
    idx = torch.from_numpy(idx)
    # drop each row's own index (faiss returns it among the first, usually first)
    own = (idx == torch.arange(x.shape[0])[:, None]).to(torch.uint8)
    order = own.argsort(dim=1, stable=True)[:, : int(depth.max())]   # the others, in faiss's order
    return seconds, idx.gather(1, order)


def run_umlkit(x: torch.Tensor, depth: torch.Tensor, dtype: torch.dtype | None) -> tuple[float, torch.Tensor, str]:
    from umlkit.metrics.knn import knn_search

    stats: dict = {}
    start = time.perf_counter()
    _, idx = knn_search(x, x, depth, self_index=torch.arange(x.shape[0]), search_dtype=dtype, stats=stats)
    return time.perf_counter() - start, idx, str(stats["search_dtype"]).replace("torch.", "")


def same_sets(a: torch.Tensor, b: torch.Tensor, depth: torch.Tensor) -> float:
    """Fraction of rows whose first depth neighbours are the same set in both."""
    agree = [set(a[r, :d].tolist()) == set(b[r, :d].tolist()) for r, d in enumerate(depth.tolist())]
    return float(np.mean(agree))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scales", default="0.05,0.2,1.0", help="fractions of the 148,500-item problem")
    parser.add_argument("--impls", default=None, help="default: faiss,umlkit,umlkit-int8,umlkit-bf16,umlkit-fp32, "
                        "less the kernels this CPU cannot run natively (the kernel rule: umlkit.metrics.kernels)")
    parser.add_argument("--data", choices=("uml", "collapsed", "random"), default="uml")
    parser.add_argument("--items", default="20000", help="sizes of the collapsed or random sets (comma-separated)")
    parser.add_argument("--dim", type=int, default=128)
    args = parser.parse_args()
    impls = (args.impls or "faiss,umlkit,umlkit-int8,umlkit-bf16,umlkit-fp32").split(",")
    if args.impls is None:   # forced kernels an AVX2-only CPU emulates would run for many minutes
        from umlkit.metrics.kernels import cpu_flags, native
        slow = [i for i, kind in (("umlkit-int8", "int8"), ("umlkit-bf16", "bf16")) if not native(kind, cpu_flags())]
        if slow:
            impls = [i for i in impls if i not in slow]
            print(f"# left out: {', '.join(slow)} (no native kernel on this CPU; name them in --impls to time them)")
    unknown = [i for i in impls if i != "faiss" and i not in DTYPES]
    if unknown:
        parser.error(f"--impls: unknown {unknown}; expected faiss or one of {sorted(DTYPES)}")
    print(describe(), flush=True)
    sizes = args.scales if args.data == "uml" else args.items
    for size in sizes.split(","):
        x, depth = problem(float(size), args.data, args.dim, int(size) if args.data != "uml" else 0)
        print(f"\n{args.data} data, {x.shape[0]} items x {x.shape[1]}-d, depth {int(depth.min())}-{int(depth.max())}",
              flush=True)
        results = {}
        for impl in impls:
            if impl == "faiss":
                seconds, idx = run_faiss(x, depth)
                results[impl] = (seconds, idx, "fp32 flat")
            else:
                results[impl] = run_umlkit(x, depth, DTYPES[impl])
        base = results.get("faiss")
        exact = results.get("umlkit-fp32")
        for impl, (seconds, idx, search) in results.items():
            line = f"{impl:>12}: {seconds:7.2f} s   search {search:<9}"
            if base:
                line += f"   speed-up vs faiss x{base[0] / seconds:.2f}"
            if exact and impl != "umlkit-fp32":
                line += f"   rows with the fp32 search's neighbour set {same_sets(idx, exact[1], depth):.4f}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
