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


def test_ratios_are_taken_within_a_repeat_and_to_the_same_attention_path(bench):
    """Hand-made results: each ratio divides by full fine-tuning of its own repeat (a slow repeat slows both), and
    a ``+matmul`` row by ``full+matmul``; a method whose baseline did not run has no ratio."""
    def r(repeat, method, img, mb, gflop, precision="bf16"):
        return {"repeat": repeat, "precision": precision, "method": method, "img_per_s": img, "peak_mb": mb,
                "gflop": gflop}
    results = [r(1, "full", 10.0, 1000, 400), r(1, "puma", 12.0, 800, 320),
               r(2, "full", 5.0, 1000, 400), r(2, "puma", 5.5, 700, 320),
               r(1, "full+matmul", 20.0, 1200, 390), r(1, "puma+matmul", 30.0, 900, 300),
               r(1, "puma", 1.0, 1.0, 1.0, precision="fp32")]
    out = bench.ratios(results)
    assert set(out) == {("bf16", "full"), ("bf16", "puma"), ("bf16", "full+matmul"), ("bf16", "puma+matmul")}
    assert out[("bf16", "puma")]["throughput"] == [12.0 / 10.0, 5.5 / 5.0]
    assert out[("bf16", "puma")]["memory"] == [0.8, 0.7]
    assert out[("bf16", "puma")]["bound"] == [400 / 320, 400 / 320]
    assert out[("bf16", "puma+matmul")]["throughput"] == [1.5]
    assert out[("bf16", "puma+matmul")]["bound"] == [390 / 300]
    assert bench._spread([1.2, 1.1, 1.0]) == "x1.10 [1.00-1.20]"


def test_matmul_attention_runs_as_gemms(bench):
    """``+matmul`` switches timm's attention to explicit products: the FLOP counter then sees no attention
    kernel, and the same products as GEMMs (4 B H N^2 d forward, 8 B H N^2 d backward: nothing recomputed)."""
    assert bench.parse_method("puma+matmul+skip") == ("puma", {"matmul_attention": True, "skip_dropped": True})
    fused, matmul = (bench.run_one(m, "fp32", "cpu", batch=4, steps=1, warmup=0, backbone="vit_tiny_uml", size=32)
                     for m in ("full", "full+matmul"))
    assert fused["attention_gflop"] > 0 and matmul["attention_gflop"] == 0
    # the flash kernel's backward recomputes the scores (14 B H N^2 d in all); the explicit path does 12 B H N^2 d
    assert matmul["gflop"] == pytest.approx(fused["gflop"] - fused["attention_gflop"] * 2 / 14)


def test_compile_suffixes_are_taken_to_eager_full_fine_tuning(bench):
    """Compilation's gain is the question (issue 60 item 7), so ``+compile``/``+graphs``/``+capture`` rows are
    taken to eager full fine-tuning; ``+matmul`` keeps its own baseline (another attention kernel)."""
    assert bench.parse_method("puma+compile+skip") == ("puma", {"compile": "default", "skip_dropped": True})
    assert bench.parse_method("full+graphs") == ("full", {"compile": "reduce-overhead"})
    assert bench.parse_method("puma+capture") == ("puma", {"capture": True})
    assert bench.baseline_of("puma+compile") == "full" and bench.baseline_of("full+graphs") == "full"
    assert bench.baseline_of("puma+matmul+compile") == "full+matmul" and bench.baseline_of("puma") == "full"
    with pytest.raises(SystemExit, match=r"\+graphs or \+capture"):
        bench.parse_method("puma+graph")


@pytest.mark.heavy   # make test-all only: inductor needs a C compiler and Python's headers, and 35 s on 2 cores
def test_compiled_step_runs_and_counts_the_eager_models_flops(bench):
    """``+compile`` steps through ``torch.compile(model)``; the FLOP counter, which cannot see compiled kernels,
    counts the same step on the eager model, so the bound compares like with like."""
    eager, compiled = (bench.run_one(m, "fp32", "cpu", batch=4, steps=1, warmup=1, backbone="vit_tiny_uml", size=32)
                       for m in ("full", "full+compile"))
    assert compiled["gflop"] == eager["gflop"] > 0 and compiled["img_per_s"] > 0
