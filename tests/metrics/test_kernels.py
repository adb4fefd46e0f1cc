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


def test_a_busy_process_reads_the_entry_a_quiet_one_stored_for_the_configured_threads(cache, monkeypatch):
    """Inside a search that a busy machine runs on 1 of 2 threads the key still names 2 threads, so the quiet
    measurement is used instead of a new, load-distorted one; a timing disturbed only after it started is not kept."""
    import torch

    from umlkit.metrics import threads
    monkeypatch.setattr(kernels, "cpu_flags", lambda: None)
    monkeypatch.setattr(kernels, "_measure", lambda dim, kinds: {"bf16": 2.0, "int8": 3.0})
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert kernels.speedups(8) == {"bf16": 2.0, "int8": 3.0}          # quiet: stored under "2 threads"
        monkeypatch.setattr(kernels, "_MEMO", {})
        monkeypatch.setattr(kernels, "_measure", lambda dim, kinds: pytest.fail("measured under load"))
        monkeypatch.setattr(threads, "busy_cores", lambda interval=0.1: 1.0)
        monkeypatch.setattr(threads, "_LAST", {})
        monkeypatch.setattr(threads, "LARGE_SEARCH", 1)
        with threads.limited_threads(10) as n:
            assert n == 1 and kernels.speedups(8) == {"bf16": 2.0, "int8": 3.0}
    finally:
        torch.set_num_threads(before)
    # quiet before the timing, busy after it: used, not stored
    cache.unlink()
    monkeypatch.setattr(kernels, "_MEMO", {})
    readings = iter([0.0, 1.0])
    monkeypatch.setattr(threads, "busy_cores", lambda interval=0.1: next(readings))
    monkeypatch.setattr(kernels, "_measure", lambda dim, kinds: {"bf16": 9.0, "int8": 9.0})
    assert kernels.speedups(8)["bf16"] == 9.0 and not cache.exists()


def test_an_entry_that_is_not_two_numbers_is_measured_again_and_a_missing_int8_gemm_scores_zero(cache, monkeypatch):
    import torch
    monkeypatch.setattr(kernels, "cpu_flags", lambda: None)
    key = kernels._machine_key(8)
    cache.write_text(json.dumps({key: {"bf16": None, "int8": 2.0}}))
    monkeypatch.setattr(torch, "_int_mm", lambda a, b: (_ for _ in ()).throw(RuntimeError("no int8 GEMM")))
    got = kernels.speedups(8)
    assert got["int8"] == 0.0 and got["bf16"] > 0
