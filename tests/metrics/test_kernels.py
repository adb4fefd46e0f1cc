"""umlkit.metrics.kernels: the search's kernel is fp32 for small searches, and for larger ones the kernel that
finished a representative whole search first, measured once per quiet machine and read back by later processes; a
timing taken on a busy machine is never stored."""
import json

import pytest
import torch

from umlkit.metrics import kernels, knn, threads

pytestmark = pytest.mark.kernel_rule   # each test sets the CPU's flags itself (tests/test_any_cpu.py)

BIG = 100_000 ** 2   # pairs: above the representative search, within the memory budget


def choose(self_search, pairs, dim, measure=True):
    """The choice as the engine asks for it: with its search to time."""
    return kernels.choose(self_search, pairs, dim, measure, search=knn.knn_search_checked)


@pytest.fixture
def cache(monkeypatch, tmp_path):
    monkeypatch.setenv("UMLKIT_CACHE", str(tmp_path))
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.delenv("UMLKIT_SEARCH_DTYPE", raising=False)
    monkeypatch.setattr(kernels, "_MEMO", {})
    monkeypatch.setattr(threads, "busy_cores", lambda interval=0.1: 0.0)    # a quiet machine
    monkeypatch.setattr(kernels, "cpu_flags", lambda: None)                 # every kernel is a candidate
    return tmp_path / "search_kernels.json"


def _fixed(**seconds):
    """A stand-in measurement returning these seconds (for the kernels it is asked about and any others)."""
    return lambda dim, self_search, ks, search: dict(seconds)


def _not_a_search(*args, **kwargs):
    """A search the measurement's child process cannot import (it is local to this test module's namespace)."""


_not_a_search.__qualname__ = "no_such_search"


def _no_measuring(*args):
    pytest.fail("measured")


def test_a_kernel_the_cpu_or_onednn_lacks_is_never_timed(cache, monkeypatch):
    """A Zen 3 EPYC (avx2, no avx512_bf16, no VNNI): nothing is timed and every search runs fp32; oneDNN limited
    to AVX2 takes bf16 away from a CPU that has it (oneDNN would emulate it), not int8."""
    monkeypatch.setattr(kernels, "cpu_flags", lambda: {"avx2", "fma", "sse4_2"})
    monkeypatch.setattr(kernels, "_measure", _no_measuring)
    choice = choose(True, BIG, 128)
    assert choice.kernel == "fp32" and "no fast bf16 or int8" in choice.reason and choice.seconds is None
    assert knn.choose_search_dtype(self_search=True, dim=32, pairs=BIG) == torch.float32
    assert kernels.native("bf16", {"avx512_bf16"}) and kernels.native("int8", {"avx_vnni"})
    assert kernels.native("int8", None)                     # unknown flags: the measurement decides
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert not kernels.native("bf16", {"avx512_bf16"}) and kernels.native("int8", {"avx512_vnni"})
    monkeypatch.setattr(kernels, "cpu_flags", lambda: {"avx2", "avx512f", "avx512_bf16", "avx512_vnni"})   # Zen 4
    assert kernels._kernels(True) == ["fp32", "int8"] and kernels._kernels(False) == ["fp32"]
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")
    assert kernels._kernels(True) == ["fp32", "bf16", "int8"] and kernels._kernels(False) == ["fp32", "bf16"]


def test_a_search_smaller_than_the_representative_one_runs_fp32_without_measuring(cache, monkeypatch):
    monkeypatch.setattr(kernels, "_measure", _no_measuring)
    unmeasured = choose(True, BIG, 128, measure=False)    # a page explaining the choice times nothing
    assert unmeasured.kernel == "unmeasured" and "fp32, bf16, int8" in unmeasured.reason
    for self_search in (True, False):
        below = kernels.representative_pairs(self_search) - 1
        choice = choose(self_search, below, 128)
        assert choice.kernel == "fp32" and f"{below:,} query x gallery pairs" in choice.reason
    assert kernels.representative_pairs(True) == kernels.REPRESENTATIVE_ITEMS ** 2
    assert not cache.exists()
    # the engine passes the search's own size: a 300 x 2,108 search is small
    x = torch.nn.functional.normalize(torch.randn(2108, 16, generator=torch.Generator().manual_seed(0)), dim=1)
    stats = {}
    knn.knn_search(x[:300], x, 5, stats=stats)
    assert stats["search_dtype"] == torch.float32


