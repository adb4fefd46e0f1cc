"""Proxy-Anchor with proxies supplied per step, for VPTSP's semantic proxies (Ren et al., ICLR 2024).

Kim et al. (CVPR 2020), Eq. 4, with the proxies passed in (``loss(embeddings, labels, proxies)``):

  pos = sum_c log(1 + sum_{x in P_c} exp(-alpha (s(x, c) - delta)))
  neg = sum_c log(1 + sum_{x in N_c} exp( alpha (s(x, c) + delta)))

``normalisation="vptsp"`` (default; VPTSP's ``criteria/dml_proxy_peft.py``, implementation_notes.md §3) divides
*both* sums by the number of classes; ``"original"`` divides the positive sum by the number of classes that have
positives in the batch, as Kim et al. and PML's ``ProxyAnchorLoss`` do (tested equal). alpha = 32, delta = 0.1.
log(1 + sum exp) is computed as a logsumexp with a zero entry, so large alpha stays finite.
"""
from __future__ import annotations

import torch
from torch import nn

from umlkit.losses._checks import check_inputs

__all__ = ["ExternalProxyAnchorLoss"]


def _log1p_sum_exp(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per column: log(1 + sum over masked rows of exp(logits)), stable."""
    masked = logits.masked_fill(~mask, float("-inf"))
    zero = torch.zeros(1, logits.shape[1], dtype=logits.dtype, device=logits.device)
    return torch.logsumexp(torch.cat([zero, masked], dim=0), dim=0)


class ExternalProxyAnchorLoss(nn.Module):
    inputs = ("embeddings", "labels", "proxies")  # the proxies come from the model (VPTSP), not the loss

    def __init__(self, alpha: float = 32.0, delta: float = 0.1, normalisation: str = "vptsp"):
        super().__init__()
        if normalisation not in ("vptsp", "original"):
            raise ValueError(f"normalisation must be 'vptsp' or 'original', got {normalisation!r}")
        self.alpha, self.delta, self.normalisation = alpha, delta, normalisation

    def forward(self, embeddings, labels, proxies: torch.Tensor) -> torch.Tensor:
        if proxies is None or proxies.ndim != 2:
            raise ValueError("ExternalProxyAnchorLoss needs proxies of shape (n_classes, dim) as third argument")
        check_inputs("ExternalProxyAnchorLoss", embeddings, labels, proxies.shape[0], proxies.shape[1])
        dtype = torch.float64 if embeddings.dtype == torch.float64 else torch.float32
        x = nn.functional.normalize(embeddings.to(dtype), dim=1)
        p = nn.functional.normalize(proxies.to(dtype), dim=1)
        sim = x @ p.T  # (B, C)
        pos_mask = nn.functional.one_hot(labels, p.shape[0]).bool()
        pos = _log1p_sum_exp(-self.alpha * (sim - self.delta), pos_mask)
        neg = _log1p_sum_exp(self.alpha * (sim + self.delta), ~pos_mask)
        n_classes = p.shape[0]
        if self.normalisation == "vptsp":
            pos_term = pos.sum() / n_classes
        else:
            with_pos = pos_mask.any(dim=0)
            pos_term = pos[with_pos].sum() / with_pos.sum().clamp_min(1)
        return pos_term + neg.sum() / n_classes
