"""The Margin loss as ooDML's and language guidance's official code trains it (Roth et al.'s DML library).

ooDML (Milbich et al., ICML 2021) and language guidance (Roth et al., CVPR 2022) train their Margin rows with the
library of Roth et al. (ICML 2020, "Revisiting training strategies and generalization performance in deep metric
learning"), whose pieces differ from pytorch-metric-learning's ``MarginLoss`` + ``DistanceWeightedMiner``:

* **distance sampling** (``batchminer/distance.py``, ``BatchMiner.__call__``): *one* triplet per anchor. For every
  item i of the batch the negative is drawn from q(d)^-1 of Wu et al. (ICCV 2017, Eq. 3) over the items of other
  classes, distances clipped below at 0.5; the upper cut-off at 1.4 is commented out in the official file, so far
  negatives keep their weight (PML zeroes them). The positive is drawn uniformly among the other items of i's
  class (i itself when it has none). Negative first, then positive, as the official loop;
* **ρ-distance sampling** (``batchminer/rho_distance.py``, R-Margin): for each item, a coin with probability
  ``cp`` is tossed; items whose class has another member in the batch are anchors. Heads: the triplet becomes a
  "push" triplet (a, a, p') with p' another member of a's class, so the Margin loss pushes a same-class item beyond
  β + margin (Roth et al. 2020, Sec. 5: ρ-regularisation keeps intra-class structure); tails: a distance-sampled
  triplet, positive drawn before negative. ooDML's script passes ``--miner_rho_distance_cp 0.4 --loss_margin_beta
  0.6`` on CUB (0.35 on Cars, 0.15 and β 0.9 on SOP);
* **the loss** (``criteria/margin.py``, ``Criterion.forward``): d = sqrt(||x_a - x_b||^2 + 1e-8), β per class of
  the anchor (learnable, initialised at ``beta``), loss = Σ relu(d_ap - β + m) + relu(β - d_an + m) divided by the
  number of *triplets* with a non-zero term (the official ``(pos_loss > 0) + (neg_loss > 0)`` on booleans is a
  logical or), or the plain sum when there is none.

Both samplers draw from NumPy's global random stream in the official order (``np.random.choice``), which the
training engine seeds and checkpoints: under the same seed and embeddings the triplets are the official ones
(tests/losses/test_parity.py). A batch without another class gives that anchor no triplet, where the official code
fails. Written here because PML samples all triplets per anchor and divides by
active pair terms; no library has the ρ-distance sampler.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from umlkit.losses._checks import check_inputs

__all__ = ["RothMarginLoss", "distance_triplets", "inverse_sphere_weights", "rho_distance_triplets"]


def _pdist(x: torch.Tensor) -> torch.Tensor:
    prod = x @ x.T
    norm = prod.diag()[:, None].expand_as(prod)
    return (norm + norm.T - 2 * prod).clamp(min=0).sqrt()


def inverse_sphere_weights(x: torch.Tensor, labels: np.ndarray, cutoff: float = 0.5) -> torch.Tensor:
    """(n, n) rows of sampling probabilities q(d)^-1 / Σ over other-class items (same-class items 0), distances
    clipped below at ``cutoff``; the stabilising maximum is taken over the whole row, as the official code."""
    dim = x.shape[1]
    d = _pdist(x.detach()).clamp(min=cutoff)
    log_q = (2.0 - float(dim)) * torch.log(d) - (float(dim - 3) / 2) * torch.log(1.0 - 0.25 * d.pow(2))
    same = torch.as_tensor(labels[:, None] == labels[None, :])
    log_q = log_q.masked_fill(same, 0.0)
    q = torch.exp(log_q - log_q.max(dim=1, keepdim=True).values).masked_fill(same, 0.0)
    return q / q.sum(dim=1, keepdim=True)


def _other_member(pos: np.ndarray, i: int) -> int:
    pos = pos.copy()
    if pos.sum() > 1:
        pos[i] = False
    return int(np.random.choice(np.where(pos)[0]))


def distance_triplets(x: torch.Tensor, labels, cutoff: float = 0.5) -> list[tuple[int, int, int]]:
    """One distance-sampled triplet (anchor, positive, negative) per item of the batch."""
    labels = np.asarray(labels)
    q = inverse_sphere_weights(x, labels, cutoff).cpu().numpy()
    out = []
    for i in range(len(labels)):
        if not np.isfinite(q[i]).all():   # no item of another class (the official code fails here)
            continue
        neg = int(np.random.choice(len(labels), p=q[i]))
        out.append((i, _other_member(labels == labels[i], i), neg))
    return out


def rho_distance_triplets(x: torch.Tensor, labels, cp: float, cutoff: float = 0.5) -> list[tuple[int, int, int]]:
    """Roth's ρ-distance triplets: with probability ``cp`` a push triplet (a, a, p'), else a distance-sampled one."""
    labels = np.asarray(labels)
    q = inverse_sphere_weights(x, labels, cutoff).cpu().numpy()
    out = []
    for i in range(len(labels)):
        heads = np.random.choice(2, p=[1 - cp, cp])
        pos = labels == labels[i]
        if pos.sum() <= 1 or not (heads or np.isfinite(q[i]).all()):
            continue
        other = _other_member(pos, i)
        out.append((i, i, other) if heads else (i, other, int(np.random.choice(len(labels), p=q[i]))))
    return out


class RothMarginLoss(nn.Module):
    """Margin loss on Roth's sampled triplets (see the module docstring). ``sampling``: ``"distance"`` or
    ``"rho_distance"`` (with ``cp``); ``learn_beta``: β a parameter per class (``num_classes`` needed) or fixed."""
    inputs = ("embeddings", "labels")  # what the training engine passes (as keywords)

    def __init__(self, num_classes: int | None, margin: float = 0.2, beta: float = 1.2, sampling: str = "distance",
                 cp: float = 0.2, cutoff: float = 0.5, learn_beta: bool = True):
        super().__init__()
        if sampling not in ("distance", "rho_distance"):
            raise ValueError(f"sampling must be 'distance' or 'rho_distance', got {sampling!r}")
        if not 0 <= cp <= 1:
            raise ValueError(f"cp (the push-triplet probability) must be in [0, 1], got {cp}")
        if learn_beta and num_classes is None:
            raise ValueError("RothMarginLoss with learn_beta=True needs num_classes (one beta per class)")
        self.num_classes, self.margin, self.sampling, self.cp, self.cutoff = num_classes, margin, sampling, cp, cutoff
        self.beta = nn.Parameter(torch.full((num_classes,), float(beta))) if learn_beta else float(beta)

    def triplets(self, x: torch.Tensor, labels) -> list[tuple[int, int, int]]:
        if self.sampling == "rho_distance":
            return rho_distance_triplets(x, labels, self.cp, self.cutoff)
        return distance_triplets(x, labels, self.cutoff)

    def forward(self, embeddings, labels, indices_tuple=None, ref_emb=None, ref_labels=None) -> torch.Tensor:
        check_inputs("RothMarginLoss", embeddings, labels, self.num_classes if isinstance(self.beta, nn.Parameter)
                     else None)
        if ref_emb is not None:
            raise ValueError("RothMarginLoss samples within one batch (no ref_emb)")
        x = embeddings.float()
        trip = (list(zip(*(t.tolist() for t in indices_tuple))) if indices_tuple is not None
                else self.triplets(x, labels.detach().cpu().numpy()))
        if not trip:
            return x.sum() * 0.0
        a, p, n = (torch.tensor(c, device=x.device) for c in zip(*trip))
        d_ap = ((x[a] - x[p]).pow(2).sum(1) + 1e-8).sqrt()
        d_an = ((x[a] - x[n]).pow(2).sum(1) + 1e-8).sqrt()
        beta = self.beta[labels[a]] if isinstance(self.beta, nn.Parameter) else self.beta
        pos, neg = torch.relu(d_ap - beta + self.margin), torch.relu(beta - d_an + self.margin)
        active = ((pos > 0) | (neg > 0)).sum()
        total = (pos + neg).sum()
        return total / active if int(active) else total
