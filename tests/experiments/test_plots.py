"""The rank-slope figure draws each row from its paper rank to its measured rank."""
import matplotlib
import pandas as pd
import pytest

from umlkit.experiments.tables.table import rank_view, rank_views
from umlkit.experiments.views import plots

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

    from umlkit.experiments.views.prose import frame_html
    long = "PUMA beats unified full fine-tuning after 15 epochs of training (Harmonic)"
    df = pd.DataFrame({"value": [1.25, float("nan")], "interior": [True, None], "claim": [long, None]})
    html = frame_html(df)
    assert "NaN" not in html and "None" not in html and html.count("<td>–</td>") == 3
    assert long in html and "<td>1.25</td>" in html and "<td>True</td>" in html
    assert df["interior"].iloc[1] is None            # the frame itself is not changed


def test_a_sweep_with_highlights_colours_only_those_and_greys_the_rest():
    import matplotlib
    matplotlib.use("Agg")
    from umlkit.experiments.views import plots
    rows = [{"unit": u, "lr": lr, "val": v, "chosen": v == best}
            for u, vals in {"a": [1, 3, 2], "b": [2, 1, 0], "c": [0, 1, 5]}.items()
            for lr, v, best in zip((1e-4, 1e-3, 1e-2), vals, [max(vals)] * 3)]
    ax = plots.plot_sweep(pd.DataFrame(rows), "lr", "val", "unit", highlight=["a"])
    labels = ax.get_legend_handles_labels()[1]
    assert "a" in labels and "b" not in labels and "c" not in labels and "the other 2" in labels
    grey = [line for line in ax.get_lines() if line.get_color() == "0.75" and len(line.get_xdata())]
    assert len(grey) == 2                                       # one thin grey line per other unit
    assert len(ax.collections[-1].get_offsets()) == 1           # only the highlighted unit's choice is ringed


def test_similarity_panels_share_one_colour_bar_and_have_equal_sizes():
    import numpy as np
    import pandas as pd

    from umlkit.experiments.views.plots import plot_similarity_panels
    rng = np.random.default_rng(0)
    mats = {n: pd.DataFrame(np.corrcoef(rng.standard_normal((5, 8))), index=[f"c{i}" for i in range(5)])
            for n in ("ELG", "PLG", "CLIP")}
    fig = plot_similarity_panels(mats)
    panels = [a for a in fig.axes if a.get_title()]
    assert [a.get_title() for a in panels] == ["ELG", "PLG", "CLIP"]
    sizes = {(round(a.get_position().width, 4), round(a.get_position().height, 4)) for a in panels}
    assert len(sizes) == 1                                  # the colour bar no longer narrows the right column
    assert len(fig.axes) == 5                               # 3 panels, the empty fourth, one colour bar


def test_sweep_panels_give_a_line_one_colour_in_every_panel_and_one_legend_with_every_line():
    """Ten lines on one source and seven on another (tab20 + markers past eight): the shared legend names all ten
    and a line keeps its colour from panel to panel."""
    import matplotlib.pyplot as plt
    rows = [{"source": s, "row": f"m{i}", "lr": lr, "val": i + lr, "chosen": lr == 1e-3}
            for s, n in (("cub", 10), ("cars", 7)) for i in range(n) for lr in (1e-4, 1e-3, 1e-2)]
    fig = plots.plot_sweep_panels(pd.DataFrame(rows), "lr", "val", "row", "source", zero=False,
                                  titles={"cub": "CUB-like"}, xlabel="rate")
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == [f"m{i}" for i in range(10)] + ["chosen"]
    colour = [{ln.get_label(): ln.get_color() for ln in ax.get_lines()} for ax in fig.axes[:2]]
    assert all(colour[0][f"m{i}"] == colour[1][f"m{i}"] for i in range(7))
    assert [ax.get_title() for ax in fig.axes[:2]] == ["CUB-like", "cars"] and fig.axes[0].get_xlabel() == "rate"
    assert all(ax.get_legend() is None for ax in fig.axes[:2])
    plt.close(fig)


def test_measured_vs_paper_labels_do_not_overlap():
    """Crowded points (PUMA's (a)/(b) cluster): the row labels are moved apart, deterministically."""
    import matplotlib
    matplotlib.use("Agg")
    import numpy as np
    import pandas as pd

    from umlkit.experiments.views import plots
    rng = np.random.default_rng(0)
    n = 12
    cmp = pd.DataFrame({"dataset": "Harmonic", "metric": "R@1", "section": ["(a) x"] * 6 + ["(b) y"] * 6,
                        "row": [f"method {i}" for i in range(n)], "paper": 80 + rng.random(n),
                        "measured": 85 + rng.random(n)})

    def boxes():
        ax = plots.plot_measured_vs_paper(cmp)
        fig = ax.figure
        fig.canvas.draw()
        texts = [t for t in ax.texts if t.get_text().startswith("method")]
        out = [t.get_window_extent(fig.canvas.get_renderer()) for t in texts]
        matplotlib.pyplot.close(fig)
        return out
    first = boxes()
    assert len(first) == n
    overlaps = sum(a.overlaps(b) for i, a in enumerate(first) for b in first[i + 1:])
    assert overlaps == 0
    assert [tuple(b.bounds) for b in boxes()] == [tuple(b.bounds) for b in first]


@pytest.mark.parametrize("groups", [5, 31])
def test_verdict_bars_count_each_group_and_keep_the_legend_inside_the_figure(groups):
    """Per paper (5 bars) or per table (31): one bar per group in the board's order, each bar's length its number
    of claims, and the legend below the axes but within the saved figure."""
    import matplotlib
    import pandas as pd
    matplotlib.use("Agg")
    from umlkit.experiments.views.plots import plot_verdicts
    rows = [{"where": f"g{i}", "verdict": v} for i in range(groups)
            for v in ["reproduced"] * (i % 4 + 1) + ["inconclusive"] * 2 + ["contradicted"]]
    fig = plot_verdicts(pd.DataFrame(rows), by="where", title="t")
    ax = fig.axes[0]
    widths = {}
    for patch in ax.patches:
        y = round(patch.get_y() + patch.get_height() / 2)
        widths[y] = widths.get(y, 0) + patch.get_width()
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == [f"g{i}" for i in range(groups)][::-1]           # first group on top
    assert [widths[y] for y in range(groups)] == [(i % 4 + 1) + 3 for i in range(groups)][::-1]
    fig.canvas.draw()
    box = ax.get_legend().get_window_extent()
    axes_box = ax.get_window_extent()
    assert box.y1 < axes_box.y0 and box.y0 >= 0                        # below the axes, not cut off
