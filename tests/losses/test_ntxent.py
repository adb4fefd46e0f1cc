"""umlkit's NT-Xent against PML's: the same loss and the same gradients, bit for bit, and a hand-computed value."""
import math

import pytest
import torch
from pytorch_metric_learning import distances
from pytorch_metric_learning import losses as pml_losses

from umlkit.losses.ntxent import NTXentLoss


def _both(embeddings, labels, **kwargs):
    out = []
    for cls in (pml_losses.NTXentLoss, NTXentLoss):
        x = embeddings.clone().requires_grad_()
        value = cls(**kwargs)(x, labels)
        value.backward()
        out.append((value.detach(), x.grad.clone()))
    return out


@pytest.mark.parametrize("views", [1, 2, 3, 17, 64])
@pytest.mark.parametrize("temperature", [0.07, 0.1, 0.5])
def test_two_views_match_pml_exactly(views, temperature):
    g = torch.Generator().manual_seed(views)
    embeddings = torch.randn(2 * views, 32, generator=g)
    ids = torch.arange(views)
    (ref, ref_grad), (ours, grad) = _both(embeddings, torch.cat([ids, ids]), temperature=temperature)
    assert torch.equal(ref, ours)
    assert torch.equal(ref_grad, grad)


def test_shuffled_views_match_pml_exactly():
    g = torch.Generator().manual_seed(0)
    ids = torch.randperm(20, generator=g)
    labels = torch.cat([ids, ids[torch.randperm(20, generator=g)]])
    (ref, ref_grad), (ours, grad) = _both(torch.randn(40, 16, generator=g), labels, temperature=0.1)
    assert torch.equal(ref, ours) and torch.equal(ref_grad, grad)


def test_several_positives_per_anchor_use_pml_code():
    g = torch.Generator().manual_seed(1)
    labels = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2])
    (ref, ref_grad), (ours, grad) = _both(torch.randn(8, 16, generator=g), labels, temperature=0.2)
    assert torch.equal(ref, ours) and torch.equal(ref_grad, grad)


def test_distance_that_is_not_a_similarity_uses_pml_code():
    g = torch.Generator().manual_seed(2)
    ids = torch.arange(6)
    (ref, _), (ours, _) = _both(torch.randn(12, 8, generator=g), torch.cat([ids, ids]), temperature=0.3,
                                distance=distances.LpDistance())
    assert torch.equal(ref, ours)


def test_hand_computed_value():
    # Two images, two views each, unit vectors at known angles; cosine similarities by hand.
    e = torch.tensor([[1.0, 0.0], [0.0, 1.0], [math.cos(0.3), math.sin(0.3)], [math.sin(0.2), math.cos(0.2)]])
    labels = torch.tensor([0, 1, 0, 1])
    t = 0.5
    sim = e @ e.T
    expected = 0.0
    for a, p in [(0, 2), (2, 0), (1, 3), (3, 1)]:
        negatives = [n for n in range(4) if labels[n] != labels[a]]
        num = math.exp(sim[a, p] / t)
        expected += -math.log(num / (num + sum(math.exp(sim[a, n] / t) for n in negatives)))
    assert NTXentLoss(temperature=t)(e, labels).item() == pytest.approx(expected / 4, rel=1e-6)
