"""One place that resolves where data and results live.

Chapters execute with ``book/`` as their working directory (jupyter-book and papermill both run a notebook
in its own folder), scripts run from the repository root, and Colab runs from ``/content``. Every path in
umlkit therefore goes through these helpers, which look in this order:

1. the environment variables ``UMLKIT_DATA`` / ``UMLKIT_RESULTS``;
2. the repository checkout that holds this package (``data/`` and ``results/`` beside ``pyproject.toml``);
3. the first folder upward from the current directory that holds ``_config.yml`` and ``book/``;
4. ``~/.umlkit/{data,results}`` for a plain ``pip install`` outside any checkout.
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

__all__ = ["repo_root", "repo_folder", "data_root", "results_root", "PROFILES"]

PROFILES = ("quick", "full")


def _looks_like_repo(path: Path) -> bool:
    return (path / "_config.yml").is_file() and (path / "book").is_dir()


@functools.lru_cache(maxsize=1)
def _package_checkout() -> Path | None:
    """The checkout holding this file in an editable (src-layout) install (src/umlkit/_paths.py -> parents[2]), or
    None; looked up once per process (a scoreboard asks for it about 20,000 times: 5 s of path resolution on a
    Zen 3)."""
    candidate = Path(__file__).resolve().parents[2]
    return candidate if _looks_like_repo(candidate) else None


def repo_root() -> Path | None:
    """The umlkit checkout this code runs from, or ``None`` when installed outside a checkout."""
    candidate = _package_checkout()
    if candidate is not None:
        return candidate
    cwd = Path.cwd().resolve()
    for folder in (cwd, *cwd.parents):
        if _looks_like_repo(folder):
            return folder
    return None


def repo_folder(*parts: str, what: str) -> Path:
    """A data folder of the repository (``configs/puma``, ``data/paper_tables``, ...); a clear error naming
    ``what`` needs it when umlkit runs outside a checkout (these files are not part of the installed package)."""
    root = repo_root()
    if root is None or not root.joinpath(*parts).is_dir():
        raise FileNotFoundError(f"{what} read {'/'.join(parts)}/ from an umlkit checkout, which was not found; clone "
                                "the repository (git clone ...; pip install -e .) and run from inside it")
    return root.joinpath(*parts)


def _resolve(env_var: str, sub: str) -> Path:
    value = os.environ.get(env_var)
    if value:
        path = Path(value).expanduser().resolve()
        if path.exists() and not path.is_dir():
            raise NotADirectoryError(f"{env_var}={value} is a file, not a folder: point it at a folder (it is created "
                                     f"if missing)")
        return path
    root = repo_root()
    if root is not None:
        return root / sub
    return Path.home() / ".umlkit" / sub


def data_root() -> Path:
    """Folder that holds datasets (real ones and the generated UML-Mini)."""
    return _resolve("UMLKIT_DATA", "data")


def results_root(profile: str | None = None) -> Path:
    """Folder for result tables; ``results_root("quick")`` is ``<results>/quick``."""
    root = _resolve("UMLKIT_RESULTS", "results")
    if profile is None:
        return root
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")
    return root / profile
