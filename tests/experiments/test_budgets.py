"""umlkit.experiments.budgets: trainable-parameter budgets against the papers."""
from umlkit.experiments import budgets


def test_puma_budget_matches_paper_except_documented_row():
    table = budgets.puma_budget()
    assert list(table.index[~table["matches paper"]]) == ["Linear Embedding"]
    assert table.loc["Linear Embedding", "note"]

