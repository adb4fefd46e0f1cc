"""The streamed ranking behind mAP@1000 on large galleries (umlkit.metrics.deep_ap) gives every metric bit for bit as
the engine's search does, and as plain Python loops do, also where it falls back to the exact search."""
import numpy as np
import pytest
import torch

import umlkit.metrics.deep_ap as deep_ap
import umlkit.metrics.retrieval as retrieval
from tests.metrics._brute import brute_metrics
from umlkit.metrics import evaluate_retrieval
from umlkit.metrics.examples import uml_like_embeddings

ALL = ["R@1", "R@2", "R@4", "R@8", "MAP@R", "RP", "mAP@1000"]


def _both(monkeypatch, *args, **kwargs):
    """(streamed, searched) results of the same call: the gallery-size switch moved below and above the set."""
    monkeypatch.setattr(retrieval, "STREAM_MIN_GALLERY", 10)
    streamed = evaluate_retrieval(*args, **kwargs)
    monkeypatch.setattr(retrieval, "STREAM_MIN_GALLERY", 10**9)
    searched = evaluate_retrieval(*args, **kwargs)
    return streamed, searched


@pytest.mark.parametrize("noise,scale", [(1.6, 0.02), (0.5, 0.02), (3.0, 0.01)])
def test_streamed_equals_search_bit_for_bit(monkeypatch, noise, scale):
    x, y = uml_like_embeddings(scale, noise=noise, seed=3)
    streamed, searched = _both(monkeypatch, x, y, metrics=ALL)
    assert streamed == searched


def test_streamed_matches_python_loops(monkeypatch):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(400, 16, generator=gen)
    y = torch.randint(0, 40, (400,), generator=gen)
    monkeypatch.setattr(retrieval, "STREAM_MIN_GALLERY", 10)
    res = evaluate_retrieval(x, y, metrics=ALL)
    ref = brute_metrics(x.numpy(), y.numpy())
    for key in ALL:
        assert res[key] == pytest.approx(ref[key], abs=1e-12), key


def test_separate_gallery_and_roth_convention(monkeypatch):
    x, y = uml_like_embeddings(0.02, noise=1.2, seed=1)
    q, g = x[::3], x[1::3]
    streamed, searched = _both(monkeypatch, q, y[::3], gallery=g, gallery_labels=y[1::3], metrics=ALL,
                               map_at_r_convention="roth")
    assert streamed == searched


def test_exact_ties_follow_the_lower_index(monkeypatch):
    """Duplicated embeddings under other labels: every tie is broken by the gallery index, as in the search."""
    x, y = uml_like_embeddings(0.01, noise=1.0, seed=2)
    x = torch.cat([x, x[:300]])
    y = torch.cat([y, y[:300] + 10**6])
    streamed, searched = _both(monkeypatch, x, y, metrics=ALL)
    assert streamed == searched


def test_uncertified_rows_take_the_exact_search(monkeypatch):
    """A cut taken far too high fails the certificate: those queries are searched exactly, the values unchanged."""
    x, y = uml_like_embeddings(0.02, noise=1.6, seed=4)
    monkeypatch.setattr(deep_ap, "_MARGIN", 0.05)
    stats = {}
    si = torch.arange(len(y))
    counts = torch.bincount(y)[y]
    blocks = list(deep_ap.streamed_matches(x, x, y, y, si, counts, 1000, stats=stats))
    assert stats["exact_rows"] > 0
    rows = torch.cat([r for r, _ in blocks])
    assert sorted(rows.tolist()) == list(range(len(y)))   # every query once
    streamed, searched = _both(monkeypatch, x, y, metrics=ALL)
    assert streamed == searched


def test_negative_floors_take_the_exact_search(monkeypatch):
    """Random 128-d vectors: the 1,000th neighbour of a 1,500-item set scores below zero, where int16 order fails."""
    gen = torch.Generator().manual_seed(5)
    x = torch.nn.functional.normalize(torch.randn(1500, 128, generator=gen), dim=1)
    y = torch.randint(0, 300, (1500,), generator=gen)
    stats = {}
    list(deep_ap.streamed_matches(x, x, y, y, torch.arange(1500), torch.bincount(y)[y], 1000, stats=stats))
    assert stats["exact_rows"] > 1000   # (queries whose every relevant item scores above zero need no cut)
    streamed, searched = _both(monkeypatch, x, y, metrics=ALL)
    assert streamed == searched


def test_queries_whose_class_is_absent(monkeypatch):
    x, y = uml_like_embeddings(0.01, noise=1.0, seed=6)
    g, gl = x[len(x) // 2:], y[len(y) // 2:]
    q, ql = x[: len(x) // 2], y[: len(y) // 2] + 10**6     # no query's class is in the gallery
    streamed, searched = _both(monkeypatch, q, ql, gallery=g, gallery_labels=gl, metrics=["R@1", "mAP@1000"])
    assert streamed.keys() == searched.keys()
    assert all(streamed[k] == searched[k] or (np.isnan(streamed[k]) and np.isnan(searched[k])) for k in streamed)
    assert np.isnan(streamed["mAP@1000"]) and streamed["R@1"] == 0.0


def test_gallery_too_large_for_the_keys_is_refused():
    x = torch.zeros(1, 4)
    with pytest.raises(ValueError, match="fewer than 2097152 gallery items"):
        next(deep_ap.streamed_matches(x, torch.zeros(deep_ap.STREAM_MAX_GALLERY, 4), torch.zeros(1), torch.zeros(1),
                                      None, torch.ones(1), 10))
