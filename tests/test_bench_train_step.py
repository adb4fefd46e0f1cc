"""benchmarks/bench_train_step.py: method suffixes map to model options, a typo stops the run, and one tiny
in-process step reports a FLOP count that drops when PUMA skips its dropped samples."""

import pytest

BENCH_SCRIPT = "bench_train_step"  # the ``bench`` fixture (conftest.py) imports it


def test_method_suffixes(bench):
    assert bench.parse_method("puma") == ("puma", {})
    assert bench.parse_method("puma+light") == ("puma", {"checkpoint_blocks": True})
    assert bench.parse_method("puma+light8+skip") == ("puma", {"checkpoint_blocks": 8, "skip_dropped": True})
    for bad in ("puma+lite", "puma+lightx", "puma+"):
        with pytest.raises(SystemExit, match="unknown suffix"):
            bench.parse_method(bad)


def test_flop_count_of_a_tiny_step(bench):
    runs = {m: bench.run_one(m, "fp32", "cpu", batch=8, steps=1, warmup=0, backbone="vit_tiny_uml", size=32)
            for m in ("full", "bitfit", "puma", "puma+skip", "puma+light")}
    assert all(r["img_per_s"] > 0 and r["gflop"] > 0 for r in runs.values())
    assert runs["bitfit"]["gflop"] < runs["full"]["gflop"]  # frozen weights: no weight-gradient GEMMs
    assert runs["puma+skip"]["gflop"] < runs["puma"]["gflop"]  # only the kept samples reach the adapters
    assert runs["puma+light"]["gflop"] > runs["puma"]["gflop"]  # the blocks' forward runs twice


def test_attention_flops_are_counted_on_the_cpu(bench):
    """PyTorch's counter skips the CPU flash-attention kernels; ``_flops`` counts them by PyTorch's own formulas:
    4 B H N^2 d forward and 10 B H N^2 d backward (the scores recomputed), hand-computed here, beside the GEMM."""
    import sys

    import torch
    flops = sys.modules.get("_flops") or __import__("_flops")
    b, h, n, d = 2, 3, 17, 8
    q, k, v = (torch.randn(b, h, n, d, requires_grad=True) for _ in range(3))
    w = torch.randn(d, 5, requires_grad=True)
    with flops.counter() as mode:
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        (out @ w).sum().backward()
    kinds = flops.by_kind(mode)
    assert kinds["attention"] * 1e9 == (4 + 10) * b * h * n * n * d
    assert kinds["gemm"] * 1e9 == 3 * 2 * b * h * n * d * 5   # out @ w forward, and both of its gradients
