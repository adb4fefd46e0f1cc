"""umlkit.experiments.runs.records: computed once, found by hash under any table, edits detected, staleness and
recomputation, and the committed quick-profile records (none stale; one retrained to the same numbers)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from umlkit.experiments.papers.puma import run_config
from umlkit.experiments.runs import fingerprint as fp
from umlkit.experiments.runs import records as rc
from umlkit.experiments.runs import runners


@pytest.fixture()
def counting_runner(monkeypatch, tmp_path):
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path))
    calls = []

    def runner(key):
        calls.append(key["seed"])
        return {"test": {"CUB": 50.0 + key["seed"]}}

    monkeypatch.setitem(runners.RUNNERS, "counting", runner)
    return calls


def test_cached_record_computes_once_and_is_found_under_any_table(counting_runner, tmp_path):
    key = run_config("quick", method="linear")
    first = rc.cached_record("puma", "table2", "row 1", key, "counting", "quick", log=None)
    second = rc.cached_record("puma", "table2", "row 1", key, "counting", "quick", log=None)
    assert counting_runner == [0] and not first["cached"] and second["cached"] and second["stale"] == []
    elsewhere = rc.cached_record("vptsp", "table1", "other label", key, "counting", "quick", log=None)
    assert counting_runner == [0] and elsewhere["label"] == "row 1"        # one run serves every table
    path = rc.record_path("puma", "table2", "row 1", key, "quick")
    assert path.parent == tmp_path / "quick" / "records" / "puma" / "table2" and path.name.startswith("row_1-")
    stored = json.loads(path.read_text())
    assert stored["runner"] == "counting" and stored["fingerprint"] == fp.fingerprint(key)
    rc.cached_record("puma", "table2", "row 1", key, "counting", "quick", rerun=True, log=None)
    assert counting_runner == [0, 0] and len(rc.list_records("quick")) == 1   # replaced, not duplicated
    summary = rc.records_summary("quick")
    assert summary.loc[("puma", "table2"), "records"] == 1 and summary.loc[("total", ""), "stale"] == 0


def test_an_archived_record_is_never_read_and_the_read_log_lists_what_is(counting_runner, tmp_path, monkeypatch):
    """tools/archive_records.py moves superseded records to results/<profile>/archive/records/: no look-up finds
    them there; UMLKIT_READ_LOG lists every record a look-up returns."""
    key = run_config("quick", method="linear")
    rc.cached_record("puma", "table2", "row 1", key, "counting", "quick", log=None)
    log = tmp_path / "reads.txt"
    monkeypatch.setenv("UMLKIT_READ_LOG", str(log))
    path = rc.find_record(key, "quick")
    assert path is not None and log.read_text() == f"{path}\n"
    archived = tmp_path / "quick" / "archive" / path.relative_to(tmp_path / "quick")
    archived.parent.mkdir(parents=True)
    path.rename(archived)
    assert rc.find_record(key, "quick") is None and rc.list_records("quick") == []
    assert log.read_text() == f"{path}\n"   # a miss is not logged
    rc.cached_record("puma", "table2", "row 1", key, "counting", "quick", log=None)
    assert counting_runner == [0, 0]   # asked again, the run is trained, not taken from the archive


def test_edited_or_unreadable_records_raise(counting_runner):
    key = run_config("quick", method="linear")
    rec = rc.cached_record("puma", "t", "r", key, "counting", "quick", log=None)
    path = Path(rec["path"])
    data = json.loads(path.read_text())
    data["key"]["seed"] = 7
    path.write_text(json.dumps(data))
    with pytest.raises(rc.RecordError, match="edited"):
        rc.load_record(path)
    path.write_text("{not json")
    assert rc.find_record(key, "quick") == path    # still found by its name
    with rc.read_only(), pytest.raises(rc.RecordError, match="cannot be read"):   # a reader is told which file
        rc.cached_record("puma", "t", "r", key, "counting", "quick", log=None)
    again = rc.cached_record("puma", "t", "r", key, "counting", "quick", log=None)   # training: the run again,
    assert counting_runner == [0, 0] and again["stale"] == []                     # the bad file kept beside
    assert path.with_name(path.name + ".damaged").read_text() == "{not json"
    for content, message in ((b"null", "holds a JSON NoneType, not a record"), (b'"text"', "holds a JSON str"),
                             (b"\xff\xfe binary", "cannot be read")):
        path.write_bytes(content)
        with pytest.raises(rc.RecordError, match=f"run record {path} ({message})"):
            rc.load_record(path)
    data["key"] = {"a": 1}                    # a consistent hash over a key no runner wrote
    data["key_hash"] = rc.config_hash(data["key"])
    path.write_text(json.dumps(data))
    with pytest.raises(rc.DamagedRecord, match=f"run record {path} is named for the run of key"):
        rc.load_record(path)                  # under the old run's name: another run than the name promises
    path = path.with_name(f"r-{data['key_hash']}.json")   # under its own name: the key itself is refused
    path.write_text(json.dumps(data))
    with pytest.raises(rc.RecordError, match=f"run record {path}: its key cannot be fingerprinted"):
        rc.load_record(path)


def test_a_record_key_is_checked_before_the_run_and_records_get_the_umask_mode(counting_runner, tmp_path):
    with pytest.raises(Exception, match="resolved configuration"):
        rc.cached_record("puma", "t", "r", {"seed": 0, "train": {"epochs": 1}}, "counting", "quick", log=None)
    assert counting_runner == []           # nothing was trained for a key that could not be stored
    old = os.umask(0o022)
    try:
        rec = rc.cached_record("puma", "t", "r", run_config("quick", method="linear"), "counting", "quick", log=None)
    finally:
        os.umask(old)
    assert Path(rec["path"]).stat().st_mode & 0o777 == 0o644   # not mkstemp's private 0600


def test_stale_records_are_listed_and_recomputed(counting_runner, monkeypatch):
    keys = [run_config("quick", method="linear", seed=s) for s in (0, 1)]
    for k in keys:
        rc.cached_record("puma", "t", f"s{k['seed']}", k, "counting", "quick", log=None)
    assert rc.stale_records("quick") == []
    # the training code changes: both records are stale, and say which part changed
    monkeypatch.setattr(fp, "code_hash", lambda *_: "ffffffffffff")
    stale = rc.stale_records("quick")
    assert [r["stale"] for r in stale] == [["code"], ["code"]]
    again = rc.recompute(stale[0], log=None)
    assert again["stale"] == [] and again["path"] == stale[0]["path"] and len(counting_runner) == 3
    assert [r["key"]["seed"] for r in rc.stale_records("quick")] == [stale[1]["key"]["seed"]]


def test_restamp_updates_only_the_named_parts_and_keeps_history(counting_runner, monkeypatch):
    key = run_config("quick", method="linear")
    rec = rc.cached_record("puma", "t", "r", key, "counting", "quick", log=None)
    old = json.loads(Path(rec["path"]).read_text())["fingerprint"]
    monkeypatch.setattr(fp, "code_hash", lambda *_: "ffffffffffff")
    with pytest.raises(ValueError, match="reason"):
        rc.restamp("quick", reason=" ")
    assert rc.restamp("quick", reason="data-only probe", parts=("data",)) == []   # stale in code: left alone
    assert rc.restamp("quick", reason="old and new code gave identical results") == [Path(rec["path"])]
    stored = json.loads(Path(rec["path"]).read_text())
    assert stored["fingerprint"] == {**old, "code": "ffffffffffff"} and rc.stale_records("quick") == []
    assert stored["restamped"][0]["from"] == old and "identical" in stored["restamped"][0]["reason"]
    assert counting_runner == [0]                                                # nothing was retrained
    assert rc.restamp("quick", reason="again") == []                             # current records are not touched


def test_callable_runners_cannot_be_recomputed(counting_runner):
    rec = rc.cached_record("puma", "t", "r", run_config("quick", method="linear"), lambda k: {"x": 1}, "quick",
                           log=None)
    assert rec["runner"].startswith("callable:")
    with pytest.raises(rc.RecordError, match="not a registered runner"):
        rc.recompute(rc.load_record(rec["path"]))


def test_normalise_key_drops_progress_only():
    cfg = run_config("quick", method="linear")
    cfg["train"]["progress"] = True
    key = rc.normalise_key(cfg)
    assert "progress" not in key["train"] and key["train"]["epochs"] == cfg["train"]["epochs"]
    group = rc.normalise_key({"cub": cfg})
    assert "progress" not in group["cub"]["train"]


def _committed():
    from umlkit._paths import repo_root
    return sorted((repo_root() / "results" / "quick" / "records").glob("*/*/*.json"))


def _direct_losses(key: dict) -> set[str]:
    """The losses a record's objective names, wrappers' bases included (not those shared code reaches)."""
    from umlkit.experiments.runs.code_reach import _option_strings
    from umlkit.experiments.runs.fingerprint import _configs
    return {n for c in _configs(key) for t in c.get("objective") or [] for n in {t["name"], *_option_strings(
        t.get("options"))}}


def _methods(key: dict) -> set[str]:
    from umlkit.experiments.runs.fingerprint import _configs
    return {c["model"]["method"] for c in _configs(key) if "model" in c}


def test_committed_quick_records_are_current_or_declared_for_the_second_edition():
    """Every committed quick-profile record was produced by the current data generator, weights and code, or trains a
    loss or a method that configs/second_edition.yaml declares changed (it waits for the retrain, shown stale
    meanwhile). When this fails after a change, run `umlkit reproduce --stale` and commit the new records, or declare
    the change."""
    from umlkit._paths import repo_root
    from umlkit._yaml import read_yaml
    edition = read_yaml(repo_root() / "configs" / "second_edition.yaml")
    losses, methods = set(edition["changed_losses"]), set(edition["changed_methods"])
    paths = _committed()
    assert paths, "no committed quick-profile records found"
    stale = {p.relative_to(p.parents[3]).as_posix(): rec["stale"] for p in paths
             if (rec := rc.load_record(p))["stale"] and not (_direct_losses(rec["key"]) & losses
                                                              or _methods(rec["key"]) & methods)}
    assert not stale, f"{len(stale)} stale record(s) of unchanged losses and methods, e.g. {list(stale.items())[:3]}"


@pytest.mark.recompute
def test_a_stored_quick_record_reproduces():
    """A committed record retrained from its stored key gives the same numbers (identical on the machine that
    wrote it; a tolerance covers other CPUs' float summation order). In `make test-all`: its inputs (data, weights,
    code) are the records' fingerprint, which test_committed_quick_records_are_current compares in `make test`."""
    paths = [p for p in _committed() if p.name.startswith("Linear_Embedding-seed0-")]
    if not paths:
        pytest.skip("no stored Linear Embedding record")
    rec = rc.load_record(paths[0])
    threads = torch.get_num_threads()
    torch.set_num_threads(int(rec["software"]["threads"]))
    try:
        again = runners.run(rec["runner"], rec["key"])
    finally:
        torch.set_num_threads(threads)
    for d, v in rec["result"]["test"].items():
        assert again["test"][d] == pytest.approx(v, abs=0.5), d
    assert again["trainable_model"] == rec["result"]["trainable_model"]


