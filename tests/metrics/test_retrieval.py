import numpy as np
import pytest
import torch

from tests.metrics._brute import brute_metrics
from umlkit.metrics import evaluate_retrieval, knn_search, neighbour_class_counts, nmi

ALL = ["R@1", "R@2", "R@4", "MAP@R", "RP", "mAP@1000"]


def _angles(deg):
    rad = np.deg2rad(np.asarray(deg, dtype=np.float64))
    return np.stack([np.cos(rad), np.sin(rad)], axis=1).astype(np.float32)


# 5 points on the circle; neighbour orders and every value below were worked out by hand (see the book's
# Evaluation chapter): e.g. item 0's neighbours are 1, 3, 4, 2 with labels 0, 1, 1, 0.
HAND_X = _angles([0, 12, 100, 20, 93])
HAND_Y = np.array([0, 0, 0, 1, 1])


def test_hand_computed_musgrave():
    res = evaluate_retrieval(HAND_X, HAND_Y, metrics=ALL)
    assert res["R@1"] == pytest.approx(0.2)
    assert res["R@2"] == pytest.approx(0.6)
    assert res["R@4"] == pytest.approx(1.0)
    assert res["RP"] == pytest.approx(0.2)
    assert res["MAP@R"] == pytest.approx(0.15)
    assert res["mAP@1000"] == pytest.approx(11 / 36)
    assert res["n_without_positives"] == 0


def test_hand_computed_roth_convention():
    res = evaluate_retrieval(HAND_X, HAND_Y, metrics=["MAP@R", "RP"], map_at_r_convention="roth")
    assert res["MAP@R"] == pytest.approx(31 / 180)
    assert res["RP"] == pytest.approx(0.3)
    # Roth's R looks one rank deeper and divides by R + 1: a perfect ranking scores R/(R+1) < 1 there, but on this
    # example the extra rank finds hits for items 2 and 4, so it ends above Musgrave's 0.15
    perfect = evaluate_retrieval(_angles([0, 1, 90, 91]), [0, 0, 1, 1], metrics=["MAP@R"], map_at_r_convention="roth")
    assert perfect["MAP@R"] == pytest.approx(0.5)


def test_separate_gallery_hand():
    # In-shop protocol: nothing excluded; query 0 at 0 deg, gallery at 5 (label 1), 30 (label 0), 90 (label 0)
    q, ql = _angles([0]), [0]
    g, gl = _angles([5, 30, 90]), [1, 0, 0]
    res = evaluate_retrieval(q, ql, g, gl, metrics=["R@1", "R@2", "MAP@R", "RP"])
    assert res["R@1"] == 0.0 and res["R@2"] == 1.0
    assert res["RP"] == pytest.approx(0.5)  # R = 2 gallery positives, 1 in top 2
    assert res["MAP@R"] == pytest.approx((1 / 2) / 2)


def _clustered(n_classes, per_class, dim, seed, noise=0.6, singletons=0):
    gen = np.random.default_rng(seed)
    centres = gen.normal(size=(n_classes, dim))
    sizes = gen.integers(per_class[0], per_class[1] + 1, size=n_classes)
    labels = np.repeat(np.arange(n_classes), sizes)
    x = centres[labels] + noise * gen.normal(size=(labels.size, dim))
    if singletons:
        x = np.concatenate([x, gen.normal(size=(singletons, dim))])
        labels = np.concatenate([labels, np.arange(n_classes, n_classes + singletons)])
    return x.astype(np.float32), labels


@pytest.mark.parametrize("seed,dim", [(0, 8), (1, 16), (2, 32)])
@pytest.mark.parametrize("convention", ["musgrave", "roth"])
def test_against_brute_force_self(seed, dim, convention):
    x, y = _clustered(12, (1, 9), dim, seed, singletons=3)
    got = evaluate_retrieval(x, y, metrics=ALL + ["R@8"], map_at_r_convention=convention)
    want = brute_metrics(x, y, ks=(1, 2, 4, 8), convention=convention)
    for key in ["R@1", "R@2", "R@4", "R@8", "MAP@R", "RP", "mAP@1000", "n_without_positives"]:
        assert got[key] == pytest.approx(want[key], abs=1e-9), key


@pytest.mark.parametrize("seed", [3, 4])
def test_against_brute_force_separate_gallery(seed):
    x, y = _clustered(10, (2, 8), 12, seed)
    gen = np.random.default_rng(seed)
    is_q = gen.random(len(y)) < 0.4
    got = evaluate_retrieval(x[is_q], y[is_q], x[~is_q], y[~is_q], metrics=ALL)
    want = brute_metrics(x[is_q], y[is_q], x[~is_q], y[~is_q], ks=(1, 2, 4))
    for key in ALL + ["n_without_positives"]:
        assert got[key] == pytest.approx(want[key], abs=1e-9), key


@pytest.mark.parametrize("n_classes,per_class,dim", [(30, (2, 6), 16), (60, (2, 12), 64), (8, (5, 40), 128)])
def test_against_pytorch_metric_learning(n_classes, per_class, dim):
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

    x, y = _clustered(n_classes, per_class, dim, seed=n_classes, noise=1.0)
    calc = AccuracyCalculator(include=("precision_at_1", "mean_average_precision_at_r", "r_precision"),
                              k="max_bin_count", device=torch.device("cpu"))
    xt = torch.nn.functional.normalize(torch.from_numpy(x), dim=1)
    pml = calc.get_accuracy(xt, torch.from_numpy(y))
    got = evaluate_retrieval(x, y, metrics=["R@1", "MAP@R", "RP"])
    assert got["R@1"] == pytest.approx(pml["precision_at_1"], abs=1e-6)
    assert got["MAP@R"] == pytest.approx(pml["mean_average_precision_at_r"], abs=1e-6)
    assert got["RP"] == pytest.approx(pml["r_precision"], abs=1e-6)


