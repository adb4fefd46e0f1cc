"""UML-like synthetic embeddings: Gaussian class clusters whose class sizes resemble PUMA's unified test set
(148,500 items, about 15,900 classes, mostly 2-10 items and a 5 % tail of 20-100), scaled by ``scale``. The
benchmarks, the tests and the search-kernel measurement (:mod:`umlkit.metrics.kernels`) use them; they live apart
from :mod:`umlkit.metrics.examples` so that the measurement imports no metric code (no import circle).
"""
from __future__ import annotations

import numpy as np
import torch

__all__ = ["UML_TEST_CLASSES", "UML_TEST_ITEMS", "uml_like_embeddings"]

UML_TEST_ITEMS, UML_TEST_CLASSES = 148_500, 15_900


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
