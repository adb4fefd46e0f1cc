"""PUMA's conditional prompt pool (Kim et al., WACV 2025, Sec. 4.2, Eq. 5-6), as the official
``models/prompt.py: PromptPool`` computes it (implementation_notes.md §1):

* query q = (mean + max over patch embeddings) / 2, taken **before** the CLS token and position embeddings are
  added, and **detached** (computed by the caller, :mod:`umlkit.models.peft_vit`);
* M prompts P (M, L, D), keys K (M, D) and attention vectors A (M, D), all orthogonally initialised;
* weight of prompt m: cos(q * softmax(A_m) over the D features, K_m) (L2-normalised both sides); the official
  code then passes the weights through a ``BatchNorm1d(affine=False)`` frozen in eval mode, i.e. a division by
  sqrt(1 + 1e-5), reproduced here as that constant;
* prompt = sum_m w_m P_m: raw cosine weights, **no softmax and no top-k**.

Official quirk, kept by default: ``tensor_prompt`` initialises P[0] orthogonally and copies it to all M prompts,
so every prompt starts identical (``identical_init=True``); ``identical_init=False`` initialises each prompt on
its own. M = 1 with a constant weight is PUMA Table 3's "single prompt". The orthogonality penalty of the
official code (1e-6 * mean((T T^T - I)^2) for T in {K, A, P flattened}) is :meth:`PromptPool.orthogonality_loss`.
"""
from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["PromptPool"]

_FROZEN_BN = 1.0 / math.sqrt(1.0 + 1e-5)


class PromptPool(nn.Module):
    def __init__(self, dim: int, pool_size: int = 20, length: int = 8, identical_init: bool = True):
        super().__init__()
        self.pool_size, self.length, self.dim = pool_size, length, dim
        self.prompts = nn.Parameter(torch.empty(pool_size, length, dim))
        self.keys = nn.Parameter(torch.empty(pool_size, dim))
        self.attention = nn.Parameter(torch.empty(pool_size, dim))
        if identical_init:
            first = torch.empty(length, dim)
            nn.init.orthogonal_(first)
            with torch.no_grad():
                self.prompts.copy_(first.expand(pool_size, -1, -1))
        else:
            for m in range(pool_size):
                nn.init.orthogonal_(self.prompts.data[m])
        nn.init.orthogonal_(self.keys)
        nn.init.orthogonal_(self.attention)

    def weights(self, query: torch.Tensor) -> torch.Tensor:
        """(B, M) cosine weights of each prompt for each query (B, D)."""
        if self.pool_size == 1:
            return torch.ones(query.shape[0], 1, dtype=query.dtype, device=query.device)
        attended = query[:, None, :] * torch.softmax(self.attention, dim=-1)[None]  # (B, M, D)
        cos = torch.nn.functional.cosine_similarity(attended, self.keys[None], dim=-1, eps=1e-12)
        return cos * _FROZEN_BN

    def forward(self, query: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns (prompt tokens (B, L, D), weights (B, M))."""
        w = self.weights(query)
        prompt = torch.einsum("bm,mld->bld", w.to(self.prompts.dtype), self.prompts)
        return prompt, w

    def orthogonality_loss(self, weight: float = 1e-6) -> torch.Tensor:
        """PUMA's auxiliary loss: weight * sum over T in {K, A, P} of mean((T T^T - I)^2)."""
        total = 0.0
        for t in (self.keys, self.attention, self.prompts.reshape(self.pool_size, -1)):
            gram = t @ t.T
            total = total + ((gram - torch.eye(self.pool_size, device=t.device, dtype=t.dtype)) ** 2).mean()
        return weight * total
