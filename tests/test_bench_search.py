"""benchmarks/bench_search.py: the faiss baseline drops each item itself and finds the fp32 search's neighbours, and
the agreement count compares neighbour sets per row."""

import torch

BENCH_SCRIPT = "bench_search"  # the ``bench`` fixture (conftest.py) imports it


def test_faiss_baseline_excludes_the_item_and_agrees_with_umlkit(bench):
    x, depth = bench.problem(0.02)   # 2,970 items: large enough for the symmetric tiles
    assert int(depth.min()) == 8
    _, faiss_idx = bench.run_faiss(x, depth)
    assert faiss_idx.shape == (x.shape[0], int(depth.max()))
    assert not (faiss_idx == torch.arange(x.shape[0])[:, None]).any()
    _, fp32_idx, search = bench.run_umlkit(x, depth, torch.float32)
    _, int8_idx, search8 = bench.run_umlkit(x, depth, torch.int8)
    assert (search, search8) == ("float32", "int8")
    assert bench.same_sets(faiss_idx, fp32_idx, depth) > 0.99   # faiss may order near-ties differently
    assert bench.same_sets(int8_idx, fp32_idx, depth) == 1.0


def test_same_sets_counts_rows_whose_first_depth_neighbours_match(bench):
    a = torch.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    b = torch.tensor([[2, 1, 0], [4, 6, 5], [7, 9, 8]])
    assert bench.same_sets(a, b, torch.tensor([2, 3, 1])) == 1.0
    assert bench.same_sets(a, b, torch.tensor([3, 3, 2])) == 1 / 3


def test_hard_inputs_are_collapsed_or_random_at_depth_ten(bench):
    x, depth = bench.problem(0.0, "collapsed", 16, items=300)
    assert x.shape == (300, 16) and torch.equal(depth, torch.full((300,), 10))
    torch.testing.assert_close(x.norm(dim=1), torch.ones(300))
    cos = x @ x.T
    assert float(cos.min()) > 0.99   # every pair nearly equal
    y, _ = bench.problem(0.0, "random", 16, items=300)
    assert float((y @ y.T).min()) < 0   # spread out
