"""``umlkit reproduce``: execute the book's chapters with papermill and summarise what happened.

Each chapter runs with its ``parameters`` cell set to the chosen profile, writes its executed copy to
``results/<profile>/notebooks/<chapter>.ipynb``, and a failing chapter is recorded and skipped (the run goes on).
The kernel's own process output (its start-up warnings, and the ZMQ traceback it prints when Ctrl-C stops a chapter
while a cell runs) goes to ``<chapter>.kernel.log`` beside the notebooks, not to the terminal.
"""
from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from umlkit._paths import repo_root, results_root

__all__ = ["book_chapters", "reproduce", "kernel_stderr_to"]


@contextlib.contextmanager
def kernel_stderr_to(path: Path) -> Iterator[None]:
    """Point file descriptor 2, which a kernel started meanwhile inherits, at ``path`` (appended), while this
    process's ``sys.stderr`` (papermill's progress bar, umlkit's messages) keeps writing where it wrote. Why: on
    Ctrl-C papermill shuts the kernel down while it still answers the interrupted cell, and the kernel prints a
    ``zmq.error.ZMQError`` traceback on its inherited stderr (seen on every interrupted chapter). Where
    ``sys.stderr`` is not file descriptor 2 (inside Jupyter, under a test's capture) it is left as it is."""
    before = sys.stderr
    try:
        on_fd2 = before.fileno() == 2
    except (AttributeError, OSError, ValueError):   # io.UnsupportedOperation is an OSError and a ValueError
        on_fd2 = False
    before.flush()
    saved = os.dup(2)
    try:
        with open(path, "ab") as log:
            os.dup2(log.fileno(), 2)
        if on_fd2:
            sys.stderr = os.fdopen(os.dup(saved), "w", buffering=1, errors="backslashreplace",
                                   encoding=getattr(before, "encoding", None) or "utf-8")
        yield
    finally:
        if sys.stderr is not before:
            sys.stderr.flush()
            sys.stderr.close()
            sys.stderr = before
        os.dup2(saved, 2)
        os.close(saved)


def book_chapters(root: Path | None = None) -> list[str]:
    """Chapter names (notebook stems) in the book's order, root first (:func:`umlkit._book.book_chapters`: the
    table of contents, then the chapters of registered papers it lacks)."""
    return list(_chapter_files(root))


def _chapter_files(root: Path | None) -> dict[str, Path]:
    from umlkit._book import book_chapters as chapters
    root = root or repo_root()
    if root is None:
        raise FileNotFoundError("umlkit reproduce needs a checkout of the book (no _toc.yml found)")
    return chapters(root)


def reproduce(profile: str = "quick", chapters=None, root: Path | None = None, kernel: str = "python3",
              progress: bool = True, parameters: dict | None = None) -> pd.DataFrame:
    """Execute ``chapters`` (default: all) and return a table: chapter, status, minutes, output / error.

    Each executed chapter is ``results/<profile>/notebooks/<chapter>.ipynb``, replaced only when the chapter ran
    through; a chapter that fails leaves its executed cells in ``<chapter>.failed.ipynb``, and an interrupted one in
    ``<chapter>.partial.ipynb``, so the last complete output is never lost.

    ``parameters`` are passed, on top of ``PROFILE``, to each chapter that declares them in its parameters cell; a
    name no chosen chapter declares is refused before anything runs (a chapter refuses a name it does not declare)."""
    import papermill as pm

    from umlkit._progress import progress_enabled  # UMLKIT_PROGRESS=0 switches papermill's bar off too

    root = root or repo_root()
    files = _chapter_files(root)
    known = list(files)
    chapters = list(chapters or known)
    unknown = [c for c in chapters if c not in known]
    if unknown:
        raise ValueError(f"unknown chapter(s) {unknown}; the book has {known}")
    from umlkit._book import notebook_parameters
    declared = {name: notebook_parameters(files[name]) for name in chapters}
    unknown = sorted(set(parameters or {}) - {p for names in declared.values() for p in names})
    if unknown:
        raise ValueError(f"parameter(s) {', '.join(unknown)} are declared by none of the chapters "
                         f"({', '.join(chapters)}); their parameters: "
                         f"{', '.join(sorted({p for names in declared.values() for p in names}))}")
    from umlkit._book import check_parameter_value
    for name, value in (parameters or {}).items():   # a wrong type is refused before the first chapter starts
        check_parameter_value(name, value)
    out_dir = results_root(profile) / "notebooks"
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in chapters:
        src = files[name]
        dst = out_dir / f"{name}.ipynb"
        # papermill saves after every cell: it writes beside the last complete output, which it replaces only once
        # the chapter ran through (Ctrl-C or a failing cell leave that one as it was)
        partial, failed = out_dir / f"{name}.partial.ipynb", out_dir / f"{name}.failed.ipynb"
        t0 = time.perf_counter()
        try:
            with kernel_stderr_to(out_dir / f"{name}.kernel.log"):
                pm.execute_notebook(str(src), str(partial), parameters={**{k: v for k, v in (parameters or {}).items()
                                                                  if k in declared[name]}, "PROFILE": profile},
                                    cwd=str(src.parent), kernel_name=kernel,
                                    progress_bar=progress and progress_enabled())
            os.replace(partial, dst)
            status, detail = "ok", str(dst)
        except Exception as err:  # keep going: the summary says what failed, and where its notebook is
            if partial.exists():
                os.replace(partial, failed)
            status, detail = "failed", f"{_failure(err)} (executed cells: {failed})"
        rows.append({"chapter": name, "status": status, "minutes": round((time.perf_counter() - t0) / 60, 2),
                     "output": detail})
    return pd.DataFrame(rows).set_index("chapter")


def _failure(err: Exception) -> str:
    """A failing chapter in one line: the cell and its own exception (papermill's message starts with an empty line
    and a banner; its ``ename``/``evalue`` hold what the cell raised), else the error's first non-empty line."""
    if getattr(err, "ename", None):
        cell = getattr(err, "exec_count", None) or getattr(err, "cell_index", None)
        value = " ".join(str(getattr(err, "evalue", "")).split())[:300]
        return f"cell {cell}: {err.ename}: {value}" if cell is not None else f"{err.ename}: {value}"
    first = next((ln.strip() for ln in str(err).splitlines() if ln.strip()), "")
    return f"{type(err).__name__}: {first}" if first else type(err).__name__
