import pytest


@pytest.fixture(scope="session")
def mini_root(tmp_path_factory):
    """One UML-Mini tree (seed 0) shared by the whole test session."""
    from umlkit.data import make_mini
    return make_mini(tmp_path_factory.mktemp("uml_mini"), seed=0)
