"""The regime map's second edition (umlkit.experiments.papers.regime.edition2): its runs, shared records with the
first edition, rates, tuning jobs, job lists and the in-progress declaration."""
import pandas as pd
import pytest

from tests.experiments.retuning import tried_values, wait_while_retuning
from umlkit.experiments.claims.editions import effective_verdicts
from umlkit.experiments.papers.regime import config as first
from umlkit.experiments.papers.regime import edition2 as e2
from umlkit.experiments.recipes.tuning import NotTuned
from umlkit.experiments.runs.records import normalise_key

V2_VALUES = {"backbone": "v2", "shift": "values", "shortcut": False}


def test_the_v2_cells_on_all_images_are_the_first_editions_runs():
    for shift in ("values", "families"):
        cell = {**V2_VALUES, "shift": shift}
        for method, shots in (("puma", "all"), ("full", "all"), ("zero_shot", None)):
            ours = {"config": e2.run_config(cell, method, 1), "probes": first.settings()["probes"]}
            assert normalise_key(ours) == normalise_key(first.map_config(shift, shots, method, 1))


def test_each_method_is_the_declared_recipe():
    lp = e2.run_config(V2_VALUES, "lpft", 0, lr=3e-4)
    full = e2.run_config(V2_VALUES, "full", 0, lr=3e-4)
    lp_epochs = e2.settings()["lp_epochs"]
    assert lp["train"]["warmup_epochs"] == lp_epochs and lp["train"]["epochs"] == full["train"]["epochs"] + lp_epochs
    assert lp["train"]["eval_every"] == lp["train"]["epochs"]
    assert ({k: v for k, v in lp.items() if k not in ("train", "name")}
            == {k: v for k, v in full.items() if k not in ("train", "name")})
    lin = e2.run_config(V2_VALUES, "linear", 0, lr=1e-3)
    assert lin["model"]["method"] == "linear" and lin["data"]["splits"] == first.split_of("values")
    narrow = e2.run_config({**V2_VALUES, "backbone": "narrow"}, "full", 0, lr=1e-3)
    assert narrow["model"]["backbone"] == "vit_tiny_uml_narrow"
    marked = e2.run_config({**V2_VALUES, "shift": "families", "shortcut": True}, "puma", 0, lr=1e-3)
    assert marked["data"]["shortcut"] == e2.settings()["shortcut"] and marked["data"]["splits"] == {}
    floor = e2.run_config({**V2_VALUES, "shortcut": True}, "zero_shot", 0)
    assert "shortcut" not in floor["data"]                     # the frozen backbone sees no training image
    with pytest.raises(ValueError, match="method must be one of"):
        e2.run_config(V2_VALUES, "lora", 0, lr=1e-3)


def test_rates_come_from_the_puma_chapter_or_the_editions_own_choice(monkeypatch):
    from umlkit.experiments.recipes import unified as unified_recipe
    assert e2.rate("v2", "puma") == unified_recipe.chosen_lr("puma")
    assert e2.rate("v2", "full") == unified_recipe.chosen_lr("full-curricularface")
    settings = {**e2.settings(), "lr": {"narrow": {"full": 3e-4}}}
    monkeypatch.setattr(e2, "settings", lambda: settings)
    assert e2.rate("narrow", "full") == 3e-4
    with pytest.raises(NotTuned, match="lr.narrow.puma"):
        e2.rate("narrow", "puma")


def test_tuning_runs_hold_out_validation_classes_on_the_loaders_split():
    jobs = e2.tuning_jobs()
    units = {label.rsplit("-lr", 1)[0] for _, label, _, _ in jobs}
    assert "v2-puma" not in units and "v2-lpft" in units and "narrow-linear" in units
    assert len(units) == len(e2.settings()["backbones"]) * len(e2.settings()["methods"]) - 3
    for folder, label, key, runner in jobs:
        assert runner == "train" and folder == e2.TUNING_FOLDER
        assert key["data"]["val_fraction"] == e2.settings()["tuning"]["val_fraction"] and key["data"]["splits"] == {}
        assert key["train"]["eval_every"] == 1 and f"lr{key['optimizer']['lr']:g}" in label
    grid = e2.tuning_grid("full", "narrow")
    assert grid == sorted(e2.settings()["tuning"]["grids"]["full"])


