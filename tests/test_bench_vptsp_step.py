"""benchmarks/bench_vptsp_step.py (VPTSP Table 10): a tiny in-process run on the quick profile writes the JSON
schema the chapter reads, and the step it times is VPTSP's real training step (two passes through the ViT)."""
import json
import re

import pytest
import torch

BENCH_SCRIPT = "bench_vptsp_step"  # the ``bench`` fixture (conftest.py) imports it


@pytest.fixture
def counted_backbone(monkeypatch):
    """Counts the calls of every PEFT ViT's forward_features (the whole backbone pass), with the task prompts
    (image branch) or without (VPTSP's proxy branch with the class prompts)."""
    from umlkit.models.peft_vit import PEFTViT
    calls = []
    original = PEFTViT.forward_features

    def counting(self, *args, **kwargs):
        calls.append(kwargs.get("use_task_prompts", True))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(PEFTViT, "forward_features", counting)
    return calls


def test_bench_writes_the_schema(bench, tmp_path, counted_backbone):
    out = tmp_path / "table10.json"
    threads = torch.get_num_threads()
    try:
        report = bench.run("quick", "cpu", rounds=1, steps=1, warmup=0, batches=(4,), out=out, threads=1, log=None)
    finally:
        torch.set_num_threads(threads)
    data = json.loads(out.read_text())
    assert data == json.loads(json.dumps(report))
    assert set(data) == {"machine", "device", "profile", "backbone", "image_size", "precision", "steps", "warmup",
                         "rounds", "date", "results"}
    assert (data["device"], data["profile"], data["backbone"], data["image_size"]) == ("cpu", "quick",
                                                                                         "vit_tiny_uml_v2", 32)
    assert (data["precision"], data["steps"], data["warmup"], data["rounds"]) == ("fp32", 1, 0, 1)
    assert isinstance(data["machine"], str) and data["machine"]
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", data["date"])
    paper = ["Full Fine-tuning (PA)", "linear", "BitFit", "Adapter", "VPT", "VPTSP"]
    assert [r["method"] for r in data["results"]] == paper
    assert [r["row"] for r in data["results"]] == ["Full Fine-tuning (PA)", "Linear Prob", "BitFit", "Adapter", "VPT",
                                                   "VPTSP-G (B)"]
    for r in data["results"]:
        assert set(r) == {"method", "row", "batch_size", "round", "ms"}
        assert (r["batch_size"], r["round"]) == (4, 0)
        assert isinstance(r["ms"], float) and r["ms"] > 0
    # one step each (no warm-up): one backbone pass per baseline, two for VPTSP (image branch with the task
    # prompts, then the proxy branch with the class prompts), in the order of the methods
    assert counted_backbone == [True] * 5 + [True, False]
    assert "VPTSP" in bench.format_table(report)


def test_summary_ratios_follow_each_rounds_baseline(bench):
    """Hand-computed: full fine-tuning takes 100 then 200 ms, VPT 50 ms both times: VPT's mean ratio is
    (0.5 + 0.25) / 2, not 50 / 150; its mean time 50 ms with no spread."""
    results = [{"method": m, "row": row, "batch_size": 32, "round": k, "ms": ms}
               for k, full in ((0, 100.0), (1, 200.0))
               for m, row, ms in (("Full Fine-tuning (PA)", "Full Fine-tuning (PA)", full), ("VPT", "VPT", 50.0))]
    summary = {r["method"]: r for r in bench.summarize(results)}
    assert summary["VPT"]["ratio"] == pytest.approx(0.375) and summary["VPT"]["ms"] == pytest.approx(50.0)
    assert summary["VPT"]["ms_std"] == 0.0
    assert summary["Full Fine-tuning (PA)"]["ms"] == pytest.approx(150.0)
    assert summary["Full Fine-tuning (PA)"]["ms_std"] == pytest.approx(70.7107, rel=1e-4)


def test_vptsp_step_trains_both_branches(bench, counted_backbone):
    """The timed VPTSP step is forward_train + proxy_anchor_external + backward + step: the class prompts of the
    batch's classes (only those) receive gradients, and the prompts and the proxy bias move."""
    cfg = bench.method_config("quick", "VPTSP-G (B)")
    assert cfg["objective"][0]["name"] == "proxy_anchor_external"
    model, step = bench.build_step(cfg, "quick", 4, "cpu")
    assert model.num_classes == bench.train_classes(cfg) == len(cfg["data"]["splits"]["cars"]["train"])
    prompts = model.class_prompts[0].detach().clone()
    bias = model.proxy_bias.detach().clone()
    step()
    assert len(counted_backbone) == 2
    has_grad = model.class_prompts[0].grad.flatten(1).abs().sum(1) > 0
    assert has_grad[:2].all() and not has_grad[2:].any()  # the classes 0 and 1 of y = arange(4) // 2
    assert not torch.equal(model.class_prompts[0].detach()[:2], prompts[:2])
    assert not torch.equal(model.proxy_bias.detach(), bias)
