"""Every shell command the README and the book's Running page show works as written (issue 82, item 4).

A doc-test harness: the fenced ``bash`` blocks of the documents are split into commands (continuation lines joined,
comments dropped), and each command must match one entry of :data:`HOW`, which says how it is checked:

* ``run``: executed here as written, from the repository root, with the documented folders swapped for test ones
  where the command reads a dataset root or writes results (a tiny UML-Mini tree in each real dataset's layout for
  ``UMLKIT_DATA``; a temporary results folder, or a copy of the records the command reads); the exit status and a
  phrase of its output are checked, and the checkout is unchanged afterwards (reading is read-only);
* ``test``: a named test runs the same command form on fixtures (the test must exist);
* ``illustration``: not executed, with the reason (a GPU, a Slurm submission, hours of training).

A new command in either document without an entry fails :func:`test_every_documented_command_is_run_tested_or_marked`.
The executions are minutes of CLI start-ups and record reads, so they run in ``make test-all`` (marker ``heavy``).
Written by hand: no tool extracts shell commands from Markdown and notebooks and runs them against a fixture.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "book/running.ipynb")
FENCE = re.compile(r"```(?:bash|sh|shell)\n(.*?)```", re.S)

# (pattern on the command, kind, detail); the first match decides. run: {rc, expect, env, records}; env values
# "{data}" / "{results}" are the test's tiny dataset tree and a temporary results folder; records: the paper whose
# quick records are copied into that results folder first.
HOW: list[tuple[str, str, object]] = [
    (r"^make (book|test)$", "illustration", "the build and the suite themselves: CI runs both (.ci/run)"),
    (r"^mkdir -p results/", "run", {"rc": 0}),
    (r"umlkit reproduce --table vptsp:table6 --dry-run$", "run", {"rc": 0, "expect": "nothing was run"}),
    (r"umlkit reproduce --table vptsp:table6 --workers 2$", "run",
     {"rc": 0, "expect": "vptsp_table6.csv", "env": {"UMLKIT_RESULTS": "{results}"}, "records": "vptsp"}),
    (r"umlkit reproduce --paper oodml$", "test",
     "tests/experiments/test_toy_paper.py::test_a_toy_paper_from_a_temporary_folder_reaches_every_consumer"),
    (r"umlkit records status oodml tables$", "run", {"rc": 0, "expect": "records stored"}),
    (r"umlkit records train oodml tables --worker [01]/2 &$", "test",
     "tests/test_cli.py::test_records_train_dry_run_lists_what_the_list_match_and_worker_select"),
    (r"umlkit records verify --sample 3$", "test",
     "tests/experiments/test_record_check.py::test_verify_sample_retrains_in_a_temporary_folder_and_reports_each_field"),
    (r"umlkit reproduce --stale --dry-run$", "run", {"rc": 0, "expect": "stale"}),
    (r"umlkit reproduce --profile quick --chapters uml_mini,evaluation$", "test",
     "tests/train/test_cli_ddp.py::test_reproduce_knows_the_book_chapters"),
    (r"papermill book/oodml.ipynb .* -y \"SEEDS: \[0, 1\]\"$", "test",
     "tests/test_chapters_with_overrides.py::test_a_chapter_with_an_override_trains_nothing_and_says_missing_records"),
    (r"papermill --help-notebook book/vptsp.ipynb$", "run", {"rc": 0, "expect": "OVERRIDES"}),
    (r"papermill book/evaluation.ipynb .* -p PROFILE quick$", "illustration",
     "the evaluation chapter itself: make test executes it under nbval, make book with papermill's engine"),
    (r"papermill book/puma.ipynb .* -p PROFILE full", "illustration",
     "the full profile on real data and a GPU; tests/full trains one step of every full code path on tiny trees"),
    (r"^export ", "run", {"rc": 0}),
    (r"umlkit data check$", "run", {"rc": 0, "expect": "found", "env": {"UMLKIT_DATA": "{data}"}}),
    (r"umlkit data check --weights$", "run",
     {"rc": 0, "expect": "not downloaded", "env": {"UMLKIT_DATA": "{data}", "UMLKIT_RESULTS": "{results}"}}),
    (r"umlkit reproduce --table vptsp:table2 --profile full$", "illustration",
     "trains the full profile's Table 2 (GPU-hours); the full one-step tests train each of its code paths"),
    (r"^CUDA_VISIBLE_DEVICES=\d .*--profile full --worker [01]/2 &$", "illustration",
     "one GPU per worker: needs two GPUs"),
    (r"umlkit plan --paper vptsp --gpus 8$", "run", {"rc": 0, "expect": "GPU-hours"}),
    (r"umlkit reproduce --table vptsp:table2 --profile full --executor slurm --dry-run$", "run",
     {"rc": 1, "expect": "the submission would be refused",   # a tiny tree: every problem named, nothing submitted
      "env": {"UMLKIT_DATA": "{data}", "UMLKIT_RESULTS": "{results}"}}),
    (r"--executor slurm --slurm-partition gpu", "test",
     "tests/cluster/test_slurm.py::test_array_reaches_the_local_records_and_a_second_submission_sends_nothing"),
    (r"umlkit records status vptsp --table \"Table 2\" --profile full --list$", "run",
     {"rc": 0, "expect": "records stored", "env": {"UMLKIT_DATA": "{data}", "UMLKIT_RESULTS": "{results}"}}),
]


def blocks(doc: str) -> list[str]:
    """The fenced shell blocks of a Markdown file, or of a notebook's Markdown cells."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    if doc.endswith(".ipynb"):
        text = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"] if c["cell_type"] == "markdown")
    return [m.group(1) for m in FENCE.finditer(text)]


