"""The CLI battery as a grid (issue 65 item 7): every command x every kind of bad input it reads or writes -
missing, malformed, wrong type, wrong place, a concurrent writer, an interrupted earlier write, a full (or
read-only) disk. Each case asserts that the command fails with ONE line naming the input and what was expected (or,
for a reading command, that it works and writes nothing), that no half-written or temporary file is left, and that
the files it was given are intact. A (command, kind) without a case says why in :data:`NOT_APPLICABLE`;
``python tools/battery_report.py`` prints the counts per command.

Disks are made full for one process with ``RLIMIT_FSIZE`` (every write past the limit fails, as on a full disk) or,
for the checks made before any work, with ``UMLKIT_FREE_BYTES``; a concurrent writer is a second process holding
the advisory lock a command takes (:func:`umlkit.results.owner_lock`)."""
from __future__ import annotations

import json
import os
import pickle
import resource
import signal
import subprocess
import sys
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from umlkit import cli

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "configs" / "puma" / "puma.yaml")
KINDS = ("missing", "malformed", "wrong-type", "wrong-place", "concurrent", "interrupted", "full-or-read-only")
COMMANDS = ("info", "evaluate", "train", "eval", "reproduce", "records train", "records status", "records verify",
            "book sync-colab", "book toc", "book check-html", "oodml import-splits", "data check", "data make-mini",
            "data pretrain-mini", "plan")


@dataclass
class Case:
    command: str
    kind: str
    argv: list[str]                      # "{t}" is the case's own folder
    expect: str | None                   # a fragment of the one error line; None: the command succeeds
    setup: object = None                 # setup(t) prepares the folder (may return a lock to hold)
    env: dict = field(default_factory=dict)
    fsize: int | None = None             # run in a subprocess whose writes fail past this many bytes
    code: int | None = None              # the exact exit status, when not just "non-zero"


