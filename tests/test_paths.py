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


def test_repo_folder_names_what_needs_it_outside_a_checkout(monkeypatch):
    import pytest

    import umlkit._paths as paths
    assert paths.repo_folder("configs", "oodml", what="x") == paths.repo_root() / "configs" / "oodml"
    with pytest.raises(FileNotFoundError, match="the ooDML experiments read configs/nowhere/"):
        paths.repo_folder("configs", "nowhere", what="the ooDML experiments")
    monkeypatch.setattr(paths, "repo_root", lambda: None)
    from umlkit.experiments.tables.paper_cells import paper_tables_dir
    with pytest.raises(FileNotFoundError, match="the papers' tables read data/paper_tables/"):
        paper_tables_dir()