def test_pml_separate_gallery():
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

    x, y = _clustered(20, (4, 10), 32, seed=7, noise=1.0)
    is_q = np.arange(len(y)) % 2 == 0
    calc = AccuracyCalculator(include=("precision_at_1", "mean_average_precision_at_r", "r_precision"),
                              k="max_bin_count", device=torch.device("cpu"))
    xt = torch.nn.functional.normalize(torch.from_numpy(x), dim=1)
    yt = torch.from_numpy(y)
    pml = calc.get_accuracy(xt[is_q], yt[is_q], xt[~is_q], yt[~is_q])
    got = evaluate_retrieval(x[is_q], y[is_q], x[~is_q], y[~is_q], metrics=["R@1", "MAP@R", "RP"])
    assert got["R@1"] == pytest.approx(pml["precision_at_1"], abs=1e-6)
    assert got["MAP@R"] == pytest.approx(pml["mean_average_precision_at_r"], abs=1e-6)
    assert got["RP"] == pytest.approx(pml["r_precision"], abs=1e-6)


def test_singletons_are_excluded_and_counted():
    x, y = _clustered(5, (3, 3), 8, seed=0, singletons=4)
    res = evaluate_retrieval(x, y, metrics=["R@1", "MAP@R", "RP"])
    assert res["n_without_positives"] == 4
    keep = np.isin(y, np.unique(y, return_counts=True)[0][np.unique(y, return_counts=True)[1] > 1])
    res_no_single = brute_metrics(x, y)
    assert res["MAP@R"] == pytest.approx(res_no_single["MAP@R"])
    # R@1 counts every query: a singleton can never be a hit
    assert res["R@1"] <= keep.mean() + 1e-12


def test_nmi_perfect_and_shuffled():
    # one random k-means start (Roth's setting) may merge clean clusters; many starts must find them all
    x, y = _clustered(6, (60, 60), 16, seed=1, noise=0.01)
    xt, yt = torch.nn.functional.normalize(torch.from_numpy(x), dim=1), torch.from_numpy(y)
    assert nmi(xt, yt, nredo=20) == pytest.approx(1.0)
    assert 0.5 < evaluate_retrieval(x, y, metrics=["NMI"])["NMI"] <= 1.0
    gen = np.random.default_rng(0)
    assert nmi(xt, torch.from_numpy(gen.permutation(y)), nredo=20) < 0.1


