"""CurricularFace (Huang et al., CVPR 2020) with PUMA's per-class difficulty buffer.

Logits are cosines between L2-normalised embeddings and learnable proxies W (n_classes, d). For sample i with
label y and target cosine c = cos(theta_y):

* target logit: cos(theta_y + m) when c > cos(pi - m), else c - sin(pi - m) * m (ArcFace's "easy margin off");
* hard negatives (cos_j above the target logit, the fallback included) become cos_j * (t + cos_j);
* loss = cross-entropy over s * logits.

``t`` is updated under no_grad in training mode by EMA with momentum 0.99, *after* the logits used it
(``t_update="after"``: PUMA's ``CurricularFace.forward`` calls ``update_sim`` last) or *before* (``"before"``: the
original CurricularFace code updates t from the batch, then uses it):
``t_mode="global"`` (the original: one scalar t <- 0.01 * mean target cosine + 0.99 t) or ``t_mode="per_class"``
(PUMA's ``losses.py``, implementation_notes.md §1: a buffer of n_classes entries, each moved toward the batch-mean
target cosine of its class; a hard negative of sample i uses t of i's class). Defaults m = 0.3, s = 32 (PUMA's
``--mrg``/``--alpha``). Proxies: ``randn`` then ``kaiming_uniform_(mode="fan_out")`` as PUMA. PML has no
CurricularFace, hence this file.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from umlkit.losses._checks import check_inputs

__all__ = ["CurricularFaceLoss"]


class CurricularFaceLoss(nn.Module):
    inputs = ("embeddings", "labels")  # what the training engine passes (as keywords)

    def __init__(self, num_classes: int, embedding_size: int, margin: float = 0.3, scale: float = 32.0,
                 t_mode: str = "per_class", momentum: float = 0.99, t_update: str = "after"):
        super().__init__()
        if t_mode not in ("per_class", "global"):
            raise ValueError(f"t_mode must be 'per_class' or 'global', got {t_mode!r}")
        if t_update not in ("after", "before"):
            raise ValueError(f"t_update must be 'after' (PUMA) or 'before' (the original), got {t_update!r}")
        self.t_update = t_update
        self.num_classes, self.embedding_size = num_classes, embedding_size
        self.margin, self.scale, self.t_mode, self.momentum = margin, scale, t_mode, momentum
        self.proxies = nn.Parameter(torch.randn(num_classes, embedding_size))
        nn.init.kaiming_uniform_(self.proxies, mode="fan_out")
        self.register_buffer("t", torch.zeros(num_classes if t_mode == "per_class" else 1))
        self.cos_m, self.sin_m = math.cos(margin), math.sin(margin)
        self.threshold = math.cos(math.pi - margin)
        self.mm = math.sin(math.pi - margin) * margin

    def forward(self, embeddings, labels, indices_tuple=None, ref_emb=None, ref_labels=None) -> torch.Tensor:
        check_inputs("CurricularFaceLoss", embeddings, labels, self.num_classes, self.embedding_size)
        x = nn.functional.normalize(embeddings.to(self.proxies.dtype), dim=1)
        w = nn.functional.normalize(self.proxies, dim=1)
        cos = (x @ w.T).clamp(-1, 1)
        target = cos.gather(1, labels[:, None]).squeeze(1)
        sin_t = torch.sqrt((1.0 - target * target).clamp(min=1e-12))
        cos_tm = target * self.cos_m - sin_t * self.sin_m
        final_target = torch.where(target > self.threshold, cos_tm, target - self.mm)
        if self.training and self.t_update == "before":
            self._update_t(labels, target)
        t = self.t[labels] if self.t_mode == "per_class" else self.t.expand(labels.shape[0])
        t = t.to(cos.dtype)[:, None]
        hard = cos > final_target[:, None]
        logits = torch.where(hard, cos * (t + cos), cos)
        logits = logits.scatter(1, labels[:, None], final_target[:, None])
        loss = nn.functional.cross_entropy(self.scale * logits, labels)
        if self.training and self.t_update == "after":
            self._update_t(labels, target)
        return loss

    @torch.no_grad()
    def _update_t(self, labels: torch.Tensor, target: torch.Tensor) -> None:
        target = target.detach()
        if self.t_mode == "global":
            self.t.mul_(self.momentum).add_((1 - self.momentum) * target.mean())
            return
        classes, inverse = torch.unique(labels, return_inverse=True)
        sums = torch.zeros(classes.numel(), dtype=target.dtype, device=target.device)
        sums.index_add_(0, inverse, target)
        means = sums / torch.bincount(inverse).to(target.dtype)
        self.t[classes] = self.momentum * self.t[classes] + (1 - self.momentum) * means.to(self.t.dtype)
