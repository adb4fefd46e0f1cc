"""The regime map's third edition (umlkit.experiments.papers.regime.edition3): each row's recipe, the cells, the
tuning protocol, the rates entered against the tuning records, and the WiSE-FT row's choice of coefficient."""
import pytest

from tests.experiments.retuning import wait_while_retuning
from umlkit.experiments.papers.regime import edition3 as e3
from umlkit.experiments.recipes import source as source_recipe
from umlkit.experiments.recipes.tuning import NotTuned
from umlkit.experiments.tables.table import Row

CELL = {"split": "hardest", "data": 2}


def test_every_row_is_oodmls_recipe_with_its_own_trainable_part():
    base = source_recipe.run_config("quick", method="Margin (D)", source="cub", split=9, seed=1, lr=1e-3)
    for name, method in e3.settings()["methods"].items():
        cfg = e3.run_config(CELL, method, 1, lr=1e-3)
        assert cfg["data"]["splits"] == base["data"]["splits"] and cfg["data"]["few_shot"] == 2
        assert cfg["model"]["method"] == ("full" if method == "lpft" else method)
        assert cfg["objective"][0] == base["objective"][0] and cfg["objective"][1]["name"] == "model_regularizer"
        assert cfg["optimizer"] == base["optimizer"] and cfg["seed"] == 1
        assert cfg["train"]["eval_every"] == cfg["train"]["epochs"]
        assert ("wise_ft" in cfg["train"]) == (method == "full")
    lp, full = e3.run_config(CELL, "lpft", 0, lr=1e-3), e3.run_config(CELL, "full", 0, lr=1e-3)
    assert lp["train"]["warmup_epochs"] == e3.settings()["lp_epochs"]
    assert lp["train"]["epochs"] == full["train"]["epochs"] + e3.settings()["lp_epochs"]
    assert e3.run_config({**CELL, "data": "all"}, "lora", 0, lr=1e-3)["data"]["few_shot"] is None
    # a batch holds at most the images there are: the hardest split's validation-protocol training classes x 2
    tuning = e3.run_config(CELL, "full", 0, lr=1e-3, validation=True)["data"]
    classes = len(tuning["splits"]["cub"]["train"])
    assert classes < 56 and tuning["batch_size"] == 2 * classes                   # fewer than 112 / 2 classes
    assert e3.run_config(CELL, "full", 0, lr=1e-3)["data"]["batch_size"] == 112
    assert e3.run_config({**CELL, "data": "all"}, "full", 0, lr=1e-3, validation=True)["data"]["batch_size"] == \
        2 * classes
    assert e3.run_config({**CELL, "data": "all"}, "lora", 0, lr=1e-3)["model"]["options"] == {"rank": 8}
    with pytest.raises(ValueError, match="method must be one of"):
        e3.run_config(CELL, "vpt", 0, lr=1e-3)


def test_the_table_has_a_floor_per_split_and_eight_rows_per_cell():
    table = e3.MAP3()
    floors = [r for r in table.rows if r.method == "Zero-Shot"]
    assert [r.setting for r in floors] == ["split=default", "split=middle", "split=hardest"]
    assert len(table.rows) == 3 + 9 * 8 and len(table.claims) == 12
    assert {c.a["method"] for c in table.claims} == {"LayerNorm", "WiSE-FT", "LP-FT", "Full fine-tuning"}


def test_tuning_holds_out_validation_classes_at_each_cells_data_level():
    jobs = e3.tuning_jobs()
    assert len(jobs) == sum(len(e3.tuning_grid(c, m)) for c in e3.cells() for m in e3.settings()["methods"].values())
    for folder, label, key, runner in jobs:
        cell = next(c for c in e3.cells() if label.startswith(f"{c['split']}-{c['data']}-"))
        split = e3.settings()["splits"][cell["split"]]
        val = source_recipe.run_config("quick", source="cub", split=split, lr=1e-3, validation=True)
        assert runner == "train" and folder == e3.TUNING_FOLDER and key["data"]["splits"] == val["data"]["splits"]
        assert key["data"]["few_shot"] == (None if cell["data"] == "all" else cell["data"]) and key["seed"] == 0


