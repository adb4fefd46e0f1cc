"""The plan of extra seeds (experiments.more_seeds): which claims the rule selects, which rows and runs they add,
that a planned claim's p-value is doubled before Holm, and the committed plan against the paper tables it names."""
import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests

from umlkit.experiments.claims import more_seeds as ms
from umlkit.experiments.tables import table as tb


@pytest.fixture
def plan_file(tmp_path, monkeypatch):
    """A plan in a temporary file, read instead of configs/more_seeds.yaml."""
    path = tmp_path / "more_seeds.yaml"
    monkeypatch.setattr(ms, "plan_path", lambda: path)
    ms._load.cache_clear()
    yield path
    ms._load.cache_clear()


def _board():
    return pd.DataFrame({"seeds": 3,
        "paper": ["p"] * 5, "table": ["Table 1"] * 5, "claim": ["a", "b", "c", "d", "e"],
        "verdict": ["inconclusive", "inconclusive", "reproduced", "inconclusive", tb.MISSING],
        "gap": [2.0, -3.0, 5.0, 0.5, np.nan], "seed spread": [1.0, 2.9, 1.0, 1.0, np.nan],
        "p adjusted": [0.2, 0.1, 0.01, 0.4, np.nan]})


def test_the_rule_takes_open_claims_whose_gap_exceeds_one_seeds_noise():
    # a: 2 > 1 yes; b: |-3| > 2.9 yes; c: decided; d: 0.5 < 1; e: never tested
    assert ms.select(_board())["claim"].tolist() == ["a", "b"]


def _table(claims):
    rows = [tb.Row(method=m, label=m.lower()) for m in ("A", "B", "C")]
    return tb.Table("p", "Table 1", rows, lambda row, seed, *a: {"m": row.method, "seed": seed}, seeds=(0, 1, 2),
                    claims=claims)


def _claim(text, a, b):
    cell = {"section": "", "setting": "", "dataset": "X"}
    return tb.Claim(text, {**cell, "method": a}, {**cell, "method": b})


def test_planned_claims_add_their_seeds_to_the_rows_they_compare_and_one_run_each(plan_file, monkeypatch):
    plan_file.write_text("seeds: [3, 4]\nclaims:\n  p:\n    Table 1:\n"
                         "    - {claim: A beats B, first look: {seeds: 3}}\n"
                         "    - B beats A again\n")
    spec = _table([_claim("A beats B", "A", "B"), _claim("B beats A again", "B", "A"), _claim("C beats A", "C", "A")])
    assert [spec.seeds_of(r, "quick") for r in spec.rows] == [(0, 1, 2, 3, 4), (0, 1, 2, 3, 4), (0, 1, 2)]
    assert spec.seeds_of(spec.rows[0], "full") == (0, 1, 2) and ms.jobs({"t": spec}, "full") == []
    jobs = ms.jobs({"Table 1": spec})
    assert [j[1] for j in jobs] == ["a-seed3", "b-seed3", "a-seed4", "b-seed4"]   # A and B once per seed
    assert [j[2] for j in jobs][0] == {"m": "A", "seed": 3}
    # two looks once the test uses more seeds than the first look; one while it is still at the first look
    assert ms.looks_of(spec, "A beats B", 5) == ms.LOOKS and ms.looks_of(spec, "A beats B", 3) == 1
    assert ms.looks_of(spec, "C beats A", 5) == 1


def test_no_plan_file_means_no_extra_seeds(plan_file):
    spec = _table([_claim("A beats B", "A", "B")])
    assert spec.seeds_of(spec.rows[0], "quick") == (0, 1, 2) and ms.jobs({"t": spec}) == []


def test_a_malformed_plan_is_refused_naming_the_file(plan_file):
    plan_file.write_text("seeds: [three]\nclaims: {}\n")
    with pytest.raises(ValueError, match="more_seeds.yaml: expected 'seeds"):
        ms.plan()


@pytest.mark.parametrize("text, match", [
    ("seeds: [3, 4, 3]\nclaims: {}\n", r"more_seeds.yaml: seeds lists seed 3 twice \(\[3, 4, 3\]\)"),
    ("seeds: [3, 4]\nclaims: {p: {T: [{claim: a, seeds: [5, 5]}]}}\n", r"seeds of 'a' lists seed 5 twice"),
    ("seeds: [3, 4]\nclaims: {p: {T: [a, a]}}\n", r"claim 'a' is listed twice under p / T"),
])
def test_a_seed_or_claim_listed_twice_is_refused(plan_file, text, match):
    """Issue 83: a doubled seed would train one run where the plan counts two (26 runs became 22)."""
    plan_file.write_text(text)
    with pytest.raises(ValueError, match=match):
        ms.plan()


