import numpy as np
import pytest

from tests.metrics._brute import brute_metrics
from umlkit.metrics import evaluate_retrieval, harmonic_mean, unified_evaluation


def _two_sources():
    # source A: 2-D points near the x axis; source B: near the y axis, one of its items sits next to A's class 0
    xa = np.array([[1.0, 0.0], [0.99, 0.05], [0.9, -0.3], [0.88, -0.35]], dtype=np.float32)
    ya = np.array([0, 0, 1, 1])
    xb = np.array([[0.0, 1.0], [0.05, 0.99], [0.999, 0.02]], dtype=np.float32)
    yb = np.array([2, 2, 3])
    return xa, ya, xb, yb


def test_per_source_unified_and_harmonic_by_hand():
    xa, ya, xb, yb = _two_sources()
    x = np.concatenate([xa, xb])
    y = np.concatenate([ya, yb])
    src = ["A"] * 4 + ["B"] * 3
    table = unified_evaluation(x, y, src, metrics=["R@1"])
    # A alone: every item's nearest neighbour is its class mate -> 100
    assert table.loc["A", "R@1"] == pytest.approx(100.0)
    # B alone: items 0 and 1 find each other; item 2 (class 3, a singleton) misses -> 2/3
    assert table.loc["B", "R@1"] == pytest.approx(200 / 3)
    # unified: B item 2 (1.15 deg) is the nearest neighbour of A items 0 (0 deg) and 1 (2.9 deg): both now miss;
    # A2/A3 and B0/B1 still find each other; B2 itself misses -> 4 hits of 7
    want = brute_metrics(x, y, ks=(1,))["R@1"] * 100
    assert table.loc["Unified", "R@1"] == pytest.approx(want)
    assert table.loc["Unified", "R@1"] == pytest.approx(100 * 4 / 7)
    assert table.loc["Harmonic", "R@1"] == pytest.approx(2 / (1 / 100 + 1 / (200 / 3)))
    assert table.attrs["counts"]["Unified"] == (7, 7)


def test_query_gallery_masks_inshop_protocol():
    gen = np.random.default_rng(0)
    x = gen.normal(size=(60, 8)).astype(np.float32)
    y = np.repeat(np.arange(20), 3)
    src = np.array([0] * 30 + [1] * 30)
    is_query = np.zeros(60, dtype=bool)
    is_query[30::3] = True  # source 1 behaves like In-shop: one query per class, the rest gallery
    is_gallery = ~is_query
    is_gallery[:30] = True
    is_query[:30] = True
    table = unified_evaluation(x, y, src, is_query=is_query, is_gallery=is_gallery, metrics=["R@1", "MAP@R"],
                               source_names=["cub-like", "inshop-like"])
    s1 = src == 1
    want = evaluate_retrieval(x[s1 & is_query], y[s1 & is_query], x[s1 & is_gallery], y[s1 & is_gallery],
                              metrics=["R@1", "MAP@R"])
    assert table.loc["inshop-like", "R@1"] == pytest.approx(100 * want["R@1"])
    assert table.loc["inshop-like", "MAP@R"] == pytest.approx(100 * want["MAP@R"])
    s0 = src == 0
    want0 = evaluate_retrieval(x[s0], y[s0], metrics=["R@1"])
    assert table.loc["cub-like", "R@1"] == pytest.approx(100 * want0["R@1"])
    # unified: queries of both sources vs the union of galleries, self excluded by global index
    q_idx = np.flatnonzero(is_query)
    hits = 0
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    for i in q_idx:
        cands = [j for j in np.flatnonzero(is_gallery) if j != i]
        best = max(cands, key=lambda j: (float(xn[i] @ xn[j]), -j))
        hits += y[best] == y[i]
    assert table.loc["Unified", "R@1"] == pytest.approx(100 * hits / len(q_idx))


def test_harmonic_mean_values():
    assert harmonic_mean([50, 50]) == pytest.approx(50)
    assert harmonic_mean([100, 50]) == pytest.approx(2 / (1 / 100 + 1 / 50))
    assert harmonic_mean([80, 0]) == 0.0
    with pytest.raises(ValueError):
        harmonic_mean([-1, 2])


def test_unified_errors():
    xa, ya, xb, yb = _two_sources()
    x = np.concatenate([xa, xb])
    with pytest.raises(ValueError, match="more than one source"):
        unified_evaluation(x, np.array([0, 0, 1, 1, 0, 0, 3]), ["A"] * 4 + ["B"] * 3)
    with pytest.raises(ValueError, match="sources must be"):
        unified_evaluation(x, np.arange(7), ["A"] * 6)
    with pytest.raises(ValueError, match="is_query"):
        unified_evaluation(x, np.arange(7), ["A"] * 7, is_query=np.ones(5, dtype=bool))


def test_source_names_are_checked():
    """Two sources under one display name overwrote one row (Harmonic then came from the other source alone)."""
    xa, ya, xb, yb = _two_sources()
    x, y, src = np.concatenate([xa, xb]), np.concatenate([ya, yb]), np.array([0] * 4 + [1] * 3)
    named = unified_evaluation(x, y, src, source_names=["cub", "cars"])
    assert list(named.index) == ["cub", "cars", "Unified", "Harmonic"]
    assert named.loc["cars", "R@1"] == pytest.approx(200 / 3)
    for names, match in ((["x", "x"], "sources 0 and 1 have the same name 'x'"),
                         (["cub", "Unified"], "source 1 is named 'Unified', a summary row's name"),
                         (["cub"], "no name for source 1 .*a list of 1 names"),
                         ({0: "cub"}, r"no name for source 1 .*a dict with keys \['0'\]")):
        with pytest.raises(ValueError, match=match):
            unified_evaluation(x, y, src, source_names=names)


def test_a_per_source_failure_names_the_source():
    xa, ya, xb, yb = _two_sources()
    x, y = np.concatenate([xa, xb]), np.concatenate([ya, yb])
    with pytest.raises(ValueError, match="source 'B': .*offers only 2"):   # B's 3 items: R@4 needs more
        unified_evaluation(x, y, ["A"] * 4 + ["B"] * 3, metrics=["R@2", "R@3"])
