"""Benchmark: NMI at a large number of classes, exact k-means against the two-level approximation.

``umlkit.metrics.nmi(method="exact")`` is Roth's and PML's NMI: one faiss k-means with K = the number of classes,
whose cost grows with n x K. At PUMA's unified scale (about 148K test items, 15.9K classes) that is minutes of CPU;
``method="hierarchical"`` (the default of ``evaluate_retrieval`` above ``NMI_EXACT_MAX_K`` classes) clusters into
ceil(sqrt(K)) groups and splits each into its share of the K clusters. This prints, on UML-like synthetic embeddings
(``umlkit.metrics.examples.uml_like_embeddings``: PUMA's class-size profile), both values, their difference and
the time of each, with the ratio to the exact run (the baseline, same run) and the CPU model.

    python benchmarks/bench_nmi.py --scale 0.25     # 37K items, 4K classes (a minute or two on 2 cores)
    python benchmarks/bench_nmi.py --scale 1        # PUMA's unified scale
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
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args(argv)
    x, y = uml_like_embeddings(args.scale, dim=args.dim)
    x, y = torch.as_tensor(x), torch.as_tensor(y)
    k = int(torch.unique(y).numel())
    print(describe())
    print(f"{x.shape[0]} items, {k} classes, {args.dim}-d")
    rows = {}
    for method in ("exact", "hierarchical"):
        start = time.perf_counter()
        value = nmi(x, y, method=method)
        rows[method] = {"NMI": value, "seconds": time.perf_counter() - start}
    base = rows["exact"]["seconds"]
    for method, r in rows.items():
        print(f"{method:>12}: NMI {r['NMI']:.4f}  {r['seconds']:8.1f} s  speed {base / r['seconds']:5.1f}x exact")
    print(f"difference (hierarchical - exact): {rows['hierarchical']['NMI'] - rows['exact']['NMI']:+.4f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": describe(), "items": x.shape[0], "classes": k, "results": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
