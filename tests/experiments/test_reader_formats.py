"""What a reader sees of a number: no signed zero, integers as integers, seed counts as ranges, the paper's Table 5
in columns that fit (issue 40's page audit)."""
import pandas as pd
import pytest

from umlkit.experiments.tables import table as tables
from umlkit.experiments.views.prose import fmt, frame_html, gap, number, signed


def test_signed_values_never_read_minus_zero():
    assert [signed(v) for v in (-0.04, 0.04, 0.0, -0.06, 1.26)] == ["0.0", "0.0", "0.0", "-0.1", "+1.3"]
    assert signed(-0.004, 2) == "0.00" and gap(1.0, 1.04) == "0.0" and gap(2.0, 1.0) == "+1.0"
    assert [number(v) for v in (-0.04, 0.04, -1.26, None, float("nan"))] == ["0.0", "0.0", "-1.3", "–", "–"]
    assert [number(v, signed=True) for v in (-0.04, -0.06, 1.26)] == ["0.0", "-0.1", "+1.3"]
    assert number(-0.004, signed=True, digits=2) == "0.00" and number(2.5, digits=0) == "2"
    assert fmt(-0.04) == "0.0" and fmt(-1.26) == "-1.3"
    html = frame_html(pd.DataFrame({"gap": [round(-0.04, 1), 1.5]}))
    assert "-0.0" not in html and "0.0" in html


def test_headers_over_text_only_are_set_left_and_over_numbers_right():
    text = frame_html(pd.DataFrame({"meaning": ["a long sentence", "another"]}, index=["x", "y"]))
    mixed = frame_html(pd.DataFrame({"meaning": ["a", "b"], "R@1": [1.0, 2.0]}))
    assert '<tr style="text-align: left;">' in text
    assert '<tr style="text-align: right;">' in mixed and "text-align: left" not in mixed


def test_degrees_of_freedom_print_whole_numbers_as_such():
    from umlkit.experiments.claims.verdicts import dof_text
    assert dof_text(2.0) == "2" and dof_text(3.14) == "3.1"


def test_side_by_side_leaves_out_a_zero_spread_and_names_a_lone_metric_column():
    cmp = pd.DataFrame({"section": ["", ""], "row": ["a", "b"], "dataset": ["", ""],
                        "metric": ["TrainableParams(M)"] * 2, "measured": [5.6, 0.7], "spread": [0.0, 0.02],
                        "seeds": [3, 3], "paper": [173.7, float("nan")]})
    out = tables.side_by_side(cmp, metric="TrainableParams(M)", digits=1)
    assert out.columns.tolist() == ["TrainableParams(M)"]
    assert out.loc["a", "TrainableParams(M)"] == "5.6 (173.7)" and out.loc["b", "TrainableParams(M)"] == "0.7 ±<0.1"


def test_seed_counts_read_as_a_range_where_rows_differ():
    from umlkit.experiments.papers.puma.chapter import seed_range
    assert seed_range(pd.Series([3, 3])) == "3" and seed_range(pd.Series([3, 5, 3])) == "3 to 5"


def test_the_papers_table5_fits_in_twelve_short_lines():
    from umlkit.experiments.papers.puma.chapter import paper_table5
    from umlkit.experiments.tables.paper_cells import paper_table
    view = paper_table5()
    assert view.shape == (12, 10) and max(len(b) for b, _ in view.index) <= 32
    raw = paper_table("puma", "Table 5")
    ref = raw[(raw["method"] == "Ours") & (raw["dataset"] == "Harmonic") & raw["setting"].str.contains("DINO")]
    assert view.loc[("DINO-S/16 · IN-1K, self-sup.", "Ours"), "Harmonic"] == pytest.approx(float(ref["value"].iloc[0]))
