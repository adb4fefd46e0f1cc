"""umlkit._progress: one switch for every progress bar, no tqdm.auto warning without ipywidgets."""
import warnings

from umlkit._progress import progress_enabled, tqdm


def test_switch_and_no_iprogress_warning(monkeypatch):
    monkeypatch.setenv("UMLKIT_PROGRESS", "0")
    assert not progress_enabled() and tqdm(range(3)).disable
    monkeypatch.setenv("UMLKIT_PROGRESS", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # tqdm.auto's IProgress warning would raise here
        bar = tqdm(range(3), leave=False)
        assert progress_enabled() and not bar.disable and list(bar) == [0, 1, 2]
