"""Fixtures the training tests share."""
import pytest


@pytest.fixture(scope="module")
def small_root(tmp_path_factory):
    from umlkit.data import make_mini
    return make_mini(tmp_path_factory.mktemp("mini_small"), seed=0, sources=["flowers", "aircraft"])
