"""The claims scoreboard reads stored records only: it never trains, and covers every declared PUMA claim."""
import pytest

from umlkit.experiments import runners
from umlkit.experiments.scoreboard import declared_claims, scoreboard, scoreboard_summary

VERDICTS = {"supported", "within noise", "not reproduced", "holds, 1 seed", "not reproduced, 1 seed"}


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
    assert len(puma) == declared["puma"] and set(board["verdict"]) <= VERDICTS
    assert set(puma["table"]) == {"Table 2", "Table 3", "Table 4", "Table 5"}
    # ooDML's record set is filled over several sessions: only claims whose two cells have records are checked
    assert len(board[board["paper"] == "oodml"]) <= declared["oodml"]
    summary = scoreboard_summary(board, declared)
    assert summary.loc["puma", "checked"] == len(puma) == summary.loc["puma", "declared"]
    for _, row in board[board["seeds"] == 1].iterrows():   # one seed: the verdict is the sign of the gap
        assert (row["measured A"] > row["measured B"]) == (row["verdict"] == "holds, 1 seed")


def test_a_profile_without_records_gives_an_empty_board(no_training, monkeypatch, tmp_path):
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path))
    assert scoreboard("quick").empty
