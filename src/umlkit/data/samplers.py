"""Batch samplers: random, m-per-class, unique-class, class-random (VPTSP/Roth) and source-balanced.

All are batch samplers (``DataLoader(batch_sampler=...)``) whose batches depend only on ``(seed, epoch)``:
``set_epoch(e)`` makes epoch e reproducible, which is what exact resumption needs, and ``rank``/``world_size``
give each DDP process its contiguous slice of every global batch (class groups stay together when the per-rank
batch is a multiple of the samples per class). Written here rather than using PML's ``MPerClassSampler`` because
that sampler draws from the global RNG state (neither resumable by epoch nor shardable per rank); the batch
*composition* is PML's (B/m classes, m images each), checked in the tests.

* ``random``: a permutation, cut into batches (PUMA with CurricularFace: plain shuffled batches).
* ``m_per_class``: each batch B/m distinct classes drawn uniformly, m images each without replacement (with
  replacement for classes smaller than m) - PML's MPerClassSampler composition.
* ``unique_class``: Hyp-ViT's sampler: an epoch visits the classes in a random order, each contributing m
  images, so every class appears once per epoch and at most once per batch.
* ``class_random``: Roth/VPTSP ``class_random``: B/k classes without replacement, k images each drawn *with*
  replacement, grouped consecutively (VPTSP's proxy accumulator needs the grouping).
* ``source_balanced``: equal numbers of images from each source per batch (the unified union otherwise feeds
  SOP-/In-shop-sized sources most).
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

__all__ = ["SAMPLERS", "BaseBatchSampler", "RandomBatchSampler", "MPerClassSampler", "UniqueClassSampler",
           "ClassRandomSampler", "SourceBalancedSampler", "build_sampler", "few_shot_indices"]


def group_by_class(labels) -> tuple[np.ndarray, list[np.ndarray]]:
    """(sorted classes, item indices of each class in dataset order) in O(n log n)."""
    labels = np.asarray(labels)
    order = np.argsort(labels, kind="stable")
    classes, starts = np.unique(labels[order], return_index=True)
    return classes, np.split(order, starts[1:])


class BaseBatchSampler:
    def __init__(self, n: int, batch_size: int, seed: int = 0, rank: int = 0, world_size: int = 1):
        if batch_size <= 0 or batch_size % world_size:
            raise ValueError(f"batch_size ({batch_size}) must be a positive multiple of world_size ({world_size})")
        if n < batch_size:
            raise ValueError(f"the dataset has {n} items, fewer than one batch of {batch_size} (a small training "
                             f"set: check data.datasets, data.few_shot and data.val_fraction, whose held-out classes "
                             f"leave it)")
        self.n, self.batch_size, self.seed = n, batch_size, seed
        self.rank, self.world_size = rank, world_size
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "seed": self.seed}

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.seed = int(state["epoch"]), int(state["seed"])

    def _rng(self) -> np.random.Generator:
        return np.random.default_rng([self.seed, self.epoch])

    def global_batches(self) -> list[np.ndarray]:
        raise NotImplementedError

    def __iter__(self) -> Iterator[list[int]]:
        per = self.batch_size // self.world_size
        for b in self.global_batches():
            yield b[self.rank * per:(self.rank + 1) * per].tolist()

    def __len__(self) -> int:
        return self.n // self.batch_size


class RandomBatchSampler(BaseBatchSampler):
    def global_batches(self):
        perm = self._rng().permutation(self.n)
        return [perm[i * self.batch_size:(i + 1) * self.batch_size] for i in range(len(self))]


class _ClassSampler(BaseBatchSampler):
    def __init__(self, labels: Sequence[int], batch_size: int, m: int = 4, seed: int = 0, rank: int = 0,
                 world_size: int = 1):
        labels = np.asarray(labels)
        super().__init__(len(labels), batch_size, seed, rank, world_size)
        if m <= 0 or batch_size % m:
            raise ValueError(f"batch_size ({batch_size}) must be a multiple of the samples per class m ({m})")
        self.m = m
        self.classes, self.members = group_by_class(labels)
        if len(self.classes) < batch_size // m:
            raise ValueError(f"a batch needs {batch_size // m} classes but the data has only {len(self.classes)}")

    def _take(self, rng, c: int, replace: bool | None = None) -> np.ndarray:
        idx = self.members[c]
        rep = len(idx) < self.m if replace is None else replace
        return rng.choice(idx, self.m, replace=rep)


class MPerClassSampler(_ClassSampler):
    def global_batches(self):
        rng = self._rng()
        k = self.batch_size // self.m
        return [np.concatenate([self._take(rng, c) for c in rng.choice(len(self.classes), k, replace=False)])
                for _ in range(len(self))]


class ClassRandomSampler(_ClassSampler):
    def global_batches(self):
        rng = self._rng()
        k = self.batch_size // self.m
        return [np.concatenate([self._take(rng, c, replace=True)
                                for c in rng.choice(len(self.classes), k, replace=False)])
                for _ in range(len(self))]


class UniqueClassSampler(_ClassSampler):
    def __len__(self) -> int:
        return len(self.classes) * self.m // self.batch_size

    def global_batches(self):
        rng = self._rng()
        flat = np.concatenate([self._take(rng, c) for c in rng.permutation(len(self.classes))])
        return [flat[i * self.batch_size:(i + 1) * self.batch_size] for i in range(len(self))]


class SourceBalancedSampler(BaseBatchSampler):
    def __init__(self, sources: Sequence[int], batch_size: int, seed: int = 0, rank: int = 0, world_size: int = 1):
        sources = np.asarray(sources)
        super().__init__(len(sources), batch_size, seed, rank, world_size)
        self.source_ids, self.members = group_by_class(sources)
        if batch_size % len(self.source_ids):
            raise ValueError(f"batch_size ({batch_size}) must be a multiple of the number of sources "
                             f"({len(self.source_ids)})")

    def global_batches(self):
        rng = self._rng()
        per = self.batch_size // len(self.source_ids)
        streams = []
        for idx in self.members:  # cycle through fresh permutations of each source
            reps = int(np.ceil(len(self) * per / len(idx)))
            streams.append(np.concatenate([rng.permutation(idx) for _ in range(reps)]))
        return [rng.permutation(np.concatenate([s[i * per:(i + 1) * per] for s in streams])) for i in range(len(self))]


SAMPLERS = ("random", "m_per_class", "unique_class", "class_random", "source_balanced")


def build_sampler(name: str, labels, batch_size: int, m: int = 4, sources=None, seed: int = 0, rank: int = 0,
                  world_size: int = 1) -> BaseBatchSampler:
    """A batch sampler by name (see the module docstring)."""
    for key, value, low in (("batch_size", batch_size, 1), ("m", m, 1), ("seed", seed, 0),
                            ("world_size", world_size, 1), ("rank", rank, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"sampler {name!r}: {key} must be an integer >= {low}, got {value!r}")
    if rank >= world_size:
        raise ValueError(f"sampler {name!r}: rank {rank} is not one of the world_size={world_size} processes "
                         f"(0..{world_size - 1})")
    if name == "random":
        return RandomBatchSampler(len(labels), batch_size, seed, rank, world_size)
    if name == "m_per_class":
        return MPerClassSampler(labels, batch_size, m, seed, rank, world_size)
    if name == "unique_class":
        return UniqueClassSampler(labels, batch_size, m, seed, rank, world_size)
    if name == "class_random":
        return ClassRandomSampler(labels, batch_size, m, seed, rank, world_size)
    if name == "source_balanced":
        if sources is None:
            raise ValueError("the source_balanced sampler needs sources= (one source id per item)")
        return SourceBalancedSampler(sources, batch_size, seed, rank, world_size)
    raise ValueError(f"unknown sampler {name!r}; choose one of {SAMPLERS}")


def few_shot_indices(labels: Sequence[int], shots: int, seed: int = 0) -> np.ndarray:
    """PUMA's few-shot training subsets: ``shots`` images per class (1, 2, 4, 8, 16 in the paper), drawn without
    replacement, or with replacement for a class with fewer images (as the official ``random.choices``).
    Deterministic in ``(seed, shots)``; classes in sorted order."""
    if isinstance(shots, bool) or not isinstance(shots, (int, np.integer)) or shots <= 0:
        raise ValueError(f"shots must be a positive integer, got {shots!r}")
    rng = np.random.default_rng([seed, shots])
    return np.concatenate([rng.choice(idx, shots, replace=len(idx) < shots) for idx in group_by_class(labels)[1]])
