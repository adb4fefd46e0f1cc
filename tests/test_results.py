"""umlkit.results: atomic table files with their metadata."""
import json

import pandas as pd
import pytest

from umlkit.results import config_hash, load_table, save_table


def test_save_and_load_table(tmp_path, monkeypatch):
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path))
    df = pd.DataFrame({"R@1": [50.0, 60.0]}, index=["a", "b"])
    path = save_table(df, "t", "quick", {"lr": 1e-4, "seeds": [0, 1]})
    assert path == tmp_path / "quick" / "t.csv"
    back, meta = load_table("t", "quick")
    pd.testing.assert_frame_equal(back, df)
    assert meta["config_hash"] == config_hash({"seeds": [0, 1], "lr": 1e-4})  # key order irrelevant
    assert json.loads((tmp_path / "quick" / "t.json").read_text())["profile"] == "quick"
    assert not list((tmp_path / "quick").glob(".t.csv.*"))  # no temporary files left behind
    with pytest.raises(FileNotFoundError, match="run the chapter"):
        load_table("missing", "quick")


def test_atomic_write_goes_through_a_symlink(tmp_path):
    """A chapter kept as a link elsewhere: the rename replaced the link by a file and left the target as it was."""
    from umlkit.results import atomic_write
    target = tmp_path / "real.ipynb"
    target.write_text("old")
    link = tmp_path / "chapter.ipynb"
    link.symlink_to(target)
    atomic_write(link, "new")
    assert link.is_symlink() and target.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chapter.ipynb", "real.ipynb"]   # no temporary left
