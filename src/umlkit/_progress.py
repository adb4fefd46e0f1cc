"""Progress bars: tqdm's, one switch for all of umlkit.

``UMLKIT_PROGRESS=0`` turns every umlkit progress bar off (the book build and the test suite set it: in a rendered
page a bar is only noise). Otherwise notebooks get tqdm's widget bar when ipywidgets is installed and the plain text
bar when it is not, instead of tqdm.auto's "IProgress not found" warning, which would print the environment's path
into the page.
"""
from __future__ import annotations

import os

__all__ = ["tqdm", "progress_enabled"]


def progress_enabled() -> bool:
    return os.environ.get("UMLKIT_PROGRESS", "1").strip().lower() not in ("0", "false", "no", "off")


def tqdm(*args, **kwargs):
    """A tqdm bar (disabled when ``UMLKIT_PROGRESS=0``)."""
    try:
        import ipywidgets  # noqa: F401
        from tqdm.auto import tqdm as bar
    except ImportError:
        from tqdm.std import tqdm as bar
    kwargs.setdefault("disable", not progress_enabled())
    return bar(*args, **kwargs)
