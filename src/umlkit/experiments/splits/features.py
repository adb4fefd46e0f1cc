"""Making class splits from features or attributes, for any paper that needs them (a shared experiments service: it
scores splits with :mod:`umlkit.metrics`, so it sits above ``data``; reading committed split files is
:mod:`umlkit.data.side_info`'s). ooDML's splits of increasing distribution shift: class swapping, then class
removal, scored by class-mean FID.

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
  proposes swaps the same way, 2 per iteration, both made before the FID is compared; when the FID after the
  iteration's swaps is not lower than before (new >= old), both swaps are undone and all proposed classes are
  removed from the split, as the official code is written (otherwise the swaps stay). The swap histories hold list
  positions per side, as the official ``train_already_swapped`` / ``test_already_swapped`` do (after a removal a
  position names another class). Fewer classes remain as the iterations go on. The official ids count swaps (R22,
  R48, ...); here splits are numbered by iteration.

A second kind of split serves the book's regime map (:func:`attribute_split`; no paper): UML-Mini's classes are
attribute combinations (:func:`umlkit.data.mini.class_attributes`), so a split can be defined by the attributes
themselves. *values*: the test classes are those whose pivot attribute takes a held-out value (a set of discrete
values, or an interval of a continuous one), and a class trains only when none of its attributes takes one, so no
training class is defined by a held-out value; *combinations*: a checkerboard over two attributes (the test
classes are those whose two levels have an odd sum), so every level of either attribute defines training and test
classes alike but no test pair of levels occurs in training. Classes too close to a continuous edge to be placed
(their images are jittered around the class value) are left out of both sides.

The published full-profile splits are loaded from the official pickles instead (the authors say the script
reproduces them "very close" to, not exactly); this module generates UML-Mini's. Written by hand: no library
builds FID-ranked class splits.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from umlkit.metrics.distribution import frechet_distance

__all__ = ["write_split_file", "read_split_file", "Split", "swap_progression", "removal_progression", "split_fid",
           "select_splits", "iid_fid", "attribute_level", "attribute_split", "SHIFT_KINDS"]


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


def _positions(means: dict, side: list, mu_own: np.ndarray, mu_other: np.ndarray) -> np.ndarray:
    """The positions of ``side``'s classes ordered by d(c, mu_other) - d(c, mu_own), most other-like first."""
    x = np.stack([means[c] for c in side])
    return np.argsort(np.linalg.norm(x - mu_other, axis=1) - np.linalg.norm(x - mu_own, axis=1), kind="stable")


def _first_free(order: np.ndarray, recent: list, history: int):
    """The first position of ``order`` not among the side's last ``history`` swapped positions."""
    return next((int(i) for i in order if int(i) not in recent[-history:]), None)


def _propose(means: dict, train: list, test: list, swaps: int, history: int, hist: tuple[list, list]) -> list:
    """One removal iteration's swaps, applied in place: the ``k``-th swap takes the first free train and test
    positions from rank ``k`` on; the histories hold positions per side, as the official code's do."""
    mu_tr = np.mean([means[c] for c in train], axis=0)
    mu_te = np.mean([means[c] for c in test], axis=0)
    order_tr, order_te = _positions(means, train, mu_tr, mu_te), _positions(means, test, mu_te, mu_tr)
    proposed = []
    for k in range(swaps):
        i, j = _first_free(order_tr[k:], hist[0], history), _first_free(order_te[k:], hist[1], history)
        if i is None or j is None:
            break
        hist[0].append(i)
        hist[1].append(j)
        train[i], test[j] = test[j], train[i]
        proposed.append((i, j))
    return proposed


def removal_progression(means: dict, start: Split, iterations: int = 35, swaps_per_iter: int = 2,
                        history: int = 5, min_classes: int = 2) -> list[Split]:
    """ooDML's class-removal splits from ``start`` (the last swap split), one split per iteration
    (``split_maker_with_class_removal``): the iteration's swaps are made together; when the FID after all of them
    is not lower than before (new >= old), they are all undone and every proposed class is removed from its side.
    Stops before an iteration that could leave a side with fewer than ``min_classes`` classes."""
    train, test = list(start.train), list(start.test)
    hist: tuple[list, list] = ([], [])
    out = []
    for it in range(1, iterations + 1):
        if min(len(train), len(test)) - swaps_per_iter < min_classes:
            break
        fid = split_fid(means, train, test)
        before = (list(train), list(test))
        proposed = _propose(means, train, test, swaps_per_iter, history, hist)
        if not proposed:
            break
        new = split_fid(means, train, test)
        if new >= fid:   # as the official code is written: undo the iteration, then drop the proposed classes
            train, test = before
            for i in sorted({i for i, _ in proposed}, reverse=True):
                del train[i]
            for j in sorted({j for _, j in proposed}, reverse=True):
                del test[j]
            new = split_fid(means, train, test)
        out.append(Split(list(train), list(test), new, "removal", it))
    return out