def test_default_metrics_keys():
    x, y = _clustered(6, (10, 10), 16, seed=1)
    res = evaluate_retrieval(x, y)
    for key in ["R@1", "R@2", "R@4", "R@8", "MAP@R", "RP", "mAP@1000", "NMI"]:
        assert 0.0 <= res[key] <= 1.0, key


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(query=np.array([[1.0, 0.0], [np.nan, 1.0]]), query_labels=[0, 0]), "NaN or inf"),
        (dict(query=np.array([[1.0, 0.0], [np.inf, 1.0]]), query_labels=[0, 0]), "NaN or inf"),
        (dict(query=np.array([[1.0, 0.0], [0.0, 0.0]]), query_labels=[0, 0]), "all-zero"),
        (dict(query=np.ones((3, 2)), query_labels=[0, 0]), "3 rows"),
        (dict(query=np.ones(3), query_labels=[0, 0, 0]), "2-D"),
        (dict(query=np.ones((3, 2)), query_labels=[0.0, 1.0, 2.0]), "integers"),
    ],
)
def test_bad_input_errors(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        evaluate_retrieval(**kwargs, metrics=["R@1"])


def test_k_larger_than_gallery():
    with pytest.raises(ValueError, match="offers only 4"):
        evaluate_retrieval(HAND_X, HAND_Y, metrics=["R@8"])
    with pytest.raises(ValueError, match="unknown metric"):
        evaluate_retrieval(HAND_X, HAND_Y, metrics=["recall"])
    with pytest.raises(ValueError, match="dimension"):
        evaluate_retrieval(HAND_X, HAND_Y, np.ones((2, 3)), [0, 1], metrics=["R@1"])


# ---------------------------------------------------------------------------------------------- knn core
def _fp32_reference(q, g, k, self_index=None):
    return knn_search(q, g, k, self_index=self_index, search_dtype=torch.float32)


@pytest.mark.parametrize("extra", [0, 4, 24])
def test_bf16_search_equals_fp32_exact(extra):
    x, _ = _clustered(200, (2, 8), 32, seed=5, noise=0.3)
    x = torch.nn.functional.normalize(torch.from_numpy(x), dim=1)
    self_index = torch.arange(x.shape[0])
    stats = {}
    v, i = knn_search(x, x, 20, self_index=self_index, candidate_extra=extra, chunk_size=97, stats=stats,
                      search_dtype=torch.bfloat16)   # pinned: a CPU without fast bf16 would choose fp32
    rv, ri = _fp32_reference(x, x, 20, self_index)
    assert torch.equal(i, ri)
    assert torch.equal(v, rv)
    assert not (i == self_index[:, None]).any()
    if extra == 0:  # with no slack the certificate must fail on some rows and search again, still exact
        assert stats["second_pass_rows"] > 0


@pytest.mark.parametrize("excluded", [False, True])
def test_exact_rows_equal_a_float64_ranking(excluded):
    """The fp32 rows (faiss's flat search for the first cut, then the re-scoring) rank as float64 does, ties (exact
    duplicates) by the lower index, the self-match excluded where given; k up to every other item."""
    from umlkit.metrics.knn import _exact_rows

    gen = torch.Generator().manual_seed(11)
    g = torch.nn.functional.normalize(torch.randn(300, 24, generator=gen), dim=1)
    g[150:160] = g[3]   # duplicates of item 3
    q = torch.cat([g[:40], g[150:152]])
    self_index = torch.cat([torch.arange(40), torch.tensor([150, 151])]) if excluded else None
    for k in (1, 12, 299):
        v, i = _exact_rows(q, g, k, self_index)
        exact = q.double() @ g.double().T
        for r in range(q.shape[0]):
            order = sorted((c for c in range(300) if self_index is None or c != int(self_index[r])),
                           key=lambda c: (-exact[r, c].item(), c))[:k]
            assert i[r].tolist() == order, (k, r)
            torch.testing.assert_close(v[r].double(), exact[r, order], rtol=0, atol=1e-6)


def test_bf16_error_bound_holds():
    from umlkit.metrics.knn import bf16_error_bound

    gen = torch.Generator().manual_seed(3)
    for dim in (2, 16, 128, 512):
        q = torch.nn.functional.normalize(torch.randn(64, dim, generator=gen), dim=1)
        g = torch.nn.functional.normalize(torch.randn(4000, dim, generator=gen) + q[:1], dim=1)
        qb, gb = q.bfloat16(), g.bfloat16()
        approx = (qb @ gb.T).float()
        exact = q.double() @ g.double().T
        dg_max = (g - gb.float()).norm(dim=1).max()
        gb_max = gb.float().norm(dim=1).max()
        bound = bf16_error_bound(q, qb, dg_max, gb_max, approx.abs().max(dim=1).values)
        assert ((exact - approx.double()).abs() <= bound.double()[:, None]).all()


def test_ties_broken_by_index_and_duplicates():
    base = torch.nn.functional.normalize(torch.randn(50, 16, generator=torch.Generator().manual_seed(0)), dim=1)
    x = torch.cat([base, base, base])  # every vector three times: exact ties everywhere
    v, i = knn_search(x, x, 4, self_index=torch.arange(150))
    # nearest neighbours of item j are its two copies (similarity 1), lower index first
    for j in (0, 7, 60, 149):
        copies = sorted({j % 50, j % 50 + 50, j % 50 + 100} - {j})
        assert i[j, :2].tolist() == copies
    rv, ri = _fp32_reference(x, x, 4, torch.arange(150))
    assert torch.equal(i, ri)


def test_one_key_sort_matches_python_sorted():
    """The 64-bit key sort against Python's sorted() on (-value, index), with ties, -0.0 / +0.0, -inf and
    negative values."""
    from umlkit.metrics.knn import _sort_desc_by_value_then_index
    gen = torch.Generator().manual_seed(0)
    values = (torch.randn(40, 30, generator=gen) * 4).round() / 4  # many exact ties
    values[:, 3], values[:, 4], values[:, 5], values[:, 6] = float("-inf"), -0.0, 0.0, -1e-30
    index = torch.stack([torch.randperm(10_000, generator=gen)[:30] for _ in range(40)])
    v, i = _sort_desc_by_value_then_index(values, index)
    for r in range(40):
        expect = sorted(zip(values[r].tolist(), index[r].tolist()), key=lambda p: (-p[0], p[1]))
        assert i[r].tolist() == [p[1] for p in expect]
        assert v[r].tolist() == [p[0] for p in expect]


def test_rescore_depends_on_the_pair_only():
    """The re-scoring's row gather (embedding), its row blocking and the width of a candidate list change no value:
    the same fp32 numbers as the product of the advanced-indexed candidates summed along the embedding."""
    from umlkit.metrics import knn
    gen = torch.Generator().manual_seed(3)
    q = torch.nn.functional.normalize(torch.randn(70, 128, generator=gen), dim=1)
    g = torch.nn.functional.normalize(torch.randn(90, 128, generator=gen), dim=1)
    index = torch.stack([torch.randperm(90, generator=gen)[:37] for _ in range(70)])
    expect = (g[index] * q[:, None, :]).sum(dim=2)
    old = knn._RESCORE_ELEMENTS
    try:
        for elements in (1, 128 * 37 * 5, 1 << 30):
            knn._RESCORE_ELEMENTS = elements
            assert torch.equal(knn.rescore(q, g, index, None), expect)
    finally:
        knn._RESCORE_ELEMENTS = old
    for width in (1, 7, 16, 33):     # a batched product (einsum) chose its kernel by the width
        assert torch.equal(knn.rescore(q, g, index[:, :width], None), expect[:, :width])
    assert torch.equal(knn.rescore(q[10:11], g, index[10:11], None), expect[10:11])
    rows = torch.arange(70)[:, None].expand(70, 37).reshape(-1)
    for elements in (128, 128 * 37 * 5 + 128, 1 << 30):   # the flat pairs of the streamed pass: the same numbers
        knn._RESCORE_ELEMENTS = elements
        try:
            assert torch.equal(knn.rescore_pairs(q, g, rows, index.reshape(-1)), expect.reshape(-1))
        finally:
            knn._RESCORE_ELEMENTS = old


def test_per_query_depth():
    x = torch.nn.functional.normalize(torch.randn(300, 8, generator=torch.Generator().manual_seed(1)), dim=1)
    depth = torch.randint(1, 40, (300,), generator=torch.Generator().manual_seed(2))
    v, i = knn_search(x, x, depth, self_index=torch.arange(300), chunk_size=64)
    rv, ri = _fp32_reference(x, x, 39, torch.arange(300))
    for row in range(300):
        d = int(depth[row])
        assert torch.equal(i[row, :d], ri[row, :d])
        assert (i[row, d:] == -1).all() and torch.isinf(v[row, d:]).all()


def test_precision_sums_blocking_is_invisible():
    from umlkit.metrics.retrieval import _precision_sums

    gen = torch.Generator().manual_seed(0)
    match = torch.rand(50, 12, generator=gen) < 0.3
    depth = torch.randint(1, 13, (50,), generator=gen)
    a1, r1 = _precision_sums(match, depth, rows_per_block=7)
    a2, r2 = _precision_sums(match, depth, rows_per_block=10_000)
    assert torch.equal(a1, a2) and torch.equal(r1, r2)


def test_read_only_arrays_are_accepted_without_a_warning():
    import warnings

    from umlkit.metrics.retrieval import check_embeddings
    x = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32)
    x.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = check_embeddings(x)
    assert torch.equal(out, torch.from_numpy(x.copy()))


