"""Fréchet distance between feature sets, ooDML's class-mean variant, and the Aggregated Generalization Score.

* :func:`frechet_distance`: the FID formula of Heusel et al. (2017), ||mu1-mu2||^2 + Tr(S1 + S2 - 2 (S1 S2)^{1/2}),
  between two Gaussians fitted to feature sets (``np.cov`` with ddof=1 as pytorch-fid and ooDML do). The matrix
  square root is scipy's ``sqrtm``, real part kept, with ``eps`` added to both covariance diagonals, as ooDML's
  ``split_helpers.py`` does (implementation_notes.md §2).
* :func:`class_mean_frechet_distance`: ooDML (Milbich et al., NeurIPS 2021), Sec. 3 / Eq. 1 as the official code
  evaluates it: one mean feature per class, and the Fréchet distance between the *set of train class means* and
  the *set of test class means* (the paper's "unimodal approximation of the intraclass distributions").
* :func:`aggregated_generalization_score`: ooDML Sec. 4.2 (AGS): the area under the metric-vs-FID curve after
  min-max normalising the split FIDs to [0, 1], by the trapezoidal rule. The official repo has no AGS code; this
  definition reproduces 47 of the 48 numbers of ooDML Table S3 from Tables S4-S6 (the test suite checks it).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.linalg

__all__ = ["frechet_distance", "class_means", "class_mean_frechet_distance", "aggregated_generalization_score"]


def _features(x, name: str) -> np.ndarray:
    arr = np.asarray(x.detach().cpu().numpy() if hasattr(x, "detach") else x, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_items, dim), got shape {arr.shape}")
    if arr.shape[0] < 2:
        raise ValueError(f"{name} needs at least 2 rows to estimate a covariance, got {arr.shape[0]}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or inf values")
    return arr


def frechet_distance(features_a, features_b, eps: float = 1e-8) -> float:
    """Fréchet distance between Gaussians fitted to two (n, d) feature sets."""
    a, b = _features(features_a, "features_a"), _features(features_b, "features_b")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"feature dimensions differ: {a.shape[1]} vs {b.shape[1]}")
    mu_a, mu_b = a.mean(axis=0), b.mean(axis=0)
    cov_a = np.atleast_2d(np.cov(a, rowvar=False)) + eps * np.eye(a.shape[1])
    cov_b = np.atleast_2d(np.cov(b, rowvar=False)) + eps * np.eye(b.shape[1])
    covmean = scipy.linalg.sqrtm(cov_a @ cov_b)
    covmean = np.real(covmean)
    diff = mu_a - mu_b
    value = float(diff @ diff + np.trace(cov_a) + np.trace(cov_b) - 2.0 * np.trace(covmean))
    return max(value, 0.0)


def class_means(features, labels) -> tuple[np.ndarray, np.ndarray]:
    """(classes, means): one mean feature per distinct label, classes sorted."""
    x = _features(features, "features")
    y = np.asarray(labels.cpu().numpy() if hasattr(labels, "cpu") else labels)
    if y.shape != (x.shape[0],):
        raise ValueError(f"labels must have shape ({x.shape[0]},), got {y.shape}")
    classes, inverse = np.unique(y, return_inverse=True)
    sums = np.zeros((classes.size, x.shape[1]))
    np.add.at(sums, inverse, x)
    return classes, sums / np.bincount(inverse)[:, None]


def class_mean_frechet_distance(train_features, train_labels, test_features, test_labels, eps: float = 1e-8) -> float:
    """ooDML's split difficulty: Fréchet distance between train class means and test class means."""
    _, mu_train = class_means(train_features, train_labels)
    _, mu_test = class_means(test_features, test_labels)
    return frechet_distance(mu_train, mu_test, eps=eps)


def aggregated_generalization_score(fids: Sequence[float], scores: Sequence[float]) -> float:
    """AGS: trapezoidal area under ``scores`` over min-max normalised ``fids`` (same unit as the scores)."""
    f = np.asarray(fids, dtype=np.float64)
    s = np.asarray(scores, dtype=np.float64)
    if f.ndim != 1 or f.shape != s.shape:
        raise ValueError(f"fids and scores must be 1-D of equal length, got shapes {f.shape} and {s.shape}")
    if f.size < 2:
        raise ValueError("AGS needs at least two splits")
    if not (np.isfinite(f).all() and np.isfinite(s).all()):
        raise ValueError("fids and scores must be finite")
    span = f.max() - f.min()
    if span <= 0:
        raise ValueError("all FIDs are equal; the normalised FID axis is undefined")
    order = np.argsort(f, kind="stable")
    x = (f[order] - f.min()) / span
    y = s[order]
    return float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2.0))