def select_splits(progression: Sequence[Split], n: int, start: int = 0, easier: Sequence[Split] = (),
                  n_easier: int = 0) -> list[Split]:
    """The splits a benchmark keeps: the default split (``progression[start]``), then ``n - 1`` splits whose FIDs
    are closest to ``n - 1`` targets evenly spaced from the default's FID (excluded) to the progression's largest
    (included); with ``n_easier``, that many splits of an ``easier`` progression (ooDML's inverse swapping on CUB)
    are put first, at targets evenly spaced from the easier progression's smallest FID (included) to the default's
    (excluded). Returned in increasing FID order; each split is used once (ooDML's Table S1 layout: CUB 2 easier +
    default + 6 harder, Cars and SOP default + 7 harder)."""
    progression = list(progression)
    if not progression or n < 1:
        raise ValueError(f"need a non-empty progression and n >= 1, got {len(progression)} splits and n={n}")
    default = progression[start]
    harder = [s for s in progression if s is not default]
    picked = _nearest(harder, np.linspace(default.fid, max(s.fid for s in progression), n)[1:])
    low = []
    if n_easier:
        if not easier:
            raise ValueError(f"n_easier={n_easier} needs the easier progression")
        pool = [s for s in easier if s.fid < default.fid]
        if len(pool) < n_easier:
            raise ValueError(f"only {len(pool)} easier splits have a FID below the default's {default.fid:.2f}")
        low = _nearest(pool, np.linspace(min(s.fid for s in pool), default.fid, n_easier + 1)[:-1])
    return sorted(low, key=lambda s: s.fid) + [default] + sorted(picked, key=lambda s: s.fid)


def _nearest(pool: list[Split], targets) -> list[Split]:
    """For each target in turn, the unused split whose FID is closest (ties: the earlier split)."""
    free, out = list(pool), []
    for t in targets:
        if not free:
            raise ValueError(f"not enough distinct splits for {len(targets)} targets")
        best = min(range(len(free)), key=lambda i: (abs(free[i].fid - t), i))
        out.append(free.pop(best))
    return out


def iid_fid(features: np.ndarray, labels, seed: int = 0) -> float:
    """ooDML Table 1's i.i.d. reference: every class on both sides, its images split at random into two halves;
    the FID between the class means of the first halves and those of the second halves. Classes with fewer than
    two images are skipped."""
    features, labels = np.asarray(features, dtype=np.float64), np.asarray(labels)
    rng = np.random.default_rng(seed)
    a, b = [], []
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        if len(idx) < 2:
            continue
        half = len(idx) // 2
        a.append(features[idx[:half]].mean(0))
        b.append(features[idx[half:]].mean(0))
    if len(a) < 2:
        raise ValueError("the i.i.d. FID needs at least two classes with two or more images")
    return frechet_distance(np.stack(a), np.stack(b))


# ------------------------------------------------------------------------------------------ attribute splits
SHIFT_KINDS = ("values", "combinations")


def attribute_level(value, rule, margin: float = 0.0) -> int | None:
    """A class's level of one attribute under ``rule``: a discrete rule lists the attribute's values in order (the
    level is the value's position); a continuous rule ``{"inside": [lo, hi]}`` gives 1 inside [lo, hi) and 0 outside,
    and None within ``margin`` of either edge (its images, jittered around the class value, may fall on both
    sides)."""
    if isinstance(rule, dict):
        lo, hi = _interval(rule.get("inside"), rule)
        v = float(value)
        if lo + margin <= v < hi - margin:
            return 1
        if v < lo - margin or v >= hi + margin:
            return 0
        return None
    values = list(rule)
    if value not in values:
        raise ValueError(f"attribute value {value!r} is not one of the rule's values {values}")
    return values.index(value)


def _interval(held, where) -> tuple[float, float]:
    if not isinstance(held, (list, tuple)) or len(held) != 2 or not float(held[0]) < float(held[1]):
        raise ValueError(f"a continuous held-out interval is [lo, hi] with lo < hi, got {held!r} (in {where!r})")
    return float(held[0]), float(held[1])