def test_neighbour_class_counts_brute_force():
    from umlkit.metrics import neighbour_class_counts
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(60, 6, generator=gen)
    y = torch.randint(0, 5, (60,), generator=gen)
    counts = neighbour_class_counts(x, y, k=7)
    xn = torch.nn.functional.normalize(x, dim=1).double()
    expect = np.zeros((5, 5), dtype=np.int64)
    for i in range(60):
        sims = [(-(xn[i] @ xn[j]).item(), j) for j in range(60) if j != i]
        for _, j in sorted(sims)[:7]:
            expect[y[i], y[j]] += 1
    assert (counts == expect).all()
    assert counts.sum() == 60 * 7
    with pytest.raises(ValueError, match="k=60"):
        neighbour_class_counts(x, y, k=60)


# ------------------------------------------------------------------- block maxima, self-search tiles
@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 16 columns and self-search tiles of 64, self-search groups of at most 256 opened (row, block)
    pairs and batched GEMMs over slabs of a few blocks: every path, several groups and slabs at test sizes."""
    from umlkit.metrics import knn
    monkeypatch.setattr(knn, "_BLOCK", 16)
    monkeypatch.setattr(knn, "_TILE", 64)
    monkeypatch.setattr(knn, "_OPEN_PAIRS", 256)
    monkeypatch.setattr(knn, "_SLAB_ENTRIES", 16 * 16 * 8)
    return knn


def test_slabs_cover_every_block_once_within_the_budget(small_blocks, monkeypatch):
    knn = small_blocks
    monkeypatch.setattr(knn, "_SLAB_ENTRIES", 16 * 10)   # 10 padded rows of a 16-column block
    counts = [3, 2, 0, 9, 1, 1, 1, 1, 1, 12, 2]
    slabs = knn._slabs(counts)
    assert [j for b0, b1, _ in slabs for j in range(b0, b1)] == list(range(len(counts)))
    for b0, b1, rows in slabs:
        assert rows == max(1, *counts[b0:b1])
        assert (b1 - b0) * rows * 16 <= 16 * 10 or b1 - b0 == 1   # a block wider than the budget sits alone
    assert slabs == [(0, 3, 3), (3, 4, 9), (4, 9, 1), (9, 10, 12), (10, 11, 2)]


def test_best_per_row_orders_by_row_score_then_index_and_cuts(small_blocks):
    """Both orderings (the 64-bit key and, for a gallery too large for it, three stable sorts) give each row's best
    kk by score desc then index asc, their rank, and which rows had more."""
    knn = small_blocks
    gen = torch.Generator().manual_seed(2)
    row = torch.randint(0, 5, (200,), generator=gen)
    col = torch.randperm(1000, generator=gen)[:200]
    val = torch.randint(0, 40, (200,), generator=gen).to(torch.int16)   # many ties
    want = []
    for r in range(5):
        items = sorted((-int(v), int(c)) for rr, c, v in zip(row, col, val) if rr == r)
        want += [(r, c, -v, k) for k, (v, c) in enumerate(items[:6])]
    # fp32 scores (the int8 search's), negative ones and -0.0 == 0.0 among them: the same order
    fval = (val.float() - 20) / 7
    fval[fval == 0] = -0.0
    fwant = [(r, c, (v - 20) / 7, k) for r, c, v, k in want]
    for values, expect, m_pad_list in ((val, want, (1024, 1 << 50)), (fval, fwant, (16, 1024))):
        for m_pad in m_pad_list:   # 1 << 50 (bf16 bits) and 1024 (fp32: 32-bit keys) overflow the one-sort key
            r, c, v, k, cut = knn._best_per_row(row, col, values, 5, 6, m_pad)
            got = list(zip(r.tolist(), c.tolist(), v.tolist(), k.tolist()))
            assert [(a, b, pytest.approx(x), y) for a, b, x, y in got] == expect
            assert v.dtype == values.dtype
            assert cut.tolist() == [int((row == x).sum()) > 6 for x in range(5)]


@pytest.mark.parametrize("merge_at", [4, 0])
def test_threshold_candidates_equal_brute_force(small_blocks, monkeypatch, merge_at):
    """Per row: open the blocks with the n_open largest maxima, tau = the smallest of them; the candidates are the
    best kk scores >= tau in the opened blocks (self-match and padding excluded), by score then index, padded with
    (-inf, -1); rest = tau, or the kk-th candidate when more passed. ``merge_at=0``: the kept scores are cut to
    each row's best kk after every slab (what bounds memory when scores are near-equal)."""
    knn = small_blocks
    monkeypatch.setattr(knn, "_MERGE_AT", merge_at)
    monkeypatch.setattr(knn, "_SLAB_ENTRIES", 16 * 16 * 2 if merge_at == 0 else knn._SLAB_ENTRIES)
    gen = torch.Generator().manual_seed(3)
    n, d = 90, 8   # 6 blocks of 16, the last with 6 padding items
    x = torch.nn.functional.normalize(torch.randn(n, d, generator=gen), dim=1)
    x[40] = x[7]   # an exact duplicate: lower index first
    gb = torch.cat([x.bfloat16(), torch.zeros(6, d, dtype=torch.bfloat16)])
    gt_blocks = gb.view(6, 16, d).transpose(1, 2).contiguous()
    bm = knn._self_block_maxima(gb, n)
    n_open = torch.randint(1, 5, (n,), generator=gen)
    kk = 7
    v, i, rest = knn._threshold_candidates(bm, gb[:n], gt_blocks, torch.arange(n), n, kk, n_open)
    scores = (gb[:n] @ gb.T).float()
    for r in range(n):
        maxima = bm[r].view(torch.bfloat16).float()
        ranked = sorted(range(6), key=lambda j: -maxima[j].item())
        tau = maxima[ranked[int(n_open[r]) - 1]].item()
        opened = [j for j in range(6) if maxima[j].item() >= tau and j in ranked[:int(n_open[r])]]
        items = [(-scores[r, c].item(), c) for j in opened for c in range(16 * j, 16 * j + 16)
                 if c < n and c != r and scores[r, c].item() >= tau]
        items.sort()
        want_i = [c for _, c in items[:kk]] + [-1] * max(0, kk - len(items))
        want_v = [-s for s, _ in items[:kk]] + [float("-inf")] * max(0, kk - len(items))
        assert i[r].tolist() == want_i
        assert v[r].tolist() == want_v
        assert rest[r].item() == (want_v[-1] if len(items) > kk else tau)


