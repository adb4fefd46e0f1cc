"""Distance-weighted sampling (Wu et al., "Sampling matters in deep embedding learning", ICCV 2017, Sec. 4) with
one vectorised draw per batch.

pytorch-metric-learning's ``DistanceWeightedMiner`` computes the sampling weights q(d)^-1 (clipped at ``cutoff``,
zero beyond ``nonzero_loss_cutoff`` and for same-class items) and then draws its triplets with
``get_random_triplet_indices``, a Python loop over the batch's classes. For the small batches of few-shot adaptation
(ooDML Sec. 4.4: 1,000 steps per episode) that loop is ~90 % of a step on one CPU core (12 ms of 13). This miner
keeps PML's weights (computed by PML's own ``mine`` up to the draw, re-stated here in ten lines because PML does
not expose them) and PML's triplet distribution, and makes the draw with two ``torch.multinomial`` calls:

* every item whose class has at least two members in the batch is an anchor, with as many triplets as its class
  has members (PML: ``k = n_p``);
* each triplet's positive is uniform over the anchor's other class members, its negative is drawn in proportion
  to the anchor's weights (same-class items have weight 0), both with replacement, as PML;
* anchors whose weights are all zero (every negative beyond the cut-off) get no triplet, as PML.

The random stream differs from PML's, so the triplets differ draw by draw but not in distribution (tested against
PML's sampler). The training engine keeps PML's miner; few-shot adaptation uses this one.
"""
from __future__ import annotations

import torch
from pytorch_metric_learning.miners import DistanceWeightedMiner

__all__ = ["BatchedDistanceWeightedMiner", "distance_weighted_triplets"]


def distance_weighted_triplets(labels: torch.Tensor, weights: torch.Tensor, generator: torch.Generator | None = None):
    """(anchors, positives, negatives) drawn as described in the module docstring from row-normalised ``weights``
    (n, n) (NaN rows, as PML's normalisation leaves for all-zero rows, draw nothing)."""
    n = labels.shape[0]
    same = labels[:, None] == labels[None, :]
    others = same & ~torch.eye(n, dtype=torch.bool, device=labels.device)
    counts = same.sum(1)
    ok = (counts >= 2) & (torch.nan_to_num(weights, nan=0.0).sum(1) > 0)
    rows = torch.nonzero(ok).flatten()
    if rows.numel() == 0:
        empty = torch.empty(0, dtype=torch.long, device=labels.device)
        return empty, empty.clone(), empty.clone()
    k = counts[rows]
    kmax = int(k.max())
    pos = torch.multinomial(others[rows].float(), kmax, replacement=True, generator=generator)
    neg = torch.multinomial(weights[rows].float(), kmax, replacement=True, generator=generator)
    keep = torch.arange(kmax, device=labels.device)[None, :] < k[:, None]
    return rows[:, None].expand(-1, kmax)[keep], pos[keep], neg[keep]


class BatchedDistanceWeightedMiner(DistanceWeightedMiner):
    """PML's ``DistanceWeightedMiner`` (same constructor and weights) with a vectorised draw."""

    def mine(self, embeddings, labels, ref_emb, ref_labels):
        if ref_emb is not embeddings and not torch.equal(ref_emb, embeddings):
            raise ValueError("BatchedDistanceWeightedMiner mines within one batch (ref_emb must be the embeddings)")
        d = float(embeddings.size(1))
        mat = torch.clamp(self.distance(embeddings, ref_emb), min=self.cutoff)
        log_w = (2.0 - d) * torch.log(mat) - ((d - 3) / 2) * torch.log(1.0 - 0.25 * (mat ** 2.0))
        bad = torch.isinf(log_w) | torch.isnan(log_w)
        mask = (labels[:, None] != ref_labels[None, :]).to(log_w.dtype)
        log_w = log_w * mask
        w = torch.exp(log_w - torch.max(log_w[~bad])) * mask * (mat < self.nonzero_loss_cutoff).to(log_w.dtype)
        w[bad] = 0
        w = w / torch.sum(w, dim=1, keepdim=True)
        return distance_weighted_triplets(labels, w)