def test_a_run_whose_loss_options_changed_reads_its_predecessor_marked_stale(counting_runner):
    """A paper's loss set to its official variant changes the key: until the new run is trained, readers show the
    previous record (same configuration but the objective's options) stale in part "options"; training does not
    use it, and a key that differs elsewhere (the rate) has no predecessor."""
    import copy
    old = run_config("quick", method="linear", loss="multisimilarity")
    rc.cached_record("puma", "table2", "MS", old, "counting", "quick", log=None)
    new = copy.deepcopy(old)
    new["objective"][0]["options"] = {**new["objective"][0]["options"], "variant": "roth", "beta": 40.0}
    assert rc.find_record(rc.normalise_key(new), "quick") is None
    shown = rc.stored_record(new, "quick")
    assert shown is not None and "options" in shown["stale"] and shown["key"] == rc.normalise_key(old)
    with rc.read_only():
        assert "options" in rc.cached_record("puma", "table2", "MS", new, "counting", "quick", log=None)["stale"]
    other = copy.deepcopy(new)
    other["optimizer"]["lr"] = 0.5
    assert rc.stored_record(other, "quick") is None
    method = copy.deepcopy(old)     # a method set to its paper's variant: the same, on the model's options
    method["model"]["options"] = {**method["model"].get("options", {}), "variant": "puma"}
    assert rc.stored_record(method, "quick")["key"] == rc.normalise_key(old)
    width = copy.deepcopy(method)
    width["model"]["options"]["hidden"] = 7      # another model option: another run
    assert rc.stored_record(width, "quick") is None
    trained = rc.cached_record("puma", "table2", "MS", new, "counting", "quick", log=None)   # not read-only: trains
    assert counting_runner == [0, 0] and trained["stale"] == [] and not trained["cached"]


