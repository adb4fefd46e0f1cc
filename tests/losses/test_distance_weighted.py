"""The vectorised distance-weighted miner against pytorch-metric-learning's: same weights, same triplet structure,
same distribution of negatives."""
import numpy as np
import torch
from pytorch_metric_learning.miners import DistanceWeightedMiner

from umlkit.losses.distance_weighted import BatchedDistanceWeightedMiner, distance_weighted_triplets


def _batch(seed=0, n_classes=6, per=3, d=8):
    torch.manual_seed(seed)
    labels = torch.arange(n_classes).repeat_interleave(per)
    emb = torch.nn.functional.normalize(torch.randn(len(labels), d) + labels[:, None] * 0.05, dim=1)
    return emb, labels


def test_triplets_have_pmls_structure():
    emb, labels = _batch()
    labels = torch.cat([labels, torch.tensor([99])])  # a class with one member: never an anchor
    emb = torch.cat([emb, torch.nn.functional.normalize(torch.randn(1, 8), dim=1)])
    a, p, n = BatchedDistanceWeightedMiner()(emb, labels)
    ap, pp, np_ = DistanceWeightedMiner()(emb, labels)
    # the same anchors with the same number of triplets each (k = class size), as PML
    assert torch.equal(torch.bincount(a, minlength=len(labels)), torch.bincount(ap, minlength=len(labels)))
    assert (labels[a] == labels[p]).all() and (a != p).all() and (labels[a] != labels[n]).all()


def test_negatives_follow_the_same_distribution_as_pmls():
    emb, labels = _batch(seed=1, n_classes=5, per=2, d=4)
    torch.manual_seed(0)
    ours, theirs = np.zeros((10, 10)), np.zeros((10, 10))
    mo, mp = BatchedDistanceWeightedMiner(), DistanceWeightedMiner()
    for _ in range(3000):
        a, _, n = mo(emb, labels)
        np.add.at(ours, (a.numpy(), n.numpy()), 1)
        a, _, n = mp(emb, labels)
        np.add.at(theirs, (a.numpy(), n.numpy()), 1)
    ours /= ours.sum(1, keepdims=True)
    theirs /= theirs.sum(1, keepdims=True)
    assert np.abs(ours - theirs).max() < 0.03  # 6,000 draws per anchor: sampling error ~0.006


def test_rows_without_weight_draw_nothing():
    labels = torch.tensor([0, 0, 1, 1])
    w = torch.tensor([[0, 0, 0.5, 0.5], [0, 0, 0, 0], [1, 0, 0, 0], [0.5, 0.5, 0, 0]]).float()
    w[1] = float("nan")  # PML's normalisation of an all-zero row
    a, p, n = distance_weighted_triplets(labels, w)
    assert set(a.tolist()) == {0, 2, 3} and (n[a == 2] == 0).all()
