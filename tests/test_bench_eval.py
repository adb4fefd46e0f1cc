"""benchmarks/bench_eval.py: the GPU search path (``cuda-fp32``), run here with its device calls mapped to the CPU,
gives the metrics of umlkit's exact fp32 search."""

import torch

BENCH_SCRIPT = "bench_eval"  # the ``bench`` fixture (conftest.py) imports it


def test_cuda_search_scores_like_the_exact_fp32_search(bench, monkeypatch):
    from umlkit.metrics import evaluate_retrieval
    from umlkit.metrics.examples import uml_like_embeddings
    monkeypatch.setattr(torch.Tensor, "cuda", lambda self: self)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda: "no GPU here")
    x, y = uml_like_embeddings(0.03, dim=128)   # 4,455 items, classes up to 100 items: several query blocks
    metrics = ["R@1", "R@2", "R@4", "R@8", "MAP@R", "RP"]
    got, search = bench._cuda_search(x, y, metrics)
    want = evaluate_retrieval(x, y, metrics=metrics, search_dtype=torch.float32)
    assert search == f"no GPU here, fp32, depth {int(torch.bincount(torch.as_tensor(y)).max()) - 1}"
    assert got == {m: want[m] for m in metrics}
