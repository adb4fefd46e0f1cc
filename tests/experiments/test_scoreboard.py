"""The claims scoreboard reads stored records only: it never trains, and covers every declared PUMA claim."""
import pytest

from umlkit.experiments import runners
from umlkit.experiments.scoreboard import declared_claims, scoreboard, scoreboard_summary

from umlkit.experiments.tables import VERDICTS, is_final


@pytest.fixture()
def no_training(monkeypatch):
    def refuse(key):
        raise AssertionError("the scoreboard must not train")
    for name in list(runners.RUNNERS):
        monkeypatch.setitem(runners.RUNNERS, name, refuse)


def test_scoreboard_checks_every_declared_claim_from_records(no_training):
    board = scoreboard("quick")
    declared = declared_claims("quick")
    puma = board[board["paper"] == "puma"]
    assert len(puma) == declared["puma"]
    assert all(is_final(v) or v.startswith(("holds, ", "not reproduced, ")) for v in board["verdict"])
    assert set(VERDICTS) == {"supported", "inconclusive", "contradicted"}
    assert set(puma["table"]) == {"Table 2", "Table 3", "Table 4", "Table 5", "Few-shot", "Regime map"}
    # ooDML's record set is filled over several sessions: only claims whose two cells have records are checked
    assert len(board[board["paper"] == "oodml"]) <= declared["oodml"]
    summary = scoreboard_summary(board, declared)
    assert summary.loc["puma", "checked"] == len(puma) == summary.loc["puma", "declared"]
    beats, equiv = board[board["margin"].isna()], board[board["margin"].notna()]
    for _, row in beats[~beats["verdict"].map(is_final)].iterrows():   # too few seeds: the sign of the gap
        if abs(row["gap"]) >= 0.1:                                       # (the board's gap is rounded)
            assert (row["gap"] > 0) == row["verdict"].startswith("holds, ") and row["seeds"] < 3
    for _, row in beats[beats["verdict"] == "supported"].iterrows():
        assert row["p"] < 0.05 and row["measured A"] > row["measured B"] and row["seeds"] >= 3
    for _, row in equiv[equiv["verdict"] == "supported"].iterrows():    # "within d": the gap is inside the margin
        assert row["p"] < 0.05 and abs(row["gap"]) < row["margin"] and row["test"].startswith("TOST")
    lg = board[board["paper"] == "language_guidance"]
    assert 0 < len(lg) <= declared["language_guidance"] and "Table 2" in set(lg["table"])


def test_a_profile_without_records_gives_an_empty_board(no_training, monkeypatch, tmp_path):
    """Without training records only the claims read from a committed benchmark file remain (VPTSP Table 10's step
    times, benchmarks/results); every other claim needs records."""
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path))
    board = scoreboard("quick")
    assert set(zip(board["paper"], board["table"])) <= {("vptsp", "Table 10")}
    from umlkit.experiments import vptsp
    assert len(board) == len(vptsp.table10_claims()) and (board["seeds"] >= 3).all()


def test_the_view_shows_gaps_seeds_the_test_and_the_verdict():
    import pandas as pd

    from umlkit.experiments.scoreboard import scoreboard_view
    board = pd.DataFrame({"paper": ["p", "p"], "table": ["T", "T"], "claim": ["a", "b"], "paper A": [80.0, 70.0],
                          "paper B": [70.0, 75.0], "gap": [3.2, -1.0], "seeds": [3, 1], "p": [0.0123, float("nan")],
                          "test": ["Welch t: t=4.10, df=3.1, p=0.0123", "none (fewer than 3 seeds)"],
                          "verdict": ["supported", "not reproduced, 1 seed"]})
    view = scoreboard_view(board)
    assert list(view.columns) == ["claim", "paper gap", "measured gap", "seeds", "test", "verdict"]
    assert view["paper gap"].tolist() == [10.0, -5.0] and view["test"].tolist() == ["Welch p=0.012", "–"]
