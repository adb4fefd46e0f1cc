"""Sanity floors (tables.mark_floors): a trained cell beyond its seed noise below the frozen backbone is 'below
floor', one at random initialisation's level 'collapsed'; a claim comparing such a cell is 'not comparable' unless it
is about the floor (a floor row is a side of it) or compares a run with itself (paired)."""
import pandas as pd
import pytest

from umlkit.experiments import tables as tb

ROWS = ["Frozen", "Random", "Good", "Weak", "Dead"]


def _cmp(values: dict, spread: float = 0.5, setting: str = "split=1") -> pd.DataFrame:
    return pd.DataFrame([{"table": "T", "section": "", "method": m, "setting": setting, "row": m, "dataset": "SOP",
                          "metric": "R@1", "measured": v, "spread": 0.0 if m in ("Frozen", "Random") else spread,
                          "seeds": 3, "values": {0: v - 0.1, 1: v, 2: v + 0.1}, "paper": float("nan"),
                          "seed_free": False} for m, v in values.items()])


def _spec(claims=(), per_setting=True):
    return tb.Table("oodml", "T", [tb.Row(method=m) for m in ROWS], config=lambda *a: {}, claims=list(claims),
                    floor=tb.Floor(frozen="Frozen", random="Random", per_setting=per_setting), columns=["SOP"])


def _c(m):
    return {"section": "", "method": m, "setting": "split=1", "dataset": "SOP"}


def test_marks_by_hand():
    # frozen 20, random 5, noise max(1, 0.5) = 1: Good 30 ok, Weak 18.9 < 19 below, Dead 5.9 < 6 collapsed
    cmp = _cmp({"Frozen": 20.0, "Random": 5.0, "Good": 30.0, "Weak": 18.9, "Dead": 5.9})
    marked = tb.mark_floors(_spec(), cmp).set_index("method")
    assert marked["floor"].to_dict() == {"Frozen": "", "Random": "", "Good": "", "Weak": tb.BELOW, "Dead": tb.COLLAPSED}
    assert marked.loc["Weak", "frozen"] == 20.0 and pd.isna(marked.loc["Frozen", "frozen"])
    # the noise is the standard error of the mean: spread 2.0 over 3 seeds gives 2 / sqrt(3) = 1.155, so 18.9 (1.1
    # below) is not marked and 18.8 (1.2 below, within one seed spread) is
    wide = tb.mark_floors(_spec(), _cmp({"Frozen": 20.0, "Random": 5.0, "Weak": 18.9, "Good": 18.8}, spread=2.0))
    assert wide.set_index("method")["floor"].to_dict() == {"Frozen": "", "Random": "", "Weak": "", "Good": tb.BELOW}
    assert tb.floor_noise(2.0, 3) == pytest.approx(1.1547, abs=1e-4) and tb.floor_noise(0.5, 3) == 1.0
    assert tb.floor_noise(float("nan"), 3) == 1.0
    view = tb.side_by_side(marked.reset_index(), paper=False)
    assert view.loc["Weak", "SOP"].endswith("↓") and view.loc["Dead", "SOP"].endswith("⊥")
    assert "↓ below floor (1 row(s): Weak)" in tb.floor_note(marked.reset_index())


def test_a_claim_on_a_collapsed_run_is_not_comparable_and_one_about_the_floor_keeps_its_verdict():
    claims = [tb.Claim("Good beats Dead", _c("Good"), _c("Dead")),
              tb.Claim("Good beats Weak", _c("Good"), _c("Weak")),
              tb.Claim("Good beats Frozen", _c("Good"), _c("Frozen")),
              tb.Claim("Weak beats Frozen", _c("Weak"), _c("Frozen")),
              tb.Claim("Weak before vs after", _c("Weak"), _c("Good"), paired=True)]
    cmp = _cmp({"Frozen": 20.0, "Random": 5.0, "Good": 30.0, "Weak": 10.0, "Dead": 5.0})
    got = tb.table_claims(_spec(claims), cmp).set_index("claim")["verdict"]
    assert got["Good beats Dead"] == "not comparable: Dead (split=1) collapsed"
    assert got["Good beats Weak"] == "not comparable: Weak (split=1) below its frozen backbone"
    assert got["Good beats Frozen"] == "supported" and got["Weak beats Frozen"] == "contradicted"
    assert got["Weak before vs after"] == "contradicted"
    assert tb.verdict_group(got["Good beats Dead"]) == tb.NOT_COMPARABLE and not tb.is_final(got["Good beats Dead"])
    # a table without floors leaves every verdict to the test
    plain = tb.Table("p", "T", [tb.Row(method=m) for m in ROWS], config=lambda *a: {}, claims=claims, columns=["SOP"])
    assert tb.table_claims(plain, cmp).set_index("claim").loc["Good beats Dead", "verdict"] == "supported"


def test_the_saved_results_say_below_floor():
    cmp = _cmp({"Frozen": 20.0, "Random": 5.0, "Good": 30.0, "Weak": 10.0}).drop(columns=["values", "seed_free"])
    cmp["delta"] = float("nan")
    out = tb.results_frame(_spec(), cmp, "quick").set_index("method")
    assert out.loc["Weak", "status"] == "below floor: frozen backbone 20.0" and out.loc["Good", "status"] == ""


def test_a_floor_row_without_settings_needs_one_cell_per_dataset():
    cmp = pd.concat([_cmp({"Frozen": 20.0, "Good": 30.0}), _cmp({"Frozen": 21.0}, setting="split=2")])
    with pytest.raises(ValueError, match="floor row 'Frozen' has several cells per dataset"):
        tb.mark_floors(_spec(per_setting=False), cmp)


def test_a_run_that_stays_at_the_frozen_backbone_on_every_split_is_named_flat():
    """ArcFace on the SOP-like source trains at the smallest rate its sweep chose and stays at the frozen backbone:
    within max(1, its spread) of it on every split. Such a row is not marked below the floor but is named flat."""
    import pandas as pd

    from umlkit.experiments.papers.oodml import chapter
    sub = pd.DataFrame({"row": ["A", "A", "B", "B", "C", "C"], "measured": [23.9, 18.2, 52.6, 41.9, 17.4, 14.1],
                        "frozen": [23.5, 17.6, 23.5, 17.6, 23.5, 17.6], "spread": [0.3, 0.4, 1.0, 2.0, 0.5, 5.0],
                        "floor": ["", "", "", "", "below floor", ""]})
    assert chapter._flat_rows(sub) == ["A"]          # B is far above it; C is marked below on one split
    assert chapter._flat_rows(sub.assign(measured=[25.0, 18.2, 52.6, 41.9, 17.4, 14.1])) == []   # 1.5 > max(1, 0.3)
