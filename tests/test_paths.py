"""umlkit._paths: where data and results live (repository, environment, book folder)."""
from pathlib import Path

import pytest

import umlkit

REPO = Path(__file__).resolve().parents[1]


def test_paths_default_to_repo(monkeypatch):
    monkeypatch.delenv("UMLKIT_DATA", raising=False)
    monkeypatch.delenv("UMLKIT_RESULTS", raising=False)
    assert umlkit.repo_root() == REPO
    assert umlkit.data_root() == REPO / "data"
    assert umlkit.results_root("quick") == REPO / "results" / "quick"


def test_paths_env_override(monkeypatch, tmp_path):
    monkeypatch.setenv("UMLKIT_DATA", str(tmp_path / "d"))
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path / "r"))
    assert umlkit.data_root() == tmp_path / "d"
    assert umlkit.results_root("full") == tmp_path / "r" / "full"
    with pytest.raises(ValueError, match="profile"):
        umlkit.results_root("fast")


def test_paths_from_book_folder(monkeypatch):
    # chapters execute with book/ as working directory: the answer must not change
    monkeypatch.delenv("UMLKIT_DATA", raising=False)
    monkeypatch.chdir(REPO / "book")
    assert umlkit.data_root() == REPO / "data"
