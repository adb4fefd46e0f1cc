"""Small, deterministic embedding sets for the book, the tests and the benchmarks (no model needed).

* :func:`circle_example`: five 2-D points whose metric values are worked out by hand in the Evaluation chapter.
* :func:`uml_like_embeddings`: Gaussian class clusters with a class-size distribution like PUMA's unified test
  set (148,500 items, about 15,900 classes, mostly 2-10 items and a tail up to ~100), scaled by ``scale``.
* :func:`compare_with_pml`: times :func:`umlkit.metrics.evaluate_retrieval` against pytorch-metric-learning's
  ``AccuracyCalculator`` on the same embeddings and reports both sets of numbers.
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch

__all__ = ["circle_example", "uml_like_embeddings", "compare_with_pml", "UML_TEST_ITEMS", "UML_TEST_CLASSES"]

UML_TEST_ITEMS, UML_TEST_CLASSES = 148_500, 15_900


def circle_example() -> tuple[np.ndarray, np.ndarray]:
    """Five unit vectors at 0, 12, 100, 20 and 93 degrees with labels 0, 0, 0, 1, 1."""
    rad = np.deg2rad(np.array([0.0, 12.0, 100.0, 20.0, 93.0]))
    return np.stack([np.cos(rad), np.sin(rad)], axis=1).astype(np.float32), np.array([0, 0, 0, 1, 1])


def uml_like_embeddings(scale: float = 1.0, dim: int = 128, noise: float = 1.6, seed: int = 0
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """L2-normalised (n, dim) embeddings and labels, class sizes like the UML test set, sorted by class."""
    if not 0 < scale <= 1:
        raise ValueError(f"scale must be in (0, 1], got {scale}")
    gen = np.random.default_rng(seed)
    n_classes = max(10, int(UML_TEST_CLASSES * scale))
    n_items = int(UML_TEST_ITEMS * scale)
    tail = gen.random(n_classes) < 0.05
    sizes = np.where(tail, gen.integers(20, 101, size=n_classes), gen.integers(2, 11, size=n_classes))
    lo, hi = np.where(tail, 20, 2), np.where(tail, 100, 10)
    diff = n_items - int(sizes.sum())
    j = 0
    while diff != 0:  # nudge sizes one at a time, within each class's range, until the total matches
        step = 1 if diff > 0 else -1
        c = j % n_classes
        if lo[c] <= sizes[c] + step <= hi[c]:
            sizes[c] += step
            diff -= step
        j += 1
    labels = np.repeat(np.arange(n_classes), sizes)
    centres = gen.standard_normal((n_classes, dim)).astype(np.float32)
    x = centres[labels] + noise * gen.standard_normal((labels.size, dim)).astype(np.float32)
    return torch.nn.functional.normalize(torch.from_numpy(x), dim=1), torch.from_numpy(labels)


def compare_with_pml(embeddings: torch.Tensor, labels: torch.Tensor) -> pd.DataFrame:
    """R@1, MAP@R, RP and seconds from umlkit (bf16, int8 and fp32 searches) and PML's AccuracyCalculator."""
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

    from umlkit.metrics.retrieval import evaluate_retrieval

    rows = {}
    for name, dtype in (("umlkit (bf16 candidates + fp32 re-rank)", torch.bfloat16),
                        ("umlkit (int8 tiles + fp32 candidates)", torch.int8),
                        ("umlkit (fp32 search)", torch.float32)):
        start = time.perf_counter()
        res = evaluate_retrieval(embeddings, labels, metrics=["R@1", "MAP@R", "RP"], search_dtype=dtype)
        rows[name] = {"R@1": res["R@1"], "MAP@R": res["MAP@R"], "RP": res["RP"],
                      "seconds": time.perf_counter() - start}
    calc = AccuracyCalculator(include=("precision_at_1", "mean_average_precision_at_r", "r_precision"),
                              k="max_bin_count", device=torch.device("cpu"), label_comparison_fn=lambda a, b: a == b)
    start = time.perf_counter()
    res = calc.get_accuracy(embeddings, labels)
    rows["PML AccuracyCalculator"] = {"R@1": res["precision_at_1"], "MAP@R": res["mean_average_precision_at_r"],
                                      "RP": res["r_precision"], "seconds": time.perf_counter() - start}
    out = pd.DataFrame.from_dict(rows, orient="index")
    out["speed-up vs PML"] = out.loc["PML AccuracyCalculator", "seconds"] / out["seconds"]
    return out