def _untuned(monkeypatch, backbone: str) -> None:
    """edition2.yaml as if ``backbone``'s rates were not chosen yet."""
    settings = {**e2.settings(), "lr": {k: v for k, v in (e2.settings().get("lr") or {}).items() if k != backbone}}
    monkeypatch.setattr(e2, "settings", lambda: settings)


def test_the_map2_job_list_waits_for_untuned_rows(monkeypatch):
    _untuned(monkeypatch, "narrow")
    ready = {label for _, label, _, _ in e2.map2_jobs()}
    assert "v2-values-puma-seed0" in ready and "v2-values-linear-seed2" in ready
    assert not any(label.startswith("narrow-values-puma") for label in ready)      # no rate chosen for it yet
    table = e2.MAP2()
    first_edition = [c for c in e2.cells() if c["backbone"] == "v2" and not c["shortcut"]]
    assert len(first_edition) == 2 and len(table.claims) == 2 * len(e2.cells()) - len(first_edition)
    assert table.in_progress is None   # every run is stored: the edition is no longer under way
    from umlkit.experiments.tables.registry import get_paper
    with pytest.raises(KeyError, match="map2-tuning"):
        get_paper("regime").job_list("nope")


def test_rows_without_a_rate_read_as_missing_and_say_why(monkeypatch):
    _untuned(monkeypatch, "narrow")
    from umlkit.experiments.runs.records import read_only
    from umlkit.experiments.tables.table import measure
    from umlkit.experiments.views.scoreboard import missing_records
    table = e2.MAP2()
    untuned = [r for r in table.rows if r.spec["cell"]["backbone"] == "narrow" and r.spec["method"] == "puma"]
    with read_only():
        assert measure(table, rows=untuned, train=False, progress=False, log=None).empty
    with pytest.raises(NotTuned):
        measure(table, rows=untuned, train=True, progress=False, log=None)
    missing = missing_records(papers=["regime"])
    missing = missing[missing["table"] == table.table]   # (the third edition's runs are under way: declared)
    assert (missing["in progress"] == "").all()   # complete: a row that loses its rate is a missing record again
    why = missing[missing["row"] == untuned[0].title]["why"]
    assert len(why) and why.str.startswith("rate not chosen yet").all()


def test_welch_interval_of_two_groups_is_scipys_and_of_four_the_hand_formula():
    import numpy as np
    from scipy import stats

    from umlkit.experiments.papers.regime.chapter import welch_interval
    a, b = [51.3, 50.97, 53.78], [62.59, 62.08, 60.41, 61.0]
    value, low, high, n = welch_interval([(np.mean(a), a, False), (np.mean(b), b, False)], [1, -1])
    ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert (value, low, high, n) == pytest.approx((np.mean(a) - np.mean(b), ci.low, ci.high, 3))
    c, d = [40.0, 42.5, 41.0], [30.0, 33.0]
    groups = [(np.mean(x), x, False) for x in (a, b, c, d)]
    value, low, high, _ = welch_interval(groups, [1, -1, -1, 1])
    parts = [np.var(x, ddof=1) / len(x) for x in (a, b, c, d)]
    df = sum(parts) ** 2 / sum(p ** 2 / (len(x) - 1) for p, x in zip(parts, (a, b, c, d)))
    half = stats.t.ppf(0.975, df) * np.sqrt(sum(parts))
    assert value == pytest.approx(np.mean(a) - np.mean(b) - np.mean(c) + np.mean(d))
    assert (low, high) == pytest.approx((value - half, value + half))
    # the frozen backbone: no variance
    exact = welch_interval([(44.0, [44.0], True), (np.mean(b), b, False)], [1, -1])
    assert exact[3] == 4 and exact[2] - exact[1] == pytest.approx(2 * stats.t.ppf(0.975, 3) * np.std(b, ddof=1) / 2)


def test_the_axis_frame_of_a_first_edition_cell_is_the_first_editions_interval():
    from umlkit.experiments.papers import regime
    from umlkit.experiments.tables import table as tables
    two = tables.compare(tables.measure(regime.edition2.MAP2(), train=False, progress=False, log=None), "puma")
    one = tables.compare(tables.measure(regime.MAP(), train=False, progress=False, log=None), "puma")
    heat = regime.heat_frame(one).set_index(["shift", "shots"])
    axes = regime.axis_frame(two).set_index(["cell", "method"])
    for shift in ("values", "families"):
        mine = axes.loc[(f"backbone=v2;shift={shift}", "PUMA")]
        assert (mine["gap"], mine["low"], mine["high"]) == pytest.approx(tuple(heat.loc[(shift, "all"),
                                                                                      ["gap", "low", "high"]]))