def test_self_block_maxima_equal_brute_force(small_blocks):
    knn = small_blocks
    gen = torch.Generator().manual_seed(4)
    for n in (200, 256, 77):   # a ragged last tile, whole tiles, a gallery shorter than one tile
        x = torch.nn.functional.normalize(torch.randn(n, 8, generator=gen), dim=1)
        pad = (-n) % 16
        gb = torch.cat([x.bfloat16(), torch.zeros(pad, 8, dtype=torch.bfloat16)])
        got = knn._self_block_maxima(gb, n).view(torch.bfloat16).float()
        full = (gb @ gb.T).float()[:n]
        full[torch.arange(n), torch.arange(n)] = float("-inf")
        expect = full.view(n, -1, 16).amax(dim=2).clamp(min=0)   # a negative block maximum reads as 0
        assert torch.equal(got, expect)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.int8])
@pytest.mark.parametrize("open_extra", [0, 8])
@pytest.mark.parametrize("extra", [0, 2, 4])
def test_self_search_tiles_equal_fp32_exact(small_blocks, monkeypatch, extra, open_extra, dtype):
    """``open_extra``: blocks opened beyond the depth (0: as few as the depth, so more rows need a second chance).
    Every opening, the bf16 second chance's included, holds at most ``_OPEN_PAIRS`` (row, block) pairs."""
    monkeypatch.setattr(small_blocks, "_OPEN_EXTRA", open_extra)
    pairs = []
    keep = small_blocks._keep_at_least
    monkeypatch.setattr(small_blocks, "_keep_at_least", lambda *a: pairs.append(a[0].numel()) or keep(*a))
    x, _ = _clustered(150, (2, 12), 16, seed=8, noise=0.4)
    x = torch.nn.functional.normalize(torch.from_numpy(x), dim=1)
    n = x.shape[0]
    depth = torch.randint(1, 12, (n,), generator=torch.Generator().manual_seed(1))
    stats = {}
    v, i = small_blocks.knn_search(x, x.clone(), depth, self_index=torch.arange(n), candidate_extra=extra,
                                   chunk_size=50, stats=stats, search_dtype=dtype)
    rv, ri = _fp32_reference(x, x, 11, torch.arange(n))
    assert stats["self_search"] and n % 16   # the symmetric tiles ran, with a padded last block
    assert pairs and max(pairs) <= small_blocks._OPEN_PAIRS
    for row in range(n):   # the same neighbours; similarities to the last bit of the re-scoring's fp32
        d = int(depth[row])
        assert torch.equal(i[row, :d], ri[row, :d])
        torch.testing.assert_close(v[row, :d], rv[row, :d], rtol=0, atol=1e-6)
    assert not (i == torch.arange(n)[:, None]).any()
    if extra == 0:
        assert stats["second_pass_rows"] > 0


