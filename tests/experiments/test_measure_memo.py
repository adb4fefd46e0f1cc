"""Issue 73 item 2: a chapter's tables are measured once per process and the family board reuses them; a record
written since makes the next reading read again (umlkit.experiments.tables.memo)."""
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from umlkit.experiments.ops.table_runs import table_spec
from umlkit.experiments.tables import memo
from umlkit.experiments.tables import table as tb

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def counted(monkeypatch):
    """Readings that reach the records (a memo hit does not)."""
    memo.forget()
    calls = []
    real = tb._measured

    def counting(spec, *a, **k):
        calls.append(spec.table)
        return real(spec, *a, **k)
    monkeypatch.setattr(tb, "_measured", counting)
    yield calls
    memo.forget()


def test_a_second_reading_is_served_from_the_memo_and_is_a_copy(counted):
    spec = table_spec("vptsp", "Table 7")
    first = tb.measure(spec, "quick", train=False, progress=False, log=None)
    first.loc[:, "value"] = -1.0   # a caller changing its frame changes nothing stored
    second = tb.measure(spec, "quick", train=False, progress=False, log=None)
    assert counted == ["Table 7"] and len(second) > 0 and (second["value"] != -1.0).all()
    other = tb.measure(spec, "quick", seeds=[0], train=False, progress=False, log=None)   # another reading
    assert counted == ["Table 7", "Table 7"] and set(other["seed"]) == {0}


def test_the_family_board_reuses_the_chapters_measurements(counted, tmp_path, monkeypatch):
    """A chapter's run_table (saving its CSVs, here into a copy of the paper's records), then the Holm family of the
    scoreboard: each claim table read from the records once."""
    shutil.copytree(ROOT / "results" / "quick" / "records" / "vptsp", tmp_path / "quick" / "records" / "vptsp")
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path))
    from umlkit.experiments.tables.registry import get_paper
    from umlkit.experiments.views.scoreboard import scoreboard
    claim_tables = get_paper("vptsp").claim_tables("quick")
    for name, spec in claim_tables.items():
        tb.run_table(spec, "quick", train=False, floors=False)
    n = len(counted)
    board = scoreboard("quick", papers=["vptsp"])
    assert len(counted) == n == len(claim_tables) and not board.empty
    assert list(tmp_path.joinpath("quick").glob("vptsp_*.csv"))   # the chapter saved its tables


def test_a_record_written_since_makes_the_next_reading_read_again(counted, tmp_path, monkeypatch):
    src = ROOT / "results" / "quick" / "records" / "vptsp" / "table7"
    dst = tmp_path / "quick" / "records" / "vptsp" / "table7"
    shutil.copytree(src, dst)
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path))
    spec = table_spec("vptsp", "Table 7")
    a = tb.measure(spec, "quick", train=False, progress=False, log=None)
    victim = sorted(dst.glob("*.json"))[0]
    moved = tmp_path / victim.name
    os.replace(victim, moved)   # a record gone (as an atomic rewrite or removal changes its folder)
    b = tb.measure(spec, "quick", train=False, progress=False, log=None)
    assert counted == ["Table 7", "Table 7"] and len(b) < len(a)
    os.replace(moved, victim)   # and back: read again, the same frame as the first
    c = tb.measure(spec, "quick", train=False, progress=False, log=None)
    assert len(counted) == 3
    pd.testing.assert_frame_equal(a.drop(columns="record"), c.drop(columns="record"))
