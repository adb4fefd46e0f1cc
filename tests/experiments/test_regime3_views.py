"""The third edition's decision map, quadrants and facts (edition3_views) on hand-made cells."""
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from umlkit.experiments.papers.regime import edition3 as e3
from umlkit.experiments.papers.regime import edition3_views as v


def _cmp(overrides=None):
    """Every row of every cell at 3 seeds: the linear probe 50, LayerNorm 52, ... full fine-tuning 60, WiSE-FT 61."""
    base = {"Linear probe": 50.0, "LayerNorm": 52.0, "BitFit": 53.0, "LoRA": 54.0, "PUMA": 55.0,
            "Full fine-tuning": 60.0, "LP-FT": 58.0, e3.WISE: 61.0}
    lines = []
    for cell in e3.cells():
        where = e3.setting(cell)
        for method, mean in base.items():
            vals = (overrides or {}).get((where, method), [mean - 1.0, mean, mean + 1.0])
            lines.append({"setting": where, "method": method, "dataset": "CUB", "metric": "R@1",
                          "measured": float(np.mean(vals)), "values": dict(enumerate(vals)), "seed_free": False})
    return pd.DataFrame(lines)


def test_the_winner_its_paired_margin_and_separability():
    where = "split=default;data=2"
    # WiSE-FT one point above full fine-tuning on every seed: the paired interval is a point; LP-FT far below
    cmp = _cmp({(where, e3.WISE): [60.0, 61.0, 62.0], (where, "Full fine-tuning"): [59.0, 60.0, 61.0]})
    d = v.decision_frame(cmp).set_index(["split", "data"])
    r = d.loc[("default", "2")]
    assert r["winner"] == e3.WISE and r["runner-up"] == "Full fine-tuning" and r["margin"] == pytest.approx(1.0)
    assert r["low"] == pytest.approx(1.0) and r["high"] == pytest.approx(1.0) and r["separable"]
    # elsewhere WiSE-FT (61 +- 1) vs full fine-tuning (60 +- 1) on the same seeds: differences 1, 1, 1 again
    assert d["winner"].eq(e3.WISE).all()


def test_a_welch_margin_matches_scipy_and_an_unseparable_winner_is_not_separable():
    where = "split=middle;data=all"
    cmp = _cmp({(where, "LayerNorm"): [60.0, 63.0, 66.0], (where, e3.WISE): [58.0, 62.0, 63.0]})
    r = v.decision_frame(cmp).set_index(["split", "data"]).loc[("middle", "all")]
    assert r["winner"] == "LayerNorm" and r["runner-up"] == e3.WISE and not r["separable"]
    a, b = np.array([60.0, 63.0, 66.0]), np.array([59.0, 60.0, 61.0])
    se = np.sqrt(a.var(ddof=1) / 3 + b.var(ddof=1) / 3)
    df = se ** 4 / ((a.var(ddof=1) / 3) ** 2 / 2 + (b.var(ddof=1) / 3) ** 2 / 2)
    half = stats.t.ppf(0.975, df) * se
    assert (r["margin"], r["low"], r["high"]) == pytest.approx((3.0, 3.0 - half, 3.0 + half))


def test_missing_records_leave_a_cell_open_and_the_quadrants_follow_han_et_al():
    cmp = _cmp()
    cmp = cmp[~((cmp["setting"] == "split=hardest;data=all") & (cmp["method"] == "PUMA"))]
    d = v.decision_frame(cmp).set_index(["split", "data"])
    assert pd.isna(d.loc[("hardest", "all"), "winner"]) and d["winner"].notna().sum() == 8
    q = v.quadrant_frame(cmp).set_index(["split", "data"])
    assert q.loc[("default", "2"), "predicted"] == "PEFT" and q.loc[("middle", "all"), "predicted"] == (
        "full fine-tuning") and q.loc[("middle", "2"), "predicted"] == ""
    # PUMA 55 +- 1 vs WiSE-FT 61 +- 1: full fine-tuning's side, everywhere
    assert q.loc[("default", "2"), "observed"] == "full fine-tuning" and q.loc[("hardest", "all"), "observed"] == ""
    facts = v.edition3_facts(d.reset_index(), q.reset_index())
    assert facts["rm3_cells_done"] == "8" and facts["rm3_peft_wins"] == "0"
    assert facts["rm3_winners"] == "WiSE-FT wins 8 cells." and facts["rm3_verdicts"] == "none yet"
    # predicted and measured: default at 2 and 4 images (PEFT predicted, against) and all images on the default and
    # middle splits (full fine-tuning predicted, holds); the hardest split's all-image cell is missing
    assert facts["rm3_quadrant_tested"] == "4" and facts["rm3_quadrant_holds"] == "2"
    assert facts["rm3_quadrant_against"] == "2"


def test_the_winners_sentence_counts_every_decided_cell():
    done = pd.DataFrame({"winner": ["A", "B", "A", "C", "A", "B"]})
    assert v._winners_text(done) == "A wins 3 cells, B 2 and C 1."
    assert v._winners_text(done.iloc[:1]) == "A wins 1 cell."
    assert v._winners_text(done.iloc[:2]) == "A wins 1 cell and B 1."
