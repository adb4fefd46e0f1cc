"""umlkit.metrics.threads: a large search runs on the cores other processes leave idle, and its results do not
depend on how many that is."""
import pytest
import torch

from umlkit.metrics import evaluate_retrieval, threads

STAT = """cpu  900 0 300 2000 0 0 0 0 0 0
cpu0 {u0} 0 {s0} {i0} 0 0 0 0 0 0
cpu1 {u1} 0 {s1} {i1} 0 0 0 0 0 0
intr 1 2 3
"""


def _stat(tmp_path, name, **v):
    path = tmp_path / name
    path.write_text(STAT.format(**v))
    return str(path)


def test_cpu_times_sum_the_affinity_sets_busy_and_total_jiffies(tmp_path):
    path = _stat(tmp_path, "a", u0=100, s0=20, i0=80, u1=5, s1=5, i1=190)
    assert threads._cpu_times({0}, path) == (120.0, 200.0)
    assert threads._cpu_times({0, 1}, path) == (130.0, 400.0)
    assert threads._cpu_times({7}, path) is None                       # no line for that CPU
    assert threads._cpu_times({0}, str(tmp_path / "missing")) is None


def test_busy_cores_count_what_others_ran_between_two_reads(monkeypatch, tmp_path):
    """Between the reads cpu0 ran 100 of 100 jiffies and cpu1 25 of 100: 1.25 of the 2 cores were busy."""
    reads = iter([(100.0, 400.0), (225.0, 600.0)])
    monkeypatch.setattr(threads, "_cpu_times", lambda cpus, path="/proc/stat": next(reads))
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 1})
    assert threads.busy_cores(interval=0.0) == pytest.approx(1.25)


@pytest.mark.parametrize("busy, current, want", [(0.0, 2, 2), (0.3, 2, 2), (0.6, 2, 1), (1.0, 2, 1), (2.0, 2, 1),
                                                 (1.0, 1, 1), (None, 2, 2), (0.9, 4, 3)])
def test_a_large_search_uses_the_idle_cores(monkeypatch, busy, current, want):
    monkeypatch.delenv("UMLKIT_SEARCH_THREADS", raising=False)
    monkeypatch.setattr(threads, "_LAST", {})
    monkeypatch.setattr(threads, "busy_cores", lambda interval=0.1: busy)
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: set(range(max(current, 2))))
    assert threads.search_threads(current) == want


def test_the_thread_count_can_be_pinned_and_a_bad_value_is_named(monkeypatch):
    monkeypatch.setattr(threads, "busy_cores", lambda interval=0.1: pytest.fail("pinned: nothing to measure"))
    monkeypatch.setenv("UMLKIT_SEARCH_THREADS", "3")
    assert threads.search_threads(2) == 3
    monkeypatch.setenv("UMLKIT_SEARCH_THREADS", "two")
    with pytest.raises(ValueError, match=r"UMLKIT_SEARCH_THREADS='two': expected a whole number of threads"):
        threads.search_threads(2)


def test_a_search_on_fewer_threads_gives_the_same_metrics_and_restores_the_counts(monkeypatch):
    """With one of two cores busy, a large evaluation runs on one thread (torch's and faiss's), returns exactly the
    metrics it returns on two, and leaves both thread counts as they were; a small one is not touched."""
    import faiss
    monkeypatch.delenv("UMLKIT_SEARCH_THREADS", raising=False)
    before = torch.get_num_threads(), faiss.omp_get_max_threads()
    g = torch.Generator().manual_seed(0)
    labels = torch.arange(600) // 6
    x = torch.randn(600, 16, generator=g) + 3 * torch.randn(100, 16, generator=g)[labels]
    metrics = ["R@1", "R@4", "MAP@R", "RP", "mAP@1000"]
    torch.set_num_threads(2)
    try:
        plain = evaluate_retrieval(x, labels, metrics=metrics)
        monkeypatch.setattr(threads, "LARGE_SEARCH", 1000)
        monkeypatch.setattr(threads, "_LAST", {})
        monkeypatch.setattr(threads, "busy_cores", lambda interval=0.1: 1.0)
        monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 1})
        with threads.limited_threads(600 * 600) as n:
            assert n == 1 and torch.get_num_threads() == 1 and faiss.omp_get_max_threads() == 1
            assert threads.configured_threads() == 2          # what the kernel cache is keyed by
        assert threads.configured_threads() == 2
        with pytest.raises(RuntimeError), threads.limited_threads(600 * 600):
            raise RuntimeError("a failing search")
        assert torch.get_num_threads() == 2 and threads._CONFIGURED == []   # restored after the failure
        from umlkit.metrics import retrieval
        seen, real = [], retrieval._search_and_score
        monkeypatch.setattr(retrieval, "_search_and_score",
                            lambda *a, **k: (seen.append(torch.get_num_threads()), real(*a, **k))[1])
        assert evaluate_retrieval(x, labels, metrics=metrics) == plain and seen == [1]   # ran on 1 thread, same metrics
        assert torch.get_num_threads() == 2
        with threads.limited_threads(10) as n:     # below LARGE_SEARCH: unchanged
            assert n == 2
    finally:
        torch.set_num_threads(before[0])
        faiss.omp_set_num_threads(before[1])
