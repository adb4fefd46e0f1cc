"""The Slurm executor's planning, without a Slurm: packing into tasks, time limits, settings files, the ledger's
states, and the per-job estimates (``make test-cluster`` runs the real submissions)."""
import json
import math
import pickle

import pandas as pd
import pytest

from umlkit.experiments.ops.cluster import (
    SlurmSettings,
    describe_plan,
    load_settings,
    plan_tasks,
    queue_states,
    time_limit_min,
)


def jobs(n):
    return [("t", f"row-seed{i}", {"name": f"k{i}"}, "train") for i in range(n)]


def test_short_jobs_are_packed_to_the_minimum_task_length_in_order():
    tasks = plan_tasks(jobs(5), [240.0, 240.0, 240.0, 900.0, 60.0], min_task_minutes=10)
    # 240 + 240 + 240 = 720 s >= 600: one task; 900 alone; the 60-s remainder its own
    assert [t.labels for t in tasks] == [["row-seed0", "row-seed1", "row-seed2"], ["row-seed3"], ["row-seed4"]]
    assert [t.seconds for t in tasks] == [720.0, 900.0, 60.0]


def test_jobs_without_an_estimate_are_not_packed_and_are_named():
    tasks = plan_tasks(jobs(2), [float("nan"), float("nan")], min_task_minutes=10)
    assert [len(t.jobs) for t in tasks] == [1, 1] and all(t.unknown == 1 for t in tasks)
    text = describe_plan(tasks, SlurmSettings(), "oodml tables")
    assert "2 run(s) have no stored time" in text and "(no estimate)" in text


def test_time_limit_is_the_longest_task_times_the_margin_plus_ten_minutes():
    tasks = plan_tasks(jobs(2), [1800.0, 600.0], min_task_minutes=10)
    assert time_limit_min(tasks, SlurmSettings(margin=2.0)) == math.ceil(1800 * 2 / 60) + 10 == 70
    assert time_limit_min(tasks, SlurmSettings(time_min=45)) == 45


def test_plan_text_counts_gpu_hours_and_resources():
    tasks = plan_tasks(jobs(3), [3600.0, 3600.0, 1800.0], min_task_minutes=10)
    text = describe_plan(tasks, SlurmSettings(partition="gpu", account="lab", gpus=1, cpus=8, mem_gb=64), "puma t2")
    assert "3 run(s) in a Slurm array of 3 task(s) on partition gpu, account lab" in text
    assert "8 CPU(s), 1 GPU(s), 64 GB" in text and "= 2.5 GPU-hours" in text and "time limit 130 min" in text


def test_settings_file_then_flags_and_clear_errors(tmp_path):
    f = tmp_path / "slurm.yaml"
    f.write_text("slurm:\n  partition: gpu\n  account: lab\n  cpus: 4\n")
    s = load_settings(f, {"cpus": 8, "partition": None}, profile="full")
    assert (s.partition, s.account, s.cpus, s.gpus) == ("gpu", "lab", 8, 1)
    assert load_settings(None, {}, profile="quick").gpus == 0
    f.write_text("slurm:\n  partion: gpu\n")
    with pytest.raises(ValueError, match=r"unknown Slurm setting\(s\) \['partion'\].*known: account"):
        load_settings(f)
    f.write_text("partition: gpu\n")
    with pytest.raises(ValueError, match="expected a `slurm:` block"):
        load_settings(f)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_settings(tmp_path / "absent.yaml")
    with pytest.raises(ValueError, match=r"slurm setting cpus = 0: expected an integer >= 1"):
        SlurmSettings(cpus=0)


def _ledger(tmp_path, monkeypatch, job, outcome):
    """A ledger entry of ``job`` whose Slurm job has ended with ``outcome`` (None: no result file)."""
    from umlkit.experiments.ops.cluster import _ledger_path
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path / "results"))
    result = tmp_path / "7_0_0_result.pkl"
    if outcome is not None:
        result.write_bytes(pickle.dumps(outcome))
    path = _ledger_path(job[2], "quick")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"job_id": "7_0", "stdout": "o.out", "stderr": "e.err", "result": str(result)}))


def test_ledger_states_of_ended_jobs(tmp_path, monkeypatch):
    job = jobs(1)[0]
    _ledger(tmp_path, monkeypatch, job, ("error", "Traceback ...\nFileNotFoundError: /x/no_such_data"))
    state = queue_states([job], "quick", ask_slurm=False)["row-seed0"]
    assert state == {"state": "failed", "job_id": "7_0", "detail": "FileNotFoundError: /x/no_such_data; log e.err"}
    _ledger(tmp_path, monkeypatch, job, None)
    assert queue_states([job], "quick", ask_slurm=False)["row-seed0"]["state"] == "failed"
    assert queue_states(jobs(2)[1:], "quick", ask_slurm=False) == {}   # not in the ledger: not listed


def test_each_job_is_estimated_by_its_own_time_else_its_row():
    from umlkit.experiments.ops.table_runs import job_seconds
    status = pd.DataFrame({"label": ["a-seed0", "a-seed1", "b-seed0"], "runner": ["train"] * 3,
                           "stored": [True, False, False], "seconds": [30.0, float("nan"), float("nan")]})
    assert job_seconds(status) == [30.0, 30.0, 30.0]   # a-seed1 by its row, b by the runner's median


def test_gpu_budget_prices_a_full_profile_configuration_by_images_and_rate():
    from umlkit.experiments.ops.gpu_budget import H200_RATES, images, price
    from umlkit.train.config import resolve_config
    cfg = resolve_config({"profile": "full", "data": {"datasets": ["cub"]}, "model": {"method": "full",
                          "backbone": "vit_s16_in21k_ft_in1k"}, "train": {"epochs": 2, "eval_every": 1}})
    assert images(cfg, "train") == 5864 and images(cfg, "test") == 5924   # CUB-200-2011's classes 1-100 / 101-200
    expected = 2 * 5864 / H200_RATES["other"] + 2 * 5924 / H200_RATES["eval"]
    assert price(cfg) == pytest.approx(expected)
