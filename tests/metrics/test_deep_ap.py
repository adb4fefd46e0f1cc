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


@pytest.fixture(autouse=True)
def _streaming_on_any_cpu(request, monkeypatch):
    """The pass is exact whatever the CPU: its tests take it on every host (the rule that keeps it off emulated bf16
    has its own tests below, marked ``kernel_rule``)."""
    if "kernel_rule" not in request.keywords:
        monkeypatch.setattr(retrieval, "streams", lambda search_dtype=None: (True, "pinned by the test"))


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


ZEN4 = {"avx2", "avx512f", "avx512_bf16", "avx512_vnni"}
ZEN3 = {"avx2", "fma"}


@pytest.mark.kernel_rule
@pytest.mark.parametrize("flags,isa,pinned,expected", [
    (ZEN4, None, None, True), (ZEN3, None, None, False), (ZEN4, "AVX2", None, False),
    (ZEN3, None, "bf16", True), (ZEN3, None, "fp32", False)])
def test_the_streamed_pass_runs_only_where_bf16_is_native_or_pinned(monkeypatch, flags, isa, pinned, expected):
    """mAP@1000's bf16 pass asks the kernel rule: on an AVX2-only CPU (or oneDNN limited to AVX2) the evaluation
    takes the exact search instead, with the same values; UMLKIT_SEARCH_DTYPE=bf16 pins the pass anywhere."""
    from umlkit.metrics import kernels
    monkeypatch.setattr(kernels, "cpu_flags", lambda: set(flags))
    for name, value in (("ONEDNN_MAX_CPU_ISA", isa), ("UMLKIT_SEARCH_DTYPE", pinned)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    streams, why = deep_ap.streams()
    assert streams is expected and why
    calls = []
    real = retrieval.streamed_matches
    monkeypatch.setattr(retrieval, "streamed_matches", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(retrieval, "STREAM_MIN_GALLERY", 10)
    x, y = uml_like_embeddings(0.01, noise=1.6, seed=3)
    res = evaluate_retrieval(x, y, metrics=ALL)
    assert bool(calls) is expected
    monkeypatch.setattr(retrieval, "STREAM_MIN_GALLERY", 10**9)
    assert res == evaluate_retrieval(x, y, metrics=ALL)


@pytest.mark.kernel_rule
@pytest.mark.parametrize("flags", [ZEN3, ZEN4], ids=["avx2", "avx512_bf16"])
def test_the_search_behind_map1000_runs_on_every_configured_thread(monkeypatch, flags):
    """No evaluation path runs single-threaded by accident: on a quiet machine every search and re-score behind a
    large mAP@1000 evaluation, streamed (native bf16) or not (AVX2), runs on the threads torch is configured with."""
    from umlkit.metrics import kernels, threads
    monkeypatch.setattr(kernels, "cpu_flags", lambda: set(flags))
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.delenv("UMLKIT_SEARCH_DTYPE", raising=False)
    monkeypatch.setattr(threads, "busy_cores", lambda interval=0.1: 0.0)
    monkeypatch.setattr(threads, "LARGE_SEARCH", 1)          # this small set counts as a large search
    monkeypatch.setattr(retrieval, "STREAM_MIN_GALLERY", 10)
    seen = []
    for module, name in ((retrieval, "knn_search_checked"), (retrieval, "streamed_matches"),
                         (deep_ap, "knn_search_checked"), (deep_ap, "rescore")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _real=real, _name=name, **k:
                            seen.append((_name, torch.get_num_threads())) or _real(*a, **k))
    x, y = uml_like_embeddings(0.01, noise=1.6, seed=3)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        evaluate_retrieval(x, y, metrics=["mAP@1000", "R@1"])
    finally:
        torch.set_num_threads(before)
    names = {n for n, _ in seen}
    assert ("streamed_matches" in names) is (flags is ZEN4) and seen
    assert {t for _, t in seen} == {2}, seen