def test_collapsed_embeddings_keep_memory_bounded_and_results_exact(small_blocks, monkeypatch):
    """Near-identical embeddings (an untrained or collapsed model), bf16 search: every score of every opened block
    passes the threshold, so the kept scores are cut to each row's best after each slab; the neighbours are still
    exact. (Such rows now go to fp32 at once, next test; the cut is for rows the prediction lets through, so it is
    switched off here.)"""
    knn = small_blocks
    monkeypatch.setattr(knn, "_OPEN_PAIRS", 4096)   # groups of ~300 rows: 4096 opened blocks of 16 scores each
    monkeypatch.setattr(knn, "_crowded", lambda bm_rows, *a: torch.zeros(bm_rows.shape[0], dtype=torch.bool))
    calls = []
    best = knn._best_per_row
    monkeypatch.setattr(knn, "_best_per_row", lambda *a: calls.append((a[0].numel(), a[3], a[4])) or best(*a))
    gen = torch.Generator().manual_seed(5)
    n = 600
    x = torch.nn.functional.normalize(torch.ones(n, 16) + 1e-3 * torch.randn(n, 16, generator=gen), dim=1)
    stats = {}
    v, i = knn.knn_search(x, x.clone(), 5, self_index=torch.arange(n), candidate_extra=2, stats=stats,
                          search_dtype=torch.bfloat16)
    assert stats["self_search"]
    exact = x @ x.T
    exact.fill_diagonal_(float("-inf"))
    rv = exact.topk(5, dim=1).values
    torch.testing.assert_close(v, rv, rtol=0, atol=1e-6)
    torch.testing.assert_close(exact.gather(1, i), v, rtol=0, atol=1e-6)   # each index carries its value
    # every score passes: an uncut first-pass group (kk = 7) would hold ~4096 * 16 scores at once; cut, a group
    # holds at most _MERGE_AT * rows * kk plus one slab's scores (a slab: _SLAB_ENTRIES, or one block's rows)
    assert all(held <= max(knn._MERGE_AT * b * kk, knn._SLAB_ENTRIES // 8) + max(knn._SLAB_ENTRIES, b * 16)
               for held, b, kk in calls)
    assert max(held for held, _, kk in calls if kk == 7) < 4096 * 16 // 3


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.int8])
def test_self_search_sends_collapsed_rows_to_fp32_at_once(small_blocks, monkeypatch, dtype):
    """Near-identical embeddings: the bf16 or int8 error bound exceeds the scores' spread, so more than half the
    blocks lie within one bound of each row's k-th largest maximum and no certificate can hold short of most of the
    row. Such rows take full fp32 rows without opening any block (bf16 before: two candidate passes each, 7x the
    fp32 search's time at 20,000 items); spread-out rows still take the block path. Exact either way."""
    knn = small_blocks
    opened = []
    keep = knn._keep_at_least
    monkeypatch.setattr(knn, "_keep_at_least", lambda *a, **kw: opened.append(a[0].numel()) or keep(*a, **kw))
    gen = torch.Generator().manual_seed(5)
    n = 600
    x = torch.nn.functional.normalize(torch.ones(n, 16) + 1e-3 * torch.randn(n, 16, generator=gen), dim=1)
    depth = torch.full((n,), 5)
    stats = {}
    v, i = knn.knn_search(x, x.clone(), depth, self_index=torch.arange(n), candidate_extra=2, stats=stats,
                          search_dtype=dtype)
    _assert_exact_rows(v, i, x, depth)
    assert stats["self_search"] and stats["fp32_fallback_rows"] == n
    assert stats["second_pass_rows"] == 0 and not opened
    y = torch.nn.functional.normalize(torch.randn(n, 16, generator=gen), dim=1)
    v, i = knn.knn_search(y, y.clone(), depth, self_index=torch.arange(n), candidate_extra=2, stats=stats,
                          search_dtype=dtype)
    _assert_exact_rows(v, i, y, depth)
    assert opened and stats["fp32_fallback_rows"] < n // 10


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_crowded_rows_equal_a_full_count(seed):
    """_crowded counts only the rows whose n_open-th largest maximum reaches the threshold; with n_open at most half
    the blocks that is the same answer as counting every row."""
    from umlkit.metrics.knn import _crowded
    gen = torch.Generator().manual_seed(seed)
    b, nb = 300, 40
    bm = torch.randint(-200, 200, (b, nb), generator=gen).to(torch.int16)
    bm[:100] = 150 + torch.randint(0, 3, (100, nb), generator=gen).to(torch.int16)   # crowded rows
    n_open = torch.randint(1, nb // 2 + 1, (b,), generator=gen)
    top_v = bm.topk(int(n_open.max()), dim=1).values
    low = top_v.gather(1, torch.randint(0, 4, (b, 1), generator=gen)).squeeze(1) - torch.randint(
        0, 60, (b,), generator=gen).to(torch.int16)
    expected = torch.tensor([sum(int(bm[r, j]) >= int(low[r]) for j in range(nb)) * 2 > nb for r in range(b)])
    got = _crowded(bm, top_v, n_open, low)
    assert torch.equal(got, expected)
    assert 0 < int(got.sum()) < b


def test_block_path_of_a_plain_search_equals_fp32_exact(small_blocks):
    """Queries that are part of the gallery at shuffled positions (not a self-search) and a separate gallery."""
    x, _ = _clustered(120, (2, 10), 16, seed=9, noise=0.4)
    g = torch.nn.functional.normalize(torch.from_numpy(x), dim=1)
    perm = torch.randperm(g.shape[0], generator=torch.Generator().manual_seed(0))
    q, si = g[perm[:300]], perm[:300]
    for self_index in (si, None):
        stats = {}
        v, i = small_blocks.knn_search(q, g, 6, self_index=self_index, candidate_extra=2, chunk_size=64,
                                       stats=stats)
        rv, ri = _fp32_reference(q, g, 6, self_index)
        assert not stats["self_search"]
        assert torch.equal(i, ri)
        torch.testing.assert_close(v, rv, rtol=0, atol=1e-6)


def test_block_path_keeps_duplicates_lower_index_first(small_blocks):
    """Exact duplicates in the gallery: the block path returns the lower index first, as the fp32 search does."""
    gen = torch.Generator().manual_seed(0)
    base = torch.nn.functional.normalize(torch.randn(1000, 128, generator=gen), dim=1)
    g = torch.cat([base, base])
    q = torch.nn.functional.normalize(base[:400] + 0.05 * torch.randn(400, 128, generator=gen), dim=1)
    _, i = small_blocks.knn_search(q, g, 3)
    _, ri = _fp32_reference(q, g, 3)
    assert torch.equal(i, ri)


def test_second_chance_opens_enough_blocks_for_its_candidates(small_blocks):
    """k = 1 with no slack, the query's only positive neighbour far below the rest: the second chance must open
    enough blocks for its deeper candidate list (a crash before the floor on its block count)."""
    m = 16 * 7 + 1
    gen = torch.Generator().manual_seed(1)
    g = -torch.nn.functional.normalize(torch.rand(m, 8, generator=gen) + 0.1, dim=1)
    g[-1] = -g[-1]   # the query: every other similarity is negative
    v, i = small_blocks.knn_search(g[-1:], g, 1, self_index=torch.tensor([m - 1]), candidate_extra=0)
    rv, ri = _fp32_reference(g[-1:], g, 1, torch.tensor([m - 1]))
    assert torch.equal(i, ri)


# ------------------------------------------------------------------------------ int8 self-search tiles
def _int8_search(knn, x, depth, **kw):
    stats = {}
    v, i = knn.knn_search(x, x.clone(), depth, self_index=torch.arange(x.shape[0]), search_dtype=torch.int8,
                          stats=stats, **kw)
    assert stats["search_dtype"] == torch.int8 and stats["self_search"]
    return v, i, stats


def _assert_exact_rows(v, i, x, depth):
    """Each row's first depth entries equal the fp32 search's (indices exactly, similarities to the last bit of
    the re-scoring), the rest are blank."""
    n = x.shape[0]
    rv, ri = _fp32_reference(x, x, int(depth.max()), torch.arange(n))
    for row in range(n):
        d = int(depth[row])
        assert torch.equal(i[row, :d], ri[row, :d]), row
        torch.testing.assert_close(v[row, :d], rv[row, :d], rtol=0, atol=1e-6)
        assert (i[row, d:] == -1).all()
    assert not (i == torch.arange(n)[:, None]).any()


def test_int8_quantisation_and_error_bound_hold():
    """Codes are round(x * 127 / max|x|); the bound covers |x_r.x_c - codes_r.codes_c / scale^2| for every pair,
    computed in float64, at several dimensions and for vectors that are not unit length."""
    from umlkit.metrics.knn import _int8_error_bound, _quantize

    gen = torch.Generator().manual_seed(3)
    for dim, norm in ((2, 1.0), (16, 1.0), (128, 1.0), (512, 1.0), (64, 3.0)):
        x = norm * torch.nn.functional.normalize(torch.randn(600, dim, generator=gen), dim=1)
        x[1] = x[0] * 0.999   # near-duplicates, where the relative error matters most
        codes, scale, err = _quantize(x)
        assert scale == pytest.approx(127 / x.abs().max().item())
        assert torch.equal(codes.long(), (x.double() * scale).round().long())
        assert codes.abs().max() == 127
        torch.testing.assert_close(err, (x.double() - codes.double() / scale).norm(dim=1).float())
        bound = _int8_error_bound(x, codes, scale, err).double()
        exact = x.double() @ x.double().T
        approx = (codes.double() @ codes.double().T) / scale**2
        assert ((exact - approx).abs() <= bound[:, None]).all()
        assert bound.max() < 0.05 * norm**2   # and it is not vacuous
    codes, scale, err = _quantize(torch.zeros(3, 4))   # all zero: a scale of 1, no error
    assert scale == 1.0 and not codes.any() and not err.any()


def test_int8_block_maxima_equal_brute_force(small_blocks):
    """int8 tiles: the ceiling of each block's largest int32 code product over ``shift``, the self-match and padding
    excluded (a block holding no other item reads -32768); tiles above the diagonal reduced both ways."""
    knn = small_blocks
    gen = torch.Generator().manual_seed(4)
    for n, shift in ((200, 1), (256, 4), (77, 2), (129, 8)):   # ragged, whole tiles, one tile, a lone last item
        x = torch.nn.functional.normalize(torch.randn(n, 8, generator=gen), dim=1)
        codes, _, _ = knn._quantize(x)
        pad = (-n) % 16
        got = knn._self_block_maxima(torch.cat([codes, torch.zeros(pad, 8, dtype=torch.int8)]), n, shift)
        products = codes.long() @ codes.long().T
        for r in range(n):
            for blk in range(got.shape[1]):
                items = [c for c in range(16 * blk, min(16 * blk + 16, n)) if c != r]
                want = -32768 if not items else -((-max(int(products[r, c]) for c in items)) // shift)
                assert int(got[r, blk]) == want, (n, r, blk)


@pytest.mark.parametrize("open_extra", [0, 8])
@pytest.mark.parametrize("extra", [0, 2, 24])
def test_int8_self_search_equals_fp32_exact(small_blocks, monkeypatch, extra, open_extra):
    """Per-row depths, several groups and slabs, a padded last block; ``extra`` 0 leaves no slack, so cut rows fail
    the final check and take full fp32 rows; 24 makes every row too deep for blocks. Exact every time."""
    monkeypatch.setattr(small_blocks, "_OPEN_EXTRA", open_extra)
    x, _ = _clustered(150, (2, 12), 16, seed=8, noise=0.4)
    x = torch.nn.functional.normalize(torch.from_numpy(x), dim=1)
    n = x.shape[0]
    depth = torch.randint(1, 12, (n,), generator=torch.Generator().manual_seed(1))
    v, i, stats = _int8_search(small_blocks, x, depth, candidate_extra=extra, chunk_size=50)
    assert n % 16
    _assert_exact_rows(v, i, x, depth)
    if extra == 0:
        assert stats["fp32_fallback_rows"] > 0
    elif extra == 2:
        assert stats["fp32_fallback_rows"] < n // 20
    else:   # depth + 24 candidates need more than a quarter of the 68 blocks: every row is a full fp32 row
        assert stats["fp32_fallback_rows"] == n


def test_int8_self_search_opens_further_blocks_when_the_bound_asks(small_blocks, monkeypatch):
    """Step 1 opening only the depth's blocks (``_OPEN_EXTRA`` 0): the error bound reaches past them for many rows,
    so step 2 opens more blocks (rather than full fp32 rows), and the result is exact; deep rows (no blocks) take
    full fp32 rows."""
    knn = small_blocks
    monkeypatch.setattr(knn, "_OPEN_EXTRA", 0)
    gen = torch.Generator().manual_seed(6)
    n = 700
    x = torch.nn.functional.normalize(torch.randn(n, 64, generator=gen), dim=1)
    depth = torch.randint(1, 6, (n,), generator=gen)
    depth[:5] = 40   # k + extra blocks would cover more than a quarter of the gallery
    v, i, stats = _int8_search(knn, x, depth, candidate_extra=4)
    _assert_exact_rows(v, i, x, depth)
    assert stats["second_pass_rows"] > n // 4
    assert 5 <= stats["fp32_fallback_rows"] < n // 4


def test_int8_self_search_with_negative_scores_and_duplicates(small_blocks):
    """Every similarity of one row negative (its threshold below 0), exact duplicates (lower index first), and
    a collapsed cluster of near-identical vectors."""
    knn = small_blocks
    gen = torch.Generator().manual_seed(7)
    x = torch.nn.functional.normalize(torch.rand(300, 8, generator=gen) + 0.1, dim=1)
    x[5] = -x[5]                        # its neighbours all score below 0
    x[100:110] = x[3]                   # duplicates
    x[200:260] = torch.nn.functional.normalize(torch.ones(8) + 1e-4 * torch.randn(60, 8, generator=gen), dim=1)
    depth = torch.full((300,), 6)
    v, i, _ = _int8_search(knn, x, depth, candidate_extra=3)
    _assert_exact_rows(v, i, x, depth)
    assert (v[5] < 0).all()
    assert i[3, :6].tolist() == list(range(100, 106))


def test_int8_self_search_is_deterministic(small_blocks):
    x, _ = _clustered(100, (2, 10), 16, seed=2, noise=0.5)
    x = torch.nn.functional.normalize(torch.from_numpy(x), dim=1)
    first = _int8_search(small_blocks, x, 5)
    second = _int8_search(small_blocks, x, 5)
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1]) and first[2] == second[2]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.int8, torch.float32])
def test_search_runs_fp32_products_in_fp32_whatever_the_process_allows(small_blocks, monkeypatch, dtype):
    """A process that let oneDNN run fp32 matmuls in bf16 (``set_float32_matmul_precision("medium")``) would void
    the exact paths' fp32 slack: the search switches it off while it runs (the re-rank sees IEEE fp32) and restores
    it afterwards, also when it raises."""
    knn = small_blocks
    matmul = torch.backends.mkldnn.matmul
    seen = []
    rescore = knn.rescore
    monkeypatch.setattr(knn, "rescore", lambda *a: seen.append(matmul.fp32_precision) or rescore(*a))
    x, _ = _clustered(60, (2, 10), 16, seed=3, noise=0.4)
    x = torch.nn.functional.normalize(torch.from_numpy(x), dim=1)
    before = matmul.fp32_precision
    try:
        matmul.fp32_precision = "bf16"
        v, i = knn.knn_search(x, x.clone(), 5, self_index=torch.arange(x.shape[0]), search_dtype=dtype)
        assert seen and set(seen) == {"ieee"}
        assert matmul.fp32_precision == "bf16"
        with pytest.raises(ValueError, match="k must be >= 1"):
            knn.knn_search(x, x, 0)
        assert matmul.fp32_precision == "bf16"
    finally:
        matmul.fp32_precision = before
    _assert_exact_rows(v, i, x, torch.full((x.shape[0],), 5))


