"""The rank-slope figure draws each row from its paper rank to its measured rank."""
import matplotlib
import pandas as pd
import pytest

from umlkit.experiments import plots
from umlkit.experiments.tables import rank_view, rank_views

matplotlib.use("Agg")


def test_rank_slopes_join_paper_rank_to_measured_rank():
    cmp = pd.DataFrame({"section": "", "row": ["A", "B", "C"], "dataset": "Harmonic", "metric": "R@1",
                        "paper": [80.0, 70.0, 60.0], "measured": [50.0, 55.0, 40.0]})
    v = rank_view(cmp)
    fig = plots.plot_rank_slopes({"Table X": v})
    lines = {tuple(ln.get_ydata()) for ln in fig.axes[0].get_lines()}
    assert lines == {(1, 2), (2, 1), (3, 3)}                    # A: 1 -> 2, B: 2 -> 1, C stays 3
    assert "ρ = 0.50" in fig.axes[0].get_title()
    # a table with a single joined row is left out of the views instead of failing the chapter
    views = rank_views({"Table X": cmp, "Table Y": cmp.iloc[:1]})
    assert list(views) == ["Table X (Harmonic)"]
    with pytest.raises(ValueError, match="at least one"):
        plots.plot_rank_slopes({})


def test_the_books_tables_write_a_dash_for_a_missing_value_and_keep_whole_texts():
    import pandas as pd

    from umlkit.experiments.prose import frame_html
    long = "PUMA beats unified full fine-tuning after 15 epochs of training (Harmonic)"
    df = pd.DataFrame({"value": [1.25, float("nan")], "interior": [True, None], "claim": [long, None]})
    html = frame_html(df)
    assert "NaN" not in html and "None" not in html and html.count("<td>–</td>") == 3
    assert long in html and "<td>1.25</td>" in html and "<td>True</td>" in html
    assert df["interior"].iloc[1] is None            # the frame itself is not changed
