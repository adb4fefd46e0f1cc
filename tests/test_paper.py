"""umlkit.experiments.tables.paper_cells: the papers' tables as data."""
import pytest

from umlkit.experiments.tables.paper_cells import paper_table


def test_paper_table_lookup():
    t = paper_table("puma", "Table 3")
    assert set(t["metric"]) >= {"TrainableParams(M)"}
    with pytest.raises(ValueError, match="paper must be"):
        paper_table("simclr")
    with pytest.raises(ValueError, match="no rows"):
        paper_table("puma", "Table 99")


def test_a_table_takes_the_cells_its_text_lost_from_the_table_of_the_same_runs():
    """Language guidance's Table S1 reports Table 2's runs with two more metrics: wherever both print an R@1 the two
    agree, and the four Table 2 cells missing in the text come from Table S1, noted as such."""
    import pandas as pd

    from umlkit.experiments.tables.paper_cells import paper_table, paper_tables_dir
    raw = pd.read_csv(paper_tables_dir() / "language_guidance.csv", dtype={"setting": str, "section": str})
    raw = raw.fillna({"section": "", "setting": ""})
    keys = ["method", "setting", "dataset"]
    t2 = raw[raw["table"] == "Table 2"].set_index(keys)["value"]
    s1 = raw[(raw["table"] == "Table S1") & (raw["metric"] == "R@1")].set_index(keys)["value"]
    both = t2.index.intersection(s1.index)
    assert len(both) >= 20 and (t2[both] == s1[both]).all()
    filled = paper_table("language_guidance", "Table 2").fillna({"section": "", "setting": ""})
    assert len(filled) == len(t2) + len(s1.index.difference(t2.index)) and set(filled["table"]) == {"Table 2"}
    margin_cub = filled[(filled["method"] == "Margin") & (filled["dataset"] == "CUB")]
    assert margin_cub["value"].tolist() == [62.7] and "from Table S1" in margin_cub["note"].iloc[0]