def _npz(t: Path, name="ok.npz", n=40):
    x = np.random.default_rng(0).random((n, 4)).astype("float32")
    np.savez(t / name, embeddings=x, labels=np.repeat(np.arange(n // 4), 4))


def _half(path: Path) -> None:
    """An interrupted write: the file's first half."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _run_folder(t: Path) -> None:
    """A run folder as `umlkit train` leaves it: config.json and a checkpoint (cut in half: interrupted)."""
    import torch

    from umlkit.train import load_config
    (t / "run").mkdir()
    (t / "run" / "config.json").write_text(json.dumps({"config": load_config(CONFIG, profile="quick")}))
    torch.save({"model": {"w": torch.zeros(1000)}}, t / "run" / "last.pt")
    _half(t / "run" / "last.pt")


def _book(t: Path, toc="root: intro\n", chapter: str | None = "{}") -> None:
    (t / "_config.yml").write_text("repository:\n  url: https://github.com/o/n\n  branch: main\n")
    (t / "_toc.yml").write_text(toc)
    if chapter is not None:
        (t / "intro.ipynb").write_text(chapter)


def _html(t: Path, page: str) -> None:
    (t / "_build" / "html").mkdir(parents=True)
    (t / "_build" / "html" / "index.html").write_text(page)


def _splits(t: Path, value, raw: bytes | None = None) -> None:
    (t / "sp").mkdir()
    for name in ("cub200_splits.pkl", "cars196_splits.pkl", "online_products_splits.pkl"):
        (t / "sp" / name).write_bytes(raw if raw is not None else pickle.dumps(value))


def _one_vptsp_job():
    args = cli.build_parser().parse_args(["records", "train", "vptsp", "--table", "Table 6", "--match", "seed0$"])
    import re
    return [j for j in cli._prepared_jobs(args) if re.search("seed0$", j[1])]


def _record_lock(t: Path) -> list[Path]:
    """The lock of every run `records train vptsp --table 'Table 6' --match seed0$` would train."""
    from umlkit.experiments.runs.records import normalise_key
    from umlkit.results import config_hash
    locks = t / "res" / "quick" / ".locks"
    return [locks / f"{config_hash(k)}.lock" for _, _, key, *_ in _one_vptsp_job()
            for k in (key, normalise_key(key))]


def _damaged_record(t: Path) -> None:
    """A record cut in half where `records train vptsp --table 'Table 6'` stores its first seed-0 run."""
    from umlkit.experiments.runs.records import normalise_key, record_path
    table, label, key, *_ = _one_vptsp_job()[0]
    path = record_path("vptsp", table, label, normalise_key(key), "quick")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": normalise_key(key), "result": {"test": {}}})[:40])


RES = {"UMLKIT_RESULTS": "{t}/res"}
FULL = {"UMLKIT_FREE_BYTES": "1024"}
CASES = [
    # info: reads only environment variables
    Case("info", "wrong-place", ["info"], "UMLKIT_RESULTS='{t}/f': expected a folder (it is a file)",
         setup=lambda t: (t / "f").write_text("x"), env={"UMLKIT_RESULTS": "{t}/f"}),
    Case("info", "malformed", ["info"], "UMLKIT_HUB_TIMEOUT='soon': expected seconds",
         env={"UMLKIT_HUB_TIMEOUT": "soon"}),
    Case("info", "wrong-type", ["info"], "UMLKIT_FREE_BYTES='1.5': expected a whole number",
         env={"UMLKIT_FREE_BYTES": "1.5"}),
    Case("info", "missing", ["info"], "UMLKIT_PAPERS='{t}/gone': expected existing folders",
         env={"UMLKIT_PAPERS": "{t}/gone"}),
    Case("info", "full-or-read-only", ["info"], None, fsize=0),
    # evaluate: reads one .npz, writes nothing
    Case("evaluate", "missing", ["evaluate", "{t}/none.npz"], "{t}/none.npz"),
    Case("evaluate", "malformed", ["evaluate", "{t}/bad.npz"], "cannot read {t}/bad.npz: not an .npz archive",
         setup=lambda t: (t / "bad.npz").write_text("junk")),
    Case("evaluate", "wrong-type", ["evaluate", "{t}/ok.npz", "--metrics", "R@x"], "R@x",
         setup=_npz),
    Case("evaluate", "wrong-place", ["evaluate", "{t}"], "{t} is not a regular file"),
    Case("evaluate", "interrupted", ["evaluate", "{t}/ok.npz"], "cannot read {t}/ok.npz",
         setup=lambda t: (_npz(t), _half(t / "ok.npz"))),
    Case("evaluate", "full-or-read-only", ["evaluate", "{t}/ok.npz", "--metrics", "R@1"], None, setup=_npz, fsize=0),
    # train: reads a YAML config (and a checkpoint to resume), writes a run folder
    Case("train", "missing", ["train", "{t}/none.yaml"], "{t}/none.yaml does not exist"),
    Case("train", "malformed", ["train", "{t}/bad.yaml"], "{t}/bad.yaml is not valid YAML",
         setup=lambda t: (t / "bad.yaml").write_text("model: [unclosed\n")),
    Case("train", "wrong-type", ["train", CONFIG, "--set", "train.epochs=two"], "train.epochs = 'two': expected an "
         "integer"),
    Case("train", "wrong-place", ["train", CONFIG, "--run-dir", "{t}/f"], "run_dir {t}/f is a file",
         setup=lambda t: (t / "f").write_text("x")),
    Case("train", "concurrent", ["train", CONFIG, "--run-dir", "{t}/r"], "the run folder {t}/r is being written by "
         "pid", setup=lambda t: [t / ".r.umlkit-lock"]),
    Case("train", "interrupted", ["train", CONFIG, "--resume", "{t}/run/last.pt", "--run-dir", "{t}/r"],
         "checkpoint {t}/run/last.pt is truncated or corrupt", setup=_run_folder),
    Case("train", "full-or-read-only", ["train", CONFIG, "--run-dir", "{t}/r"], "--run-dir {t}/r: {t} has 0 MiB "
         "free, and the runs need about 64 MiB (records and checkpoints); nothing was trained", env=FULL),
    # eval: reads a run folder (config.json + checkpoint) and a data root, writes nothing
    Case("eval", "missing", ["eval", "{t}/none.pt", "--data", "{t}"], "checkpoint {t}/none.pt does not exist"),
    Case("eval", "malformed", ["eval", "{t}/run/last.pt", "--data", "{t}"], "{t}/run/config.json: not a umlkit run "
         "configuration", setup=lambda t: ((t / "run").mkdir(), (t / "run" / "config.json").write_text("{no"),
                                           (t / "run" / "last.pt").write_text("x"))),
    Case("eval", "wrong-type", ["eval", "{t}/none.pt", "--data", "{t}", "--metrics", "R@0"], "R@k needs k >= 1"),
    Case("eval", "wrong-place", ["eval", "{t}/orphan.pt", "--data", "{t}"], "{t}/config.json not found",
         setup=lambda t: (t / "orphan.pt").write_text("x")),
    Case("eval", "interrupted", ["eval", "{t}/run/last.pt", "--data", "{t}/nodata"], "{t}/run/last.pt",
         setup=_run_folder),
    # reproduce: reads chapters, parameters and records; writes tables (and records for --table)
    Case("reproduce", "missing", ["reproduce", "--chapters", "nosuch"], "unknown chapter(s) ['nosuch']"),
    Case("reproduce", "malformed", ["reproduce", "-p", "SEEDS=[0,"], "-p 'SEEDS=[0,': the value is not valid YAML"),
    Case("reproduce", "wrong-type", ["reproduce", "--chapters", "vptsp", "-p", "TRAIN=maybe"], "TRAIN"),
    Case("reproduce", "wrong-place", ["reproduce", "-p", "PROFILE=full"], "choose the profile with --profile full"),
    Case("reproduce", "interrupted", ["reproduce", "--table", "vptsp:table6"], "/res/quick/records/vptsp/table6/cub-"
         "Hyp-seed0-7ca3864b4018.json cannot be read", setup=_damaged_record, env=RES),
    Case("reproduce", "full-or-read-only", ["reproduce", "--table", "vptsp:table6"], "reproduce --table vptsp:Table 6:"
         " {t} has 0 MiB free", env={**RES, **FULL}),
    # records train / status / verify: read job lists and records, train writes records under a lock
    Case("records train", "missing", ["records", "train", "nosuch", "tables"], "unknown paper 'nosuch'"),
    Case("records train", "malformed", ["records", "train", "oodml", "tables", "--match", "("], "--match '(' is not a "
         "regular expression"),
    Case("records train", "wrong-type", ["records", "train", "oodml", "tables", "--threads", "two"], "--threads"),
    Case("records train", "wrong-place", ["records", "train", "vptsp", "tables"], "UMLKIT_RESULTS='{t}/f': expected "
         "a folder", setup=lambda t: (t / "f").write_text("x"), env={"UMLKIT_RESULTS": "{t}/f"}),
    Case("records train", "concurrent", ["records", "train", "vptsp", "--table", "Table 6", "--match", "seed0$"],
         "is being written by pid", setup=_record_lock, env=RES, code=1),
    Case("records train", "interrupted", ["records", "train", "vptsp", "--table", "Table 6", "--match", "seed0$"],
         "stored record(s) are damaged and are not used", setup=_damaged_record, env=RES),
    Case("records train", "full-or-read-only", ["records", "train", "vptsp", "--table", "Table 6", "--match",
                                                "seed0$"], "has 0 MiB free", env={**RES, **FULL}),
    Case("records status", "missing", ["records", "status", "nosuch"], "unknown paper 'nosuch'"),
    Case("records status", "malformed", ["records", "status", "oodml", "tables", "--set", "noequals"],
         "override 'noequals' must look like key.sub=value"),
    Case("records status", "wrong-type", ["records", "status", "oodml", "tables", "--profile", "7"],
         "argument --profile: invalid choice: '7'"),
    Case("records status", "wrong-place", ["records", "status", "oodml", "omega_sweep"],
         "unknown oodml job list 'omega_sweep'"),
    Case("records status", "interrupted", ["records", "status", "vptsp", "--table", "Table 6"], "stored record(s) are "
         "damaged and are not used", setup=_damaged_record, env=RES),
    Case("records status", "full-or-read-only", ["records", "status", "vptsp", "tables"], None, fsize=0,
         env={"TMPDIR": "/dev/shm"}),
    Case("records verify", "missing", ["records", "verify", "--paper", "nosuch"], "unknown paper 'nosuch'"),
    Case("records verify", "wrong-type", ["records", "verify", "--profile", "fast"], "invalid choice: 'fast'"),
    Case("records verify", "wrong-place", ["records", "verify"], "UMLKIT_RESULTS='{t}/f': expected a folder",
         setup=lambda t: (t / "f").write_text("x"), env={"UMLKIT_RESULTS": "{t}/f"}),
    Case("records verify", "interrupted", ["records", "verify", "--paper", "vptsp"],
         "cub-Hyp-seed0-7ca3864b4018.json", setup=_damaged_record, env=RES, code=1),
    Case("records verify", "full-or-read-only", ["records", "verify", "--paper", "vptsp"], None, fsize=0,
         env={"TMPDIR": "/dev/shm"}),
    # book: reads _config.yml, _toc.yml, chapters and built pages; sync-colab and toc --write write them
    Case("book sync-colab", "missing", ["book", "sync-colab", "--root", "{t}/none"], "{t}/none/_config.yml: cannot "
         "read the book configuration"),
    Case("book sync-colab", "malformed", ["book", "sync-colab", "--root", "{t}"], "{t}/_toc.yml: cannot read the "
         "table of contents", setup=lambda t: _book(t, toc="root: [\n")),
    Case("book sync-colab", "wrong-type", ["book", "sync-colab", "--root", "{t}"], "{t}/_config.yml: expected a "
         "mapping", setup=lambda t: (_book(t), (t / "_config.yml").write_text("- a\n"))),
    Case("book sync-colab", "wrong-place", ["book", "sync-colab", "--root", "{t}", "--check"], "lists 1 chapter(s) "
         "that do not exist: {t}/intro.ipynb", setup=lambda t: _book(t, chapter=None)),
    Case("book sync-colab", "interrupted", ["book", "sync-colab", "--root", "{t}"], "{t}/intro.ipynb",
         setup=lambda t: _book(t, chapter='{"cells": [')),
    Case("book toc", "missing", ["book", "toc", "--root", "{t}/none"], "{t}/none/_toc.yml: cannot read the table of "
         "contents"),
    Case("book toc", "malformed", ["book", "toc", "--root", "{t}"], "{t}/_toc.yml: cannot read the table of contents",
         setup=lambda t: _book(t, toc="root: [\n")),
    Case("book toc", "wrong-type", ["book", "toc", "--root", "{t}"], "{t}/_toc.yml: cannot read the table of contents",
         setup=lambda t: _book(t, toc="- root\n")),
    Case("book toc", "wrong-place", ["book", "toc", "--root", "{t}/f"], "{t}/f/_toc.yml",
         setup=lambda t: (t / "f").write_text("x")),
    Case("book toc", "interrupted", ["book", "toc", "--root", "{t}"], "{t}/_toc.yml: cannot read the table of contents",
         setup=lambda t: _book(t, toc="root: intro\nchapters:\n  - fi")),
    Case("book check-html", "missing", ["book", "check-html", "{t}/none"], "{t}/none: no built book here"),
    Case("book check-html", "wrong-place", ["book", "check-html", "{t}/f"], "{t}/f: no built book here",
         setup=lambda t: (t / "f").write_text("x")),
    Case("book check-html", "malformed", ["book", "check-html", "{t}"], "not UTF-8", code=1,
         setup=lambda t: (t / "_build" / "html").mkdir(parents=True) or
         (t / "_build" / "html" / "index.html").write_bytes(b"\xff\xfe\x00bad")),
    Case("book check-html", "full-or-read-only", ["book", "check-html", "{t}"], None,
         setup=lambda t: _html(t, "<html><body><p>fine</p></body></html>"), fsize=0, env={"TMPDIR": "/dev/shm"}),
    # oodml import-splits: reads the three official pickles, writes splits_full.json under the data root
    Case("oodml import-splits", "missing", ["oodml", "import-splits", "{t}/none", "--root", "{t}"],
         "{t}/none lacks ['cub200_splits.pkl'"),
    Case("oodml import-splits", "malformed", ["oodml", "import-splits", "{t}/sp", "--root", "{t}"],
         "{t}/sp/cub200_splits.pkl: not a readable ooDML split file",
         setup=lambda t: _splits(t, None, raw=b"junk")),
    Case("oodml import-splits", "wrong-type", ["oodml", "import-splits", "{t}/sp", "--root", "{t}"],
         "{t}/sp/cub200_splits.pkl: expected a dict of split id", setup=lambda t: _splits(t, [1, 2])),
    Case("oodml import-splits", "wrong-place", ["oodml", "import-splits", "{t}/sp/cub200_splits.pkl", "--root", "{t}"],
         "{t}/sp/cub200_splits.pkl lacks", setup=lambda t: _splits(t, {})),
    Case("oodml import-splits", "interrupted", ["oodml", "import-splits", "{t}/sp", "--root", "{t}"],
         "{t}/sp/cub200_splits.pkl: not a readable ooDML split file",
         setup=lambda t: (_splits(t, {i: {"train": list(range(50))} for i in range(9)}),
                          _half(t / "sp" / "cub200_splits.pkl"))),
    # data: check reads a root; make-mini and pretrain-mini write trees and weights
    Case("data check", "missing", ["data", "check", "--root", "{t}/none"], "data root {t}/none does not exist"),
    Case("data check", "wrong-type", ["data", "check", "--root", "{t}", "--datasets", "cub,7"],
         "unknown dataset(s) ['7']"),
    Case("data check", "wrong-place", ["data", "check", "--root", "{t}/f"], "data root {t}/f does not exist or is "
         "not a folder", setup=lambda t: (t / "f").write_text("x")),
    Case("data make-mini", "malformed", ["data", "make-mini", "--root", "{t}"], "{t}/UML_MINI.json is not a readable "
         "UML-Mini manifest", setup=lambda t: (t / "UML_MINI.json").write_text("{no")),
    Case("data make-mini", "wrong-type", ["data", "make-mini", "--root", "{t}", "--seed", "x"], "--seed"),
    Case("data make-mini", "wrong-place", ["data", "make-mini", "--root", "{t}"], "{t} is not empty and is not a "
         "UML-Mini tree (no UML_MINI.json)", setup=lambda t: (t / "mine.txt").write_text("keep")),
    Case("data make-mini", "full-or-read-only", ["data", "make-mini", "--root", "{t}/m"], "data make-mini --root "
         "{t}/m: {t} has 0 MiB free, and the tree needs about 128 MiB", env=FULL),
    Case("data make-mini", "interrupted", ["data", "make-mini", "--root", "{t}/m"], "could not write UML-Mini's cub "
         "under {t}/m/CUB_200_2011", fsize=200_000),
    Case("data pretrain-mini", "missing", ["data", "pretrain-mini", "--out", "{t}/w", "--recipe", "v9"],
         "invalid choice: 'v9'"),
    Case("data pretrain-mini", "malformed", ["data", "pretrain-mini", "--out", "{t}"], "{t}/SHA256SUMS, line 1: "
         "expected '<sha256> <file name>'", setup=lambda t: (t / "SHA256SUMS").write_text("junk\n")),
    Case("data pretrain-mini", "wrong-type", ["data", "pretrain-mini", "--epochs", "0", "--out", "{t}/w"],
         "argument --epochs: expected a positive integer, got 0"),
    Case("data pretrain-mini", "wrong-place", ["data", "pretrain-mini", "--out", "{t}/f"], "{t}/f is not a folder",
         setup=lambda t: (t / "f").write_text("x")),
    Case("data pretrain-mini", "full-or-read-only", ["data", "pretrain-mini", "--out", "{t}/w"], "data pretrain-mini "
         "--out {t}/w: {t} has 0 MiB free", env=FULL),
    # plan: reads job lists and stored wall times, writes nothing
    Case("plan", "missing", ["plan", "--paper", "nosuch"], "unknown paper 'nosuch'"),
    Case("plan", "wrong-type", ["plan", "--paper", "puma", "--gpus", "abc"], "argument --gpus: invalid int value"),
    Case("plan", "wrong-place", ["plan", "--paper", "vptsp", "--table", "Table 99"], "Table 99"),
    Case("plan", "full-or-read-only", ["plan", "--paper", "vptsp"], None, fsize=0, env={"TMPDIR": "/dev/shm"}),
]

NOT_APPLICABLE = {
    ("info", "concurrent"): "info reads no file another process writes",
    ("info", "interrupted"): "info reads no file",
    ("evaluate", "concurrent"): "reads one file and writes none; a writer replaces it atomically or not at all",
    ("eval", "concurrent"): "reads a finished checkpoint; `train` replaces checkpoints atomically",
    ("eval", "full-or-read-only"): "needs a data root to evaluate on; writes nothing (covered by the read-only "
                                   "book tests, which evaluate stored runs)",
    ("reproduce", "concurrent"): "its records are written under the same per-record lock as `records train` "
                                 "(that row)",
    ("records status", "concurrent"): "reads records only; a record being written is invisible until its atomic "
                                      "rename",
    ("records verify", "concurrent"): "reads records only, as `records status`",
    ("records verify", "malformed"): "takes no value that can be malformed (a paper name and a profile)",
    ("book sync-colab", "concurrent"): "a maintainer's command on the source tree; every write is atomic",
    ("book sync-colab", "full-or-read-only"): "writes only notebooks that change, each atomically (a failed write "
                                              "leaves the old notebook)",
    ("book toc", "concurrent"): "as sync-colab",
    ("book toc", "full-or-read-only"): "writes only with --write, atomically",
    ("book check-html", "wrong-type"): "takes one folder and nothing else",
    ("book check-html", "concurrent"): "reads a finished build",
    ("book check-html", "interrupted"): "a half-written page is a malformed page (that row)",
    ("oodml import-splits", "concurrent"): "one atomic write of splits_full.json; a second import writes the same "
                                           "file",
    ("oodml import-splits", "full-or-read-only"): "writes one small JSON file atomically; a failed write leaves the "
                                                  "previous one",
    ("data check", "malformed"): "a malformed dataset is a row of its own in the table, not an error "
                                 "(tests/data/test_loaders.py::test_check_table_and_corrupt_images)",
    ("data check", "concurrent"): "reads only",
    ("data check", "interrupted"): "a half-extracted dataset is a row of the table, as a malformed one",
    ("data check", "full-or-read-only"): "reads only",
    ("data make-mini", "missing"): "makes its root; nothing it reads can be missing",
    ("data make-mini", "concurrent"): "a second generation waits for the first and then finds the tree complete "
                                      "(tests/data/test_mini.py::test_two_processes_generating_one_tree_take_turns)",
    ("data pretrain-mini", "concurrent"): "its SHA256SUMS is updated under a file lock, keeping both entries",
    ("data pretrain-mini", "interrupted"): "a malformed SHA256SUMS (that row) is what an interrupted write leaves",
    ("plan", "malformed"): "takes names and numbers only (the wrong-type row)",
    ("plan", "concurrent"): "reads only",
    ("plan", "interrupted"): "reads job lists and wall times; damaged records are the records rows",
}


def _fill(value: str, t: Path) -> str:
    return value.replace("{t}", str(t))


def _limited(nbytes: int):
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    return limit


_HOLD = """
import fcntl, os, sys, time
handles = []
for path in sys.argv[1:]:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    h = open(path, "a+")
    fcntl.lockf(h, fcntl.LOCK_EX | fcntl.LOCK_NB)
    h.seek(0); h.truncate(); h.write(f"pid {os.getpid()} (the battery's holder)\\n"); h.flush()
    handles.append(h)
print("held", flush=True)
time.sleep(120)
"""


@contextmanager
def _held(locks):
    if not locks:
        yield
        return
    p = subprocess.Popen([sys.executable, "-c", _HOLD, *map(str, locks)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "held"
        yield
    finally:
        p.kill()
        p.wait()


def _snapshot(t: Path) -> dict:
    return {p.relative_to(t).as_posix(): (p.read_bytes() if p.is_file() else None) for p in t.rglob("*")
            if "res/quick/.locks" not in p.as_posix()}


def _invoke(case: Case, t: Path, monkeypatch, capsys) -> tuple[int, str, str]:
    argv = [_fill(a, t) for a in case.argv]
    env = {k: _fill(v, t) for k, v in case.env.items()}
    if case.fsize is not None:   # its own process: the limit must not reach this one
        proc = subprocess.run([sys.executable, "-m", "umlkit.cli", *argv], capture_output=True, text=True,
                              env={**os.environ, **env}, cwd=ROOT, timeout=300, preexec_fn=_limited(case.fsize))
        return proc.returncode, proc.stderr, proc.stdout
    try:
        code = cli.main(argv)
    except SystemExit as e:   # argparse
        code = e.code
    got = capsys.readouterr()
    return code, got.err, got.out


# reading commands run whole in a process that cannot write a byte: the slowest rows, left to `make test-all`
_HEAVY = {("plan", "full-or-read-only"), ("records status", "full-or-read-only"),
          ("records verify", "full-or-read-only")}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.heavy) if (c.command, c.kind) in _HEAVY else c
                                  for c in CASES], ids=[f"{c.command}|{c.kind}" for c in CASES])
def test_the_grid(case, tmp_path, monkeypatch, capsys):
    t = tmp_path / "in"
    t.mkdir()
    for k, v in case.env.items():   # before the set-up: it writes where the command will look (UMLKIT_RESULTS)
        monkeypatch.setenv(k, _fill(v, t))
    locks = case.setup(t) if case.setup else None
    locks = locks if isinstance(locks, list) and all(isinstance(x, Path) for x in locks) else None
    before = _snapshot(t)
    with _held(locks):
        code, err, out = _invoke(case, t, monkeypatch, capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("umlkit") and "error" in ln]
    assert "Traceback" not in err, err[-3000:]
    if case.code is not None:
        assert code == case.code, (code, err[-2000:])
    if case.expect is None:
        assert code in (0, None) or case.code is not None, (code, err[-2000:])
    elif case.code is None:
        assert code not in (0, None) and len(errors) == 1, (code, err[-2000:])
        assert _fill(case.expect, t) in errors[0], err[-2000:]
    else:
        assert _fill(case.expect, t) in err + out, (err + out)[-2000:]
    after = _snapshot(t)
    tmp = [p for p in after if ".tmp" in p.rsplit("/", 1)[-1]]
    assert not tmp, tmp                                                    # nothing half-written left behind
    kept = {p: v for p, v in before.items() if p in after and after[p] == v}
    lost = sorted(set(before) - set(kept) - {p for p in before if p.startswith("res/quick/records/")
                                             and case.kind == "interrupted" and case.command == "records train"})
    assert not lost, lost                                                  # the given files are intact
    if case.expect is not None and case.kind in ("full-or-read-only", "concurrent"):
        written = sorted(p for p in set(after) - set(before) if not p.startswith(("res/quick/.locks", ".")) and
                         after[p] is not None and not p.endswith(".lock"))
        assert not written, written                                        # refused before any work


def test_every_command_meets_every_kind():
    have = {(c.command, c.kind) for c in CASES}
    holes = [(cmd, k) for cmd in COMMANDS for k in KINDS if (cmd, k) not in have and (cmd, k) not in NOT_APPLICABLE]
    assert not holes, holes
    assert not have & set(NOT_APPLICABLE), have & set(NOT_APPLICABLE)
    assert {c.command for c in CASES} == set(COMMANDS) and {c.kind for c in CASES} <= set(KINDS)


def counts() -> dict[str, Counter]:
    """Cases per command and kind (the report of tools/battery_report.py)."""
    out: dict[str, Counter] = {cmd: Counter() for cmd in COMMANDS}
    for c in CASES:
        out[c.command][c.kind] += 1
    return out
