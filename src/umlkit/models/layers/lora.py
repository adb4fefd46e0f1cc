"""LoRA (Hu et al., ICLR 2022) on the query and value projections of a timm ViT's fused ``qkv`` Linear.

W_q x + (alpha / r) B_q A_q x and likewise for v; A Kaiming-uniform, B zero, so training starts at the
pretrained model. On ViT-S/16 rank 128 on q and v of all 12 blocks gives 2.36M parameters, which PUMA's
Table 2 reports as "scaled to the same parameters" (2.4M with the 128-d head). Written here because peft's
LoRA targets separate q/v Linears, while timm fuses them into one ``qkv`` layer.
"""
from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["LoRAQKV"]


class LoRAQKV(nn.Module):
    """Wraps a frozen fused qkv Linear (D -> 3D) and adds low-rank updates to q and v."""

    def __init__(self, qkv: nn.Linear, rank: int = 128, alpha: float | None = None):
        super().__init__()
        dim = qkv.in_features
        if qkv.out_features != 3 * dim:
            raise ValueError(f"expected a fused qkv Linear {dim}->{3 * dim}, got {dim}->{qkv.out_features}")
        self.qkv = qkv
        self.dim, self.rank = dim, rank
        self.scaling = (alpha if alpha is not None else rank) / rank
        self.a_q = nn.Parameter(torch.empty(rank, dim))
        self.b_q = nn.Parameter(torch.zeros(dim, rank))
        self.a_v = nn.Parameter(torch.empty(rank, dim))
        self.b_v = nn.Parameter(torch.zeros(dim, rank))
        for p in (self.a_q, self.b_q, self.a_v, self.b_v):
            p._umlkit_new = True  # the training engine's "new module" parameter group
        nn.init.kaiming_uniform_(self.a_q, a=math.sqrt(5))
        nn.init.kaiming_uniform_(self.a_v, a=math.sqrt(5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.qkv(x)
        dq = (x @ self.a_q.T) @ self.b_q.T * self.scaling
        dv = (x @ self.a_v.T) @ self.b_v.T * self.scaling
        zeros = torch.zeros_like(dq)
        return out + torch.cat([dq, zeros, dv], dim=-1)