def _held_out(attr: str, value, held: dict, margins: dict) -> bool | None:
    """Whether a class's ``attr`` value is held out (True), clear of it (False) or too close to call (None)."""
    if attr not in held:
        return False
    out = held[attr]
    if isinstance(out, dict):
        level = attribute_level(value, {"inside": out.get("interval")}, float(margins.get(attr, 0.0)))
        return None if level is None else bool(level)
    return value in set(out)


def attribute_split(classes: Sequence[dict], keys: Sequence, kind: str, attributes: Sequence[str],
                    levels: dict, held: dict | None = None, margins: dict | None = None) -> dict:
    """``{"train": [class keys], "test": [...]}`` of one source whose classes have the attribute dicts ``classes``
    (in the order of ``keys``); a class on neither list is left out.

    ``kind="values"``: a class tests when its ``attributes[0]`` value is held out, and trains only when *none* of
    its attributes takes a held-out value: ``held`` maps an attribute to its held-out discrete values, or to
    ``{"interval": [lo, hi]}`` for a continuous one (e.g. both hues of a bird class). A continuous value within its
    attribute's ``margins`` entry of an interval's edge counts as neither, so its class is left out (the generator
    jitters each image's value around the class's). ``kind="combinations"``: a class
    tests when its levels of ``attributes[0]`` and ``attributes[1]`` (``levels``: :func:`attribute_level`'s
    rules) have an odd sum, trains when even, and is left out within its margin of a continuous level's edge. Both
    sides must keep at least two classes."""
    if kind not in SHIFT_KINDS:
        raise ValueError(f"kind must be one of {SHIFT_KINDS}, got {kind!r}")
    if len(classes) != len(keys):
        raise ValueError(f"{len(classes)} class attribute dicts for {len(keys)} class keys")
    need = 1 if kind == "values" else 2
    if len(attributes) < need:
        raise ValueError(f"a {kind} split needs {need} attribute(s), got {list(attributes)}")
    a = attributes[0]
    margins = margins or {}
    side = []
    if kind == "values":
        held = held or {}
        if a not in held:
            raise ValueError(f"a values split on {a!r} needs held-out values for it; held_out names {sorted(held)}")
        for attr, out in held.items():
            if attr in levels and not isinstance(out, dict) and not set(out) <= set(levels[attr]):
                raise ValueError(f"held-out values of {attr!r} must be among {list(levels[attr])}, got {list(out)}")
        for c in classes:
            if a not in c:
                raise ValueError(f"a class has no attribute {a!r} (it has {sorted(c)})")
            if a in levels and not isinstance(levels[a], dict):
                attribute_level(c[a], levels[a])     # a value the rule does not know is an error, not a training class
            pivot = _held_out(a, c[a], held, margins)
            others = [_held_out(k, v, held, margins) for k, v in c.items()]
            if pivot:
                side.append("test")
            elif pivot is False and all(o is False for o in others):
                side.append("train")
            else:
                side.append(None)
    else:
        b = attributes[1]
        missing = [x for x in (a, b) if x not in levels]
        if missing:
            raise ValueError(f"a combinations split needs levels for {missing}; levels name {sorted(levels)}")
        for c in classes:
            la = attribute_level(c[a], levels[a], float(margins.get(a, 0.0)))
            lb = attribute_level(c[b], levels[b], float(margins.get(b, 0.0)))
            side.append(None if la is None or lb is None else ("test" if (la + lb) % 2 else "train"))
    split = {part: [k for k, s in zip(keys, side) if s == part] for part in ("train", "test")}
    if min(len(split["train"]), len(split["test"])) < 2:
        raise ValueError(f"a {kind} split on {list(attributes[:need])} leaves {len(split['train'])} training and "
                         f"{len(split['test'])} test classes; each side needs at least 2")
    return split


def write_split_file(path, splits: dict, dependants: str = "the records") -> Path:
    """Write ``splits`` to ``path`` as JSON (atomically). A file already there is replaced only by an identical one:
    committed splits define the record keys of every run on them (``dependants``), so a different file is an error
    naming it."""
    from umlkit.results import atomic_write
    path = Path(path)
    text = json.dumps(splits, indent=1, sort_keys=True, default=int) + "\n"
    if path.exists() and path.read_text() != text:
        raise FileExistsError(f"{path} holds other splits than the ones generated now; {dependants} depend on it. "
                              "Move it away first if the change is intended.")
    atomic_write(path, text)
    return path


def read_split_file(path, make: str) -> dict:
    """The splits stored at ``path`` (a missing file is an error naming it and ``make``, the call that writes it)."""
    from umlkit.results import load_json
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run {make} once")
    return load_json(path, "a split file")
