"""Test-session set-up shared by tests/ and the book's notebooks (nbval): nothing is written into the checkout.

Data (UML-Mini is generated on first use) goes to a temporary folder, and results go to a temporary copy of the
committed run records (and committed measurements and language files), so chapters executed by nbval read them
and write their tables elsewhere.
The variables are set at import, before any kernel starts, so the notebooks' kernels inherit them. A variable the
caller already set is kept.
"""
import os
import shutil
import tempfile
from pathlib import Path

_ROOT = Path(__file__).resolve().parent
_TMP = Path(tempfile.mkdtemp(prefix="umlkit-tests-"))
os.environ.setdefault("UMLKIT_PROGRESS", "0")  # no progress bars in test logs or executed notebooks
os.environ.setdefault("UMLKIT_CACHE", str(_TMP / "cache"))  # the per-machine GEMM speed-ups (metrics.kernels)
if not os.environ.get("UMLKIT_DATA"):
    os.environ["UMLKIT_DATA"] = str(_TMP / "data")
if not os.environ.get("UMLKIT_RESULTS"):
    records = _ROOT / "results" / "quick" / "records"
    if records.is_dir():
        shutil.copytree(records, _TMP / "results" / "quick" / "records")
    for stored in (_ROOT / "results" / "quick").glob("uml_mini_fid_range.*"):  # committed measurements
        shutil.copy2(stored, _TMP / "results" / "quick" / stored.name)
    # the committed language files the records were trained with: a file made again on another CPU can differ in
    # its rounded embeddings' last digit, hence in its sha256, and the records' keys would no longer match
    language = _ROOT / "results" / "quick" / "language"
    if language.is_dir():
        shutil.copytree(language, _TMP / "results" / "quick" / "language")
    os.environ["UMLKIT_RESULTS"] = str(_TMP / "results")


# The slowest test files, started first: ``make test`` runs two xdist workers with ``--dist loadfile``, which hands
# out whole files in collection order, so a slow file collected late leaves one worker running it alone at the end
# (longest processing time first). Measured with --durations on a Zen 4 and a Zen 3 (2026-12-03): the full-profile
# one-step runs 146-160 s, the training engine's resume and determinism tests about 60 s in all, the front page's
# fresh checkout 36-47 s, the scoreboard chapter 23-31 s, the PUMA runners, plugins, the toy paper, torchrun.
SLOW_FIRST = ("tests/full/test_full_profile.py", "tests/train/test_engine.py", "tests/test_read_only.py",
              "book/scoreboard.ipynb", "tests/experiments/test_puma.py", "tests/test_plugins.py",
              "tests/experiments/test_toy_paper.py", "tests/train/test_cli_ddp.py", "tests/data/test_mini.py",
              "tests/experiments/test_scoreboard.py", "tests/experiments/test_completeness.py",
              "tests/test_any_cpu.py", "book/uml_mini.ipynb")


def pytest_collection_modifyitems(session, config, items):
    """:data:`SLOW_FIRST` files first, in that order; the rest as collected (a stable sort: every worker collects
    the same order, as xdist requires)."""
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}

    def where(item) -> int:
        rel = Path(str(item.fspath)).resolve().relative_to(_ROOT).as_posix() if str(item.fspath).startswith(
            str(_ROOT)) else ""
        return rank.get(rel, len(rank))
    items.sort(key=where)
