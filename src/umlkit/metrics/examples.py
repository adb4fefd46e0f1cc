"""Small, deterministic embedding sets for the book, the tests and the benchmarks (no model needed).

* :func:`circle_example`: five 2-D points whose metric values are worked out by hand in the Evaluation chapter.
* :func:`uml_like_embeddings` (from :mod:`umlkit.metrics.synthetic`): Gaussian class clusters with a class-size
  distribution like PUMA's unified test set, scaled by ``scale``.
* :func:`compare_with_pml`: times :func:`umlkit.metrics.evaluate_retrieval` against pytorch-metric-learning's
  ``AccuracyCalculator`` on the same embeddings and reports both sets of numbers.
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch

from umlkit.metrics.synthetic import UML_TEST_CLASSES, UML_TEST_ITEMS, uml_like_embeddings

__all__ = ["circle_example", "uml_like_embeddings", "compare_with_pml", "UML_TEST_ITEMS", "UML_TEST_CLASSES"]



def circle_example() -> tuple[np.ndarray, np.ndarray]:
    """Five unit vectors at 0, 12, 100, 20 and 93 degrees with labels 0, 0, 0, 1, 1."""
    rad = np.deg2rad(np.array([0.0, 12.0, 100.0, 20.0, 93.0]))
    return np.stack([np.cos(rad), np.sin(rad)], axis=1).astype(np.float32), np.array([0, 0, 0, 1, 1])


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
