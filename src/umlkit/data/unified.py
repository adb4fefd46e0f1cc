"""The union of several datasets with disjoint global labels and a per-item source id (PUMA's ``All_dataset``).

Labels are offset cumulatively in the order given, so no two sources share a label; ``sources`` (one id per item)
is never seen by the model but drives per-source evaluation and the source-balanced sampler. For evaluation the
In-shop test split keeps its query/gallery roles in ``is_query`` / ``is_gallery``; every other source is both.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from umlkit.data.datasets import ImageListDataset, load_dataset

__all__ = ["UnifiedDataset", "load_unified", "PUMA_ORDER"]

PUMA_ORDER = ("cub", "cars", "sop", "inshop", "nabirds", "dogs", "flowers", "aircraft")


class UnifiedDataset(torch.utils.data.Dataset):
    def __init__(self, datasets: Sequence[ImageListDataset], transform: Callable | None = None):
        if not datasets:
            raise ValueError("UnifiedDataset needs at least one dataset")
        self.datasets = list(datasets)
        self.source_names = [d.name for d in self.datasets]
        if len(set(self.source_names)) != len(self.source_names):
            raise ValueError(f"duplicate sources {self.source_names}")
        self.transform = transform
        offsets = np.cumsum([0] + [d.num_classes for d in self.datasets])
        self.label_offsets = offsets[:-1]
        self.num_classes = int(offsets[-1])
        self.labels = np.concatenate([d.labels + o for d, o in zip(self.datasets, self.label_offsets)])
        self.sources = np.concatenate([np.full(len(d), i) for i, d in enumerate(self.datasets)])
        self._index = [(i, j) for i, d in enumerate(self.datasets) for j in range(len(d))]
        self.is_query = np.concatenate([getattr(d, "is_query", np.ones(len(d), bool)) for d in self.datasets])
        self.is_gallery = np.concatenate([~d.is_query if hasattr(d, "is_query") else np.ones(len(d), bool)
                                          for d in self.datasets])

    def __len__(self) -> int:
        return len(self._index)

    def __getitem__(self, k: int):
        i, j = self._index[k]
        d = self.datasets[i]
        tf = self.transform if self.transform is not None else d.transform
        return d.transformed(j, tf), int(self.labels[k])

    def class_names(self) -> list[str]:
        return [f"{d.name}:{c}" for d in self.datasets for c in d.class_names]

    def class_keys(self) -> list[str]:
        """``"<source>#<class key>"`` of every class in label order: unique even where names repeat (SOP's
        classes are named by their super-category)."""
        return [f"{d.name}#{k}" for d in self.datasets for k in d.class_keys]

    def sample_keys(self) -> list[str]:
        """``"<source>#<folder>/<file>"`` of every image in item order (the image file and its parent folder: unique
        in every supported layout, checked): how per-image side information (captions, per-sample pseudolabels)
        names its rows."""
        keys = [k for d in self.datasets for k in d.sample_keys]
        if len(set(keys)) != len(keys):
            seen: set = set()
            dup = next(k for k in keys if k in seen or seen.add(k))
            raise ValueError(f"two images share the key {dup!r} (folder/file); per-image side information cannot "
                             f"name them apart")
        return keys

    def __repr__(self) -> str:
        parts = ", ".join(f"{d.name} {len(d)}" for d in self.datasets)
        return f"UnifiedDataset({len(self)} images, {self.num_classes} classes: {parts})"


def load_unified(root: str | Path, split: str, names: Sequence[str] = PUMA_ORDER, transform: Callable | None = None,
                 **kwargs) -> UnifiedDataset:
    """The union of ``names`` for ``split`` (``train`` or ``test``; In-shop's test = query + gallery)."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    return UnifiedDataset([load_dataset(n, root, split, **kwargs) for n in names], transform)
