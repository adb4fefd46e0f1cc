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


def test_the_machine_line_names_the_cpu_its_instruction_sets_and_blas(bench):
    """Issue 62 item 6: a ratio measured on one CPU does not hold on another, so every header names the CPU model,
    the instruction sets the kernels depend on (as /proc/cpuinfo reports them) and torch's BLAS."""
    import sys
    machine = sys.modules["_machine"]
    line = machine.describe()
    assert line.startswith(f"CPU: {machine.cpu_model()} (") and "BLAS " in line and "threads" in line
    flags = machine.cpu_flags()
    assert set(flags) <= set(machine._ISA) and all(f in line for f in flags)
    with open("/proc/cpuinfo") as f:
        reported = {w for ln in f if ln.startswith("flags") for w in ln.split(":", 1)[1].split()}
    assert set(flags) == set(machine._ISA) & reported


def test_the_default_set_and_its_accuracy_calculator_equal_compute_the_same_metrics(bench):
    """Issue 62 item 3: ``pml-default`` is the default set's equal (PML's R@1, MAP@R, RP as umlkit's; NMI from its
    own k-means, close), each umlkit line is compared with its equal, and the six-metric line with ``pml``."""
    x, y = bench.uml_like_embeddings(0.01, dim=128)   # 1,485 items
    ours = bench._default_set("umlkit-default", x, y, [])
    theirs = bench._pml("pml-default", x, y)
    assert set(theirs) == {"R@1", "MAP@R", "RP", "mAP@1000", "NMI"}
    assert theirs["R@1"] == ours["R@1"] and abs(theirs["MAP@R"] - ours["MAP@R"]) < 1e-6
    assert abs(theirs["RP"] - ours["RP"]) < 1e-6 and abs(theirs["NMI"] - ours["NMI"]) < 0.02
    assert bench._BASELINE["umlkit-default"] == "pml-default" and bench._BASELINE.get("umlkit", "pml") == "pml"
    assert set(bench._BASELINE.values()) <= set(bench._PML)
