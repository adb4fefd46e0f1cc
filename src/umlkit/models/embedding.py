"""The embedding model every method produces: backbone feature -> head -> L2-normalised embedding.

Heads:

* ``linear``: Linear(D -> E) with PyTorch's default init (PUMA: the orthogonal ``_init_weights`` in the
  official file is never called, implementation_notes.md §1);
* ``mlp3``: Linear-BN-ReLU-Linear-BN-ReLU-Linear, hidden 2048 (PUMA Table 2's MLP-3, 5.3M on ViT-S/16);
* ``ln_linear``: LayerNorm(D) + Linear(D -> E), xavier-uniform weight, zero bias (VPTSP ``fcLN`` + head);
* ``identity``: the backbone feature itself (zero-shot).

Auxiliary heads (``aux_heads={name: (dim, kind)}``) sit beside the main head on the same backbone feature and
feed the multi-head objectives of ooDML: S2SD's high-dimensional target heads (``mlp2``: Linear(D, t)-ReLU-
Linear(t, t), as ooDML's ``criteria/s2sd.py``) and DiVA's shared / intra-class / self-supervised heads
(``linear``). ``forward_train`` returns them; ``forward`` (evaluation) returns the main embedding, or with
``eval_concat_aux=True`` (DiVA) the re-normalised concatenation of the main and every auxiliary embedding.
"""
from __future__ import annotations

import torch
from torch import nn

__all__ = ["EmbeddingModel", "build_head", "HEADS"]

HEADS = ("linear", "mlp3", "ln_linear", "identity", "mlp2")


def build_head(kind: str, in_dim: int, embed_dim: int, hidden: int = 2048) -> nn.Module:
    if kind == "linear":
        return nn.Linear(in_dim, embed_dim)
    if kind == "mlp3":
        return nn.Sequential(
            nn.Linear(in_dim, hidden), nn.BatchNorm1d(hidden), nn.ReLU(inplace=True),
            nn.Linear(hidden, hidden), nn.BatchNorm1d(hidden), nn.ReLU(inplace=True),
            nn.Linear(hidden, embed_dim),
        )
    if kind == "ln_linear":
        linear = nn.Linear(in_dim, embed_dim)
        nn.init.xavier_uniform_(linear.weight)
        nn.init.zeros_(linear.bias)
        return nn.Sequential(nn.LayerNorm(in_dim), linear)
    if kind == "identity":
        return nn.Identity()
    if kind == "mlp2":
        return nn.Sequential(nn.Linear(in_dim, embed_dim), nn.ReLU(inplace=True), nn.Linear(embed_dim, embed_dim))
    raise ValueError(f"unknown head {kind!r}; choose one of {HEADS}")


class EmbeddingModel(nn.Module):
    """``backbone`` (a :class:`~umlkit.models.peft_vit.PEFTViT` or a timm model) + ``head`` + L2 normalisation."""

    def __init__(self, backbone: nn.Module, head: nn.Module, method: str, backbone_name: str, embed_dim: int,
                 data_config: dict | None = None, aux_heads: dict[str, nn.Module] | None = None,
                 eval_concat_aux: bool = False):
        super().__init__()
        self.aux_heads = nn.ModuleDict(aux_heads or {})
        self.eval_concat_aux = eval_concat_aux
        self.backbone = backbone
        self.head = head
        self.method = method
        self.backbone_name = backbone_name
        self.embed_dim = embed_dim
        self.data_config = data_config or {}

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Backbone feature before the head (the "body" embedding of Hyp-ViT/ooDML evaluations)."""
        if hasattr(self.backbone, "forward_features") and hasattr(self.backbone, "vit"):
            return self.backbone.forward_features(x)
        return self.backbone(x)  # timm model with num_classes=0: pooled pre-logits

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feat = self.features(x)
        emb = nn.functional.normalize(self.head(feat), dim=-1)
        if self.eval_concat_aux and len(self.aux_heads):
            parts = [emb] + [nn.functional.normalize(h(feat), dim=-1) for h in self.aux_heads.values()]
            return nn.functional.normalize(torch.cat(parts, dim=-1), dim=-1)
        return emb

    def forward_train(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict:
        """Everything a loss may need: ``embeddings`` (B, E), ``features`` (backbone output) and ``aux``
        ({name: L2-normalised (B, dim)} of the auxiliary heads)."""
        feat = self.features(x)
        emb = nn.functional.normalize(self.head(feat), dim=-1)
        aux = {k: nn.functional.normalize(h(feat), dim=-1) for k, h in self.aux_heads.items()}
        return {"embeddings": emb, "features": feat, "aux": aux}

    def extra_loss(self) -> torch.Tensor | float:
        """Auxiliary loss of the method (PUMA's prompt orthogonality penalty), 0 when it has none."""
        pool = getattr(self.backbone, "prompt_pool", None)
        return pool.orthogonality_loss() if pool is not None and pool.pool_size > 1 else 0.0
