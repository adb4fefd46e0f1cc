"""Reading is read-only: in a fresh copy of the checkout (a git repository of its own, with the results folder
in place - no UMLKIT_RESULTS redirection), executing the front page (the scoreboard of every declared claim over the
committed records and language files) leaves ``git status --porcelain`` empty."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import sys
import papermill as pm
pm.execute_notebook(sys.argv[1], sys.argv[2], cwd=sys.argv[3], kernel_name="python3", progress_bar=False)
"""


def _git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def _fresh_copy(dst: Path) -> Path:
    """The checkout's tracked and not-ignored files (committed or not) as a new repository with one commit."""
    files = _git("ls-files", "-co", "--exclude-standard", "-z", cwd=ROOT).split("\0")
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)
    _git("init", "-q", cwd=dst)
    _git("add", "-A", cwd=dst)
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "copy", cwd=dst)
    return dst


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_executing_the_front_page_leaves_a_fresh_checkout_unchanged(tmp_path):
    clone = _fresh_copy(tmp_path / "clone")
    assert _git("status", "--porcelain", cwd=clone) == ""
    env = {k: v for k, v in os.environ.items() if k != "UMLKIT_RESULTS"}   # the clone's own results/
    env["PYTHONPATH"] = str(clone / "src")   # the copy's code, in this process and in the chapter's kernel
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(clone / "book" / "intro.ipynb"),
                           str(tmp_path / "intro.out.ipynb"), str(clone / "book")],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = (tmp_path / "intro.out.ipynb").read_text()
    assert "declared" in out and "reproduced" in out          # the scoreboard's summary was displayed
    assert _git("status", "--porcelain", "--ignored=no", cwd=clone) == ""
    assert not (clone / "results" / "quick" / "language" / ".lock").exists()