def test_write_plan_round_trips_the_selection(tmp_path):
    board = _board().assign(paper="vptsp", table="Table 2")
    path = ms.write_plan(board, tmp_path / "plan.yaml")
    got = ms.plan(path)
    assert got["seeds"] == [3, 4] and got["claims"] == {"vptsp": {"Table 2": ["a", "b"]}}
    assert got["first"][("vptsp", "Table 2", "b")] == {"seeds": 3, "gap": -3.0, "p (Holm)": 0.1}


def test_a_second_look_doubles_the_decision_p_before_holm():
    p = np.array([0.01, 0.02, 0.6, 0.004])   # the third decides B > A at 0.4
    c = pd.DataFrame({"claim": list("abcd"), "p": p, "p against": 1 - p, "paper": "x",
                      "verdict": ["reproduced", "reproduced", "inconclusive", "reproduced"], "looks": [2, 1, 2, 1]})
    out = tb.holm_adjust(c, "paper")
    # two-sided, then times the looks: 0.04, 0.04, 1.0 (0.8 x 2), 0.008
    dec = np.fmin(1.0, np.array([2, 1, 2, 1]) * np.fmin(1.0, 2 * np.fmin(p, 1 - p)))
    assert out["p decision"].tolist() == pytest.approx(dec.tolist())
    assert out["p adjusted"].to_numpy() == pytest.approx(multipletests(dec, method="holm")[1])


def test_the_committed_plan_names_declared_claims_only():
    """Every claim of configs/more_seeds.yaml is a declared claim of the table it is filed under, and each one
    with rows of its own reaches at least one run in its paper's more_seeds job list."""
    from umlkit.experiments.tables.registry import papers
    planned = ms.plan()["claims"]
    assert planned, "configs/more_seeds.yaml lists no claims"
    found = {}
    for entry in papers().values():
        for name, spec in entry.claim_tables("quick").items():
            texts = {c.text for c in spec.claims}
            for t in planned.get(spec.paper, {}).get(name, []):
                if t in texts:
                    found[(spec.paper, name, t)] = spec
    wanted = {(p, t, c) for p, tabs in planned.items() for t, cs in tabs.items() for c in cs}
    assert wanted == set(found)
    for spec in {id(s): s for s in found.values()}.values():
        if spec.rows:
            assert ms.jobs({spec.table: spec}), spec.table


def test_second_look_sets_each_planned_claim_beside_its_first_look(plan_file):
    plan_file.write_text("seeds: [3, 4]\nclaims:\n  p:\n    Table 1:\n    - claim: a\n      first look: {seeds: 3, "
                         "gap: 2.0, p (Holm): 0.2}\n    - claim: b\n      first look: {seeds: 3, gap: 1.0, "
                         "p (Holm): 0.3}\n")
    board = _board().assign(paper="q", seeds=[5, 3, 5, 5, 0],
                            verdict=["reproduced", "inconclusive", "reproduced", "inconclusive", tb.MISSING])
    view = ms.second_look(board)
    assert view["claim"].tolist() == ["a", "b"]          # c is decided but not planned
    assert view[["gap (3 seeds)", "p Holm (3 seeds)", "seeds", "verdict"]].values.tolist() == [
        [2.0, 0.2, 5, "reproduced"], [1.0, 0.3, 3, "inconclusive"]]
    assert ms.second_look_facts(board) == {"more_n": "2", "more_done": "1", "more_left": "1",
                                             "more_decided": "1", "more_extra": "2", "more_first": "3"}


def test_the_pages_view_puts_each_look_in_one_cell(plan_file):
    plan_file.write_text("seeds: [3, 4]\nclaims:\n  p:\n    Table 1:\n    - claim: a\n      first look: {seeds: 3, "
                         "gap: 2.0, p (Holm): 0.2}\n")
    board = _board().assign(paper="q", seeds=[5, 3, 5, 5, 0], **{"p adjusted": [0.01, 0.3, 0.01, 0.4, np.nan]})
    view = ms.second_look_view(board)
    assert view.values.tolist() == [["q · Table 1", "a", "+2.0, p 0.2 (3 seeds)", "+2.0, p 0.01 (5 seeds)",
                                     "inconclusive"]]
