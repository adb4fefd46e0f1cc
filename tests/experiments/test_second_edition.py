"""umlkit.experiments.ops.second_edition: the retrain plan's states, estimates and order, and the renewal of stale
records (`records train PAPER second_edition`), on a toy paper whose records live in a temporary results folder."""
from __future__ import annotations

import copy
import types

import pandas as pd
import pytest

from umlkit.experiments.ops import second_edition as se
from umlkit.experiments.papers.puma import run_config
from umlkit.experiments.runs import fingerprint as fp
from umlkit.experiments.runs import records as rc
from umlkit.experiments.runs import runners


def _key(seed: int, lr: float = 1e-3) -> dict:
    key = run_config("quick", method="linear", seed=seed)
    key["optimizer"]["lr"] = lr
    return key


@pytest.fixture()
def toy(monkeypatch, tmp_path):
    """A paper with a sweep list and a tables list over three tables: Table 1 holds the headline, Table 2 a decided
    claim, Table 3 an open one; the sweep's second run is also a Table 1 run (listed once, as a sweep)."""
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path))
    calls = []

    def runner(key):
        calls.append((key["seed"], key["optimizer"]["lr"]))
        return {"test": {"CUB": 50.0}}
    monkeypatch.setitem(runners.RUNNERS, "counting", runner)
    sweep = [("lr_sweep", f"lr{lr}", _key(0, lr), "counting") for lr in (1e-4, 1e-3)]
    tables = [("table1", "a-seed0", _key(0), "counting"), ("table1", "a-seed1", _key(1), "counting"),
              ("table3", "c-seed0", _key(3), "counting"), ("table2", "b-seed0", _key(2), "counting"),
              ("extra", "x-seed0", _key(4), "counting")]
    specs = {f"Table {i}": types.SimpleNamespace(slug=f"table{i}") for i in (1, 2, 3)}
    paper = types.SimpleNamespace(name="toy", headline="A beats B", job_list_names=["tables", "lr_sweep"],
                                  claim_tables=lambda profile: specs,
                                  job_list=lambda name, profile: {"tables": tables, "lr_sweep": sweep}[name])
    board = pd.DataFrame([("toy", "Table 1", "A beats B", "inconclusive"),
                          ("toy", "Table 2", "B beats C", "reproduced"),
                          ("toy", "Table 3", "C beats D", "inconclusive")],
                         columns=["paper", "table", "claim", "verdict"])
    monkeypatch.setattr(se, "get_paper", lambda name: paper)
    monkeypatch.setattr(se, "papers", lambda: ["toy"])
    monkeypatch.setattr(se, "first_edition", lambda: board)
    return calls, sweep, tables


def test_the_plan_orders_sweeps_headline_decided_open_rest_and_knows_each_runs_state(toy, monkeypatch):
    calls, sweep, tables = toy
    rc.cached_record("toy", "lr_sweep", "lr0.0001", sweep[0][2], "counting", "quick", log=None)
    rc.cached_record("toy", "table1", "a-seed0", tables[0][2], "counting", "quick", log=None)   # = sweep[1]
    old_code = fp.code_hash
    monkeypatch.setattr(fp, "code_hash", lambda *a: "ffffffffffff")   # the code changes: both are stale
    rc.cached_record("toy", "table3", "c-seed0", tables[2][2], "counting", "quick", log=None)    # current
    with pytest.MonkeyPatch.context() as m:   # a stored run whose loss options changed since: a predecessor
        m.setattr(fp, "code_hash", old_code)
        older = copy.deepcopy(tables[3][2])
        older["objective"][0]["options"] = {"beta": 9.0}
        rc.cached_record("toy", "table2", "b-seed0", older, "counting", "quick", log=None)
    frame = se.plan_frame("quick")
    assert frame["label"].tolist() == ["lr0.0001", "lr0.001", "a-seed1", "b-seed0", "c-seed0", "x-seed0"]
    assert frame["class"].tolist() == ["sweeps", "sweeps", "headline", "decided", "open", "rest"]
    assert frame["state"].tolist() == ["stale", "stale", "missing", "stale", "current", "missing"]
    # estimates: a stored run's own seconds (stale and current); nothing known of a missing run's row or table
    assert not frame["seconds"].iloc[[0, 1, 3, 4]].isna().any() and frame["seconds"].iloc[[2, 5]].isna().all()
    summary = se.plan_summary(frame, workers=2)
    assert summary.set_index(["class", "paper"]).loc[("sweeps", "toy"), "stale"] == 2
    assert "current" not in set(summary.columns) and summary["missing"].sum() == 2
    jobs = se.ordered_jobs("toy", "quick")   # every run, the current one included: a share never moves
    assert [j[1] for j in jobs] == ["lr0.0001", "lr0.001", "a-seed1", "b-seed0", "c-seed0", "x-seed0"]
    assert [se.run_state(j[2]) for j in jobs] == frame["state"].tolist()
    assert [j[1] for j in se.ordered_jobs("toy", "quick", "second_edition:sweeps")] == ["lr0.0001", "lr0.001"]
    with pytest.raises(KeyError, match="classes are sweeps, headline"):
        se.ordered_jobs("toy", "quick", "second_edition:soon")