def test_the_fastest_whole_search_is_chosen_measured_for_real_and_read_back(cache, monkeypatch):
    """The real measurement at a small representative size: every kernel runs the engine's search; the choice is
    the smallest time; the entry is stored under the machine and read by a later process (empty memo) without
    measuring; a corrupt file or an entry missing a kernel is measured over."""
    monkeypatch.setattr(kernels, "REPRESENTATIVE_ITEMS", 4096)
    monkeypatch.setattr(kernels, "_WARM_ITEMS", 512)
    failed = kernels.choose(True, 4096 ** 2, 32, search=_not_a_search)       # the child cannot find it: nothing kept
    assert failed.kernel == "int8" and "the timing failed" in failed.reason and not cache.exists()
    monkeypatch.setattr(kernels, "_MEMO", {})
    choice = kernels.choose(True, 4096 ** 2, 32, search=knn.knn_search_checked)
    assert kernels.choose(True, 4096 ** 2, 32) == choice                # memo: no search needed to read it
    seconds = choice.seconds
    assert set(seconds) == {"fp32", "bf16", "int8"} and all(v > 0 for v in seconds.values())
    assert choice.kernel == min(seconds, key=seconds.get)
    assert f"{choice.kernel} {seconds[choice.kernel]:.2f} s" in choice.reason and "4,096 items at d=32" in choice.reason
    (key, value), = json.loads(cache.read_text()).items()
    assert "d=32" in key and "threads" in key and "self search of 4096 items" in key
    assert {k: value[k] for k in seconds} == seconds
    monkeypatch.setattr(kernels, "_MEMO", {})
    monkeypatch.setattr(kernels, "_measure", _no_measuring)
    assert choose(True, BIG, 32) == choice
    monkeypatch.setattr(kernels, "_MEMO", {})
    assert choose(True, BIG, 32, measure=False) == choice      # a stored measurement is read either way
    for damaged in ("{not json", json.dumps({key: {"fp32": 1.0, "bf16": None}})):
        cache.write_text(damaged)
        monkeypatch.setattr(kernels, "_MEMO", {})
        monkeypatch.setattr(kernels, "_measure", _fixed(fp32=3.0, bf16=2.0, int8=1.0))
        if damaged.startswith("{not"):
            with pytest.warns(UserWarning, match="is not a JSON object"):
                assert choose(True, BIG, 32).kernel == "int8"
        else:
            assert choose(True, BIG, 32).kernel == "int8"
        assert json.loads(cache.read_text())[key]["int8"] == 1.0
    # a plain search has no int8 path and its own entry
    plain = {"fp32": 1.0, "bf16": 2.0}
    monkeypatch.setattr(kernels, "_measure", lambda dim, self_search, ks, search: {k: plain[k] for k in ks})
    assert choose(False, BIG, 32).kernel == "fp32"
    assert len(json.loads(cache.read_text())) == 2


