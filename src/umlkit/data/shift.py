"""ooDML's splits of increasing distribution shift: class swapping, then class removal, scored by class-mean FID.

Milbich, Roth et al., "Characterizing generalization under out-of-distribution shifts in deep metric learning"
(NeurIPS 2021), Sec. 3, as the official code builds them (``split_helpers.split_maker`` and
``split_maker_with_class_removal``; implementation notes of this project, ooDML section):

* every class is one mean feature of a frozen, pretrained, not metric-trained backbone; a split's difficulty is the
  Fréchet distance between the set of train class means and the set of test class means
  (:func:`umlkit.metrics.class_mean_frechet_distance`);
* **swapping**: each iteration records the current split, ranks the train classes by d(c, mu_test) - d(c, mu_train)
  (most test-like first) and the test classes by the mirror score, once, then ``swaps_per_iter`` times exchanges
  the first train and the first test candidate not among the classes of the last ``history`` swaps (official: 2
  swaps per iteration, history 5, 25 iterations; ``inverse=True`` takes the other end of the ranking and makes
  splits easier);
* **removal** starts from the last swap split (the official code's last state, not necessarily its hardest) and
  proposes swaps the same way, 2 per iteration; when a swap would not lower the FID (new >= old) it is undone and
  both proposed classes are removed from the split, as the official code is written (otherwise the swap stays).
  Fewer classes remain as the iterations go on. The official ids count swaps (R22, R48, ...); here splits are
  numbered by iteration.

The published full-profile splits are loaded from the official pickles instead (the authors say the script
reproduces them "very close" to, not exactly); this module generates UML-Mini's. Written by hand: no library
builds FID-ranked class splits.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from umlkit.metrics.distribution import frechet_distance

__all__ = ["Split", "swap_progression", "removal_progression", "split_fid"]


@dataclass
class Split:
    """One split: the class keys on each side, its class-mean FID and how it was made (``swap`` / ``removal``
    and the iteration)."""
    train: list
    test: list
    fid: float
    kind: str = "swap"
    iteration: int = 0
    meta: dict = field(default_factory=dict)


def split_fid(means: dict, train, test) -> float:
    """Class-mean FID of a split, ``means`` mapping class key -> mean feature."""
    return frechet_distance(np.stack([means[c] for c in train]), np.stack([means[c] for c in test]))


def _candidates(means: dict, side: list, mu_own: np.ndarray, mu_other: np.ndarray, inverse: bool) -> list:
    """``side``'s classes ordered by d(c, mu_other) - d(c, mu_own): the most other-like first (last if inverse)."""
    x = np.stack([means[c] for c in side])
    score = np.linalg.norm(x - mu_other, axis=1) - np.linalg.norm(x - mu_own, axis=1)
    order = np.argsort(score, kind="stable")
    return [side[i] for i in (order[::-1] if inverse else order)]


def _rankings(means: dict, train: list, test: list, inverse: bool) -> tuple[list, list]:
    """The candidate orders of one iteration (computed once, as the official code does)."""
    mu_tr = np.mean([means[c] for c in train], axis=0)
    mu_te = np.mean([means[c] for c in test], axis=0)
    return _candidates(means, train, mu_tr, mu_te, inverse), _candidates(means, test, mu_te, mu_tr, inverse)


def _pick(ranking: tuple[list, list], train: list, test: list, recent: list):
    """The first train and test candidates still on their side and not recently swapped."""
    a = next((c for c in ranking[0] if c in train and c not in recent), None)
    b = next((c for c in ranking[1] if c in test and c not in recent), None)
    return a, b


def swap_progression(means: dict, train, test, iterations: int = 25, swaps_per_iter: int = 2, history: int = 5,
                     inverse: bool = False) -> list[Split]:
    """The recorded splits of ooDML's swapping procedure, the start split first (``iterations`` + 1 splits)."""
    train, test = list(train), list(test)
    if len(train) < 2 or len(test) < 2:
        raise ValueError(f"a split needs at least 2 classes per side, got {len(train)} train / {len(test)} test")
    missing = [c for c in train + test if c not in means]
    if missing:
        raise ValueError(f"no class-mean feature for class(es) {missing[:5]}")
    recent: list = []
    out = [Split(list(train), list(test), split_fid(means, train, test), "swap", 0)]
    for it in range(1, iterations + 1):
        ranking = _rankings(means, train, test, inverse)
        for _ in range(swaps_per_iter):
            a, b = _pick(ranking, train, test, recent)
            if a is None or b is None:
                break
            train[train.index(a)], test[test.index(b)] = b, a
            recent = (recent + [a, b])[-2 * history:]
        out.append(Split(list(train), list(test), split_fid(means, train, test), "swap", it))
    return out


def removal_progression(means: dict, start: Split, iterations: int = 35, swaps_per_iter: int = 2,
                        history: int = 5, min_classes: int = 2) -> list[Split]:
    """ooDML's class-removal splits from ``start`` (the last swap split), one split per iteration."""
    train, test = list(start.train), list(start.test)
    fid = split_fid(means, train, test)
    recent: list = []
    out = []
    for it in range(1, iterations + 1):
        if min(len(train), len(test)) <= min_classes:
            break
        ranking = _rankings(means, train, test, inverse=False)
        for _ in range(swaps_per_iter):
            if min(len(train), len(test)) <= min_classes:
                break
            a, b = _pick(ranking, train, test, recent)
            if a is None or b is None:
                break
            i, j = train.index(a), test.index(b)
            train[i], test[j] = b, a
            new = split_fid(means, train, test)
            if new >= fid:  # as the official code is written: undo, then drop both proposed classes
                train[i], test[j] = a, b
                train.remove(a)
                test.remove(b)
                fid = split_fid(means, train, test)
            else:
                fid = new
            recent = (recent + [a, b])[-2 * history:]
        out.append(Split(list(train), list(test), fid, "removal", it))
    return out
