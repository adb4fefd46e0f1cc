"""Benchmark: NMI at a large number of classes: 20 exact k-means iterations against the restricted ones of
``method="auto"``, and against the two-level k-means.

``umlkit.metrics.nmi(method="exact")`` is Roth's and PML's NMI: one faiss k-means (20 iterations) with K = the number
of classes, whose cost grows with n x K. At PUMA's unified scale (about 148K test items, 15.9K classes) that is one
to two minutes of CPU. ``method="auto"`` (the default of ``evaluate_retrieval``) runs 5 iterations above
``NMI_EXACT_MAX_K`` classes, the third to fifth assignments restricted to each item's 32 nearest centroids of the
second (``"candidates"``: the same with 20); ``method="hierarchical"`` clusters into ceil(sqrt(K)) groups and splits
each into its share of the K clusters; ``exact:5`` is faiss with 5 iterations (``METHOD:N``: N iterations). This
prints, on UML-like synthetic embeddings (``umlkit.metrics.examples.uml_like_embeddings``: PUMA's class-size
profile), each value per k-means seed, its difference to the exact one of the same seed, and the times, with the
ratio to the exact run (the baseline, same run) and the CPU model. The spread of the exact value over seeds is the
yardstick for the differences.

    python benchmarks/bench_nmi.py --scale 0.25               # 37K items, 4K classes (a few minutes on 2 cores)
    python benchmarks/bench_nmi.py --scale 1 --seeds 0,1,2 --methods exact,exact:5,auto   # PUMA's unified scale
"""
from __future__ import annotations

import argparse
import json
import time

import torch
from _machine import describe

from umlkit.metrics.examples import uml_like_embeddings
from umlkit.metrics.retrieval import nmi


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=0.25, help="fraction of PUMA's unified test set (default 0.25)")
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--seeds", default="0", help="k-means seeds, comma-separated (default 0)")
    ap.add_argument("--methods", default="exact,auto,hierarchical",
                    help="comma-separated nmi() methods; METHOD:N runs N k-means iterations instead of 20")
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args(argv)
    x, y = uml_like_embeddings(args.scale, dim=args.dim)
    x, y = torch.as_tensor(x), torch.as_tensor(y)
    k = int(torch.unique(y).numel())
    print(describe())
    print(f"{x.shape[0]} items, {k} classes, {args.dim}-d")
    rows = {}
    for seed in (int(v) for v in args.seeds.split(",")):
        for method in args.methods.split(","):
            name, _, niter = method.partition(":")   # "exact:5": 5 iterations instead of 20
            start = time.perf_counter()
            value = nmi(x, y, method=name, seed=seed, niter=int(niter) if niter else 20)
            rows[f"{method} seed {seed}"] = {"NMI": value, "seconds": time.perf_counter() - start}
            exact = rows.get(f"exact seed {seed}")
            r = rows[f"{method} seed {seed}"]
            line = f"{method:>13} seed {seed}: NMI {value:.4f}  {r['seconds']:8.1f} s"
            if exact:
                line += f"  speed {exact['seconds'] / r['seconds']:5.1f}x exact  difference {value - exact['NMI']:+.4f}"
            print(line, flush=True)
    exact = [r["NMI"] for name, r in rows.items() if name.startswith("exact ")]
    if len(exact) > 1:
        print(f"exact NMI over seeds: spread (max - min) {max(exact) - min(exact):.4f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": describe(), "items": x.shape[0], "classes": k, "results": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
