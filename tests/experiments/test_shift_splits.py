"""ooDML's swap and removal splits (umlkit.experiments.splits.features) against a brute-force re-statement of the
official
rules."""
import math

import numpy as np
import pytest

from umlkit.experiments.splits.features import removal_progression, split_fid, swap_progression
from umlkit.metrics.distribution import frechet_distance


def _means(n=16, d=3, seed=0):
    rng = np.random.default_rng(seed)
    return {f"c{i}": rng.normal(size=d) + (i % 4) * 0.5 for i in range(n)}


def _brute_swap(means, train, test, recent):
    """One swap, written with plain loops: the train class with the smallest d(c, mu_test) - d(c, mu_train) and the
    test class with the smallest d(c, mu_train) - d(c, mu_test), skipping recently swapped classes."""
    def centre(side):
        return [sum(means[c][k] for c in side) / len(side) for k in range(len(means[side[0]]))]

    def dist(a, b):
        return math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))

    mu_tr, mu_te = centre(train), centre(test)
    a = min((c for c in train if c not in recent), key=lambda c: dist(means[c], mu_te) - dist(means[c], mu_tr))
    b = min((c for c in test if c not in recent), key=lambda c: dist(means[c], mu_tr) - dist(means[c], mu_te))
    return a, b


def test_swaps_follow_the_official_rule_and_raise_the_fid():
    means = _means()
    keys = sorted(means, key=lambda k: int(k[1:]))
    train, test = keys[:8], keys[8:]
    prog = swap_progression(means, train, test, iterations=6, swaps_per_iter=1, history=2)
    assert len(prog) == 7 and prog[0].train == train and prog[0].fid == pytest.approx(split_fid(means, train, test))
    tr, te, recent = list(train), list(test), []
    for split in prog[1:]:
        a, b = _brute_swap(means, tr, te, recent)
        tr[tr.index(a)], te[te.index(b)] = b, a
        recent = (recent + [a, b])[-4:]
        assert split.train == tr and split.test == te
        assert split.fid == pytest.approx(frechet_distance(np.stack([means[c] for c in tr]),
                                                           np.stack([means[c] for c in te])))
    assert prog[-1].fid > prog[0].fid
    easier = swap_progression(means, train, test, iterations=3, inverse=True)
    assert easier[-1].fid < prog[-1].fid


def test_removal_either_keeps_a_swap_that_lowers_the_fid_or_drops_both_classes():
    means = _means(24, seed=3)
    keys = sorted(means)
    start = swap_progression(means, keys[:12], keys[12:], iterations=5)[-1]
    prog = removal_progression(means, start, iterations=8, swaps_per_iter=1)
    prev_train, prev_test, prev_fid = start.train, start.test, start.fid
    removed_any = False
    for s in prog:
        assert s.kind == "removal" and len(s.train) == len(s.test)
        if len(s.train) < len(prev_train):          # both proposed classes dropped, nothing else changed
            removed_any = True
            gone = (set(prev_train) - set(s.train)) | (set(prev_test) - set(s.test))
            assert len(gone) == 2 and not gone & (set(s.train) | set(s.test))
        else:                                        # a kept swap lowers the FID
            assert s.fid < prev_fid
        prev_train, prev_test, prev_fid = s.train, s.test, s.fid
    assert removed_any


def test_bad_splits_are_refused():
    means = _means(4)
    with pytest.raises(ValueError, match="at least 2"):
        swap_progression(means, ["c0"], ["c1", "c2"])
    with pytest.raises(ValueError, match="no class-mean"):
        swap_progression(means, ["c0", "c1"], ["c2", "x"])


def test_two_swaps_per_iteration_take_the_next_candidates_of_one_ranking():
    means = _means(20, seed=5)
    keys = sorted(means)
    train, test = keys[:10], keys[10:]
    one = swap_progression(means, train, test, iterations=1, swaps_per_iter=2)

    def ranked(side, own, other):   # the official order, computed once from the split before any swap
        centre = {s: np.mean([means[c] for c in group], axis=0) for s, group in (("own", own), ("other", other))}
        return sorted(side, key=lambda c: np.linalg.norm(means[c] - centre["other"]) -
                      np.linalg.norm(means[c] - centre["own"]))

    to_test, to_train = ranked(train, train, test)[:2], ranked(test, test, train)[:2]
    assert set(train) - set(one[1].train) == set(to_test) and set(one[1].train) - set(train) == set(to_train)
    removal = removal_progression(means, one[-1], iterations=3)
    assert all(len(s.train) == len(s.test) for s in removal) and len(removal) == 3


