"""umlkit.metrics.cross_source_rate against a brute-force nearest-neighbour loop."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from umlkit.metrics import cross_source_rate


def _brute(emb, src, is_query, is_gallery):
    e = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    out = {}
    crossed = []
    for i in np.flatnonzero(is_query):
        best, best_j = -np.inf, -1
        for j in np.flatnonzero(is_gallery):
            if j == i:
                continue
            s = float(e[i] @ e[j])
            if s > best:
                best, best_j = s, j
        crossed.append((src[i], src[best_j] != src[i]))
    for s in dict.fromkeys(x for x, _ in crossed):
        out[str(s)] = 100.0 * np.mean([c for x, c in crossed if x == s])
    out["Unified"] = 100.0 * np.mean([c for _, c in crossed])
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_a_brute_force_loop(seed):
    rng = np.random.default_rng(seed)
    n = 90
    emb = rng.normal(size=(n, 8)).astype(np.float32)
    src = rng.integers(0, 3, n)
    is_query = np.ones(n, bool)
    is_gallery = np.ones(n, bool)
    if seed == 2:   # an In-shop-like source: its queries are not gallery items
        sel = np.flatnonzero(src == 2)
        is_gallery[sel[: len(sel) // 2]] = False
        is_query[sel[len(sel) // 2:]] = False
    got = cross_source_rate(torch.from_numpy(emb), src, is_query=is_query, is_gallery=is_gallery,
                            search_dtype=torch.float32)
    want = _brute(emb, src, is_query, is_gallery)
    assert set(got.index) == set(want)
    for k, v in want.items():
        assert got[k] == pytest.approx(v)


def test_separated_sources_never_cross_and_names_apply():
    emb = torch.tensor([[1.0, 0.0], [0.99, 0.1], [0.0, 1.0], [0.1, 0.99]])
    got = cross_source_rate(emb, [0, 0, 1, 1], source_names=["cub", "cars"])
    assert got.to_dict() == {"cub": 0.0, "cars": 0.0, "Unified": 0.0}
    mixed = cross_source_rate(emb, [0, 1, 0, 1])
    assert mixed["Unified"] == 100.0


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="sources must be 1-D with 3 entries"):
        cross_source_rate(torch.ones(3, 2), [0, 1])
    with pytest.raises(ValueError, match="two gallery items"):
        cross_source_rate(torch.eye(3), [0, 1, 2], is_gallery=[True, False, False])
