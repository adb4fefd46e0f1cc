"""Issue 82 item 1: a chapter run with an override (`papermill ... -y "OVERRIDES: [train.epochs=3]"`, the README's
form) trains nothing, ends without an error and shows its tables as missing records; the repository is unchanged
after it. Every paper chapter with an OVERRIDES parameter, executed by papermill (minutes: make test-all)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from umlkit._book import chapter_parameters
from umlkit.experiments.tables.registry import papers

ROOT = Path(__file__).resolve().parents[1]


def _chapters_with_overrides() -> list[str]:
    table = chapter_parameters()
    named = set(table.loc[table["parameter"] == "OVERRIDES", "chapter"])
    return [c for p in papers().values() for c in p.chapters if c in named]


def _status() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "results"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout


@pytest.mark.heavy
@pytest.mark.parametrize("chapter", _chapters_with_overrides())
def test_a_chapter_with_an_override_trains_nothing_and_says_missing_records(chapter, tmp_path):
    before = _status()
    out = tmp_path / f"{chapter}.ipynb"
    done = subprocess.run([sys.executable, "-m", "papermill", str(ROOT / "book" / f"{chapter}.ipynb"), str(out),
                           "--cwd", str(ROOT / "book"), "-y", "OVERRIDES: [train.epochs=3]"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    text = json.dumps(json.loads(out.read_text())["cells"])
    assert "missing records" in text
    assert _status() == before   # no record, side file or table written