def test_fp32_guard_uses_the_legacy_setting_on_older_torch(monkeypatch):
    """torch < 2.9 has no per-backend setting: the guard sets and restores ``float32_matmul_precision``."""
    from umlkit.metrics import knn
    monkeypatch.setattr(torch.backends.mkldnn, "matmul", None, raising=False)
    state, calls = ["medium"], []
    monkeypatch.setattr(torch, "get_float32_matmul_precision", lambda: state[0])
    monkeypatch.setattr(torch, "set_float32_matmul_precision", lambda p: calls.append(p) or state.__setitem__(0, p))
    with knn._ieee_fp32_matmul():
        assert state[0] == "highest"
    assert calls == ["highest", "medium"] and state[0] == "medium"
    state[0], calls[:] = "highest", []
    with knn._ieee_fp32_matmul():
        pass
    assert calls == []


@pytest.mark.parametrize("call, message", [
    (lambda x: knn_search(x.double(), x, 2), "query must be a 2-d float32 tensor .* dtype torch.float64"),
    (lambda x: knn_search(x, x[:, :3], 2), "query has dimension 4 but gallery has 3"),
    (lambda x: knn_search(x[0], x, 2), r"query must be a 2-d float32 tensor .* shape \(4,\)"),
    (lambda x: knn_search(x.numpy(), x, 2), "query must be a torch.Tensor, got ndarray"),
    (lambda x: knn_search(torch.cat([x, torch.full((1, 4), float("nan"))]), x, 2), "1 row.* NaN or inf .* row 10"),
    (lambda x: knn_search(x, x, 2.7), "k must be an int or an integer tensor, got 2.7"),
    (lambda x: knn_search(x, x, torch.full((10,), 2.0)), "integer tensor, got dtype torch.float32"),
    (lambda x: knn_search(x, x, 2, self_index=torch.arange(10).float()), r"self_index must be an integer tensor"),
    (lambda x: knn_search(x, x, 2, self_index=torch.arange(10) + 5), r"in \[0, 10\) or -1, got \[5, 14\]"),
    (lambda x: evaluate_retrieval(x, list(range(10))), r"NMI needs .* 10 queries, 10 classes. Leave it out"),
    (lambda x: evaluate_retrieval(x, [0] * 10), r"NMI needs .* 10 queries, 1 classes. Leave it out"),
    (lambda x: knn_search(x, x, 2, chunk_size=0), "chunk_size must be an integer >= 1, got 0"),
    (lambda x: knn_search(x, x, 2, candidate_extra=-5), "candidate_extra must be an integer >= 0, got -5"),
    (lambda x: neighbour_class_counts(x, [0] * 9 + [10**6], k=2), r"C <= 10 .* got \[0, 1000000\]; map raw"),
    (lambda x: evaluate_retrieval(x, [0] * 5 + [1] * 5, ks=(0, 1)), r"ks must be integers >= 1 .* \[0, 1\]"),
    (lambda x: evaluate_retrieval(x, [0] * 5 + [1] * 5, metrics="R@1"), r"the string 'R@1' \(write \['R@1'\]\)"),
])
def test_search_inputs_it_cannot_take_are_named(call, message):
    x = torch.nn.functional.normalize(torch.randn(10, 4, generator=torch.Generator().manual_seed(0)), dim=1)
    with pytest.raises((ValueError, TypeError), match=message):
        call(x)


