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
