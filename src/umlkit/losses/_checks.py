"""Input checks shared by every umlkit loss: clear errors instead of silent NaN."""
from __future__ import annotations

import torch

__all__ = ["check_inputs", "NonFiniteEmbeddingsError"]


class NonFiniteEmbeddingsError(ValueError):
    """Embeddings with NaN or inf reached a loss (the training engine reports it as a diverged step)."""


def check_inputs(name: str, embeddings: torch.Tensor, labels: torch.Tensor | None, num_classes: int | None = None,
                 embedding_size: int | None = None) -> None:
    if not isinstance(embeddings, torch.Tensor) or embeddings.ndim != 2:
        shape = tuple(embeddings.shape) if isinstance(embeddings, torch.Tensor) else type(embeddings).__name__
        raise ValueError(f"{name}: embeddings must be a 2-D tensor (batch, dim), got {shape}")
    if embedding_size is not None and embeddings.shape[1] != embedding_size:
        raise ValueError(f"{name}: embeddings have dimension {embeddings.shape[1]}, the loss was built for "
                         f"embedding_size={embedding_size}")
    if not bool(torch.isfinite(embeddings).all()):
        raise NonFiniteEmbeddingsError(f"{name}: embeddings contain NaN or inf (a diverged step or fp16 overflow "
                                       "upstream)")
    if embeddings.shape[0] == 0:
        raise ValueError(f"{name}: the batch is empty (0 embeddings)")
    if labels is None:
        return
    if not isinstance(labels, torch.Tensor):
        raise TypeError(f"{name}: labels must be a torch.Tensor of int64 class ids, got {type(labels).__name__}")
    if labels.ndim != 1 or labels.shape[0] != embeddings.shape[0]:
        raise ValueError(f"{name}: labels must have shape ({embeddings.shape[0]},), got {tuple(labels.shape)}")
    if labels.dtype != torch.long:
        # torch indexes with uint8/bool tensors as masks and several losses need int64 (one_hot, cross-entropy)
        raise TypeError(f"{name}: labels must be int64 class ids (torch.long), got {labels.dtype}"
                        + ("" if labels.is_floating_point() or labels.dtype == torch.bool else
                           "; cast them with labels.long()"))
    if num_classes is not None and labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= num_classes):
        raise ValueError(f"{name}: labels must lie in [0, {num_classes}), "
                         f"got [{int(labels.min())}, {int(labels.max())}]")
