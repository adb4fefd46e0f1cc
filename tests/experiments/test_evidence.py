"""The verdicts that decide (issue 61): each claim's 95 % interval (scipy's own Welch and paired intervals), the
effect-size verdicts after Holm ('no effect' by TOST, 'smaller than the paper's'), the seeds an open claim needs
(statsmodels' power solvers and the normal approximation by hand), the margin's sensitivity table, the ceiling rule
with its MAP@R comparison, and the stamped seed plan."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.power import TTestIndPower, TTestPower

from umlkit.experiments.claims import evidence as ev
from umlkit.experiments.claims import more_seeds as ms
from umlkit.experiments.claims import verdicts as vd
from umlkit.experiments.tables import table as tb

A = [61.2, 63.0, 62.1, 60.4]
B = [58.0, 59.9, 57.2]


def test_the_interval_is_scipys_welch_and_paired_interval():
    res = vd.claim_test(A, B)
    ci = stats.ttest_ind(A, B, equal_var=False).confidence_interval(0.95)
    assert (res["low"], res["high"]) == pytest.approx((ci.low, ci.high), abs=1e-9)
    assert res["gap"] == pytest.approx(np.mean(A) - np.mean(B))
    a, b = {0: 1.0, 1: 2.5, 2: 2.0}, {0: 0.2, 1: 1.9, 2: 0.6}
    paired = vd.claim_test(a, b, paired=True)
    ci = stats.ttest_rel([1.0, 2.5, 2.0], [0.2, 1.9, 0.6]).confidence_interval(0.95)
    assert (paired["low"], paired["high"]) == pytest.approx((ci.low, ci.high), abs=1e-9)
    # an exact cell on each side: the interval is the point
    exact = vd.claim_test([5.0], [3.0], exact_a=True, exact_b=True)
    assert exact["low"] == exact["high"] == 2.0
    assert vd.interval_text(-1.234, 2.0) == "[-1.2, +2.0]" and vd.interval_text(np.nan, 1.0) == ""


def _claim(gap, se, df, paper_gap=np.nan, p=None, family="f", looks=1):
    """A tested claim as check_claims leaves it: p of A > B from (gap, se, df)."""
    p = float(stats.t.sf(gap / se, df)) if p is None else p
    return {"paper": family, "claim": f"gap {gap}", "verdict": "inconclusive", "p": p, "p against": 1 - p,
            "test gap": gap, "se": se, "df": df, "paper gap": paper_gap, "margin": np.nan, "looks": looks,
            "seeds": 3}


def test_effect_size_verdicts_by_hand():
    claims = pd.DataFrame([_claim(9.0, 0.5, 4.0),                   # decided: reproduced
                           _claim(0.05, 0.1, 8.0),                  # |gap| < 1 well inside: no effect
                           _claim(1.0, 0.4, 6.0, paper_gap=6.0),    # sign open (Holm), but far below the paper's 6
                           _claim(3.0, 0.3, 8.0, paper_gap=8.0),    # a gain shown, and shown below the paper's 8
                           _claim(0.5, 3.0, 4.0, paper_gap=2.0)])   # wide: inconclusive
    out = vd.holm_adjust(claims, "paper")
    assert out["verdict"].tolist() == [vd.REPRODUCED, vd.NO_EFFECT, vd.EXCLUDED, vd.SMALLER, vd.INCONCLUSIVE]
    # two-sided decision p-values: the third claim's 2 x 0.023 = 0.047 is third smallest of five, x3 after Holm
    assert out["p decision"].iloc[2] == pytest.approx(2 * stats.t.sf(2.5, 6.0))
    assert out["p adjusted"].iloc[2] == pytest.approx(3 * 2 * stats.t.sf(2.5, 6.0))
    # the TOST p-values by hand, Holm-adjusted over the three claims whose sign stays open
    tost = [max(stats.t.sf((g + 1) / s, d), stats.t.cdf((g - 1) / s, d)) for g, s, d in
            ((0.05, 0.1, 8.0), (1.0, 0.4, 6.0), (0.5, 3.0, 4.0))]
    assert out["p no effect"].iloc[[1, 2, 4]].tolist() == pytest.approx(list(vd.holm(np.array(tost))))
    assert np.isnan(out["p no effect"].iloc[3])   # a decided sign is not asked whether it is zero
    # below the paper's gap: asked of the open claims and of the decided gain, one Holm family
    below = [stats.t.cdf((1.0 - 6.0) / 0.4, 6.0), stats.t.cdf((3.0 - 8.0) / 0.3, 8.0),
             stats.t.cdf((0.5 - 2.0) / 3.0, 4.0)]
    assert out["p smaller"].iloc[2:].tolist() == pytest.approx(list(vd.holm(np.array(below))))
    assert np.isnan(out["p smaller"].iloc[1])   # no paper gap: the question is not asked
    # beside a decided verdict, what its data rule out: the TOST's smallest margin (the 90 % interval's farther end),
    # the gains below the 95 % interval's lower end
    assert out["rules out"].iloc[1] == f"|gap| >= {0.05 + stats.t.ppf(0.95, 8.0) * 0.1:.1f}" == "|gap| >= 0.2"
    assert out["rules out"].iloc[0] == f"gap < +{9.0 - stats.t.ppf(0.975, 4.0) * 0.5:.1f}" == "gap < +7.6"
    assert out["rules out"].iloc[4] == ""   # inconclusive: nothing ruled out
    # a reversed sign is 'contradicted', never 'smaller' (issue 76: 9 of 17 'smaller' had a negative gap)
    rev = vd.holm_adjust(pd.DataFrame([_claim(-3.0, 0.3, 8.0, paper_gap=4.0)]), "paper").iloc[0]
    assert rev["verdict"] == vd.CONTRADICTED
    # the paper's own gap inside the margin: 'no effect' says it agrees with the paper
    inside = vd.holm_adjust(pd.DataFrame([_claim(0.05, 0.1, 8.0, paper_gap=0.4)]), "paper").iloc[0]
    assert inside["verdict"] == vd.NO_EFFECT_INSIDE
    # a second look doubles every p-value the claim enters
    looked = vd.holm_adjust(pd.DataFrame([_claim(0.05, 0.1, 8.0, looks=2)]), "paper")
    assert looked["p no effect"].iloc[0] == pytest.approx(min(1.0, 2 * vd.tost_p(0.05, 0.1, 8.0, 1.0)))


def test_needed_seeds_are_statsmodels_answer_at_the_holm_level():
    # Welch, 3 seeds a side, se 1.5: the per-seed spread s = 1.5 * sqrt(3) / sqrt(2); the paper's gap 4 at level
    # 0.05 / 10 with 80 % power, or no effect within 1 with 90 % on each one-sided test: the fewer wins
    s = 1.5 * math.sqrt(3) / math.sqrt(2)
    direct = TTestIndPower().solve_power(effect_size=4 / s, alpha=0.005, power=0.8, alternative="larger")
    equiv = TTestIndPower().solve_power(effect_size=1 / s, alpha=0.005, power=0.9, alternative="larger")
    assert ev.needed_seeds(1.5, 3, 3.7, 0.005, paper_gap=4.0) == math.ceil(min(direct, equiv))
    # the normal approximation n = 2 (z_a + z_b)^2 s^2 / d^2 (4.9 here) is a little below the t answer (7)
    z = stats.norm.ppf(1 - 0.005) + stats.norm.ppf(0.8)
    assert 0 < ev.needed_seeds(1.5, 3, 3.7, 0.005, paper_gap=4.0) - 2 * z * z * s * s / 16 < 3
    # paired (whole df): the one-sample solver on the differences' spread se * sqrt(n)
    one = TTestPower().solve_power(effect_size=1 / (0.8 * math.sqrt(5)), alpha=0.01, power=0.9, alternative="larger")
    assert ev.needed_seeds(0.8, 5, 4.0, 0.01) == math.ceil(one)
    assert ev.needed_seeds(0.0, 3, 2.0, 0.05) is None                    # no noise to scale
    assert ev.needed_seeds(50.0, 3, 3.5, 0.001, paper_gap=0.1) is None   # beyond MAX_SEEDS


def test_open_claims_get_their_seeds_at_the_level_holm_leaves_them():
    claims = pd.DataFrame([_claim(9.0, 0.5, 4.0), _claim(0.5, 3.0, 4.3, paper_gap=2.0), _claim(0.4, 2.0, 4.5)])
    board = ev.with_needed_seeds(vd.holm_adjust(claims, "paper"))
    assert board["verdict"].tolist() == [vd.REPRODUCED, vd.INCONCLUSIVE, vd.INCONCLUSIVE]
    # two-sided (alpha / 2), one of three decided (Holm's next threshold / 2), and the plan's two looks
    level = 0.05 / 2 / (3 - 1) / 2
    assert board["seeds needed"].iloc[1] == ev.needed_seeds(3.0, 3, 4.3, level, paper_gap=2.0)
    assert board["seeds needed"].iloc[2] == ev.needed_seeds(2.0, 3, 4.5, level)
    assert np.isnan(board["seeds needed"].iloc[0])
    # a claim already at its second look plans for its third: p enters Holm times 3 there
    looked = ev.with_needed_seeds(vd.holm_adjust(pd.DataFrame(
        [_claim(9.0, 0.5, 4.0), _claim(0.5, 3.0, 4.3, paper_gap=2.0, looks=2), _claim(0.4, 2.0, 4.5)]), "paper"))
    assert looked["seeds needed"].iloc[1] == ev.needed_seeds(3.0, 3, 4.3, 0.05 / 2 / 2 / 3, paper_gap=2.0)
    assert looked["seeds needed"].iloc[1] > board["seeds needed"].iloc[1]


def test_the_sensitivity_table_reruns_the_rule_at_each_margin():
    claims = pd.DataFrame([_claim(9.0, 0.5, 4.0), _claim(0.3, 0.25, 8.0), _claim(1.2, 0.2, 8.0)])
    table = ev.sensitivity(vd.holm_adjust(claims, "paper"), scales=(0.5, 1.0, 2.0))
    for d in (0.5, 1.0, 2.0):
        want = vd.holm_adjust(claims, "paper", margin_scale=d)["verdict"].value_counts()
        assert table[f"margin x {d:g}"].to_dict() == {k: int(want.get(k, 0)) for k in table.index}
    assert table.loc[vd.NO_EFFECT, "margin x 2"] > table.loc[vd.NO_EFFECT, "margin x 0.5"]


def test_two_cells_at_the_ceiling_are_decided_on_their_second_metric():
    def cell(method, metric, vals):
        return {"table": "T", "section": "", "method": method, "setting": "", "dataset": "CUB", "metric": metric,
                "row": method, "measured": float(np.mean(vals)), "spread": float(np.std(vals, ddof=1)), "seeds": 3,
                "values": dict(enumerate(vals)), "paper": np.nan, "seed_free": False}
    cmp = pd.DataFrame([cell("G", "R@1", [97.9, 98.2, 98.0]), cell("B", "R@1", [97.5, 97.6, 97.9]),
                        cell("G", "MAP@R", [60.1, 61.0, 60.4]), cell("B", "MAP@R", [57.0, 57.9, 58.3])])
    # the selectors name the claim's metric, as VPTSP's do: the MAP@R cells are still found (issue 76's bug)
    c = tb.Claim("G beats B", {"section": "", "method": "G", "setting": "", "dataset": "CUB", "metric": "R@1"},
                 {"section": "", "method": "B", "setting": "", "dataset": "CUB", "metric": "R@1"})
    out = tb.check_claims(cmp, [c]).iloc[0]
    want = vd.claim_test([60.1, 61.0, 60.4], [57.0, 57.9, 58.3])
    assert out["decided on"] == "MAP@R" and out["metric"] == "MAP@R" and out["claim metric"] == "R@1"
    assert out["verdict"] == want["verdict"] == vd.REPRODUCED and out["p"] == pytest.approx(want["p"])
    assert (out["low"], out["high"]) == (want["low"], want["high"])   # the interval shown is MAP@R's
    assert (out["ceiling A"], out["ceiling B"]) == (98.0, 97.7)
    # without the second metric measured: no verdict, and it says so
    alone = tb.check_claims(cmp[cmp["metric"] == "R@1"], [c]).iloc[0]
    assert alone["verdict"] == vd.AT_CEILING and alone["second metric"] == "not measured"
    # one cell below 95: tested on R@1 as usual
    cmp.loc[1, "measured"] = 94.9
    below = tb.check_claims(cmp, [c]).iloc[0]
    assert below["verdict"] != vd.AT_CEILING and below["decided on"] == ""
    assert tb.at_ceiling("R@1", 95.0, 99.0) and not tb.at_ceiling("MAP@R", 99.0, 99.0)


def test_a_seed_plan_edited_after_it_was_frozen_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(ms, "plan_path", lambda: tmp_path / "more_seeds.yaml")
    ms._load.cache_clear()
    from umlkit.experiments.claims import seed_plan
    chosen = pd.DataFrame([{"owner": "p", "table": "Table 1", "claim": "A beats B", "seeds": 3, "gap": 0.4,
                            "p adjusted": 0.7, "seeds needed": 6, "extra seeds": (3, 4, 5), "hours": 0.1}])
    path = seed_plan.write(chosen, tmp_path / "seed_plan.yaml")
    stage = ms.stages()[1]
    assert stage["claim_seeds"][("p", "Table 1", "A beats B")] == (3, 4, 5)
    rows = [tb.Row(method=m, label=m.lower()) for m in ("A", "B")]
    cell = {"section": "", "setting": "", "dataset": "X"}
    spec = tb.Table("p", "Table 1", rows, lambda row, seed, *a: {"m": row.method, "seed": seed}, seeds=(0, 1, 2),
                    claims=[tb.Claim("A beats B", {**cell, "method": "A"}, {**cell, "method": "B"})])
    assert spec.seeds_of(rows[0], "quick") == (0, 1, 2, 3, 4, 5)
    assert ms.looks_of(spec, "A beats B", 6) == 2 and ms.looks_of(spec, "A beats B", 3) == 1
    path.write_text(path.read_text().replace("- 5", "- 6"))
    ms._load.cache_clear()
    with pytest.raises(ValueError, match="edited after it was frozen"):
        ms.stages()
    ms._load.cache_clear()


def test_a_second_plan_extends_the_rows_a_pooled_claim_pools_and_counts_its_look(tmp_path, monkeypatch):
    """Stage 3 (``seed_plan_2.yaml``): a claim of a derived table (AGS-like, no rows of its own) gets its seeds on
    every row of the named methods in the source table; only the first seeds every pooled row lacks are chosen."""
    from umlkit.experiments.claims import seed_plan
    monkeypatch.setattr(ms, "plan_path", lambda: tmp_path / "more_seeds.yaml")
    ms._load.cache_clear()
    cell = {"section": "", "dataset": "X"}
    rows = [tb.Row(method=m, setting=f"split{i}", label=f"{m}{i}") for m in ("A", "B", "C") for i in (1, 2)]
    source = tb.Table("p", "Table S", rows, lambda row, seed, *a: {"m": row.method, "s": row.setting, "seed": seed},
                      seeds=(0, 1, 2), claims=[tb.Claim("C is C", {**cell, "method": "C", "setting": "split1"},
                                                        {**cell, "method": "C", "setting": "split2"})])
    derived = tb.Table("p", "Table D", [], lambda *a: {}, seeds=(0, 1, 2),
                       claims=[tb.Claim("A beats B by AGS", {**cell, "method": "A"}, {**cell, "method": "B"})])
    board = pd.DataFrame([{"paper": "p", "table": "Table D", "claim": "A beats B by AGS", "verdict": vd.INCONCLUSIVE,
                           "seeds needed": 5, "seeds": 3, "gap": 0.5, "p adjusted": 0.9}])
    chosen = seed_plan.choose(board, {("p", "Table D"): derived}, pooled={
        ("p", "Table D"): lambda claim: (source, [claim.a["method"], claim.b["method"]])})
    assert chosen.iloc[0]["extra seeds"] == (3, 4)
    assert chosen.iloc[0]["pooled rows"] == {"table": "Table S", "methods": ["A", "B"]}
    seed_plan.write(chosen, tmp_path / "seed_plan_2.yaml", rule=seed_plan.RULE_2)
    assert len(ms.stages()) == 2   # no first seed plan here: the second is read on its own
    source.__dict__.pop("_planned_cells")   # the table object cached the plans as choose() read it
    assert [source.seeds_of(r, "quick") for r in rows] == [(0, 1, 2, 3, 4)] * 4 + [(0, 1, 2)] * 2
    assert ms.looks_of(derived, "A beats B by AGS", 5) == 2 and ms.looks_of(derived, "A beats B by AGS", 3) == 1
    bad = tmp_path / "seed_plan_2.yaml"
    bad.write_text(bad.read_text().replace("table: Table S", "table: 7"))
    ms._load.cache_clear()
    with pytest.raises(ValueError, match="edited after it was frozen"):
        ms.stages()
    ms._load.cache_clear()


def _board_rows():
    rows = []
    for claim, verdict, raw, gap, low, high, paper_gap, need in (
            ("a beats b", vd.REPRODUCED, vd.REPRODUCED, 5.0, 3.0, 7.0, 4.0, np.nan),
            ("c beats d", vd.INCONCLUSIVE, vd.INCONCLUSIVE, 0.5, -2.0, 3.0, 2.0, 14),
            ("e beats f", vd.AT_CEILING, vd.AT_CEILING, 0.2, -0.1, 0.5, 1.0, np.nan),
            ("g beats h", "not comparable: g (X) below its frozen backbone", vd.REPRODUCED, 3.0, 1.0, 5.0, np.nan,
             np.nan)):
        rows.append({"paper": "p", "table": "Table 1" if claim < "e" else "Table 2", "claim": claim,
                     "verdict": verdict, "raw verdict": raw, "gap": gap, "test gap": gap, "low": low, "high": high,
                     "paper gap": paper_gap, "seeds": 3, "seeds needed": need, "beyond": False})
    return pd.DataFrame(rows)


def test_the_forest_frame_and_plot_draw_every_claim_with_an_interval():
    import matplotlib
    matplotlib.use("Agg")
    from umlkit.experiments.views.forest import forest_frame, plot_forest
    f = forest_frame(_board_rows())
    assert f["label"].tolist()[:2] == ["Table 1: a beats b", "Table 1: c beats d"]   # two tables: named
    assert f["group"].tolist() == [vd.REPRODUCED, vd.INCONCLUSIVE, vd.AT_CEILING, vd.NOT_COMPARABLE]
    fig = plot_forest(_board_rows(), "t")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()][0] == "Table 1: a beats b"
    assert ax.get_xlim()[0] < -2.0 and ax.get_xlim()[1] > 7.0   # every interval inside the axis
    assert plot_forest(_board_rows().assign(low=np.nan)) is None


def test_the_summary_box_counts_what_the_board_says():
    from umlkit.experiments.views.report_card import summary_facts
    f = summary_facts(_board_rows())
    assert f["rs_scope"] == "4 claims declared from 2 tables (Table 1, Table 2); 3 have two measured cells and a test"
    assert f["rs_yes"] == "1 reproduced, 0 smaller than the paper's (a gain shown)"
    assert f["rs_no"].startswith("0 contradicted, 0 with the paper's gap excluded")
    assert f["rs_untestable"].startswith("1 at the R@1 ceiling without a second metric, 1 not comparable")
    assert "1 inconclusive, needing 14 seeds per side, " in f["rs_untestable"]
    # a claim whose power calculation ends beyond the largest seed count is counted, not left out of the range
    rows = pd.concat([_board_rows(), _board_rows().iloc[[1]].assign(claim="i beats j", **{"seeds needed": np.nan},
                                                                      beyond=True)], ignore_index=True)
    text = summary_facts(rows)["rs_untestable"]
    assert f"2 inconclusive, needing 14 seeds per side where a number exists and over {ev.MAX_SEEDS} for 1" in text
    only_beyond = rows[rows["claim"] != "c beats d"]
    assert f"1 inconclusive, needing over {ev.MAX_SEEDS} seeds per side" in summary_facts(only_beyond)["rs_untestable"]
    assert summary_facts(pd.DataFrame())["rs_yes"] == "no claims on the board yet"


def test_the_papers_gap_is_placed_against_the_interval():
    assert ev.effect_answer(4.6, -1.0, 2.0) == "paper +4.6 above"
    assert ev.effect_answer(-3.0, -1.0, 2.0) == "paper -3.0 below"
    assert ev.effect_answer(0.5, -1.0, 2.0) == "paper +0.5 inside"
    assert ev.effect_answer(np.nan, -1.0, 2.0) == ""
    board = ev.with_effect_answers(pd.DataFrame({"paper gap": [4.6, np.nan], "low": [-1.0, 0.0], "high": [2.0, 1.0]}))
    assert board["paper effect"].tolist() == ["paper +4.6 above", ""]
