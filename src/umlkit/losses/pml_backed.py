"""Losses pytorch-metric-learning already has, configured with each paper's settings (never rewritten here).

:class:`PMLLoss` wraps a PML loss (+ optional miner) with umlkit's input checks, computes in fp32 (so fp16/bf16
embeddings from autocast stay finite) and mines when no ``indices_tuple`` is given. Learnable proxies stay
parameters of the wrapped PML loss, so ``loss.parameters()`` hands them to the optimizer (give them their own
learning rate, e.g. PUMA's x1e4 or Proxy-Anchor's x100).
"""
from __future__ import annotations

import torch
from torch import nn

from umlkit.losses._checks import check_inputs

__all__ = ["PMLLoss"]


class PMLLoss(nn.Module):
    inputs = ("embeddings", "labels")  # what the training engine passes (as keywords)

    def __init__(self, name: str, loss: nn.Module, miner: nn.Module | None = None, num_classes: int | None = None,
                 embedding_size: int | None = None):
        super().__init__()
        self.name, self.loss, self.miner = name, loss, miner
        self.num_classes, self.embedding_size = num_classes, embedding_size

    def forward(self, embeddings, labels, indices_tuple=None, ref_emb=None, ref_labels=None) -> torch.Tensor:
        check_inputs(self.name, embeddings, labels, self.num_classes, self.embedding_size)
        x = embeddings.float()
        ref = ref_emb.float() if ref_emb is not None else None
        if indices_tuple is None and self.miner is not None:
            indices_tuple = self.miner(x, labels, ref, ref_labels)
        return self.loss(x, labels, indices_tuple, ref, ref_labels)

    def extra_repr(self) -> str:
        return f"name={self.name!r}"