def _ternary(n: int, d: int, seed: int) -> torch.Tensor:
    """Normalised {-1, 0, 1} codes: many pairs tie exactly in real arithmetic (quantised or hashed features)."""
    x = torch.randint(-1, 2, (n, d), generator=torch.Generator().manual_seed(seed)).float()
    x[x.abs().sum(1) == 0, 0] = 1.0
    return torch.nn.functional.normalize(x, dim=1)


@pytest.mark.parametrize("n, d, k, extra", [(2048, 16, 1, 24), (12000, 24, 3, 4)])
def test_every_search_dtype_returns_the_same_neighbours_on_exact_ties(n, d, k, extra):
    """The default search dtype comes from a start-up timing, so the searches must agree bit for bit, ties included:
    with re-scored values that depended on the candidate list's width, the bf16 search gave 27 of these 2,048 rows
    (plain search) and 17 of the 12,000 (self-search tiles) another neighbour than the fp32 search."""
    x = _ternary(n, d, 0 if n == 2048 else 1)
    out = {}
    for dtype in (torch.float32, torch.bfloat16, torch.int8):
        stats = {}
        out[dtype] = knn_search(x, x, k, self_index=torch.arange(n), search_dtype=dtype, candidate_extra=extra,
                                stats=stats)
        assert stats["self_search"] == (n > 2048 and dtype != torch.float32)
    for dtype in (torch.bfloat16, torch.int8):
        assert torch.equal(out[dtype][1], out[torch.float32][1]), dtype
        assert torch.equal(out[dtype][0], out[torch.float32][0]), dtype