def test_the_restamp_tool_restamps_only_the_records_current_before_the_change(counting_runner, monkeypatch,
                                                                               tmp_path):
    """tools/restamp_records.py --list-current under the old code, then --only after the change: a record that was
    already stale before it (here: left off the list) stays stale, so a restamp never hides an older change."""
    import runpy
    import sys
    tool = str(Path(__file__).resolve().parents[2] / "tools" / "restamp_records.py")
    recs = [rc.cached_record("puma", "t", f"s{s}", run_config("quick", method="linear", seed=s), "counting",
                             "quick", log=None) for s in (0, 1)]
    listed = tmp_path / "current.txt"
    monkeypatch.setattr(sys, "argv", [tool, "--list-current", str(listed)])
    with pytest.raises(SystemExit):
        runpy.run_path(tool, run_name="__main__")
    assert set(listed.read_text().split()) == {r["path"] for r in recs}
    listed.write_text(recs[0]["path"] + "\n")          # as though the second had been stale before the change
    monkeypatch.setattr(fp, "code_hash", lambda *_: "ffffffffffff")
    monkeypatch.setattr(sys, "argv", [tool, "--reason", "identical under both codes", "--only", str(listed)])
    runpy.run_path(tool, run_name="__main__")
    assert [r["path"] for r in rc.stale_records("quick")] == [recs[1]["path"]] and counting_runner == [0, 1]
