"""ArcFace (Deng et al., CVPR 2019, Eq. 3) as ooDML's official ``criteria/arcface.py`` (``Criterion``) trains it.

Logits s · cos(θ_j) for the classes j ≠ y and s · cos(θ_y + m) for the target, with the cosines between the
(already L2-normalised) embeddings and the normalised class map **clamped to [1e-10, 1 - 1e-10]**: negative cosines
count as 0, and no fallback keeps cos(θ + m) monotone beyond π - m (pytorch-metric-learning's ``ArcFaceLoss`` keeps
negative cosines and switches to cos θ - m sin m there, as PUMA's ``losses.ArcFaceLoss``). Defaults are ooDML's
``--loss_arcface_angular_margin 0.5`` (radians) and ``--loss_arcface_feature_scale 16``; the class map starts
uniform in ±1/√d as the official one. Written here because PML's ArcFace has neither the clamp nor the scale.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from umlkit.losses._checks import check_inputs

__all__ = ["RothArcFaceLoss"]


class RothArcFaceLoss(nn.Module):
    inputs = ("embeddings", "labels")  # what the training engine passes (as keywords)

    def __init__(self, num_classes: int, embedding_size: int, margin: float = 0.5, scale: float = 16.0):
        super().__init__()
        self.num_classes, self.embedding_size, self.margin, self.scale = num_classes, embedding_size, margin, scale
        bound = 1.0 / math.sqrt(embedding_size)
        self.class_map = nn.Parameter(torch.empty(num_classes, embedding_size).uniform_(-bound, bound))

    def forward(self, embeddings, labels, indices_tuple=None, ref_emb=None, ref_labels=None) -> torch.Tensor:
        check_inputs("RothArcFaceLoss", embeddings, labels, self.num_classes, self.embedding_size)
        w = nn.functional.normalize(self.class_map, dim=1)
        cos = (embeddings.float() @ w.T).clamp(min=1e-10, max=1 - 1e-10)
        target = cos.gather(1, labels[:, None])
        with_margin = torch.cos(torch.acos(target) + self.margin)
        logits = cos.scatter(1, labels[:, None], with_margin)
        return nn.functional.cross_entropy(self.scale * logits, labels)
