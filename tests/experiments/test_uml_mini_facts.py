"""The UML-Mini chapter's shares are computed from its Table 1, never typed."""
import pandas as pd

from umlkit.experiments.pages.benchmark import share_facts


def test_share_facts_by_hand():
    t1 = pd.DataFrame({"train images": [10, 30, 20, 40, 100], "train classes": [1, 6, 2, 1, 10],
                       "paper train images": [421, 182, 200, 197, 1000],
                       "paper train classes": [708, 250, 30, 12, 1000]},
                      index=["sop", "inshop", "cub", "cars", "Total"])
    f = share_facts(t1)
    real = (f["real_sop_img"], f["real_sop_cls"], f["real_inshop_img"], f["real_inshop_cls"])
    assert real == ("42", "71", "18", "25")
    assert (f["mini_inst_img"], f["mini_inst_cls"]) == ("40", "70")   # (10 + 30) / 100, (1 + 6) / 10
    assert set(share_facts(t1.drop(index="sop")).values()) == {"–"}