def test_configured_rates_are_the_tuning_choice_and_interior():
    """Every rate entered under lr in edition2.yaml is its unit's best on the stored tuning records, strictly inside
    the rates tried; a unit whose tuning runs are all stored has its rate entered."""
    frame = e2.tuning_frame()
    entered = {(b, m): float(v) for b, per in (e2.settings().get("lr") or {}).items() for m, v in per.items()}
    wait_while_retuning("regime", "regime map 2 tuning", {f"{b}-{m}": v for (b, m), v in entered.items()},
                        dict(zip(frame.loc[frame["chosen"], "unit"], frame.loc[frame["chosen"], "lr"])),
                        tried_values(frame, ["unit"], "lr"))
    for (backbone, method), lr in entered.items():
        unit = frame[frame["unit"] == f"{backbone}-{method}"]
        assert len(unit) == len(e2.tuning_grid(method, backbone)), f"{backbone}-{method}: tuning runs missing"
        best = unit[unit["chosen"]].iloc[0]
        assert best["lr"] == pytest.approx(lr) and best["interior"], (backbone, method, unit.to_string())
    complete = {u for u, g in frame.groupby("unit") if len(g) == len(e2.tuning_grid(*u.split("-")[::-1]))}
    assert complete <= {f"{b}-{m}" for b, m in entered}, f"tuned but not entered: {complete - set(entered)}"


def _synthetic_cmp(gaps: dict) -> "pd.DataFrame":
    """A compare frame with every second-edition cell: full fine-tuning at 50 + seed, each method at full + its gap
    (-20 where not given)."""
    import pandas as pd
    lines = []
    for cell in e2.cells():
        where = e2.setting(cell)
        for method in ("Full fine-tuning", "PUMA", "LP-FT", "Linear probe"):
            vals = {s: 50.0 + s + (gaps.get((where, method), -20.0) if method != "Full fine-tuning" else 0.0)
                    + 0.1 * s * s
                    for s in range(3)}
            lines.append({"setting": where, "method": method, "dataset": "Harmonic", "metric": "R@1",
                          "measured": sum(vals.values()) / 3, "values": vals, "seed_free": False})
    return pd.DataFrame(lines)


def test_axis_moves_are_differences_of_gaps_per_step_and_end_to_end():
    from umlkit.experiments.papers.regime import chapter
    narrow, v2, broad = (e2.setting({"backbone": b, "shift": "values", "shortcut": False})
                         for b in ("narrow", "v2", "broad"))
    cmp = _synthetic_cmp({(narrow, "PUMA"): -10.0, (v2, "PUMA"): -6.0, (broad, "PUMA"): -1.0,
                          (broad, "LP-FT"): 2.0})
    moves = chapter.axis_moves(cmp).set_index(["axis", "from", "to", "method"])
    assert moves.loc[("breadth", narrow, v2, "PUMA"), "move"] == pytest.approx(4.0)
    assert moves.loc[("breadth", v2, broad, "PUMA"), "move"] == pytest.approx(5.0)
    assert moves.loc[("breadth", narrow, broad, "PUMA"), "move"] == pytest.approx(9.0)
    assert moves.loc[("breadth", narrow, broad, "LP-FT"), "move"] == pytest.approx(22.0)   # -20 -> +2
    whole = moves.loc[("breadth", narrow, broad, "PUMA")]
    assert whole["low"] < 9.0 < whole["high"] and whole["seeds"] == 3
    facts = chapter.edition2_facts(chapter.axis_frame(cmp), chapter.axis_moves(cmp),
                                   pd.DataFrame({"verdict": ["reproduced", "missing records"]}))
    assert facts["rm2_move_breadth_puma"].startswith("+9.0 (")              # the whole move, not the last step
    assert facts["rm2_step_narrow_values_v2_values_puma"].startswith("+4.0 (")
    assert facts["rm2_gap_broad_values_lpft"].startswith("+2.0 (") and facts["rm2_claims_measured"] == "1"
    assert facts["rm2_best_puma"].startswith("-1.0 (the broad backbone")   # in words, not config keys


def test_rows_of_a_backbone_not_yet_pretrained_wait(monkeypatch):
    monkeypatch.setattr(e2, "backbone_ready", lambda b: b != "narrow")
    labels = {label for _, label, _, _ in e2.map2_jobs()}
    assert not any(label.startswith("narrow-") for label in labels) and "broad-values-zero-shot-seed0" in labels


