"""The Slurm executor against a real single-node Slurm (``make test-cluster`` starts slurmctld, slurmd and munged
with ``tools/slurm_local.sh`` and sets ``SLURM_CONF``): an array reaching the local executor's records, a preempted task
that requeues and resumes to the same record, a failing task reported with its log, a second submission that
submits nothing, and two arrays started at once on a fresh UML-Mini root.

The reference for "identical" is the same run trained by the local executor (``records train``, one thread) in
the same environment, before the arrays: every stored result field but the wall time must match. Both use the
exact fp32 search (``UMLKIT_SEARCH_DTYPE=fp32``): the default kernel is chosen by this machine's timings, and a
metric rounded to three decimals can move by 0.001 between kernels (seen once against the committed records).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
FOUR = "^cub-ProxyAnchor-split(8|9)-seed[01]$"
LABELS = [f"cub-ProxyAnchor-split{s}-seed{i}" for s in (8, 9) for i in (0, 1)] + [
    "cub-ProxyAnchor-split7-seed0", "cub-ProxyAnchor-split6-seed1", "cub-ProxyAnchor-split7-seed1"]
ENV = {"UMLKIT_PROGRESS": "0", "UMLKIT_SEARCH_DTYPE": "fp32"}


@pytest.fixture(scope="module")
def cluster():
    """The running test cluster; without one the module fails (make test-cluster starts it), never skips silently."""
    if not os.environ.get("SLURM_CONF"):
        pytest.fail("SLURM_CONF is not set: run these tests through `make test-cluster`, which starts a Slurm")
    out = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() in ("idle", "mix", "alloc"), out.stderr
    return os.environ["SLURM_CONF"]


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("cluster_data")


@pytest.fixture(scope="module")
def local(data_root, tmp_path_factory):
    """The runs of these tests trained by the local executor (two workers of one thread) in this environment."""
    results = tmp_path_factory.mktemp("local_results")
    match = "^(" + "|".join(LABELS) + ")$"
    procs = [subprocess.Popen([sys.executable, "-m", "umlkit.cli", "records", "train", "oodml", "tables", "--match",
                               match, "--worker", f"{i}/2"], env=_env(results, data_root), cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(2)]
    outs = [p.communicate(timeout=900)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    return results / "quick" / "records" / "oodml" / "tables4"


def _env(results: Path, data: Path) -> dict:
    return {**os.environ, **ENV, "UMLKIT_RESULTS": str(results), "UMLKIT_DATA": str(data)}


def umlkit(args: list[str], results: Path, data: Path, check: bool = True) -> subprocess.CompletedProcess:
    env = _env(results, data)
    proc = subprocess.run([sys.executable, "-m", "umlkit.cli", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def submit(results: Path, data: Path, match: str, *extra: str) -> subprocess.CompletedProcess:
    return umlkit(["records", "train", "oodml", "tables", "--match", match, "--executor", "slurm", *extra],
                  results, data)


def job_ids(out: str) -> list[str]:
    line = next(ln for ln in out.splitlines() if ln.startswith("submitted"))
    return line.split("Slurm job ")[1].split(";")[0].split(", ")


def wait_for(ids: list[str], timeout: float = 400) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        out = subprocess.run(["squeue", "-h", "-r", "-o", "%i"], capture_output=True, text=True).stdout.split()
        if not any(j.split("_")[0] in ids for j in out):
            return
        time.sleep(1)
    pytest.fail(f"Slurm jobs {ids} still queued after {timeout} s")


def same_as_local(local: Path, results: Path, label: str) -> None:
    """The record ``label`` under ``results`` equals the local executor's in every result field but the wall time."""
    new = list((results / "quick" / "records" / "oodml" / "tables4").glob(f"{label}-*.json"))
    old = list(local.glob(f"{label}-*.json"))
    assert len(new) == 1 and len(old) == 1, (new, old)
    a, b = json.loads(old[0].read_text()), json.loads(new[0].read_text())
    assert a["key"] == b["key"] and old[0].name == new[0].name
    a["result"].pop("train_seconds"), b["result"].pop("train_seconds")
    assert a["result"] == b["result"], label


def test_array_reaches_the_local_records_and_a_second_submission_sends_nothing(cluster, local, data_root, tmp_path):
    first = submit(tmp_path, data_root, FOUR)
    assert "4 to submit" in first.stdout and "array of 4 task(s)" in first.stdout
    ids = job_ids(first.stdout)
    again = submit(tmp_path, data_root, FOUR)   # all four queued or running: nothing new
    assert "0 to submit" in again.stdout and "nothing to submit" in again.stdout, again.stdout
    wait_for(ids)
    for label in ("cub-ProxyAnchor-split8-seed0", "cub-ProxyAnchor-split8-seed1", "cub-ProxyAnchor-split9-seed0",
                  "cub-ProxyAnchor-split9-seed1"):
        same_as_local(local, tmp_path, label)
    after = submit(tmp_path, data_root, FOUR)   # all four stored
    assert "4 stored" in after.stdout and "nothing to submit" in after.stdout
    left = list((tmp_path / "quick" / "checkpoints").rglob("*.pt"))
    assert not left, f"checkpoints left after the records were written: {left}"


