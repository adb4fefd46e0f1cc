"""Multi-Similarity loss (Wang et al., CVPR 2019, Eqs. 4-5 and the hard-pair mining of Sec. 4) with the three
reductions the papers' code and text use.

For anchor i with cosine similarities S_ij, the mined positives P_i are same-class items with S_ij - ε < max of
S_i over other classes, the mined negatives N_i other-class items with S_ij + ε > min of S_i over the positives
(ε 0.1), and the anchor's terms are

    pos_i = 1/α log(1 + Σ_{j∈P_i} exp(-α (S_ij - λ))),   neg_i = 1/β log(1 + Σ_{j∈N_i} exp(β (S_ij - λ))).

How the batch's terms are combined differs:

* ``"anchors"``: the mean of pos_i + neg_i over every anchor (0 for an anchor with nothing mined): Wang et al.'s
  Eq. 5 and pytorch-metric-learning's ``MultiSimilarityLoss`` + ``MultiSimilarityMiner`` (tested equal). Language
  guidance's text cites this form (Sec. 4: Wang et al. via Musgrave et al.);
* ``"mined_anchors"``: ooDML's official ``criteria/multisimilarity.py``: the mean of pos_i over the anchors with a
  mined positive plus the mean of neg_i over the anchors with a mined negative;
* ``"softplus_of_mean"``: language guidance's official ``criteria/multisimilarity.py``: softplus applied to the
  batch mean of log Σ (with the empty sum 0), 1/α softplus(mean_i log(1 + Σ_P ...)) + the same for negatives.

Defaults α 2, β 40, λ 0.5, ε 0.1 are the official codes' (``--loss_multisimilarity_*`` of both repositories);
Wang et al. and PML use β 50. Written here because PML offers only the first reduction.
"""
from __future__ import annotations

import torch
from torch import nn

from umlkit.losses._checks import check_inputs

__all__ = ["MultiSimilarityLoss", "REDUCTIONS", "multisimilarity_masks"]

REDUCTIONS = ("anchors", "mined_anchors", "softplus_of_mean")


def multisimilarity_masks(sim: torch.Tensor, labels: torch.Tensor, epsilon: float):
    """(positive mask, negative mask) of the hard pairs each row's anchor mines (its own item excluded)."""
    same = labels[:, None] == labels[None, :]
    pos_lab = same & ~torch.eye(len(labels), dtype=torch.bool, device=sim.device)
    neg_lab = ~same
    hardest_pos = sim.masked_fill(~pos_lab, float("inf")).min(dim=1, keepdim=True).values
    hardest_neg = sim.masked_fill(~neg_lab, float("-inf")).max(dim=1, keepdim=True).values
    return pos_lab & (sim - epsilon < hardest_neg), neg_lab & (sim + epsilon > hardest_pos)


def _log_sum_exp_plus_one(z: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """log(1 + Σ_mask exp(z)) per row, computed stably (0 for an empty row)."""
    z = z.masked_fill(~mask, float("-inf"))
    return torch.logsumexp(torch.cat([z, torch.zeros_like(z[:, :1])], dim=1), dim=1)


class MultiSimilarityLoss(nn.Module):
    inputs = ("embeddings", "labels")  # what the training engine passes (as keywords)

    def __init__(self, alpha: float = 2.0, beta: float = 40.0, base: float = 0.5, epsilon: float = 0.1,
                 reduction: str = "anchors"):
        super().__init__()
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
        self.alpha, self.beta, self.base, self.epsilon, self.reduction = alpha, beta, base, epsilon, reduction

    def forward(self, embeddings, labels, indices_tuple=None, ref_emb=None, ref_labels=None) -> torch.Tensor:
        check_inputs("MultiSimilarityLoss", embeddings, labels)
        if ref_emb is not None or indices_tuple is not None:
            raise ValueError("MultiSimilarityLoss mines its own pairs within one batch (no ref_emb, no indices_tuple)")
        x = nn.functional.normalize(embeddings.float(), dim=1)
        sim = x @ x.T
        pos_mask, neg_mask = multisimilarity_masks(sim, labels, self.epsilon)
        pos = _log_sum_exp_plus_one(-self.alpha * (sim - self.base), pos_mask)
        neg = _log_sum_exp_plus_one(self.beta * (sim - self.base), neg_mask)
        if self.reduction == "softplus_of_mean":
            # log(1 + Σ) is what the official code averages (its logsumexp over the terms and one zero); softplus of
            # that mean is its reduction
            return nn.functional.softplus(pos.mean()) / self.alpha + nn.functional.softplus(neg.mean()) / self.beta
        pos, neg = pos / self.alpha, neg / self.beta
        if self.reduction == "anchors":
            return (pos + neg).mean()
        has_pos, has_neg = pos_mask.any(1), neg_mask.any(1)
        zero = x.sum() * 0.0
        return ((pos[has_pos].mean() if has_pos.any() else zero) + (neg[has_neg].mean() if has_neg.any() else zero))
