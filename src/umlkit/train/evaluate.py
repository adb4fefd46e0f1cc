"""Embedding extraction and evaluation of a model on a (unified) test set with umlkit.metrics."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from umlkit.data.unified import UnifiedDataset
from umlkit.metrics import unified_evaluation

__all__ = ["extract_embeddings", "evaluate_model"]


@torch.no_grad()
def extract_embeddings(model: torch.nn.Module, dataset, batch_size: int = 256, device: str | torch.device = "cpu",
                       num_workers: int = 0, progress: bool = False, autocast_dtype: torch.dtype | None = None,
                       desc: str = "embed") -> tuple[torch.Tensor, np.ndarray]:
    """(embeddings (n, d) float32 on the CPU, labels (n,)) in dataset order, model in eval mode."""
    was_training = model.training
    model.eval()
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=False, num_workers=num_workers)
    if progress:
        from umlkit._progress import tqdm
        loader = tqdm(loader, desc=desc, unit="batch", leave=False)
    device = torch.device(device)
    out, labels = [], []
    for x, y in loader:
        x = x.to(device, non_blocking=True)
        if autocast_dtype is not None:
            with torch.autocast(device.type, dtype=autocast_dtype):
                e = model(x)
        else:
            e = model(x)
        out.append(e.float().cpu())
        labels.append(y.numpy())
    model.train(was_training)
    return torch.cat(out), np.concatenate(labels)


def evaluate_model(model: torch.nn.Module, dataset: UnifiedDataset, metrics: Sequence[str] = ("R@1",),
                   batch_size: int = 256, device: str | torch.device = "cpu", progress: bool = False,
                   autocast_dtype: torch.dtype | None = None, num_workers: int = 0) -> pd.DataFrame:
    """Per-source, Unified and Harmonic scores (percent) of ``model`` on a :class:`UnifiedDataset` test split."""
    emb, labels = extract_embeddings(model, dataset, batch_size, device, num_workers, progress, autocast_dtype)
    return unified_evaluation(emb, labels, dataset.sources, is_query=dataset.is_query, is_gallery=dataset.is_gallery,
                              metrics=metrics, source_names=dataset.source_names)