def commands(block: str) -> list[str]:
    """One string per command: comments dropped, lines ending in a backslash joined with the next."""
    out, cur = [], ""
    for line in block.splitlines():
        line = re.sub(r"(^|\s)#\s.*$", "", line).rstrip()
        if not line.strip():
            continue
        cur = f"{cur} {line.strip()}" if cur else line.strip()
        if cur.endswith("\\"):
            cur = cur[:-1].rstrip()
        else:
            out.append(cur)
            cur = ""
    return out + ([cur] if cur else [])


def documented() -> list[tuple[str, str]]:
    """(document, command) of every shell command the documents show, in order."""
    return [(doc, c) for doc in DOCS for b in blocks(doc) for c in commands(b)]


def how(command: str) -> tuple[str, object] | None:
    for pattern, kind, detail in HOW:
        if re.search(pattern, command):
            return kind, detail
    return None


def test_the_harness_joins_continuations_and_drops_comments():
    block = "a --x 1   # note\n    # more note\nb \\\n    --y 2 \\\n    --z 3\nexport K=V\n"
    assert commands(block) == ["a --x 1", "b --y 2 --z 3", "export K=V"]


def test_every_documented_command_is_run_tested_or_marked():
    """Each command of README.md and book/running.ipynb has an entry; a ``test`` entry names a test that exists."""
    found = documented()
    assert len(found) >= 20 and any(d == "book/running.ipynb" for d, _ in found)
    unknown = [f"{d}: {c}" for d, c in found if how(c) is None]
    assert not unknown, "documented commands without a check (add them to HOW):\n" + "\n".join(unknown)
    for _, c in found:
        kind, detail = how(c)
        if kind == "test":
            path, name = detail.split("::")
            assert f"def {name}(" in (ROOT / path).read_text(encoding="utf-8"), (c, detail)
        elif kind == "illustration":
            assert isinstance(detail, str) and detail, c
    used = {p for p, _, _ in HOW if any(re.search(p, c) for _, c in found)}
    assert used == {p for p, _, _ in HOW}, f"entries no command matches: {set(p for p, _, _ in HOW) - used}"


@pytest.fixture(scope="module")
def tiny_tree(tmp_path_factory) -> Path:
    from umlkit.data import make_mini
    return make_mini(tmp_path_factory.mktemp("docdata") / "data", size="tiny")


def _status() -> set[str]:
    """The checkout's changed paths, less the record store (a second-edition worker may be filling it meanwhile;
    tests/test_read_only.py checks on a fresh clone that reading writes no record)."""
    out = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout
    return {ln for ln in out.splitlines() if "results/quick/records/" not in ln}


def _runnable() -> list[tuple[str, dict]]:
    return [(c, how(c)[1]) for _, c in documented() if how(c) and how(c)[0] == "run"]


@pytest.mark.heavy
@pytest.mark.parametrize("command,check", _runnable(), ids=[c for c, _ in _runnable()])
def test_a_documented_command_runs_as_written(command, check, tiny_tree, tmp_path):
    results = tmp_path / "results"
    if check.get("records"):   # the records the command reads, copied: what it writes lands in the copy
        paper = check["records"]
        shutil.copytree(ROOT / "results" / "quick" / "records" / paper, results / "quick" / "records" / paper)
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "UMLKIT_PROGRESS": "0",
           **{k: v.format(data=tiny_tree, results=results) for k, v in (check.get("env") or {}).items()}}
    line = command.replace(".venv/bin/", f"{bin_dir}/") if not (ROOT / ".venv/bin").is_dir() else command
    line = re.sub(r"^export .*$", "true", line)   # an export's value is the documented folder: the test's is set
    if line.startswith("mkdir -p results/"):
        line = line.replace("results/", f"{results}/")
    before = _status()
    done = subprocess.run(["bash", "-c", line], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode == check["rc"], f"{command}: rc {done.returncode}\n{out[-3000:]}"
    assert check.get("expect", "") in out, f"{command}: {check.get('expect')!r} not in\n{out[-3000:]}"
    assert _status() == before, f"{command} changed the checkout"
