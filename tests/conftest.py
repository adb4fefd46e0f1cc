import importlib
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def mini_root(tmp_path_factory):
    """One UML-Mini tree (seed 0) shared by the whole test session."""
    from umlkit.data import make_mini
    return make_mini(tmp_path_factory.mktemp("uml_mini"), seed=0)


@pytest.fixture(scope="module")
def bench(request):
    """The script ``benchmarks/<BENCH_SCRIPT>.py`` named by the test module, imported as a module."""
    folder = str(Path(__file__).resolve().parents[1] / "benchmarks")
    sys.path.insert(0, folder)
    try:
        yield importlib.import_module(request.module.BENCH_SCRIPT)
    finally:
        sys.path.remove(folder)


@pytest.fixture(scope="session")
def quick_board():
    """The quick profile's scoreboard from the committed records, computed once per test session (read-only)."""
    from umlkit.experiments.views.scoreboard import scoreboard
    return scoreboard("quick")


@pytest.fixture()
def no_training(monkeypatch):
    """Every registered runner refuses: a test that reads records must not train."""
    from umlkit.experiments.runs import runners

    def refuse(key):
        raise AssertionError("reading records must not train")
    for name in list(runners.RUNNERS):
        monkeypatch.setitem(runners.RUNNERS, name, refuse)
