"""Files the book ships and reads back by their content, checked where they are read (issue 83, rule 3).

Two kinds: the tiny ViTs' weights (``src/umlkit/models/weights``, written by :mod:`umlkit.models.pretrain`) and the
language files (``results/<profile>/language``, written by :mod:`umlkit.data.language`). A record's key names such a
file by its sha256, so a file cut short or edited is not an error by itself: the records merely stop matching, and
the book would retrain with the damaged file (or report "to train" without saying why). Each folder therefore keeps
a ``SHA256SUMS`` beside its files, in coreutils' ``sha256sum`` format (``<hex>  <name>``; ``sha256sum -c SHA256SUMS``
checks a folder by hand), and every reader compares the file with its line before using it.

The format is one line per file and the check one comparison, so no library is used (hashlib does the hashing).
"""
from __future__ import annotations

import functools
from pathlib import Path

__all__ = ["SUMS", "DamagedShippedFile", "read_sums", "expected_sha", "check_sha", "add_sum"]

SUMS = "SHA256SUMS"


class DamagedShippedFile(ValueError):
    """A shipped file whose content is not the one its folder's ``SHA256SUMS`` lists."""


def read_sums(folder: str | Path) -> dict[str, str]:
    """``{file name: sha256}`` of ``folder/SHA256SUMS`` (empty when there is none); a malformed line is refused with
    the file and line."""
    path = Path(folder) / SUMS
    if not path.is_file():
        return {}
    st = path.stat()
    return dict(_parse(str(path.resolve()), st.st_mtime_ns, st.st_size))


@functools.lru_cache(maxsize=16)
def _parse(path: str, mtime_ns: int, size: int) -> tuple[tuple[str, str], ...]:
    out = []
    for no, line in enumerate(Path(path).read_text(errors="replace").splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2 or len(parts[0]) != 64 or any(c not in "0123456789abcdef" for c in parts[0]):
            raise ValueError(f"{path}, line {no}: expected '<sha256>  <file name>' (sha256sum's format), got "
                             f"{line[:80]!r}; restore the file with `git checkout -- {path}`")
        out.append((parts[1].lstrip("*"), parts[0]))
    return tuple(out)


def expected_sha(path: str | Path) -> str | None:
    """The sha256 ``path``'s folder lists for it, or None where it lists none."""
    path = Path(path)
    return read_sums(path.parent).get(path.name)


def check_sha(path: str | Path, sha: str, restore: str) -> str:
    """``sha`` (the file's sha256, computed by the caller) when it is the listed one or none is listed; else
    :class:`DamagedShippedFile` naming the file, both hashes, its size and ``restore`` (how to get it back)."""
    want = expected_sha(path)
    if want is not None and want != sha:
        size = Path(path).stat().st_size
        raise DamagedShippedFile(
            f"{path} is damaged or was changed: its sha256 is {sha[:12]}…, {Path(path).parent / SUMS} lists "
            f"{want[:12]}… ({size:,} bytes now); nothing was read from it. Restore it: {restore}")
    return sha


def add_sum(path: str | Path, sha: str) -> None:
    """List ``path`` with ``sha`` in its folder's ``SHA256SUMS`` (other lines kept; an atomic rewrite under a lock, so
    two writers of one folder lose no line)."""
    from umlkit.results import atomic_write, file_lock
    path = Path(path)
    with file_lock(path.parent / f".{SUMS}.lock"):
        sums = read_sums(path.parent)
        if sums.get(path.name) == sha:
            return
        sums[path.name] = sha
        atomic_write(path.parent / SUMS, "".join(f"{h}  {n}\n" for n, h in sorted(sums.items())))
