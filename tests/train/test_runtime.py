"""Device, precision, loader workers and batch size (train.runtime): ``auto`` resolved from the machine, and every
setting the machine or the data cannot honour refused before data or model, naming the key and the fix."""

import pytest
import torch

from umlkit.train import fit
from umlkit.train.runtime import check_batch, resolve_precision, resolve_workers


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)


def test_auto_precision_follows_the_device(monkeypatch):
    assert resolve_precision("auto", torch.device("cpu")) == "fp32"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert resolve_precision("auto", torch.device("cuda")) == "bf16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    assert resolve_precision("auto", torch.device("cuda")) == "fp16"
    from umlkit.metrics import kernels
    monkeypatch.setattr(kernels, "cpu_flags", lambda: {"avx2", "avx512f", "avx512_bf16", "avx512_vnni"})   # Zen 4
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    assert resolve_precision("bf16", torch.device("cpu")) == "bf16"     # an explicit choice is kept where native
    monkeypatch.setattr(kernels, "cpu_flags", lambda: {"avx2", "fma"})                                     # Zen 3
    with pytest.warns(UserWarning, match="no native bf16.*training in fp32 instead"):
        assert resolve_precision("bf16", torch.device("cpu")) == "fp32"
    monkeypatch.setattr(kernels, "cpu_flags", lambda: {"avx2", "avx512f", "avx512_bf16"})
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")                    # oneDNN limited below bf16
    with pytest.warns(UserWarning, match="no native bf16"):
        assert resolve_precision("bf16", torch.device("cpu")) == "fp32"
    with pytest.raises(ValueError, match="precision = 'fp16' needs a GPU.*--set precision=auto"):
        resolve_precision("fp16", torch.device("cpu"))


def test_auto_workers_leave_one_core_and_too_many_are_refused():
    assert [resolve_workers("auto", c) for c in (1, 2, 4, 64)] == [0, 1, 3, 8]
    assert resolve_workers(2, cores=2) == 2
    with pytest.raises(ValueError, match=r"data.num_workers = 8: this machine has 2 CPU core\(s\); use "
                                         r"data.num_workers: auto \(1 here\) or at most 2"):
        resolve_workers(8, cores=2)


def test_a_batch_the_data_cannot_fill_is_refused_with_the_fix():
    data = type("D", (), {"__len__": lambda self: 40, "num_classes": 10, "source_names": ["CUB"]})()
    check_batch(40, data, 4, "random")
    check_batch(40, data, 4, "m_per_class")             # 10 classes x 4 images
    with pytest.raises(ValueError, match=r"batch_size = 180: CUB has only 40 training images; .*"
                                         r"--set data.batch_size=40"):
        check_batch(180, data, 4, "random")
    with pytest.raises(ValueError, match=r"the m_per_class sampler fills a batch with 12 classes of 2 images, and "
                                         r"CUB has 10 training classes; .*--set data.batch_size=20"):
        check_batch(24, data, 2, "m_per_class")
    small = type("D", (), {"__len__": lambda self: 24, "num_classes": 4, "source_names": ["cub"]})()
    # both limits at once: 24 images, but 4 classes x 2 per class: the fix is the batch that passes both (8), not
    # 24 and then 8 in a second refusal
    with pytest.raises(ValueError, match=r"batch_size = 64: cub has only 24 training images in 4 classes, and the "
                                         r"class_random sampler takes 2 per class; .*--set data.batch_size=8\)"):
        check_batch(64, small, 2, "class_random")


def test_fp16_on_the_cpu_fails_before_any_data_is_read(no_gpu, tmp_path):
    with pytest.raises(ValueError, match="precision = 'fp16' needs a GPU"):
        fit({"precision": "fp16", "data": {"root": str(tmp_path / "none")}, "train": {"progress": False}},
            run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_the_batch_check_runs_before_the_model_on_real_data(mini_root, tmp_path):
    cfg = {"data": {"root": str(mini_root), "datasets": ["flowers"], "batch_size": 5000},
           "model": {"pretrained": False}, "train": {"progress": False, "epochs": 1}}
    with pytest.raises(ValueError, match=r"data.batch_size = 5000: flowers has only 300 training images"):
        fit(cfg, run_dir=tmp_path / "run")
