"""The retrieval engine's query blocks give the same values as one block; NMI's two-level k-means."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from umlkit.metrics import evaluate_retrieval
from umlkit.metrics.retrieval import _split_clusters, evaluate_indices, nmi, parse_metrics


@pytest.mark.parametrize("convention", ["musgrave", "roth"])
@pytest.mark.parametrize("separate_gallery", [False, True])
def test_blocked_search_equals_one_block(convention, separate_gallery):
    rng = np.random.default_rng(3)
    n, d = 700, 16
    emb = torch.nn.functional.normalize(torch.from_numpy(rng.normal(size=(n, d)).astype(np.float32)), dim=1)
    labels = torch.from_numpy(rng.integers(0, 40, n))
    labels[0] = 999                                   # a class with one item: no positives
    if separate_gallery:
        qi, gi = torch.arange(0, 300), torch.arange(300, n)
    else:
        qi = gi = torch.arange(n)
    ks, others = parse_metrics(["R@1", "R@4", "MAP@R", "RP", "mAP@1000"], ())
    one = evaluate_indices(emb, labels, qi, gi, recall_ks=ks, others=others, map_at_r_convention=convention)
    for entries in (1, 500, 4096):                   # blocks of 1 query, a few, and many
        blocked = evaluate_indices(emb, labels, qi, gi, recall_ks=ks, others=others,
                                   map_at_r_convention=convention, block_entries=entries)
        assert blocked == one, entries


def test_split_clusters_shares_k_in_proportion_within_bounds():
    sizes = np.array([100, 50, 0, 3, 47])
    alloc = _split_clusters(sizes, 20)
    assert alloc.sum() == 20 and alloc[2] == 0 and (alloc <= sizes).all() and (alloc[sizes > 0] >= 1).all()
    assert alloc[0] == 10 and alloc[1] == 5                # 100/200 and 50/200 of 20
    tight = _split_clusters(np.array([2, 1, 1]), 4)
    assert tight.tolist() == [2, 1, 1]


def test_hierarchical_nmi_recovers_separated_clusters_and_auto_switches():
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(64, 32)) * 10
    y = np.repeat(np.arange(64), 20)
    x = torch.from_numpy((centres[y] + rng.normal(scale=0.05, size=(len(y), 32))).astype(np.float32))
    labels = torch.from_numpy(y)
    # one k-means start can merge two blobs and split another (a local minimum), at either level
    exact, two_level = nmi(x, labels, method="exact"), nmi(x, labels, method="hierarchical")
    assert exact > 0.9 and two_level > 0.9 and abs(two_level - exact) < 0.05
    # auto: exact below the threshold, so the same number as "exact"
    assert nmi(x, labels, method="auto") == nmi(x, labels, method="exact")
    with pytest.raises(ValueError, match="NMI method"):
        nmi(x, labels, method="fast")


def test_auto_nmi_takes_the_candidate_k_means_above_the_class_threshold(monkeypatch):
    """Above NMI_EXACT_MAX_K classes "auto" is the candidate k-means with NMI_LARGE_K_NITER iterations, checked
    against scikit-learn's NMI of that clustering computed here."""
    from sklearn.metrics import normalized_mutual_info_score

    import umlkit.metrics.retrieval as retrieval
    from umlkit.metrics.kmeans import candidate_kmeans
    rng = np.random.default_rng(2)
    y = np.repeat(np.arange(40), 12)
    x = (rng.normal(size=(40, 16))[y] + rng.normal(scale=0.8, size=(len(y), 16))).astype(np.float32)
    monkeypatch.setattr(retrieval, "NMI_EXACT_MAX_K", 30)
    expected = normalized_mutual_info_score(y, candidate_kmeans(x, 40, 0, retrieval.NMI_LARGE_K_NITER))
    auto = nmi(torch.from_numpy(x), torch.from_numpy(y), method="auto")
    assert auto == pytest.approx(expected, abs=1e-12)
    assert auto != nmi(torch.from_numpy(x), torch.from_numpy(y), method="exact")   # faiss, 20 iterations
    assert nmi(torch.from_numpy(x), torch.from_numpy(y), method="candidates", niter=retrieval.NMI_LARGE_K_NITER) \
        == auto


def test_evaluate_retrieval_passes_the_nmi_method():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(300, 8)).astype(np.float32)
    y = rng.integers(0, 30, 300)
    a = evaluate_retrieval(x, y, metrics=["NMI"], nmi_method="exact")["NMI"]
    b = evaluate_retrieval(x, y, metrics=["NMI"], nmi_method="hierarchical")["NMI"]
    assert 0 < a < 1 and 0 < b < 1 and a != b
    assert evaluate_retrieval(x, y, metrics=["NMI"])["NMI"] == a      # the default is the exact value
    assert evaluate_retrieval(x, y, metrics=["NMI"], nmi_method="auto")["NMI"] == a   # exact at 30 classes
