"""A record is what its name says (issue 65, item 1): a file named for one run but holding another's, or a truncated
one, is damaged - never counted as stored, never used, never overwritten in place - and `umlkit records verify`
lists it; `records train` stops on it unless asked to train its run again, which keeps the bad file beside it."""
import shutil
from pathlib import Path

import pytest

from umlkit.cli import main
from umlkit.experiments.runs.records import (
    DamagedRecord,
    cached_record,
    damaged_records,
    find_record,
    load_record,
    normalise_key,
    read_only,
    set_aside,
)

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "results" / "quick" / "records" / "vptsp" / "table2"
A, B = "cub-Hyp-ViT-seed0-7ca3864b4018.json", "cub-Hyp-ViT-seed1-d09aa5be1861.json"


@pytest.fixture
def results(tmp_path, monkeypatch):
    """A results folder holding two committed VPTSP records, the second misfiled: seed 1's name, seed 0's run."""
    folder = tmp_path / "quick" / "records" / "vptsp" / "table2"
    folder.mkdir(parents=True)
    shutil.copy(SRC / A, folder / A)
    shutil.copy(SRC / A, folder / B)   # the wrong run under seed 1's name
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path))
    return folder


def _key_of_seed1():
    import json
    return normalise_key(json.loads((SRC / B).read_text())["key"])


def test_a_misfiled_record_is_damaged_and_never_used(results):
    assert load_record(results / A)["key_hash"] == "7ca3864b4018"
    with pytest.raises(DamagedRecord, match=r"named for the run of key d09aa5be1861 but holds the run of key "
                                            r"7ca3864b4018"):
        load_record(results / B)
    key = _key_of_seed1()
    assert find_record(key, "quick") == results / B   # the index finds the file by its name ...
    with read_only(), pytest.raises(DamagedRecord):   # ... and reading it refuses to use it
        cached_record("vptsp", "table2", "cub-Hyp-ViT-seed1", key, "train_analysis", "quick")
    assert [p.name for p, _ in damaged_records("quick")] == [B]


def test_a_truncated_record_is_damaged(results):
    text = (results / A).read_text()
    (results / A).write_text(text[: len(text) // 2])
    with pytest.raises(DamagedRecord, match="cannot be read"):
        load_record(results / A)
    assert sorted(p.name for p, _ in damaged_records("quick")) == sorted([A, B])


def test_status_dry_run_and_verify_show_it_and_train_refuses(results, capsys):
    from umlkit.experiments.ops.table_runs import job_status
    from umlkit.experiments.tables.registry import get_paper
    jobs = [j for j in get_paper("vptsp").job_list("tables") if j[1] in ("cub-Hyp-ViT-seed0", "cub-Hyp-ViT-seed1")]
    status = job_status(jobs, "quick").set_index("label")
    assert status.loc["cub-Hyp-ViT-seed0", "stored"] and not status.loc["cub-Hyp-ViT-seed1", "stored"]
    assert "holds the run of key 7ca3864b4018" in status.loc["cub-Hyp-ViT-seed1", "damaged"]
    assert main(["records", "verify", "--paper", "vptsp"]) == 1
    out = capsys.readouterr().out
    assert f"damaged: {results / B}" in out and "2 record(s) checked, 1 damaged (vptsp)" in out
    before = (results / B).read_bytes()
    assert main(["records", "train", "vptsp", "tables", "--match", "^cub-Hyp-ViT-seed[01]$", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "1 stored record(s) are damaged and are not used" in err and "--replace-damaged" in err
    assert (results / B).read_bytes() == before   # nothing moved or written
    assert main(["records", "train", "vptsp", "tables", "--match", "^cub-Hyp-ViT-seed[01]$", "--dry-run",
                 "--replace-damaged"]) == 0
    out = capsys.readouterr().out
    assert "1 already stored, 1 to train" in out and "damaged  cub-Hyp-ViT-seed1" in out
    assert (results / B).read_bytes() == before   # a dry run sets nothing aside


def test_set_aside_keeps_every_bad_file(tmp_path):
    bad = tmp_path / "x-0123456789ab.json"
    bad.write_text("{")
    first = set_aside(bad)
    bad.write_text("[")
    second = set_aside(bad)
    assert (first.name, second.name) == ("x-0123456789ab.json.damaged", "x-0123456789ab.json.damaged.1")
    assert not bad.exists() and first.read_text() == "{" and second.read_text() == "["


def test_no_committed_record_is_damaged():
    """Every record the book reads is what its name says (the index, the key hash and the file name agree)."""
    assert damaged_records("quick") == []


def test_a_table_read_only_names_the_damaged_record_and_reads_its_cells_as_missing(results, capsys):
    """Issue 79: a chapter with TRAIN=False reads past a damaged record (named once on stderr), never crashes."""
    from umlkit.experiments.papers import vptsp
    from umlkit.experiments.tables import table as tables
    spec = vptsp.TABLES("quick")["Table 2"]
    rows = [r for r in spec.rows if r.label == "cub-Hyp-ViT"] or [r for r in spec.rows if "Hyp" in r.method][:1]
    with read_only():
        got = tables.measure(spec, "quick", rows=rows, seeds=[0, 1], train=False, progress=False)
    err = capsys.readouterr().err
    assert f"skipped: run record {results / B}" in err and "its cells read as missing records" in err
    assert set(got["seed"]) == {0}                          # seed 0's record read; seed 1's cells missing


def test_training_where_allowed_replaces_a_damaged_record_and_keeps_it_beside(results, monkeypatch):
    from umlkit.experiments.runs import runners
    monkeypatch.setitem(runners.RUNNERS, "counting", lambda key: {"test": {"CUB": 1.0}})
    rec = cached_record("vptsp", "table2", "cub-Hyp-ViT-seed1", _key_of_seed1(), "counting", "quick", log=None)
    assert rec["result"] == {"test": {"CUB": 1.0}} and (results / (B + ".damaged")).exists()
    assert load_record(results / B)["key_hash"] == "d09aa5be1861"


def test_thread_and_worker_counts_are_capped_at_the_cores(capsys):
    import os
    with pytest.raises(SystemExit):
        main(["records", "train", "vptsp", "tables", "--threads", "100000"])
    assert f"expected at most {os.cpu_count()}" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["reproduce", "--table", "vptsp:table6", "--workers", "100000"])
    assert "one thread or worker per core" in capsys.readouterr().err
