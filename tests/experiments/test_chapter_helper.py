"""Issue 73 item 4: the chapter helper (umlkit.experiments.views.chapter.Chapter) shows a table in the paper's shape
with its claims block right below, and gathers the page's claims; every paper chapter uses it."""
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from umlkit._paths import results_root
from umlkit.experiments.tables import memo
from umlkit.experiments.tables import table as tables
from umlkit.experiments.tables.registry import papers
from umlkit.experiments.views import chapter as chapter_module
from umlkit.experiments.views.chapter import CLAIMS_HEADING, MISSING_TEXT, Chapter
from umlkit.experiments.views.scoreboard import family_adjusted, scoreboard_view, verdicts_beside

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def shown(monkeypatch, tmp_path):
    """What the helper displays, collected; the chapter's CSVs go to a copy of VPTSP's records."""
    shutil.copytree(ROOT / "results" / "quick" / "records" / "vptsp", tmp_path / "quick" / "records" / "vptsp")
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path))
    memo.forget()
    out = []
    monkeypatch.setattr(chapter_module, "_display", out.append)
    yield out
    memo.forget()


def test_show_gives_one_side_by_side_per_metric_then_the_claims_block(shown, capsys):
    from umlkit.experiments.papers import vptsp
    T = vptsp.TABLES("quick")
    ch = Chapter("vptsp", T, "quick")
    cmp = ch.run("Table 7")
    assert not cmp.empty and (results_root("quick") / "vptsp_table7.csv").is_file()   # saved, as a chapter does
    ch.show("Table 7", ["R@1", ("MAP@R", 2)])
    printed = capsys.readouterr().out.splitlines()
    assert printed == ["R@1", "MAP@R", CLAIMS_HEADING]
    pd.testing.assert_frame_equal(shown[0], tables.side_by_side(cmp, "R@1"))
    pd.testing.assert_frame_equal(shown[1], tables.side_by_side(cmp, "MAP@R", digits=2))
    pd.testing.assert_frame_equal(shown[2], verdicts_beside(T["Table 7"], cmp, "vptsp", "quick"))
    block = shown[2]   # each claim under its table: the paper's gap, the measured gap, the seeds, the verdict
    assert list(block.columns[:4]) == ["paper gap", "measured gap [95 % interval]", "seeds", "verdict"]
    manual_view = scoreboard_view(family_adjusted(tables.table_claims(T["Table 7"], cmp), "vptsp", "quick"))
    pd.testing.assert_series_equal(block["paper gap"], manual_view.set_index("claim")["paper gap"])
    assert (block["seeds"].dropna() >= 1).all()
    manual = family_adjusted(tables.table_claims(T["Table 7"], cmp), "vptsp", "quick")
    pd.testing.assert_frame_equal(ch.claims(), manual)


def test_a_table_without_records_says_so_and_an_unrun_one_is_an_error(shown, capsys, tmp_path, monkeypatch):
    from umlkit.experiments.papers import vptsp
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path / "empty"))
    ch = Chapter("vptsp", vptsp.TABLES("quick"), "quick")
    assert ch.run("Table 7").empty
    ch.show("Table 7")
    out = capsys.readouterr().out
    n = sum(len(seeds) for _, seeds in tables.wanted_runs(ch.spec("Table 7"), "quick"))
    assert out.startswith(f"missing records: {n} of {n} runs of this table") and not shown
    first = ch.spec("Table 7").rows[0]
    assert max(len(line) for line in out.splitlines()) <= 110   # wrapped to the page
    out = " ".join(out.split())
    assert f"({first.title}: seed" in out and out.endswith("TRAIN=True trains them")
    assert " ".join(ch.missing("Table 7").split()) == out and MISSING_TEXT.startswith("missing records")
    assert ch.claims().empty
    with pytest.raises(KeyError, match="call .run"):
        ch.show("Table 5")
    with pytest.raises(KeyError, match="no table 'Table 99'"):
        ch.run("Table 99")


def _code(stem: str) -> str:
    nb = json.loads((ROOT / "book" / f"{stem}.ipynb").read_text())
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")


def test_every_paper_chapter_uses_the_helper_and_types_no_claims_block():
    chapters = [c for p in papers().values() for c in p.chapters]
    assert chapters
    for stem in chapters:
        code = _code(stem)
        assert "Chapter(" in code, stem
        assert "The claims on this table" not in code and "def run(" not in code, stem


def test_complete_says_whether_every_row_has_a_record(shown, tmp_path):
    """A view that reads across rows runs only on a complete table: one row's records removed makes it partial."""
    from umlkit.experiments.papers import vptsp
    T = vptsp.TABLES("quick")
    ch = Chapter("vptsp", T, "quick")
    ch.run("Table 7")
    assert ch.complete("Table 7")
    folder = tmp_path / "quick" / "records" / "vptsp" / "table7"
    for f in folder.glob("cub-LSTM-seed*.json"):
        f.unlink()
    memo.forget()
    ch.run("Table 7")
    assert not ch.complete("Table 7") and not ch.compared["Table 7"].empty
    others = [r for r in T["Table 7"].rows if r.title != "LSTM"]
    ch.run("Table 7", rows=others)   # the rows it was run with are all there
    assert ch.complete("Table 7")


def test_missing_runs_count_what_a_half_filled_measurement_lacks():
    """The missing-records sentence counts by hand: a table of two rows x three seeds of which one row's seed 2 and
    the other row are measured lacks three runs, named by row and seed."""
    from umlkit.experiments.tables.table import Row, Table
    spec = Table("toy", "Table 1", [Row(method="A", label="A"), Row(method="B", label="B")],
                 lambda *a, **k: {}, seeds=(0, 1, 2))
    measured = pd.DataFrame({"row": ["A", "B", "B", "B"], "seed": [2, 0, 1, 2], "value": [1.0] * 4})
    titles = [r.title for r in spec.rows]
    assert tables.missing_runs(spec, measured, "quick") == [(titles[0], 0), (titles[0], 1)]
    assert tables.missing_runs(spec, measured.iloc[:0], "quick") == [(t, s) for t in titles for s in (0, 1, 2)]
    assert tables.missing_runs(spec, measured, "quick", seeds=[2]) == []
    text = tables.missing_sentence(tables.missing_runs(spec, measured, "quick"), 6)
    assert text == (f"missing records: 2 of 6 runs of this table under this chapter's settings ({titles[0]}: seeds "
                    f"0, 1); TRAIN=True trains them")
    many = [(f"r{i}", 0) for i in range(6)]
    assert "(r0: seed 0; r1: seed 0; r2: seed 0; r3: seed 0; and 2 more rows)" in tables.missing_sentence(many, 6)
