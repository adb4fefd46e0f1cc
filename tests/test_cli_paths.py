import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import umlkit
from umlkit import cli

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


def test_cli_help_and_info(capsys):
    proc = subprocess.run([sys.executable, "-m", "umlkit.cli", "--help"], capture_output=True, text=True, check=True)
    assert "info" in proc.stdout and "evaluate" in proc.stdout
    assert cli.main(["info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["umlkit"] == umlkit.__version__


def test_cli_evaluate(tmp_path, capsys):
    x = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]], dtype=np.float32)
    np.savez(tmp_path / "e.npz", embeddings=x, labels=np.array([0, 0, 1, 1]))
    assert cli.main(["evaluate", str(tmp_path / "e.npz"), "--metrics", "R@1,MAP@R"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["R@1"] == 1.0 and out["MAP@R"] == 1.0
    np.savez(tmp_path / "bad.npz", emb=x)
    assert cli.main(["evaluate", str(tmp_path / "bad.npz")]) == 2
    assert "lacks" in capsys.readouterr().err