def test_the_board_says_a_missing_claim_of_a_table_in_progress_is_under_way():
    from umlkit.experiments.views.scoreboard import board_table, scoreboard
    board = scoreboard(papers=["regime"])
    table = board_table(board)
    missing = table[table["verdict"] == "missing records"]
    ours = board["table"].to_numpy()[missing.index] == e2.TABLE_NAME
    assert missing["note"][ours].str.startswith("runs under way (declared before them): ").all()
    assert not missing["note"][~ours].str.startswith("runs under way (declared before them)").any()
    third = board["table"].to_numpy()[missing.index] == "Regime map, third edition"   # retrained: says so
    assert missing["note"][third].str.startswith("runs under way (second edition): ").all()


def test_the_front_page_counts_claims_of_a_table_in_progress_apart():
    from umlkit.experiments.views.scoreboard import paper_summaries
    board = pd.DataFrame({"paper": ["regime"] * 4, "claim": list("abcd"),
                          "verdict": ["reproduced", "missing records", "missing records", "contradicted"],
                          "in_progress": ["", "declared before its runs", "", ""]})
    assert paper_summaries(board, only="regime")["sum_regime"] == (
        "4 claims: 1 reproduced, 1 contradicted, 1 missing records, 1 with runs under way")


def test_the_second_editions_sentences_hold_in_the_committed_records():
    """What the chapter's "What the second edition shows" says in words (its numbers are glued): which method, if any,
    leads full fine-tuning with an interval clear of zero (glued from the board), LP-FT keeps more of the
    pretraining attributes than full fine-tuning in every cell; its lead is inconclusive on the loaders' split and
    within 2 points (inconclusive) on the narrow and broad backbones; PUMA's gap widens from the narrow world to the
    broad one, with an interval below zero; the broad frozen feature retrieves the values split's test classes worse
    than v2's and better than the narrow one's; the mark costs full fine-tuning and LP-FT more than 5 points, PUMA less
    than 3 and the linear probe less than 0.5; PUMA's gap closes with the mark (interval above zero) but stays
    negative; no PUMA claim is supported."""
    from umlkit.experiments.papers.regime import chapter
    from umlkit.experiments.tables import table as tables
    from umlkit.experiments.views.scoreboard import family_adjusted
    table = e2.MAP2()
    cmp = tables.compare(tables.measure(table, train=False, progress=False, log=None), "puma")
    tiny = [c for c in e2.cells() if c["backbone"] != "wide"]   # the capacity axis is checked at the end
    if any(chapter.cell_values(cmp, e2.setting(c), "Full fine-tuning") is None for c in tiny):
        pytest.skip("the second edition's tiny-backbone records are not all in this checkout")
    board = family_adjusted(tables.table_claims(table, cmp), "regime", "quick").set_index("claim")
    claims = effective_verdicts(board)   # where stale, the first edition's: the prose describes its records
    # the only lead over full fine-tuning whose interval clears zero; its verdict is glued, never typed
    ahead = [c for c, lo in board["low"].items() if lo > 0 and " beats full fine-tuning" in c]
    lead = "backbone=v2;shift=values: LP-FT beats full fine-tuning (Harmonic R@1)"
    facts = chapter.edition2_facts(chapter.axis_frame(cmp), chapter.axis_moves(cmp), board.reset_index(), cmp)
    # the findings open with the leads the records show (glued): none since the full fine-tuning rows retrained at
    # PUMA's re-chosen rate (2026-12-06: LP-FT on v2 values +0.4, -1.0 to +1.8); LP-FT on v2 values before
    assert ahead in ([], [lead])
    assert facts["rm2_lead"].startswith("No method is ahead") if not ahead else "LP-FT (" in facts["rm2_lead"]
    assert claims["backbone=v2;shift=families: LP-FT beats full fine-tuning (Harmonic R@1)"] in (
        "inconclusive", "contradicted")
    glued = facts["rm2_verdict_v2_values_lpft"]
    assert glued.startswith(claims[lead] + " (Holm p ") or glued == f"stale records (first edition: {claims[lead]})"
    axes = chapter.axis_frame(cmp).drop_duplicates(["cell", "method"]).set_index(["cell", "method"])
    for backbone in ("narrow", "broad"):
        where = e2.setting({"backbone": backbone, "shift": "values", "shortcut": False})
        assert axes.loc[(where, "LP-FT"), "gap"] < 2.0   # no lead there (with the seed plan's seeds, -2.8 on broad)
        assert claims[f"{where}: LP-FT beats full fine-tuning (Harmonic R@1)"] in ("inconclusive", "contradicted")
    f = chapter.edition2_facts(chapter.axis_frame(cmp), chapter.axis_moves(cmp), tables.table_claims(table, cmp), cmp)
    for cell in tiny:
        tag = chapter._cell_tag(e2.setting(cell))
        assert float(f[f"rm2_probe_{tag}_lpft"]) > float(f[f"rm2_probe_{tag}_ft"])
    moves = chapter.axis_moves(cmp).set_index(["axis", "from", "to", "method"])
    narrow, v2, broad = (e2.setting({"backbone": b, "shift": "values", "shortcut": False})
                         for b in ("narrow", "v2", "broad"))
    assert moves.loc[("breadth", narrow, broad, "PUMA"), "high"] < 0
    assert float(f["rm2_h_narrow_values_zs"]) < float(f["rm2_h_broad_values_zs"]) < float(f["rm2_h_v2_values_zs"])
    assert float(f["rm2_mark_cost_ft"]) > 5 and float(f["rm2_mark_cost_lpft"]) > 5
    assert 0 < float(f["rm2_mark_cost_puma"]) < 3 and abs(float(f["rm2_mark_cost_linear"])) < 0.5
    plain, marked = (e2.setting({"backbone": "v2", "shift": "families", "shortcut": m}) for m in (False, True))
    assert moves.loc[("shortcut", plain, marked, "PUMA"), "low"] > 0 and axes.loc[(marked, "PUMA"), "gap"] < 0
    assert not any(v == "reproduced" for c, v in claims.items() if ": PUMA beats" in c)
    # capacity: twice the width lifts every method, the more it trains the more; PUMA's gap does not move measurably;
    # the wide PUMA feature keeps more of the pretraining attributes than full fine-tuning's
    broad, wide = (e2.setting({"backbone": b, "shift": "values", "shortcut": False}) for b in ("broad", "wide"))
    if chapter.cell_values(cmp, wide, "Full fine-tuning") is None:
        return   # the wide backbone's records are not in this checkout
    gains = [float(f[f"rm2_h_wide_values_{t}"]) - float(f[f"rm2_h_broad_values_{t}"])
             for t in ("zs", "linear", "puma", "lpft", "ft")]
    # the frozen feature gains least, then the linear probe and PUMA, and the two that train the whole backbone most
    assert 0 < gains[0] < gains[1] < gains[2] < min(gains[3], gains[4])
    assert (moves.loc[("capacity", broad, wide, "PUMA"), "low"] < 0
            < moves.loc[("capacity", broad, wide, "PUMA"), "high"])
    # the wide PUMA's gap lies below zero (its Holm verdict, two-sided at two looks, is the board's to say)
    assert board.loc[f"{wide}: PUMA beats full fine-tuning (Harmonic R@1)", "high"] < 0
    assert float(f["rm2_probe_wide_values_ft"]) < float(f["rm2_probe_wide_values_puma"]) \
        and float(f["rm2_h_wide_values_puma"]) < float(f["rm2_h_wide_values_ft"])


def test_the_views_show_rates_as_written_and_cells_by_short_labels():
    from umlkit.experiments.papers.regime import chapter
    narrow = e2.setting({"backbone": "narrow", "shift": "values", "shortcut": False})
    moves = chapter.moves_view(chapter.axis_moves(_synthetic_cmp({(narrow, "PUMA"): -10.0})))
    assert ("breadth", "narrow / values", "v2 / values") in moves.index
    assert ("shortcut", "v2 / families", "v2 / families + mark") in moves.index
    assert moves["95 % interval"].str.match(r"^\[[+-]\d+\.\d, [+-]\d+\.\d\]$").all()
    frame = pd.DataFrame({"backbone": ["v2", "v2"], "method": ["lpft", "lpft"], "unit": ["v2-lpft"] * 2,
                          "lr": [1e-4, 3e-4], "val Harmonic": [95.66, 97.16], "val Unified": [91.4, 94.7],
                          "seconds": [159.2, 184.7], "chosen": [False, True], "interior": [None, False]})
    view = chapter.tuning_view(frame)
    assert list(view["lr"]) == ["1e-04", "3e-04"] and list(view["chosen"]) == ["", "chosen (edge)"]