def test_a_self_search_whose_block_maxima_exceed_the_memory_budget_runs_fp32(cache, monkeypatch):
    """The block maxima are n x ceil(n / 128) int16: 148,500 items fit the 384 MiB budget (329 MiB), 170,000 do
    not (431 MiB); a plain search holds no maxima of every row and is not limited."""
    monkeypatch.setattr(kernels, "_measure", _fixed(fp32=3.0, bf16=2.0, int8=1.0))
    assert choose(True, 148_500 ** 2, 128).kernel == "int8"
    over = choose(True, 170_000 ** 2, 128)
    assert over.kernel == "fp32" and "hold 431 MiB of block maxima" in over.reason and "384 MiB" in over.reason
    assert choose(False, 170_000 ** 2, 128).kernel == "bf16"
    assert 148_500 * -(-148_500 // 128) * 2 <= kernels.MAXIMA_BUDGET < 170_000 * -(-170_000 // 128) * 2


def test_a_busy_machine_times_nothing_and_a_timing_disturbed_midway_is_used_but_never_stored(cache, monkeypatch):
    monkeypatch.setattr(threads, "busy_cores", lambda interval=0.1: 1.0)
    monkeypatch.setattr(kernels, "_measure", _no_measuring)
    choice = choose(True, BIG, 64)
    assert choice.kernel == "int8" and "machine was busy" in choice.reason and "int8, bf16, fp32" in choice.reason
    assert choose(False, BIG, 64).kernel == "bf16"
    assert not cache.exists()
    # quiet before the timing, busy after it: this process uses it, the file never sees it
    monkeypatch.setattr(kernels, "_MEMO", {})
    readings = iter([0.0, 1.0])
    monkeypatch.setattr(threads, "busy_cores", lambda interval=0.1: next(readings))
    monkeypatch.setattr(kernels, "_measure", _fixed(fp32=9.0, bf16=1.0, int8=2.0))
    assert choose(True, BIG, 64).kernel == "bf16" and not cache.exists()


def test_a_busy_process_reads_the_entry_a_quiet_one_stored_for_the_configured_threads(cache, monkeypatch):
    """Inside a search that a busy machine runs on 1 of 2 threads the key still names 2 threads, so the quiet
    measurement is used instead of none."""
    monkeypatch.setattr(kernels, "_measure", _fixed(fp32=3.0, bf16=1.0, int8=2.0))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert choose(True, BIG, 8).kernel == "bf16"           # quiet: stored under "2 threads"
        monkeypatch.setattr(kernels, "_MEMO", {})
        monkeypatch.setattr(kernels, "_measure", _no_measuring)
        monkeypatch.setattr(threads, "busy_cores", lambda interval=0.1: 1.0)
        monkeypatch.setattr(threads, "_LAST", {})
        monkeypatch.setattr(threads, "LARGE_SEARCH", 1)
        with threads.limited_threads(10) as n:
            assert n == 1 and choose(True, BIG, 8).kernel == "bf16"
    finally:
        torch.set_num_threads(before)


def test_an_unwritable_cache_still_gives_the_measurement(cache, monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("UMLKIT_CACHE", str(blocker / "sub"))      # a folder under a file cannot be made
    monkeypatch.setattr(kernels, "_measure", _fixed(fp32=3.0, bf16=2.0, int8=4.0))
    assert choose(True, BIG, 8).kernel == "bf16"


_BAD_ENTRIES = ["abc", [3.0, 2.0, 1.0], None, 7, {"fp32": -1.0, "bf16": 2.0, "int8": 0.5},
                {"fp32": float("nan"), "bf16": 2.0, "int8": 0.5}, {"fp32": float("inf"), "bf16": 2.0, "int8": 0.5},
                {"fp32": 0.0, "bf16": 2.0, "int8": 0.5}, {"fp32": 1.0, "bf16": 2.0},
                {"fp32": "1.0", "bf16": 2.0, "int8": 0.5}, {"fp32": True, "bf16": 2.0, "int8": 0.5},
                {"fp32": 1.0, "bf16": {"s": 2.0}, "int8": 0.5}, {"fp32": 1.0, "bf16": None, "int8": 0.5}]


@pytest.mark.parametrize("entry", _BAD_ENTRIES, ids=repr)
def test_an_entry_without_positive_finite_seconds_is_measured_again_and_replaced(cache, monkeypatch, entry):
    """Wrong types, negative, zero, NaN, infinite or missing seconds: not measured. The choice comes from a new
    measurement, whose entry replaces the bad one (other machines' entries are kept); without a search to time,
    such an entry reads as unmeasured, never as a traceback."""
    key = kernels._machine_key(32, True)
    other = {"fp32": 9.0, "bf16": 8.0, "int8": 7.0}
    cache.write_text(json.dumps({key: entry, "another machine": other}))    # NaN and Infinity as json writes them
    monkeypatch.setattr(kernels, "_measure", _no_measuring)
    assert choose(True, BIG, 32, measure=False).kernel == "unmeasured"
    monkeypatch.setattr(kernels, "_measure", _fixed(fp32=3.0, bf16=2.0, int8=1.0))
    choice = choose(True, BIG, 32)
    assert choice.kernel == "int8" and choice.seconds == {"fp32": 3.0, "bf16": 2.0, "int8": 1.0}
    stored = json.loads(cache.read_text())
    assert {k: stored[key][k] for k in choice.seconds} == choice.seconds and stored["another machine"] == other
    assert not list(cache.parent.glob("*.tmp"))                             # replaced atomically, no leftovers
    monkeypatch.setattr(kernels, "_MEMO", {})
    monkeypatch.setattr(kernels, "_measure", _no_measuring)
    assert choose(True, BIG, 32) == choice                                   # the repaired file is read back


@pytest.mark.parametrize("text", ['"a string"', "[1, 2, 3]", "null", "3.5", "{not json", ""])
def test_a_cache_file_that_is_not_a_json_object_reads_as_empty_with_one_warning(cache, monkeypatch, text):
    cache.write_text(text)
    monkeypatch.setattr(kernels, "_measure", _fixed(fp32=3.0, bf16=1.0, int8=2.0))
    with pytest.warns(UserWarning) as caught:
        choice = choose(True, BIG, 32)
    assert choice.kernel == "bf16"
    assert len(caught) == 1 and str(cache) in str(caught[0].message) and "\n" not in str(caught[0].message)
    (key, value), = json.loads(cache.read_text()).items()                   # rewritten as an object
    assert key == kernels._machine_key(32, True) and value["bf16"] == 1.0


def test_the_environment_overrides_the_choice_and_every_kernel_returns_the_exact_top_k(cache, monkeypatch):
    n = knn._TILE + 60  # large enough to count as a self-search
    x = torch.nn.functional.normalize(torch.randn(n, 16, generator=torch.Generator().manual_seed(0)), dim=1)
    exact = knn.knn_search(x, x, 7, self_index=torch.arange(n), search_dtype=torch.float32)
    for forced, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32), ("int8", torch.int8)):
        monkeypatch.setenv("UMLKIT_SEARCH_DTYPE", forced)
        stats = {}
        got = knn.knn_search(x, x, 7, self_index=torch.arange(n), stats=stats)
        assert stats["search_dtype"] == dtype
        assert torch.equal(got[1], exact[1]) and torch.allclose(got[0], exact[0])
    # int8 has no plain search: forced or passed, a plain search runs the plain choice (fp32 at this size)
    for how in ("env", "argument"):
        stats = {}
        knn.knn_search(x[:300], x, 7, stats=stats, search_dtype=torch.int8 if how == "argument" else None)
        assert stats["search_dtype"] == torch.float32 and not stats["self_search"]
    monkeypatch.setenv("UMLKIT_SEARCH_DTYPE", "")     # set but empty (`UMLKIT_SEARCH_DTYPE= cmd`): as unset
    stats = {}
    knn.knn_search(x, x, 7, self_index=torch.arange(n), stats=stats)
    assert stats["search_dtype"] == torch.float32
    monkeypatch.setenv("UMLKIT_SEARCH_DTYPE", "fp16")
    with pytest.raises(ValueError, match="UMLKIT_SEARCH_DTYPE='fp16': expected 'bf16', 'fp32' or 'int8'"):
        knn.knn_search(x, x, 7)
    with pytest.raises(ValueError, match="search_dtype must be .* got torch.float16"):
        knn.knn_search(x, x, 7, search_dtype=torch.float16)