def _split(fid, name=""):
    from umlkit.experiments.splits.features import Split
    return Split([name + "a", name + "b"], [name + "c", name + "d"], fid)


def test_select_splits_takes_the_nearest_fid_to_evenly_spaced_targets():
    from umlkit.experiments.splits.features import select_splits
    prog = [_split(f, str(i)) for i, f in enumerate([10.0, 12.0, 19.0, 31.0, 33.0, 40.0, 52.0, 70.0])]
    # targets from the default (10, excluded) to the largest (70): 30, 50, 70 -> 31, 52, 70
    chosen = select_splits(prog, 4)
    assert [s.fid for s in chosen] == [10.0, 31.0, 52.0, 70.0]
    assert chosen[0] is prog[0]
    easier = [_split(f, "e" + str(i)) for i, f in enumerate([9.0, 7.5, 6.0, 5.0, 11.0])]
    # easier targets from the smallest (5) to the default (10, excluded): 5 and 7.5; 11 is not easier
    chosen = select_splits(prog, 2, easier=easier, n_easier=2)
    assert [s.fid for s in chosen] == [5.0, 7.5, 10.0, 70.0]


def test_select_splits_never_uses_a_split_twice_and_says_when_too_few():
    from umlkit.experiments.splits.features import select_splits
    prog = [_split(f, str(i)) for i, f in enumerate([1.0, 2.0, 100.0])]
    chosen = select_splits(prog, 3)  # targets 50.5 and 100: 100 goes to the first, 2 to the second
    assert sorted(s.fid for s in chosen) == [1.0, 2.0, 100.0]
    with pytest.raises(ValueError, match="not enough distinct splits"):
        select_splits(prog, 4)
    with pytest.raises(ValueError, match="easier splits have a FID below"):
        select_splits(prog, 2, easier=[_split(5.0)], n_easier=1)


def test_iid_fid_matches_the_fid_of_the_two_halves_by_hand():
    from umlkit.experiments.splits.features import iid_fid
    rng = np.random.default_rng(3)
    labels = np.repeat(np.arange(6), 4)
    feats = rng.normal(size=(24, 3)) + labels[:, None]
    # the same draw as iid_fid: one permutation per class from one generator
    g = np.random.default_rng(7)
    a, b = [], []
    for c in range(6):
        idx = g.permutation(np.flatnonzero(labels == c))
        a.append(feats[idx[:2]].mean(0))
        b.append(feats[idx[2:]].mean(0))
    assert iid_fid(feats, labels, seed=7) == pytest.approx(frechet_distance(np.stack(a), np.stack(b)))
    with pytest.raises(ValueError, match="at least two classes"):
        iid_fid(feats[:4], np.zeros(4))


# ------------------------------------------------------------------------------------------ attribute splits
from umlkit.experiments.splits.features import attribute_level, attribute_split  # noqa: E402

_LEVELS = {"shape": ["disc", "square", "ring", "star"], "texture": ["plain", "striped", "checkered"],
           "hue": {"inside": [0.5, 0.75]}, "sat": {"inside": [0.6, 1.01]}}


def test_values_split_holds_out_exactly_the_listed_values():
    classes = [{"shape": s, "texture": t} for s in _LEVELS["shape"] for t in _LEVELS["texture"]]
    keys = list(range(1, len(classes) + 1))
    split = attribute_split(classes, keys, "values", ["shape", "texture"], _LEVELS, {"shape": ["ring", "star"]})
    assert split["test"] == [7, 8, 9, 10, 11, 12] and split["train"] == [1, 2, 3, 4, 5, 6]
    cont = [{"hue": h} for h in (0.1, 0.5, 0.6, 0.74999, 0.75, 0.9)]
    split = attribute_split(cont, list("abcdef"), "values", ["hue"], _LEVELS, {"hue": {"interval": [0.5, 0.75]}})
    assert split == {"train": ["a", "e", "f"], "test": ["b", "c", "d"]}     # [0.5, 0.75) is held out


