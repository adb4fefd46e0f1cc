"""benchmarks/full_epoch.py: the loader-only measurement walks the job's whole sampler; the loop-only variants (cached
batches, skipped loss checks) do what they say."""

import pytest

BENCH_SCRIPT = "full_epoch"  # the ``bench`` fixture (conftest.py) imports it


def test_loader_only_counts_the_samplers_images(bench, tmp_path, monkeypatch):
    from umlkit.data import make_mini
    monkeypatch.setenv("UMLKIT_DATA", str(make_mini(tmp_path / "data", size="tiny")))
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path / "results"))
    row = bench.loader_rate("Ours-seed0", 2, "cpu", workers="0")
    cfg = bench.job_config("Ours-seed0", 2, "cpu", workers="0")
    assert row["workers"] == 0 and len(row["epoch_seconds"]) == 2
    assert row["images_per_epoch"] % cfg["data"]["batch_size"] == 0 and row["images_per_epoch"] > 0
    assert row["img_per_s"] == row["images_per_epoch"] / row["epoch_seconds"][1]


def test_skipped_loss_checks_let_nan_embeddings_through(bench):
    import sys

    import torch

    from umlkit.losses import create_loss
    from umlkit.losses._checks import NonFiniteEmbeddingsError
    saved = {n: m.check_inputs for n, m in list(sys.modules.items())
             if n.startswith("umlkit.losses") and hasattr(m, "check_inputs")}
    loss = create_loss("cosface", num_classes=3, embedding_size=4)
    nan, y = torch.full((2, 4), float("nan")), torch.tensor([0, 1])
    with pytest.raises(NonFiniteEmbeddingsError):
        loss(nan, y)
    try:
        bench.skip_loss_checks()
        assert torch.isnan(loss(nan, y))
    finally:
        for n, f in saved.items():
            sys.modules[n].check_inputs = f
    with pytest.raises(NonFiniteEmbeddingsError):
        loss(nan, y)


def test_cached_batches_replay_one_pass_without_waiting_for_the_loader(bench, tmp_path, monkeypatch):
    from umlkit.data import make_mini
    from umlkit.train import engine, fit
    monkeypatch.setattr(engine, "_set_up", engine._set_up)   # restored after the test
    bench.cache_batches()
    root = make_mini(tmp_path / "mini", sources=["flowers", "aircraft"])
    cfg = {"data": {"root": str(root), "datasets": ["flowers", "aircraft"], "batch_size": 32},
           "model": {"method": "puma", "pretrained": False, "embed_dim": 16,
                     "options": {"adapter_dim": 4, "pool_size": 3, "prompt_length": 1}},
           "loss": {"name": "cosface"}, "train": {"epochs": 2, "progress": False}}
    history = fit(cfg, run_dir=tmp_path / "run").history
    assert [h["steps"] for h in history] == [600 // 32] * 2   # flowers + aircraft: 600 training images
    assert all(h["data_seconds"] < 0.05 * h["seconds"] for h in history)
