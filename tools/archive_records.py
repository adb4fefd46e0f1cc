"""Move superseded quick-profile records (earlier learning rates, first versions of a row) out of the folders the
tables read, into ``results/quick/archive/records/`` (issue 61, item 5). A record stays where it is when

* a book build read it: ``UMLKIT_READ_LOG=FILE`` makes :func:`umlkit.experiments.runs.records.find_record` list every
  record it returns; build the book with it first (after removing ``_build/.jupyter_cache`` so that every chapter
  executes), or
* any job list of any registered paper names its key (what ``umlkit records train`` would train or skip; a run
  that finished during the build is one of those).

Everything else is moved with ``git mv`` (names and contents unchanged, so a move back restores it). Dry run by
default.

    rm -rf _build/.jupyter_cache
    UMLKIT_READ_LOG=/tmp/reads.txt .venv/bin/jupyter-book build . --all
    .venv/bin/python tools/archive_records.py /tmp/reads.txt [--move]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from umlkit._paths import repo_root, results_root
from umlkit.experiments.runs.records import find_record, read_only
from umlkit.experiments.tables.registry import papers


def job_records(profile: str = "quick") -> set[Path]:
    """The stored records every paper's job lists name."""
    out = set()
    with read_only():
        for paper in papers().values():
            for name in paper.job_list_names:
                for job in paper.job_list(name, profile):
                    path = find_record(job[2], profile)
                    if path is not None:
                        out.add(path.resolve())
    return out


def superseded(read_log: Path, profile: str = "quick") -> list[Path]:
    """Stored records neither read (``read_log``) nor named by a job list."""
    if not read_log.is_file():
        sys.exit(f"{read_log}: no such read log; build the book with UMLKIT_READ_LOG={read_log} first")
    read = {Path(line.strip()).resolve() for line in read_log.read_text().splitlines() if line.strip()}
    if not read:
        sys.exit(f"{read_log} lists no record: was the book built with its notebooks executed?")
    keep = read | job_records(profile)
    root = results_root(profile) / "records"
    return sorted(p for p in root.glob("*/*/*.json") if p.resolve() not in keep)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("read_log", type=Path, help="the file UMLKIT_READ_LOG named during the book build")
    ap.add_argument("--move", action="store_true", help="move them (default: list them)")
    args = ap.parse_args(argv)
    root = results_root("quick")
    old = superseded(args.read_log)
    for path in old:
        target = root / "archive" / path.relative_to(root)
        print(f"{path.relative_to(root)} -> {target.relative_to(root)}")
        if args.move:
            target.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["git", "mv", str(path), str(target)], check=True, cwd=repo_root())
    print(f"{len(old)} superseded record(s){' moved' if args.move else ' (dry run: --move moves them)'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