def test_rates_are_the_tuning_records_choice_and_missing_ones_say_how_to_make_them():
    from umlkit.experiments.claims.editions import retrain_reason
    frame = e3.tuning_frame()
    best = frame[frame["chosen"]]
    units = e3.tuning_sweep().units("quick")
    # every unit tuned, inside its grid; while the second edition retrains the changed splits, only the units of the
    # splits that kept their classes have records (configs/second_edition.yaml declares it)
    assert len(best) == len(units) or (retrain_reason("regime", e3.TABLE_NAME) and len(best) > 0)
    configured = {}
    for r in best.itertuples():
        try:
            configured[r.unit] = e3.rate({"split": r.split, "data": r.data if r.data == "all" else int(r.data)},
                                         r.method)
        except NotTuned:
            continue
    wait_while_retuning("regime", e3.TUNING_FOLDER, configured, dict(zip(best["unit"], best["lr"])),
                        {f"{c['split']}-{c['data']}-{m}": e3.tuning_grid(c, m) for c, m in units})
    assert best["interior"].astype(bool).all()
    for r in best.itertuples():
        cell = {"split": r.split, "data": r.data if r.data == "all" else int(r.data)}
        assert e3.rate(cell, r.method) == r.lr, f"{r.unit}: the file's rate is not the validation argmax"
    with pytest.raises(NotTuned, match=r"map3-tuning.*lr\.nowhere\.2\.puma"):
        e3.rate({**CELL, "split": "nowhere"}, "puma")


def test_the_wise_ft_row_reads_the_coefficient_chosen_on_validation(monkeypatch):
    result = {"test": {"CUB": 50.0}, "wise_ft": [{"alpha": a, "test": {"CUB": 40.0 + 10 * a}} for a in (0, .5, 1)]}
    row = Row(method=e3.WISE, setting="split=hardest;data=2", spec={"cell": CELL, "method": "full", "wise": True})
    monkeypatch.setattr(e3, "wise_alpha", lambda cell, profile="quick": 0.5)
    assert e3.scores(result, row) == {("CUB", "R@1"): 45.0}
    plain = Row(method="Full fine-tuning", setting=row.setting, spec={"cell": CELL, "method": "full"})
    assert e3.scores(result, plain) == {("CUB", "R@1"): 50.0}
    # the table's runs measure MAP@R beside R@1 (the second metric at the ceiling); the tuning runs R@1 only
    assert e3.run_config(CELL, "full", 0, lr=1e-3)["train"]["metrics"] == ["R@1", "MAP@R"]
    assert e3.run_config(CELL, "full", 0, lr=1e-3, validation=True)["train"]["metrics"] == ["R@1"]
    both = {**result, "test_metrics": {"CUB": {"MAP@R": 21.5}},
            "wise_ft": [{**p, "test_metrics": {"CUB": {"MAP@R": 20.0 + i}}} for i, p in enumerate(result["wise_ft"])]}
    assert e3.scores(both, plain) == {("CUB", "R@1"): 50.0, ("CUB", "MAP@R"): 21.5}
    assert e3.scores(both, row) == {("CUB", "R@1"): 45.0, ("CUB", "MAP@R"): 21.0}
    monkeypatch.setattr(e3, "wise_alpha", lambda cell, profile="quick": None)
    assert e3.scores(result, row) == {}   # no validation curve yet: no value


def test_wise_curves_keep_their_legend_when_the_first_split_has_no_runs_yet():
    import matplotlib
    matplotlib.use("Agg")
    import pandas as pd

    from umlkit.experiments.papers.regime import edition3_views as views3
    rows = [{"split": "hardest", "data": d, "seed": s, "alpha": a, "R@1": 40.0 + 10 * a + s}
            for d in ("2", "all") for s in (0, 1) for a in (0.0, 0.5, 1.0)]
    fig = views3.plot_wise_curves(pd.DataFrame(rows), {("hardest", "2"): 0.5})
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["2", "all (12)"]
    assert not fig.axes[0].lines and fig.axes[-1].lines   # the empty panel is drawn, the legend comes from the last