def test_values_split_keeps_every_held_out_value_out_of_training_and_leaves_edge_classes_out():
    """A bird-like class trains only when both of its hues are clear of the held-out interval (by the margin);
    a class with only its second hue inside, or a hue within the margin of an edge, is left out."""
    classes = [{"hue": 0.1, "disc_hue": 0.2},     # both clear: train
               {"hue": 0.3, "disc_hue": 0.6},     # head hue held out: neither side
               {"hue": 0.6, "disc_hue": 0.1},     # body hue held out: test
               {"hue": 0.7, "disc_hue": 0.7},     # test
               {"hue": 0.49, "disc_hue": 0.1},    # within 0.02 of the edge: left out
               {"hue": 0.2, "disc_hue": 0.9},     # train
               {"hue": 0.51, "disc_hue": 0.2}]    # inside but within the margin: left out
    held = {"hue": {"interval": [0.5, 0.75]}, "disc_hue": {"interval": [0.5, 0.75]}}
    split = attribute_split(classes, list(range(7)), "values", ["hue", "disc_hue"], {}, held,
                            {"hue": 0.02, "disc_hue": 0.02})
    assert split == {"train": [0, 5], "test": [2, 3]}


def test_combinations_split_is_a_checkerboard_whose_test_pairs_never_train():
    classes = [{"shape": s, "texture": t} for s in _LEVELS["shape"] for t in _LEVELS["texture"]]
    split = attribute_split(classes, list(range(12)), "combinations", ["shape", "texture"], _LEVELS)
    pairs = {side: {(classes[k]["shape"], classes[k]["texture"]) for k in split[side]} for side in split}
    assert not pairs["train"] & pairs["test"]
    for side in ("train", "test"):   # every value of both attributes is on both sides
        assert {s for s, _ in pairs[side]} == set(_LEVELS["shape"])
        assert {t for _, t in pairs[side]} == set(_LEVELS["texture"])
    # by hand: disc (0) + striped (1) is odd -> test; square (1) + striped (1) is even -> train
    assert 1 in split["test"] and 4 in split["train"]
    two = [{"hue": h, "sat": s} for h in (0.1, 0.6) for s in (0.4, 0.8)] * 2 + [{"hue": 0.6, "sat": 0.61}]
    split = attribute_split(two, list(range(9)), "combinations", ["hue", "sat"], _LEVELS, margins={"sat": 0.03})
    assert split["test"] == [1, 2, 5, 6] and 8 not in split["train"]   # exactly one level 1; 8 is within the margin


def test_attribute_split_errors_name_the_problem():
    classes = [{"shape": s} for s in _LEVELS["shape"]]
    with pytest.raises(ValueError, match="kind must be one of"):
        attribute_split(classes, [1, 2, 3, 4], "swap", ["shape"], _LEVELS)
    with pytest.raises(ValueError, match="must be among"):
        attribute_split(classes, [1, 2, 3, 4], "values", ["shape"], _LEVELS, {"shape": ["hexagon"]})
    with pytest.raises(ValueError, match="needs held-out values for it"):
        attribute_split(classes, [1, 2, 3, 4], "values", ["shape"], _LEVELS, {"hue": {"interval": [0.1, 0.2]}})
    with pytest.raises(ValueError, match="each side needs at least 2"):
        attribute_split(classes, [1, 2, 3, 4], "values", ["shape"], _LEVELS, {"shape": ["star"]})
    with pytest.raises(ValueError, match="needs 2 attribute"):
        attribute_split(classes, [1, 2, 3, 4], "combinations", ["shape"], _LEVELS)
    with pytest.raises(ValueError, match="needs levels for"):
        attribute_split(classes, [1, 2, 3, 4], "combinations", ["shape", "size"], _LEVELS)
    with pytest.raises(ValueError, match="4 class attribute dicts for 3 class keys"):
        attribute_split(classes, [1, 2, 3], "values", ["shape"], _LEVELS, {"shape": ["ring", "star"]})
    with pytest.raises(ValueError, match="not one of the rule's values"):
        attribute_split([*classes, {"shape": "hexagon"}], [1, 2, 3, 4, 5], "values", ["shape"], _LEVELS,
                        {"shape": ["ring", "star"]})
    with pytest.raises(ValueError, match="lo < hi"):
        attribute_level(0.3, {"inside": [0.9, 0.1]})
    with pytest.raises(ValueError, match="lo < hi"):
        attribute_level(0.3, {"inside": [0.1]})