def test_renewing_retrains_a_stale_record_once_and_reads_a_current_one(toy, monkeypatch):
    calls, sweep, _ = toy
    key = sweep[0][2]
    rc.cached_record("toy", "lr_sweep", "lr0.0001", key, "counting", "quick", log=None)
    assert rc.cached_record("toy", "lr_sweep", "lr0.0001", key, "counting", "quick", rerun="stale", log=None)["cached"]
    assert len(calls) == 1                                           # current: read, not trained
    monkeypatch.setattr(fp, "code_hash", lambda *a: "ffffffffffff")
    renewed = rc.cached_record("toy", "lr_sweep", "lr0.0001", key, "counting", "quick", rerun="stale", log=None)
    assert len(calls) == 2 and renewed["stale"] == []                # stale: trained again, in place
    again = rc.cached_record("toy", "lr_sweep", "lr0.0001", key, "counting", "quick", rerun="stale", log=None)
    assert len(calls) == 2 and again["cached"]                       # a second worker reads the renewed one
    assert len(rc.list_records("quick")) == 1


def test_two_workers_shares_stay_disjoint_when_one_starts_after_the_other_renewed_records(toy):
    """``--worker I/N`` takes every N-th job of :func:`ordered_jobs`: worker 1's share is the same whether it starts
    before or after worker 0 renewed its runs, so no run is trained twice and none is left out (the shares were
    once taken from the runs still to train, a list that shrank as worker 0 renewed them)."""
    calls, _, _ = toy

    def share(i):
        return [j for k, j in enumerate(se.ordered_jobs("toy", "quick")) if k % 2 == i]
    before = [j[1] for j in share(1)]
    for table, label, key, runner in share(0):
        rc.cached_record("toy", table, label, key, runner, "quick", rerun="stale", log=None)
    assert [j[1] for j in share(1)] == before
    for table, label, key, runner in share(1):
        rc.cached_record("toy", table, label, key, runner, "quick", rerun="stale", log=None)
    assert len(calls) == len(set(calls)) == 6
    assert all(se.run_state(j[2]) == "current" for j in se.ordered_jobs("toy", "quick"))


def test_a_missing_runs_estimate_is_its_rows_median_else_its_tables():
    frame = pd.DataFrame({"paper": ["p"] * 5, "table": ["t1", "t1", "t1", "t2", "t2"],
                          "label": ["a-seed0", "a-seed1", "b-seed0", "c-seed0", "c-seed1"],
                          "seconds": [10.0, float("nan"), 30.0, float("nan"), float("nan")]})
    got = se._fill_estimates(frame.copy())["seconds"].tolist()
    assert got[:3] == [10.0, 10.0, 30.0] and pd.isna(got[3]) and pd.isna(got[4])   # t2 knows nothing
    frame.loc[1, "label"] = "z-seed0"                                              # a row of its own: the table's
    assert se._fill_estimates(frame.copy())["seconds"].tolist()[1] == 20.0