def _latest_checkpoint(results: Path) -> Path | None:
    found = list((results / "quick" / "checkpoints").rglob("latest.pt"))
    return found[0] if found else None


def _start_when_requeued(job: str, timeout: float = 120) -> None:
    """Slurm holds a requeued job for two minutes (reason BeginTime); once the test sees it held, it lets it start
    now, as a cluster with free nodes would after that delay."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        out = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T %r"], capture_output=True, text=True).stdout
        if "BeginTime" in out:
            subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], check=True)
            return
        time.sleep(0.5)
    pytest.fail(f"job {job} was not requeued within {timeout} s (squeue: {out.strip() or 'gone'})")


def test_preempted_task_requeues_and_resumes_to_the_same_record(cluster, local, data_root, tmp_path):
    label = "cub-ProxyAnchor-split7-seed0"
    ids = job_ids(submit(tmp_path, data_root, f"^{label}$").stdout)
    end = time.monotonic() + 300
    while _latest_checkpoint(tmp_path) is None:   # interrupted after its first epoch's checkpoint
        assert time.monotonic() < end, "no checkpoint appeared"
        time.sleep(0.2)
    epoch = json.loads((_latest_checkpoint(tmp_path).parent / "log.jsonl").read_text().splitlines()[0])["epoch"]
    for sig in ("TERM", "USR2"):   # what Slurm sends a preempted job: SIGTERM first, then submitit's signal
        subprocess.run(["scancel", "--signal", sig, ids[0]], check=True)
        # a pause between the two, as on a cluster: sent back to back, the TERM could still be on its way to the
        # job's processes when USR2 had submitit start `scontrol requeue`, and reach that child (seen once in CI:
        # "Command '['scontrol', 'requeue', '5']' died with SIGTERM")
        time.sleep(2.0)
    _start_when_requeued(ids[0])
    wait_for(ids)
    log = next((tmp_path / "quick" / "slurm" / "oodml").glob("*_0_log.out")).read_text()
    err = next((tmp_path / "quick" / "slurm" / "oodml").glob("*_0_log.err")).read_text()
    assert "requeued, resuming from its checkpoints" in log + err and "Requeued job" in log + err
    assert epoch >= 1
    same_as_local(local, tmp_path, label)


def test_failing_task_leaves_no_record_and_is_reported_failed_with_its_log(cluster, data_root, tmp_path):
    bad = ["--set", f"data.root={tmp_path / 'no_such_data'}"]
    ids = job_ids(submit(tmp_path, data_root, "^cub-ProxyAnchor-split6-seed0$", *bad).stdout)
    wait_for(ids)
    assert not list((tmp_path / "quick" / "records").rglob("*.json"))
    status = umlkit(["records", "status", "oodml", "tables", "--list", *bad], tmp_path, data_root)
    line = next(ln for ln in status.stdout.splitlines() if "cub-ProxyAnchor-split6-seed0" in ln)
    assert line.startswith("failed") and f"[job {ids[0]}" in line and "log.err" in line, line
    assert "no_such_data" in line, line   # the error's last line names the missing folder
    assert "1 failed" in status.stdout
    again = submit(tmp_path, data_root, "^cub-ProxyAnchor-split6-seed0$", *bad)   # a failed run is sent again
    assert "1 to submit" in again.stdout
    wait_for(job_ids(again.stdout))


def test_two_arrays_at_once_on_a_fresh_uml_mini_root(cluster, local, tmp_path):
    data = tmp_path / "fresh_data"
    env = _env(tmp_path / "results", data)
    cmd = [sys.executable, "-m", "umlkit.cli", "records", "train", "oodml", "tables", "--executor", "slurm", "--match"]
    procs = [subprocess.Popen(cmd + [m], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                              cwd=ROOT)
             for m in ("^cub-ProxyAnchor-split6-seed1$", "^cub-ProxyAnchor-split7-seed1$")]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    wait_for([i for out in outs for i in job_ids(out)])
    manifests = list(data.glob("uml_mini*/UML_MINI.json"))   # ooDML's quick runs read UML-Mini large
    assert len(manifests) == 1, manifests
    manifest = json.loads(manifests[0].read_text())
    assert manifest.get("complete", True) and manifest["seed"] == 0
    for label in ("cub-ProxyAnchor-split6-seed1", "cub-ProxyAnchor-split7-seed1"):
        same_as_local(local, tmp_path / "results", label)
