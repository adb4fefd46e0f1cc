"""Folders owned by one writer (issue 65, item 2): a run folder or a record another process is writing is refused at
once, naming the holder's pid and command; a results folder that is not writable or too full is refused before
anything trains; temporary files carry the writer's pid."""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from umlkit.cli import main
from umlkit.results import Busy, atomic_write, check_writable, owner_lock

HOLD = """
import sys, time
from pathlib import Path
from umlkit.results import owner_lock
with owner_lock(Path(sys.argv[1]), "test"):
    print("held", flush=True)
    time.sleep(60)
"""


@pytest.fixture
def holder(tmp_path):
    """A second process holding a lock file until the test ends; yields (lock path, its pid)."""
    procs = []

    def start(lock: Path):
        p = subprocess.Popen([sys.executable, "-c", HOLD, str(lock)], stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "held"
        procs.append(p)
        return p.pid
    yield start
    for p in procs:
        p.kill()
        p.wait()


def test_a_held_lock_fails_fast_naming_the_holder(tmp_path, holder):
    lock = tmp_path / "run" / ".umlkit-owner.lock"
    pid = holder(lock)
    t0 = time.perf_counter()
    with pytest.raises(Busy, match=rf"the run folder x is being written by pid {pid} \(.*-c"):
        with owner_lock(lock, "the run folder x"):
            pass
    assert time.perf_counter() - t0 < 5   # at once, not after a wait
    # released when its holder ends (even killed): the next writer gets it, and the line names the new holder
    with owner_lock(tmp_path / "free.lock", "y"):
        assert (tmp_path / "free.lock").read_text().startswith(f"pid {os.getpid()} ")
    assert (tmp_path / "free.lock").read_text() == ""


def test_a_second_train_into_the_same_run_folder_is_refused_before_it_starts(tmp_path, holder, capsys):
    run = tmp_path / "run"
    pid = holder(tmp_path / ".run.umlkit-lock")
    rc = main(["train", "configs/puma/puma.yaml", "--profile", "quick", "--run-dir", str(run), "--set",
               "train.epochs=1"])
    err = capsys.readouterr().err
    assert rc == 2 and f"pid {pid}" in err and str(run) in err
    assert not run.exists()   # nothing written beside the holder


def _key(lr: float) -> dict:
    """A real record key (a resolved quick configuration), so that it can be fingerprinted."""
    from umlkit.train import load_config
    return {"config": load_config("configs/puma/puma.yaml", profile="quick", overrides=[f"optimizer.lr={lr}"])}


def test_a_record_another_process_trains_is_left_to_it(tmp_path, holder, monkeypatch):
    from umlkit.experiments.runs import records
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path / "results"))
    key = _key(1e-3)
    pid = holder(tmp_path / "results" / "quick" / ".locks" / f"{records.config_hash(records.normalise_key(key))}.lock")
    ran = []
    with pytest.raises(Busy, match=f"pid {pid}"):
        records.cached_record("p", "t", "a", key, lambda k: ran.append(k) or {"test": {}}, "quick", log=None)
    assert ran == [] and not (tmp_path / "results" / "quick" / "records").exists()


def test_a_record_finished_by_another_process_while_waiting_is_read_not_retrained(tmp_path, monkeypatch):
    from umlkit.experiments.runs import records
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path / "results"))
    key = _key(2e-3)
    records.cached_record("p", "t", "a", key, lambda k: {"test": {"v": 1}}, "quick", log=None)
    calls = []
    rec = records.cached_record("p", "t", "a", key, lambda k: calls.append(k) or {"test": {"v": 2}}, "quick",
                                log=None)
    assert calls == [] and rec["result"]["test"]["v"] == 1


def test_an_unwritable_or_full_results_folder_is_refused_before_training(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    with monkeypatch.context() as m:
        if os.access(ro, os.W_OK):   # root writes anywhere: ask the question as an unprivileged user would get it
            m.setattr(os, "access", lambda path, mode: False)
        with pytest.raises(PermissionError, match=f"{ro} is not writable; nothing was trained"):
            check_writable(ro / "records", 1, "records train p")
    ro.chmod(0o700)
    monkeypatch.setenv("UMLKIT_FREE_BYTES", str(10 * 2**20))
    with pytest.raises(OSError, match=r"has 10 MiB free, and the runs need about 64 MiB"):
        check_writable(tmp_path / "a" / "b", 64 * 2**20, "records train p")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is not a folder"):
        check_writable(tmp_path / "file" / "records", 1, "records train p")


def test_records_train_into_a_full_results_folder_trains_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("UMLKIT_FREE_BYTES", "1024")
    rc = main(["records", "train", "vptsp", "--table", "Table 6", "--match", "seed0$"])
    err = capsys.readouterr().err
    assert rc == 2 and "MiB free" in err and "nothing was trained" in err
    assert not (tmp_path / "results" / "quick" / "records").exists()


def test_temporary_files_carry_the_writers_pid(tmp_path, monkeypatch):
    seen = []
    real = os.replace

    def spy(src, dst):
        seen.append(Path(src).name)
        return real(src, dst)
    monkeypatch.setattr(os, "replace", spy)
    atomic_write(tmp_path / "r.json", "{}")
    assert seen and seen[0].startswith(f".r.json.{os.getpid()}.")
