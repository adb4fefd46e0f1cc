"""Result tables on disk: ``results/<profile>/<name>.csv`` plus ``<name>.json`` with the configuration and its hash.

Chapters write what they measured here and render from these files, so a table in the book can always be traced
to the configuration that produced it. Writes are atomic (temporary file + rename).
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from umlkit._paths import results_root

__all__ = ["config_hash", "file_sha256", "save_table", "load_table", "atomic_write", "load_json",
           "load_benchmark", "owner_lock", "Busy", "check_writable"]


class Busy(RuntimeError):
    """Another process holds the folder or record this one was about to write (its pid and command named)."""


def config_hash(config: dict) -> str:
    """Stable 12-hex-digit hash of a JSON-serialisable configuration (key order does not matter)."""
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def file_sha256(path, chunk: int = 1 << 20) -> str:
    """sha256 hex digest of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def _new_file_mode(path: Path) -> int:
    """The permissions ``path`` keeps (when it exists) or a new file gets under the process's umask; mkstemp's
    temporary files are private (0600), which a rename would otherwise carry over."""
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write text or bytes to ``path`` through a temporary file in the same folder, flushed to disk, and a rename.
    A symbolic link is written through: its target gets the content and the link stays (a rename would replace the
    link by a file and leave the target as it was)."""
    path = Path(path)
    if path.is_symlink():
        path = path.resolve()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp")
    except OSError as err:
        raise _named(err, path, data) from err
    try:
        with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), _new_file_mode(path))
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise _named(err, path, data) from err
        raise


def _named(err: OSError, path: Path, data) -> OSError:
    """``err`` as one sentence naming the file, the size written and what to free or change (the old file, if any,
    is untouched: the write went to a temporary file)."""
    size = len(data.encode() if isinstance(data, str) else data)
    what = {errno.ENOSPC: f"free at least {size:,} bytes on the disk holding {path.parent}",
            errno.EDQUOT: f"free at least {size:,} bytes of your disk quota",
            errno.EFBIG: f"the file size limit (ulimit -f) is below {size:,} bytes: raise it",
            errno.EROFS: f"{path.parent} is on a read-only file system: point UMLKIT_RESULTS at a writable folder",
            errno.EACCES: f"{path.parent} is not writable for this user"}.get(err.errno, "check the folder")
    return type(err)(err.errno, f"could not write {path} ({size:,} bytes): {err.strerror}; {what}; any previous "
                                f"version of the file is kept")


@contextmanager
def file_lock(path: Path):
    """An exclusive advisory lock on ``path`` (created if missing) for the duration of the block: processes that
    share a file or a generated folder take turns (a POSIX record lock, ``fcntl.lockf``, which holds across the
    nodes of a cluster on NFS, unlike ``flock``; without fcntl, no lock)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        try:
            import fcntl
            fcntl.lockf(handle, fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover - not POSIX
            pass
        yield  # closing the file releases the lock


@contextmanager
def owner_lock(lock: Path, what: str):
    """Hold ``lock`` (a lock file, created if missing) exclusively for the block, or fail at once: a second writer
    of the same run folder or record gets :class:`Busy` naming the holder's pid and command, instead of writing
    beside it. The file keeps the holder's line while it is held (a POSIX record lock, ``fcntl.lockf``, released when
    the process ends, even by a kill; without fcntl, no lock). Record locks, unlike ``flock``, hold across the
    nodes of a cluster on NFSv4 (and NFSv3 with lockd), so two Slurm tasks on two nodes exclude each other too.
    Being per process, the lock does not exclude a second holder in the same process."""
    import sys
    lock = Path(lock)
    lock.parent.mkdir(parents=True, exist_ok=True)
    handle = open(lock, "a+")
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        fcntl = None
    try:
        if fcntl is not None:
            try:
                fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except (BlockingIOError, PermissionError):   # EAGAIN or EACCES: another process holds it
                handle.seek(0)
                holder = handle.read().strip() or "another process"
                raise Busy(f"{what} is being written by {holder}; wait for it to finish or use another "
                           f"folder (lock: {lock})") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} ({' '.join(sys.argv)[:200]})\n")
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
    finally:
        handle.close()


def check_writable(folder: Path, need_bytes: int, what: str, needs: str = "the runs need",
                   contents: str = "records and checkpoints", nothing: str = "nothing was trained") -> None:
    """Refuse before any work when ``folder`` (or the first existing folder above it) cannot take ``need_bytes``:
    not a folder, not writable, or not enough free space - naming the folder, the free and the needed space."""
    folder = Path(folder)
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise ValueError(f"{what}: {probe} is not a folder (expected a folder to write {folder} in)")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise PermissionError(f"{what}: {probe} is not writable; {nothing} (choose a writable folder, e.g. for "
                              f"results with UMLKIT_RESULTS)")
    free = _free_bytes(probe)
    if free < need_bytes:
        raise OSError(f"{what}: {probe} has {free / 2**20:.0f} MiB free, and {needs} about "
                      f"{need_bytes / 2**20:.0f} MiB ({contents}); {nothing}")


def _free_bytes(folder: Path) -> int:
    """Free bytes for this user on ``folder``'s file system; ``UMLKIT_FREE_BYTES`` stands in for it (tests)."""
    override = os.environ.get("UMLKIT_FREE_BYTES")
    if override is not None:
        return int(override)
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize


def save_table(df: pd.DataFrame, name: str, profile: str, config: dict) -> Path:
    """Write ``df`` and its configuration; returns the CSV path."""
    folder = results_root(profile)
    meta = {"name": name, "profile": profile, "config": config, "config_hash": config_hash(config)}
    csv_path = folder / f"{name}.csv"
    atomic_write(csv_path, df.to_csv())
    atomic_write(folder / f"{name}.json", json.dumps(meta, indent=2, sort_keys=True, default=str))
    return csv_path


def load_table(name: str, profile: str) -> tuple[pd.DataFrame, dict]:
    folder = results_root(profile)
    csv_path = folder / f"{name}.csv"
    if not csv_path.is_file():
        raise FileNotFoundError(f"{csv_path} does not exist; run the chapter that produces {name!r} first")
    meta = json.loads((folder / f"{name}.json").read_text())
    return pd.read_csv(csv_path, index_col=0), meta


def load_json(path: str | Path, what: str = "a JSON file"):
    """The parsed JSON of ``path``; a file that is not valid JSON (or not UTF-8) is an error naming it and ``what``
    it should be."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: not readable as {what} ({err})") from None


def load_benchmark(path: str | Path, what: str = "a benchmark file") -> tuple[list, dict]:
    """A benchmark's results file (``benchmarks/*.py`` write ``{"results": [...], <header>...}``): its result lines
    and its header (machine, versions, ...); ``([], {})`` when the file does not exist, an error naming it when it is
    not such a file."""
    path = Path(path)
    if not path.is_file():
        return [], {}
    raw = load_json(path, what)
    if not isinstance(raw, dict) or not isinstance(raw.get("results"), list):
        raise ValueError(f"{path}: expected {what}: a JSON object with a 'results' list")
    return raw["results"], {k: v for k, v in raw.items() if k != "results"}
