"""umlkit._progress: one switch for every progress bar; tqdm.auto (which warns "IProgress not found" inside
notebooks) only when ipywidgets can be imported."""
import sys

import tqdm.notebook
import tqdm.std

from umlkit._progress import progress_enabled
from umlkit._progress import tqdm as bar


def test_switch(monkeypatch):
    monkeypatch.setenv("UMLKIT_PROGRESS", "0")
    assert not progress_enabled() and bar(range(3)).disable
    monkeypatch.setenv("UMLKIT_PROGRESS", "1")
    b = bar(range(3), leave=False)
    assert progress_enabled() and not b.disable and list(b) == [0, 1, 2]


def test_plain_text_bar_without_ipywidgets(monkeypatch):
    monkeypatch.setitem(sys.modules, "ipywidgets", None)        # import ipywidgets now fails
    b = bar(range(2), disable=True)
    assert type(b) is tqdm.std.tqdm and not isinstance(b, tqdm.notebook.tqdm)
