"""benchmarks/full_epoch.py: the loader-only measurement walks the job's whole sampler (every batch, every epoch)."""

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
