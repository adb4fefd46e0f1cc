"""Samplers: batch composition, determinism by (seed, epoch), DDP slicing; few-shot subsets; transforms."""
from collections import Counter

import numpy as np
import pytest
import torch
from PIL import Image

from umlkit.data import build_sampler, build_transforms, few_shot_indices

LABELS = np.repeat(np.arange(10), [3, 4, 5, 6, 7, 2, 8, 4, 4, 5])


@pytest.mark.parametrize("name", ["m_per_class", "class_random", "unique_class"])
def test_class_samplers_compose_batches_of_m_per_class(name):
    s = build_sampler(name, LABELS, batch_size=8, m=2, seed=1)
    batches = list(s)
    assert len(batches) == len(s) > 0
    for b in batches:
        labs = LABELS[b]
        counts = Counter(labs.tolist())
        assert len(b) == 8 and set(counts.values()) == {2} and len(counts) == 4
        assert all(labs[i] == labs[i + 1] for i in range(0, 8, 2))  # grouped consecutively


def test_unique_class_visits_every_class_once_per_epoch():
    s = build_sampler("unique_class", LABELS, batch_size=10, m=2, seed=0)
    seen = Counter(LABELS[i] for b in s for i in b)
    assert len(s) == 2 and set(seen.values()) == {2} and len(seen) == 10


def test_m_per_class_uses_distinct_images_when_possible():
    s = build_sampler("m_per_class", LABELS, batch_size=8, m=2, seed=0)
    for b in s:
        for c in set(LABELS[b]):
            members = [i for i in b if LABELS[i] == c]
            assert len(set(members)) == 2


def test_determinism_by_seed_and_epoch_and_ddp_slices():
    a = build_sampler("m_per_class", LABELS, batch_size=8, m=2, seed=5)
    b = build_sampler("m_per_class", LABELS, batch_size=8, m=2, seed=5)
    assert list(a) == list(b)
    a.set_epoch(1)
    assert list(a) != list(b)
    b.load_state_dict(a.state_dict())
    assert list(a) == list(b)
    r0 = build_sampler("m_per_class", LABELS, batch_size=8, m=2, seed=5, rank=0, world_size=2)
    r1 = build_sampler("m_per_class", LABELS, batch_size=8, m=2, seed=5, rank=1, world_size=2)
    c = build_sampler("m_per_class", LABELS, batch_size=8, m=2, seed=5)
    assert [x + y for x, y in zip(r0, r1)] == list(c)


def test_random_and_source_balanced():
    r = build_sampler("random", LABELS, batch_size=7, seed=0)
    flat = [i for b in r for i in b]
    assert len(flat) == len(set(flat)) == 7 * (len(LABELS) // 7)
    sources = np.array([0] * 40 + [1] * 8)
    s = build_sampler("source_balanced", np.zeros(48), batch_size=8, sources=sources, seed=0)
    for b in s:
        assert Counter(sources[b].tolist()) == {0: 4, 1: 4}
    with pytest.raises(ValueError, match="sources"):
        build_sampler("source_balanced", LABELS, 8)
    with pytest.raises(ValueError, match="multiple"):
        build_sampler("m_per_class", LABELS, 9, m=2)


def test_few_shot_indices():
    idx = few_shot_indices(LABELS, shots=4, seed=0)
    counts = Counter(LABELS[idx].tolist())
    assert set(counts.values()) == {4}
    small = [i for i in idx if LABELS[i] == 5]  # class 5 has only 2 images: drawn with replacement
    assert set(small) <= set(np.flatnonzero(LABELS == 5))
    big = [i for i in idx if LABELS[i] == 6]
    assert len(set(big)) == 4  # without replacement when the class is large enough
    assert np.array_equal(idx, few_shot_indices(LABELS, shots=4, seed=0))
    assert not np.array_equal(idx, few_shot_indices(LABELS, shots=4, seed=1))


def test_transforms_sizes_and_normalisation():
    img = Image.fromarray(np.full((40, 60, 3), 255, np.uint8))
    cfg = {"input_size": (3, 224, 224), "mean": (0.5,) * 3, "std": (0.5,) * 3}
    for name in ("puma", "vptsp", "roth", "hyp"):
        for train in (True, False):
            x = build_transforms(name, cfg, train)(img)
            assert x.shape == (3, 224, 224) and torch.allclose(x, torch.ones_like(x))
    mini = build_transforms("mini", {"input_size": (3, 32, 32)}, train=False)(Image.new("RGB", (32, 32)))
    assert mini.shape == (3, 32, 32) and float(mini.min()) == -1.0
    with pytest.raises(ValueError, match="unknown transform"):
        build_transforms("simclr")


def test_mini_train_transform_equals_torchvisions_padded_random_crop():
    """EdgeShift on the tensor gives the pixels and the random draws of RandomCrop(padding=2, edge) on the PIL image."""
    import numpy as np
    import torch
    from torchvision import transforms as T
    cfg = {"input_size": (3, 32, 32), "mean": (0.4, 0.5, 0.6), "std": (0.2, 0.3, 0.4)}
    ours = build_transforms("mini", cfg, train=True)
    ref = T.Compose([T.RandomCrop(32, padding=2, padding_mode="edge"), T.ToTensor(),
                     T.Normalize(cfg["mean"], cfg["std"])])
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)) for _ in range(200)]
    torch.manual_seed(3)
    want = [ref(im) for im in images] + [torch.rand(2)]
    torch.manual_seed(3)
    got = [ours(im) for im in images] + [torch.rand(2)]
    assert all(torch.equal(a, b) for a, b in zip(want, got))
    assert len({tuple(g.flatten()[:5].tolist()) for g in got[:-1]}) > 1   # the crops do move


@pytest.mark.parametrize("kwargs, message", [
    (dict(m=2.0), "m must be an integer >= 1, got 2.0"),
    (dict(batch_size="8"), "batch_size must be an integer >= 1, got '8'"),
    (dict(world_size=0), "world_size must be an integer >= 1, got 0"),
    (dict(rank=2, world_size=2), r"rank 2 is not one of the world_size=2 processes \(0..1\)"),   # gave empty batches
])
def test_sampler_arguments_are_named(kwargs, message):
    args = dict(batch_size=8, m=2, seed=0) | kwargs
    with pytest.raises(ValueError, match=message):
        build_sampler("m_per_class", LABELS, **args)


def test_few_shot_needs_an_integer_count():
    with pytest.raises(ValueError, match="shots must be a positive integer, got 2.5"):   # said "seed must be integer"
        few_shot_indices(LABELS, 2.5)
