"""umlkit's environment variables, checked once when the package is imported (issue 65, item 4): every path (the
``umlkit`` command, a chapter, a script importing the library) refuses a value it cannot use before anything runs,
naming the variable, the value and what it accepts, and lists every bad variable at once.

One value is corrected instead of refused: ``UMLKIT_SEARCH_THREADS`` above the cores this process may use is
clamped to them with a warning (more threads than cores only slows a search down, and thousands of them crashed
it). The modules that read a variable keep their own checks; this one only makes the refusal happen at start-up,
not at the first evaluation after hours of training.

Why by hand: a handful of variables with umlkit's own meanings; pydantic-settings would check types but not, say,
that a results folder is not a file.
"""
from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable, MutableMapping
from pathlib import Path

__all__ = ["EnvironmentProblem", "check_environment", "check_at_import", "VARIABLES"]


class EnvironmentProblem(ValueError):
    """One or more umlkit environment variables hold values umlkit cannot use (the message lists each)."""


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # pragma: no cover - macOS and Windows have no affinity sets
        return os.cpu_count() or 1


def _whole(raw: str, low: int = 0) -> bool:
    return raw.strip().isdigit() and int(raw) >= low


def _seconds(raw: str) -> bool:
    try:
        return 0 < float(raw) <= 600
    except ValueError:
        return False


def _not_a_file(raw: str) -> bool:
    return not Path(raw).expanduser().is_file()


def _folders(raw: str) -> bool:
    return all(Path(p).expanduser().is_dir() for p in raw.split(os.pathsep) if p)


_FLAGS = {"0", "1", "true", "false", "yes", "no", "on", "off"}

# name -> (accepts the value?, what it accepts)
VARIABLES: dict[str, tuple[Callable[[str], bool], str]] = {
    "UMLKIT_SEARCH_THREADS": (_whole, "a whole number of threads, 0 or unset to measure the idle cores"),
    "UMLKIT_SEARCH_DTYPE": (lambda v: v in ("bf16", "fp32", "int8"), "'bf16', 'fp32' or 'int8' (unset: measure)"),
    "UMLKIT_PROGRESS": (lambda v: v.strip().lower() in _FLAGS, "1/0, true/false, yes/no or on/off"),
    "UMLKIT_HUB_TIMEOUT": (_seconds, "seconds in (0, 600], e.g. 5"),
    "UMLKIT_FREE_BYTES": (_whole, "a whole number of bytes (a test's stand-in for the free disk space)"),
    "UMLKIT_DATA": (_not_a_file, "a folder (it is a file)"),
    "UMLKIT_RESULTS": (_not_a_file, "a folder (it is a file)"),
    "UMLKIT_CHECKPOINTS": (_not_a_file, "a folder (it is a file)"),
    "UMLKIT_CACHE": (_not_a_file, "a folder (it is a file)"),
    "UMLKIT_WORDNET": (_not_a_file, "a folder of the WordNet 3.0 database files (it is a file)"),
    "UMLKIT_SLURM_CONFIG": (lambda v: Path(v).expanduser().is_file(), "an existing YAML file"),
    "UMLKIT_NUMERICS": (lambda v: v.strip().lower() in ("pinned", "native"),
                        "'pinned' (default: records train with AVX2-pinned CPU numerics) or 'native'"),
    "UMLKIT_PAPERS": (_folders, f"existing folders of paper packages, separated by {os.pathsep!r}"),
}


def check_environment(environ: MutableMapping[str, str] | None = None, cores: int | None = None) -> list[str]:
    """Check :data:`VARIABLES` in ``environ`` (default ``os.environ``); raise :class:`EnvironmentProblem` naming
    every bad one. Returns the warnings: ``UMLKIT_SEARCH_THREADS`` above ``cores`` is set to ``cores`` there."""
    env = os.environ if environ is None else environ
    problems = []
    for name, (ok, expected) in VARIABLES.items():
        raw = env.get(name)
        if raw is None or raw == "":
            continue
        if not ok(raw):
            problems.append(f"{name}={raw!r}: expected {expected}")
    if problems:
        raise EnvironmentProblem("umlkit cannot start with these environment variables: " + "; ".join(problems))
    notes = []
    threads, cores = env.get("UMLKIT_SEARCH_THREADS", ""), cores or _cores()
    if threads.strip() and int(threads) > cores:
        env["UMLKIT_SEARCH_THREADS"] = str(cores)
        notes.append(f"UMLKIT_SEARCH_THREADS={threads} is more than the {cores} core(s) this process may use; "
                     f"searching on {cores}")
    return notes


def _is_command() -> bool:
    """Whether this process is the ``umlkit`` command: its console script, or ``python -m umlkit.cli`` (while the
    package is imported for ``-m``, ``sys.argv[0]`` is still ``"-m"``), as the parallel workers start it."""
    first = sys.argv[0] if sys.argv else ""
    return Path(first).name == "umlkit" or first == "-m"


def check_at_import() -> None:
    """:func:`check_environment` for ``import umlkit``: warnings as :class:`UserWarning`; a refusal ends the
    ``umlkit`` command with its message and exit status 2, and raises in any other program."""
    try:
        notes = check_environment()
    except EnvironmentProblem as err:
        if _is_command():
            print(f"umlkit: error: {err}", file=sys.stderr)
            raise SystemExit(2) from None
        raise
    for note in notes:
        warnings.warn(note, UserWarning, stacklevel=3)
