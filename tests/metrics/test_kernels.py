"""umlkit.metrics.kernels: the bf16 / int8 GEMM speed-ups come from the CPU's instruction set and one measurement
at the search's scale per machine, read back from the cache by later processes."""
import json

import pytest

from umlkit.metrics import kernels


@pytest.fixture
def cache(monkeypatch, tmp_path):
    from umlkit.metrics import threads
    monkeypatch.setenv("UMLKIT_CACHE", str(tmp_path))
    monkeypatch.setattr(kernels, "_MEMO", {})
    monkeypatch.setattr(threads, "busy_cores", lambda interval=0.1: 0.0)    # a quiet machine
    return tmp_path / "gemm_speedups.json"


def test_a_kernel_the_cpu_lacks_is_not_timed_and_scores_zero(cache, monkeypatch):
    """A Zen 3 EPYC (avx2, no avx512_bf16, no VNNI): neither fast kernel is timed; the choice is fp32."""
    from umlkit.metrics import knn
    monkeypatch.setattr(kernels, "cpu_flags", lambda: {"avx2", "fma", "sse4_2"})
    timed = []
    real = kernels._products
    monkeypatch.setattr(kernels, "_products", lambda dim, kinds: (timed.append(tuple(kinds)), real(32, kinds))[1])
    assert kernels.speedups(32) == {"bf16": 0.0, "int8": 0.0}
    assert timed == [()]                                   # only the fp32 product ran
    assert knn.choose_search_dtype(self_search=True, dim=32) == knn.torch.float32
    assert kernels.native("bf16", {"avx512_bf16"}) and kernels.native("int8", {"avx_vnni"})
    assert kernels.native("int8", None)                     # unknown flags: the measurement decides


def test_the_speedups_are_measured_once_per_machine_and_read_back(cache, monkeypatch):
    monkeypatch.setattr(kernels, "cpu_flags", lambda: None)
    first = kernels.speedups(16)
    assert set(first) == {"bf16", "int8"} and all(v >= 0 for v in first.values())
    stored = json.loads(cache.read_text())
    (key, value), = stored.items()
    assert "d=16" in key and "threads" in key and value["bf16"] == first["bf16"]
    # another process (empty memo) reads the file and measures nothing
    monkeypatch.setattr(kernels, "_MEMO", {})
    monkeypatch.setattr(kernels, "_measure", lambda dim, kinds: pytest.fail("measured again"))
    assert kernels.speedups(16) == first
    # a corrupt cache is measured over, not trusted
    cache.write_text("{not json")
    monkeypatch.setattr(kernels, "_MEMO", {})
    monkeypatch.setattr(kernels, "_measure", lambda dim, kinds: {"bf16": 1.5, "int8": 2.5})
    assert kernels.speedups(16) == {"bf16": 1.5, "int8": 2.5}
    assert json.loads(cache.read_text())[key]["int8"] == 2.5


def test_an_unwritable_cache_still_gives_the_measurement(monkeypatch, tmp_path):
    from umlkit.metrics import threads
    monkeypatch.setattr(threads, "busy_cores", lambda interval=0.1: 0.0)
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("UMLKIT_CACHE", str(blocker / "sub"))      # a folder under a file cannot be made
    monkeypatch.setattr(kernels, "_MEMO", {})
    monkeypatch.setattr(kernels, "_measure", lambda dim, kinds: {"bf16": 2.0, "int8": 3.0})
    assert kernels.speedups(8) == {"bf16": 2.0, "int8": 3.0}


def test_a_measurement_taken_on_a_busy_machine_is_used_but_not_cached(cache, monkeypatch):
    from umlkit.metrics import threads
    monkeypatch.setattr(threads, "busy_cores", lambda interval=0.1: 1.0)
    monkeypatch.setattr(kernels, "_measure", lambda dim, kinds: {"bf16": 15.9, "int8": 28.2})
    assert kernels.speedups(8) == {"bf16": 15.9, "int8": 28.2}
    assert not cache.exists()
