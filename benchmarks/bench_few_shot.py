"""Benchmark: one ooDML few-shot adaptation step (Margin loss with distance-weighted mining on a 112-item batch of
the support set) with pytorch-metric-learning's DistanceWeightedMiner (baseline, same run) against umlkit's
vectorised draw (:mod:`umlkit.losses.distance_weighted`), and mAP@1000 on a ~1,000-item query set (the evaluation of
every episode) with the row-blocked re-scoring of :mod:`umlkit.metrics.knn`.

Printed: milliseconds per step / per evaluation, the ratio to the baseline, the CPU model and the thread count.
CPUs differ: the ratios hold for the CPU printed, not for another.

    python benchmarks/bench_few_shot.py [--steps 200] [--threads 1]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from _machine import describe
from pytorch_metric_learning.miners import DistanceWeightedMiner


def step_ms(miner, steps: int, seed: int = 0) -> float:
    from umlkit.losses import create_loss
    torch.manual_seed(seed)
    head = torch.nn.Linear(96, 128)
    loss = create_loss("margin", num_classes=100)
    loss.miner = miner
    opt = torch.optim.Adam([*head.parameters(), *loss.parameters()], lr=1e-2)
    feats, labels = torch.randn(112, 96), torch.arange(56).repeat_interleave(2)
    start = time.perf_counter()
    for _ in range(steps):
        out = loss(torch.nn.functional.normalize(head(feats), dim=-1), labels)
        opt.zero_grad()
        out.backward()
        opt.step()
    return 1e3 * (time.perf_counter() - start) / steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    from umlkit.losses.distance_weighted import BatchedDistanceWeightedMiner
    print(f"{describe()}; torch threads: {a.threads}")
    base = step_ms(DistanceWeightedMiner(cutoff=0.5, nonzero_loss_cutoff=1.4), a.steps)
    ours = step_ms(BatchedDistanceWeightedMiner(cutoff=0.5, nonzero_loss_cutoff=1.4), a.steps)
    print(f"adaptation step, PML DistanceWeightedMiner (baseline): {base:6.2f} ms")
    print(f"adaptation step, BatchedDistanceWeightedMiner:         {ours:6.2f} ms  ({base / ours:.1f}x faster)")

    from umlkit.metrics import evaluate_retrieval, knn
    x = torch.nn.functional.normalize(torch.randn(1000, 128), dim=1)
    y = np.repeat(np.arange(100), 10)

    def eval_ms(reps=5):
        start = time.perf_counter()
        for _ in range(reps):
            evaluate_retrieval(x, y, metrics=["R@1", "mAP@1000"])
        return 1e3 * (time.perf_counter() - start) / reps

    blocked = eval_ms()
    old, knn._RESCORE_ELEMENTS = knn._RESCORE_ELEMENTS, 1 << 62  # one gather for every row (the old re-scoring)
    try:
        whole = eval_ms()
    finally:
        knn._RESCORE_ELEMENTS = old
    print(f"R@1 + mAP@1000 on 1,000 queries, one gather (baseline):  {whole:6.1f} ms")
    print(f"R@1 + mAP@1000 on 1,000 queries, row-blocked re-scoring: {blocked:6.1f} ms  "
          f"({whole / blocked:.1f}x faster)")


if __name__ == "__main__":
    main()
