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


def test_a_failed_write_names_the_file_its_size_and_what_to_free_and_keeps_the_old_file(tmp_path):
    """Issue 79: a record write hitting the file-size limit (a real ``ulimit -f``, in a child process) or a full disk
    says which file, how many bytes and what to change; the previous version stays."""
    import subprocess
    import sys
    target = tmp_path / "rec.json"
    code = ("import resource, sys\nfrom pathlib import Path\nfrom umlkit.results import atomic_write\n"
            f"p = Path({str(target)!r}); atomic_write(p, 'old')\n"
            "hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (1024, hard))\n"
            "try:\n    atomic_write(p, 'x' * 5000)\nexcept OSError as e:\n"
            "    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))\n"
            "    print(e.errno, e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("27 ") and f"could not write {target} (5,000 bytes)" in out and "ulimit -f" in out
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["rec.json"]


def test_a_full_disk_is_named_with_the_bytes_to_free(tmp_path, monkeypatch):
    import errno
    import os

    from umlkit import results

    def full(*_):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match=r"could not write .*x\.json \(3 bytes\): No space left on device; free at "
                                      r"least 3 bytes on the disk holding") as info:
        results.atomic_write(tmp_path / "x.json", "abc")
    assert info.value.errno == errno.ENOSPC and list(tmp_path.iterdir()) == []
