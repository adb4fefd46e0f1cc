"""umlkit.experiments.pages.budgets: trainable-parameter budgets against the papers."""
from umlkit.experiments.pages import budgets


def test_puma_budget_matches_paper_except_documented_row():
    table = budgets.puma_budget()
    assert list(table.index[~table["matches paper"]]) == ["Linear Embedding"]
    assert table.loc["Linear Embedding", "note"]
    # the paper prints one decimal (0.1); at that precision 49,280 parameters read 0.0, so the count is also shown
    # to three significant digits
    assert table.loc["Linear Embedding", "total"] == 49_280 and table.loc["Linear Embedding", "exact (M)"] == "0.0493"
    view = budgets.uml_view({"classes": 15_952, "total (M)": 222.94, "paper (M)": 124.8})
    assert view["value"].tolist() == ["15,952", "222.9", "124.8"]



def test_budget_facts_from_hand_made_counts():
    """The parameter-budget page's numbers, computed from the counted tables (a hand-made pair here): PUMA's
    adapters = stochastic adapter - head, pool = PUMA - stochastic adapter, ratio = 8 full models / PUMA."""
    import pandas as pd

    from umlkit.experiments.pages.budgets import budget_facts
    head = 384 * 128 + 128                       # 49,280: the linear head of a 384-d backbone to 128-d
    adapters = 12 * 2 * (384 * 128 + 128 * 384)  # 2,359,296
    puma = pd.DataFrame({"total": [21_714_944, head, head + adapters, head + adapters + 76_800]},
                        index=["Full fine-tuning (one model)", "Linear Embedding", "Stochastic adapter", "PUMA"])
    vptsp = pd.DataFrame({"total": [238_464, 1_764_096, 2_649_984], "measured (M)": [0.24, 1.76, 2.65],
                          "paper (M)": [0.26, 1.27, 2.15]}, index=["BitFit", "VPTSP-M", "VPTSP-G"])
    f = budget_facts(puma, vptsp, {"class prompts (M)": 220.52})
    assert (f["pb_head"], f["pb_head_m"], f["pb_adapters"], f["pb_pool"]) == ("49,280", "0.05", "2.36", "0.077")
    assert f["pb_eight"] == "173.7" and f["pb_puma"] == "2.49"
    assert f["pb_ratio"] == f"{8 * 21_714_944 / (head + adapters + 76_800):.1f}" == "69.9"
    assert (f["pb_bitfit_gap"], f["pb_gru"], f["pb_uml_prompts"]) == ("0.02", "0.89", "221")
