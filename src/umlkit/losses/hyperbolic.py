"""Hyp: hyperbolic metric learning of Ermolov et al. (CVPR 2022, "Hyperbolic Vision Transformers"), as
``htdt/hyp_metric`` (implementation_notes.md §5) and PUMA's Hyp baseline use it.

Embeddings are clipped to norm ``clip_r`` (2.3), mapped into the Poincaré ball of curvature ``c`` (0.1) by the
exponential map at 0, and compared by negative hyperbolic distance. The loss is the official pairwise
cross-entropy: for every ordered pair of views (i != j) of the k images per class in the batch (each class once
per "view"), view i's samples must pick their own class among view j's samples and the other samples of view i,
temperature ``tau`` (0.2); the terms are averaged over the k(k-1) ordered pairs (``divisor="ordered_pairs"``).
PUMA's Hyp baseline (``losses.SupCon`` with ``--hyp_c 0.1``) uses tau 0.1 and divides the same sum by k^2, the
count of its loop's steps including i = j (``divisor="all_pairs"``). The batch must hold the same
number k >= 2 of images for each of its classes (the unique-class sampler). Written here because PML has no
hyperbolic distance.
"""
from __future__ import annotations

import torch
from torch import nn

from umlkit.losses._checks import check_inputs

__all__ = ["HypLoss", "to_poincare", "poincare_distance_matrix"]


def to_poincare(x: torch.Tensor, c: float = 0.1, clip_r: float | None = 2.3) -> torch.Tensor:
    """Clip feature norms to ``clip_r``, apply expmap_0, and keep points inside the ball."""
    norm = x.norm(dim=-1, keepdim=True).clamp_min(1e-15)
    if clip_r is not None:
        x = x * torch.clamp(clip_r / norm, max=1.0)
        norm = x.norm(dim=-1, keepdim=True).clamp_min(1e-15)
    sqrt_c = c**0.5
    y = torch.tanh(sqrt_c * norm) * x / (sqrt_c * norm)
    max_norm = (1 - 1e-3) / sqrt_c
    ynorm = y.norm(dim=-1, keepdim=True).clamp_min(1e-15)
    return torch.where(ynorm > max_norm, y / ynorm * max_norm, y)


def poincare_distance_matrix(x: torch.Tensor, y: torch.Tensor, c: float = 0.1) -> torch.Tensor:
    """d_c(x_i, y_j) = 2/sqrt(c) artanh(sqrt(c) ||(-x_i) (+)_c y_j||) for all pairs, with the Möbius sum formed as
    a vector per pair (n x m x d) and its denominator offset by 1e-5, as ``hyptorch.pmath.dist_matrix`` (the
    official code of Hyp-ViT and PUMA): the expanded form of the norm loses the small distances to cancellation."""
    xy = -x @ y.T  # <-x, y>
    x2 = (x * x).sum(-1, keepdim=True)
    y2 = (y * y).sum(-1, keepdim=True).T
    num = (1 + 2 * c * xy + c * y2)[:, :, None] * (-x)[:, None, :] + (1 - c * x2)[:, :, None] * y[None, :, :]
    denom = 1 + 2 * c * xy + c * c * x2 * y2
    norm = (num / (denom[:, :, None] + 1e-5)).norm(dim=-1)
    sqrt_c = c**0.5
    return 2 / sqrt_c * torch.atanh((sqrt_c * norm).clamp(-1 + 1e-5, 1 - 1e-5))


class HypLoss(nn.Module):
    inputs = ("embeddings", "labels")  # what the training engine passes (as keywords)

    def __init__(self, c: float = 0.1, clip_r: float | None = 2.3, tau: float = 0.2, divisor: str = "ordered_pairs"):
        super().__init__()
        if divisor not in ("ordered_pairs", "all_pairs"):
            raise ValueError(f"divisor must be 'ordered_pairs' (k(k-1), Hyp-ViT) or 'all_pairs' (k^2, PUMA), got "
                             f"{divisor!r}")
        self.c, self.clip_r, self.tau, self.divisor = c, clip_r, tau, divisor

    def _pair_loss(self, z0: torch.Tensor, z1: torch.Tensor) -> torch.Tensor:
        n = z0.shape[0]
        eye = torch.eye(n, dtype=z0.dtype, device=z0.device) * 1e9
        logits01 = -poincare_distance_matrix(z0, z1, self.c) / self.tau
        logits00 = -poincare_distance_matrix(z0, z0, self.c) / self.tau - eye
        logits = torch.cat([logits01, logits00], dim=1)
        logits = logits - logits.max(dim=1, keepdim=True).values.detach()
        return nn.functional.cross_entropy(logits, torch.arange(n, device=z0.device))

    def forward(self, embeddings, labels, indices_tuple=None, ref_emb=None, ref_labels=None) -> torch.Tensor:
        check_inputs("HypLoss", embeddings, labels)
        x = embeddings if embeddings.dtype == torch.float64 else embeddings.float()
        order = torch.argsort(labels, stable=True)
        classes, counts = torch.unique(labels, return_counts=True)
        k = int(counts[0])
        if k < 2 or not bool((counts == k).all()):
            raise ValueError(f"HypLoss needs the same number (>= 2) of images for every class in the batch, got "
                             f"counts {counts.tolist()}; use the unique-class sampler")
        z = to_poincare(x[order], self.c, self.clip_r).view(classes.numel(), k, -1)
        total = sum(self._pair_loss(z[:, i], z[:, j]) for i in range(k) for j in range(k) if i != j)
        return total / (k * (k - 1) if self.divisor == "ordered_pairs" else k * k)
