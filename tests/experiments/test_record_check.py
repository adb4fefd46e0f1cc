"""umlkit records verify --sample N (umlkit.experiments.runs.record_check): stored records retrained in a temporary
folder,
every field compared, each metric's difference judged against its cell's seed spread (statistics.stdev)."""
from __future__ import annotations

import math
import statistics

import pytest

from umlkit import cli
from umlkit.experiments.papers.puma import run_config
from umlkit.experiments.runs import record_check as chk
from umlkit.experiments.runs import records as rc
from umlkit.experiments.runs import runners

STORED = {0: 50.0, 1: 54.0, 2: 52.0}      # R@1 per seed as stored: s.d. 2.0


@pytest.fixture()
def stored_cell(monkeypatch, tmp_path):
    """Three seeds of one cell stored under a temporary results folder by a registered runner; ``shift`` is what a
    retrain adds to R@1 (another CPU's numerics, in miniature)."""
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path / "results"))
    shift = {"value": 0.0, "calls": 0}

    def runner(key):
        shift["calls"] += 1
        return {"test": {"R@1": {"CUB": STORED[key["seed"]] + shift["value"]}}, "loss": [1.0, 0.5],
                "train_seconds": 3.0}
    monkeypatch.setitem(runners.RUNNERS, "verify_toy", runner)
    for seed in STORED:
        rc.cached_record("puma", "table2", f"Linear-seed{seed}", run_config("quick", method="linear", seed=seed),
                         "verify_toy", "quick", log=None)
    shift["calls"] = 0
    return shift


def test_flatten_and_the_seed_spread_are_statistics_stdev():
    assert chk.flatten({"a": {"b": 1, "c": [2.5, {"d": 3}]}, "e": "x", "f": True}) == {"a.b": 1.0, "a.c.0": 2.5,
                                                                                  "a.c.1.d": 3.0}
    recs = [{"result": {"test": {"R@1": {"CUB": v}}, "loss": [v]}} for v in STORED.values()]
    assert chk.seed_spread(recs) == {"test.R@1.CUB": pytest.approx(statistics.stdev(STORED.values()))}
    assert chk.TOLERANCE_SDS == pytest.approx(1.96 * math.sqrt(2))


@pytest.mark.parametrize("shift,kind", [(0.0, "identical"), (0.5, "within the seed spread"),
                                        (5.0, "within the seed spread"), (5.6, "outside the seed spread")])
def test_each_difference_is_judged_against_the_cells_seed_spread(shift, kind):
    """s = 2.0, tolerance 1.96 * sqrt(2) * 2 = 5.54: a shift of 5.0 is inside, 5.6 outside; losses and timings are
    counted as differing fields but never judged."""
    stored = {"test": {"R@1": {"CUB": 50.0}}, "loss": [1.0], "train_seconds": 3.0}
    new = {"test": {"R@1": {"CUB": 50.0 + shift}}, "loss": [1.0 + shift], "train_seconds": 4.0}
    c = chk.compare_results("p.json", "Linear-seed0", stored, new, {"test.R@1.CUB": 2.0})
    assert c.fields == 3 and c.differing == (1 if shift == 0 else 3)
    assert c.worst == (kind if shift else "metrics identical (losses or timings differ)")
    assert [k for k, *_ in c.judged] == ([] if shift == 0 else ["test.R@1.CUB"])
    assert chk.compare_results("p", "l", stored, new, {}).worst.startswith("metrics identical" if shift == 0 else
                                                                           "no spread")
    assert chk.compare_results("p", "l", stored, stored, {}).worst == "identical"


def test_the_sample_is_reproducible_and_skips_stale_records():
    recs = [{"path": f"r{i}.json", "stale": ["code"] if i % 2 else [], "runner": "train"} for i in range(10)]
    first = chk.sample_records(recs, 3, seed=4)
    assert first == chk.sample_records(recs, 3, seed=4) and all(not r["stale"] for r in first)
    with pytest.raises(ValueError, match="--sample 6: only 5 current record"):
        chk.sample_records(recs, 6)


def test_verify_sample_retrains_in_a_temporary_folder_and_reports_each_field(stored_cell, tmp_path, capsys):
    before = sorted(p.read_bytes() for p in (tmp_path / "results").rglob("*") if p.is_file())
    assert cli.main(["records", "verify", "--sample", "3"]) == 0
    out = capsys.readouterr().out
    assert stored_cell["calls"] == 3 and out.count("identical: Linear-seed") == 3
    assert "3 record(s) retrained: 3 identical in every metric (3 in every field), 0 with a metric outside" in out
    stored_cell["value"] = 6.0                     # beyond 5.54 = 2.77 x the cell's s.d. of 2.0
    assert cli.main(["records", "verify", "--sample", "1", "--match", "seed1$"]) == 1
    out = capsys.readouterr().out
    assert "outside the seed spread: Linear-seed1 (1 of 4 fields differ)" in out
    assert "test.R@1.CUB: stored 54, retrained 60 (diff +6; seed s.d. 2, tolerance 5.54): outside" in out
    after = sorted(p.read_bytes() for p in (tmp_path / "results").rglob("*") if p.is_file())
    assert after == before                          # nothing under the results folder was written
