"""NMI's candidate k-means (umlkit.metrics.kmeans) against plain Lloyd iterations written out in numpy (float64)."""
from __future__ import annotations

import numpy as np
import pytest

from umlkit.metrics.kmeans import candidate_kmeans


def _lloyd(x: np.ndarray, k: int, seed: int, niter: int, candidates: int | None) -> np.ndarray:
    """Lloyd's iterations, one loop per item: start at k random items (numpy's seeded permutation), assign, move
    each centroid to its items' mean (an empty one stays); from the third assignment on, an item chooses among its
    ``candidates`` nearest centroids of the second (None: among all)."""
    x = x.astype(np.float64)
    centroids = x[np.random.RandomState(seed).permutation(len(x))[:k]].copy()
    lists = [np.arange(k)] * len(x)

    def assign(step):
        nonlocal lists
        out = np.empty(len(x), dtype=np.int64)
        for i, row in enumerate(x):
            dist = ((centroids[lists[i]] - row) ** 2).sum(axis=1)
            if step == 1 and candidates is not None:
                lists[i] = lists[i][np.argsort(dist, kind="stable")[:candidates]]
                dist = ((centroids[lists[i]] - row) ** 2).sum(axis=1)
            out[i] = lists[i][int(np.argmin(dist))]
        return out

    labels = assign(0)
    for step in range(1, niter + 1):
        for c in range(k):
            if (labels == c).any():
                centroids[c] = x[labels == c].mean(axis=0)
        labels = assign(step)
    return labels


@pytest.mark.parametrize("candidates", [3, 40])
def test_candidate_kmeans_equals_lloyd_written_out(candidates):
    rng = np.random.default_rng(5)
    x = (rng.normal(size=(12, 6))[rng.integers(0, 12, 400)] + rng.normal(scale=0.7, size=(400, 6))).astype(np.float32)
    got = candidate_kmeans(x, 40, seed=3, niter=6, candidates=candidates)
    assert np.array_equal(got, _lloyd(x, 40, seed=3, niter=6, candidates=candidates))


def test_few_candidates_change_the_result_and_all_candidates_do_not():
    """The restriction is real (3 candidates give another clustering than plain Lloyd here) and vanishes when every
    centroid is a candidate."""
    rng = np.random.default_rng(8)
    x = rng.normal(size=(300, 4)).astype(np.float32)
    plain = _lloyd(x, 30, seed=0, niter=8, candidates=None)
    assert np.array_equal(candidate_kmeans(x, 30, seed=0, niter=8, candidates=30), plain)
    assert not np.array_equal(candidate_kmeans(x, 30, seed=0, niter=8, candidates=3), plain)


def test_candidate_kmeans_is_deterministic_and_checks_its_arguments():
    x = np.random.default_rng(1).normal(size=(200, 8)).astype(np.float32)
    a, b = candidate_kmeans(x, 20, seed=4, niter=5), candidate_kmeans(x, 20, seed=4, niter=5)
    assert np.array_equal(a, b) and not np.array_equal(a, candidate_kmeans(x, 20, seed=5, niter=5))
    with pytest.raises(ValueError, match="k=201"):
        candidate_kmeans(x, 201, seed=0, niter=5)
    with pytest.raises(ValueError, match="niter=0"):
        candidate_kmeans(x, 20, seed=0, niter=0)
