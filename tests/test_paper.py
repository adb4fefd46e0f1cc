"""umlkit.paper: the papers' tables as data."""
import pytest

from umlkit.paper import paper_table


def test_paper_table_lookup():
    t = paper_table("puma", "Table 3")
    assert set(t["metric"]) >= {"TrainableParams(M)"}
    with pytest.raises(ValueError, match="paper must be"):
        paper_table("simclr")
    with pytest.raises(ValueError, match="no rows"):
        paper_table("puma", "Table 99")
