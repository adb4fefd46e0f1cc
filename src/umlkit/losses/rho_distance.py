"""ρ-distance mining for R-Margin (Roth et al., ICML 2020, Sec. 5 "ρ-regularisation"; ooDML's "R-Margin").

Triplets come from pytorch-metric-learning's ``DistanceWeightedMiner`` (cutoff 0.5, non-zero-loss cutoff 1.4, as
the margin loss of Wu et al.); then, with probability ``rho`` (0.2 in Roth's ``rho_distance`` batchminer), each
triplet's negative is swapped for another positive of its anchor. The margin loss then pushes that positive away,
which keeps intra-class structure (a denser, less compressed embedding space). Written here because PML has no
such miner; it returns a PML triplet ``indices_tuple``.
"""
from __future__ import annotations

import torch
from pytorch_metric_learning.miners import DistanceWeightedMiner
from torch import nn

__all__ = ["RhoDistanceMiner"]


class RhoDistanceMiner(nn.Module):
    def __init__(self, rho: float = 0.2, cutoff: float = 0.5, nonzero_loss_cutoff: float = 1.4,
                 generator: torch.Generator | None = None):
        super().__init__()
        if not 0 <= rho <= 1:
            raise ValueError(f"rho must be in [0, 1], got {rho}")
        self.rho, self.generator = rho, generator
        self.base = DistanceWeightedMiner(cutoff=cutoff, nonzero_loss_cutoff=nonzero_loss_cutoff)

    @torch.no_grad()
    def forward(self, embeddings, labels, ref_emb=None, ref_labels=None):
        a, p, n = self.base(embeddings, labels, ref_emb, ref_labels)
        if a.numel() == 0 or self.rho == 0:
            return a, p, n
        gallery_labels = labels if ref_labels is None else ref_labels
        swap = torch.rand(a.numel(), generator=self.generator, device="cpu").to(a.device) < self.rho
        n = n.clone()
        for t in torch.nonzero(swap).flatten().tolist():
            same = torch.nonzero(gallery_labels == labels[a[t]]).flatten()
            same = same[(same != a[t]) & (same != p[t])]
            if same.numel():
                pick = torch.randint(same.numel(), (1,), generator=self.generator).item()
                n[t] = same[pick]
        return a, p, n
