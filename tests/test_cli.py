"""umlkit.cli: help, info, evaluate."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import umlkit
from umlkit import cli


def test_cli_help_and_info(capsys):
    proc = subprocess.run([sys.executable, "-m", "umlkit.cli", "--help"], capture_output=True, text=True, check=True)
    assert "info" in proc.stdout and "evaluate" in proc.stdout
    assert cli.main(["info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["umlkit"] == umlkit.__version__


def test_cli_evaluate(tmp_path, capsys):
    x = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]], dtype=np.float32)
    np.savez(tmp_path / "e.npz", embeddings=x, labels=np.array([0, 0, 1, 1]))
    assert cli.main(["evaluate", str(tmp_path / "e.npz"), "--metrics", "R@1,MAP@R"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["R@1"] == 1.0 and out["MAP@R"] == 1.0
    np.savez(tmp_path / "bad.npz", emb=x)
    assert cli.main(["evaluate", str(tmp_path / "bad.npz")]) == 2
    assert "lacks" in capsys.readouterr().err
    # every item its own class: MAP@R has no query with positives; JSON has no NaN, so it is null
    np.savez(tmp_path / "single.npz", embeddings=x, labels=np.arange(4))
    assert cli.main(["evaluate", str(tmp_path / "single.npz"), "--metrics", "R@1,MAP@R"]) == 0
    out = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"invalid JSON constant {c}"))
    assert out["MAP@R"] is None and out["R@1"] == 0.0


@pytest.mark.kernel_rule
def test_cli_evaluate_explain_says_which_kernel_and_why_on_stderr(tmp_path, capsys, monkeypatch):
    """A small file: fp32 without timing anything (its pair count against the representative search's); a large
    one (the representative size lowered) names the kernel that finished the representative search first, with the
    timings; stdout stays the metrics' JSON; UMLKIT_SEARCH_DTYPE is named where it pins the kernel."""
    from umlkit.metrics import kernels, threads
    monkeypatch.setenv("UMLKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("UMLKIT_SEARCH_DTYPE", raising=False)
    monkeypatch.setattr(kernels, "_MEMO", {})
    monkeypatch.setattr(threads, "busy_cores", lambda interval=0.1: 0.0)
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    x = np.random.default_rng(0).standard_normal((3000, 16)).astype(np.float32)
    np.savez(tmp_path / "e.npz", embeddings=x, labels=np.arange(3000) // 3)
    # the CPU's flags set here, both kinds: the sentence must not depend on the host's instruction set
    monkeypatch.setattr(kernels, "cpu_flags", lambda: {"avx2", "avx512f", "avx512_bf16", "avx512_vnni"})   # Zen 4
    assert cli.main(["evaluate", str(tmp_path / "e.npz"), "--metrics", "R@1", "--explain"]) == 0
    out = capsys.readouterr()
    assert set(json.loads(out.out)) >= {"R@1"}
    assert "search kernel: fp32 for a self-search of 3,000 x 3,000 items: 9,000,000 query x gallery pairs" in out.err
    monkeypatch.setattr(kernels, "cpu_flags", lambda: {"avx2", "fma"})                                     # Zen 3
    assert cli.main(["evaluate", str(tmp_path / "e.npz"), "--metrics", "R@1", "--explain"]) == 0
    assert "search kernel: fp32 for a self-search of 3,000 x 3,000 items: this CPU has no fast bf16 or int8 " \
        "kernel" in capsys.readouterr().err
    timed = {"fp32": 3.0, "bf16": 1.0, "int8": 2.0}
    monkeypatch.setattr(kernels, "_measure", lambda dim, self_search, ks, search: timed)
    monkeypatch.setattr(kernels, "REPRESENTATIVE_ITEMS", 2048)
    monkeypatch.setattr(kernels, "cpu_flags", lambda: None)
    assert cli.main(["evaluate", str(tmp_path / "e.npz"), "--metrics", "R@1", "--explain"]) == 0
    err = capsys.readouterr().err
    assert "search kernel: bf16 for a self-search" in err and "fp32 3.00 s, bf16 1.00 s, int8 2.00 s" in err
    monkeypatch.setenv("UMLKIT_SEARCH_DTYPE", "int8")
    assert cli.main(["evaluate", str(tmp_path / "e.npz"), "--metrics", "R@1", "--explain"]) == 0
    assert "search kernel: int8 for a self-search of 3,000 x 3,000 items: pinned by UMLKIT_SEARCH_DTYPE" in \
        capsys.readouterr().err


def test_cli_errors_are_one_line_naming_the_input(tmp_path, capsys):
    target = tmp_path / "real"
    target.mkdir()
    (target / "mine.txt").write_text("keep")
    assert cli.main(["data", "make-mini", "--root", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("umlkit: error: ") and str(target) in err and "Traceback" not in err
    assert (target / "mine.txt").read_text() == "keep"
    import pytest
    with pytest.raises(FileExistsError):
        cli.main(["--debug", "data", "make-mini", "--root", str(target)])


def test_cli_records_status_counts_the_stored_records_of_a_job_list(capsys):
    from umlkit.experiments.papers import oodml
    from umlkit.experiments.runs.records import find_record, normalise_key
    jobs = oodml.ENTRY.job_list("lr_sweep")
    have = sum(find_record(normalise_key(k), "quick") is not None for _, _, k in jobs)
    assert cli.main(["records", "status", "oodml", "lr_sweep"]) == 0
    assert f"{have} of {len(jobs)} records stored" in capsys.readouterr().out
    # a job list whose jobs name their runner (4-tuples): the unified setting's sweep trains with "train"
    from umlkit.experiments.papers import language_guidance as lg
    jobs = lg.ENTRY.job_list("unified_sweep")
    assert {len(j) for j in jobs} == {4} and {j[3] for j in jobs} == {"train"}
    have = sum(find_record(normalise_key(j[2]), "quick") is not None for j in jobs)
    assert cli.main(["records", "status", "language_guidance", "unified_sweep"]) == 0
    assert f"{have} of {len(jobs)} records stored" in capsys.readouterr().out


def test_cli_records_and_oodml_errors_name_the_input(tmp_path, capsys):
    assert cli.main(["records", "train", "oodml", "tables", "--worker", "2/2"]) == 2
    assert "--worker 2/2" in capsys.readouterr().err
    assert cli.main(["records", "train", "oodml", "tables", "--worker", "half"]) == 2
    assert "expects I/N" in capsys.readouterr().err
    assert cli.main(["records", "status", "oodml", "everything"]) == 2
    assert ("unknown oodml job list 'everything'; choose one of lr_sweep, lr_sweep_cars, lr_sweep_sop, tables"
            in capsys.readouterr().err)
    assert cli.main(["oodml", "import-splits", str(tmp_path), "--root", str(tmp_path)]) == 2
    assert "cub200_splits.pkl" in capsys.readouterr().err


def test_one_tables_runs_are_selected_by_its_declaration_not_by_labels(capsys):
    """VPTSP's Table 6 measures 3 rows x 3 seeds (5 where planned), two of its rows Table 2's runs: --table lists them
    (a label filter on 'cub-' matched other tables' runs too); a derived table, an unknown table and a job list
    given beside --table are errors that say what to give instead."""
    assert cli.main(["records", "status", "vptsp", "--table", "Table 6", "--list"]) == 0
    out = capsys.readouterr().out.splitlines()
    listed = [line.split(None, 1)[1] for line in out if line.startswith(("stored", "missing"))]
    # 3 rows x 3 seeds, and seeds 3 and 4 of the rows the extra-seed plan (configs/more_seeds.yaml) extends
    from umlkit.experiments.claims import more_seeds
    from umlkit.experiments.ops.table_runs import table_jobs, table_spec
    extra = len(more_seeds.jobs({"t": table_spec("vptsp", "Table 6")}))
    assert len(listed) == 9 + extra and len(set(listed)) == len(listed) and extra > 0
    assert {x.rsplit("-seed", 1)[1] for x in listed} == {"0", "1", "2", "3", "4"}
    assert out[-1] == f"vptsp --table 'Table 6' (quick): {9 + extra} of {9 + extra} records stored, 0 to train"
    extra3 = len(more_seeds.jobs({"t": table_spec("puma", "Table 3")}))
    assert len(table_jobs("puma", "Table 3")) == 6 * 3 + extra3    # its PUMA row is Table 2's run, listed once here
    assert cli.main(["records", "status", "vptsp", "tables", "--table", "Table 6"]) == 2
    assert "one of the two" in capsys.readouterr().err
    assert cli.main(["records", "train", "oodml", "--table", "Table S3"]) == 2
    assert "computed from other tables' records" in capsys.readouterr().err
    assert cli.main(["reproduce", "--paper", "vptsp", "--table", "Table 9", "--dry-run"]) == 2
    assert "its tables: Table 1, Table 2" in capsys.readouterr().err


def test_reproduce_table_dry_run_lists_and_trains_nothing(capsys, no_training):
    assert cli.main(["reproduce", "--paper", "vptsp", "--table", "Table 7", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    from umlkit.experiments.ops.table_runs import table_jobs
    n = len(table_jobs("vptsp", "Table 7"))   # 5 rows x 3 seeds + its floor, and the seed plans' extra seeds
    assert n > 16 and out[-1].startswith(f"vptsp Table 7 (quick): {n} runs, 0 to train; nothing was run (")
    assert out[-2].startswith("stored runs took ") and out[-2].endswith(" min in all")
    assert cli.main(["reproduce", "--table", "vptsp:table7", "--dry-run"]) == 0     # PAPER:TABLE, any spelling
    assert capsys.readouterr().out.splitlines()[-1] == out[-1]
    assert cli.main(["reproduce", "--table", "Table 7", "--dry-run"]) == 2
    assert "--table 'Table 7' goes with --paper" in capsys.readouterr().err
    assert cli.main(["reproduce", "--paper", "vptsp", "--table", "vptsp:Table 7", "--dry-run"]) == 0
    assert cli.main(["reproduce", "--paper", "puma", "--table", "vptsp:Table 7", "--dry-run"]) == 2
    assert "two papers" in capsys.readouterr().err
    assert cli.main(["reproduce", "--paper", "vptsp", "--workers", "2"]) == 2
    assert "--workers 2 goes with --table" in capsys.readouterr().err


def test_reproduce_table_estimates_the_missing_runs_from_the_stored_wall_times(capsys, no_training, tmp_path,
                                                                              monkeypatch):
    """Two of Table 7's stored records copied into an empty results folder: the other runs are estimated, each at
    its own row's stored time where one is stored, else at the copied runs' median; with nothing stored, no
    estimate."""
    import json
    import shutil

    from umlkit.experiments.ops.table_runs import job_status, table_jobs
    status = job_status(table_jobs("vptsp", "Table 7"))
    keep = status.iloc[[0, 1]]
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path))
    assert cli.main(["reproduce", "--table", "vptsp:Table 7", "--dry-run"]) == 0
    n = len(table_jobs("vptsp", "Table 7"))
    assert f"no stored run has a wall time, so no estimate for the {n} missing" in capsys.readouterr().out
    for rec in keep["record"]:
        dest = tmp_path / "quick" / Path(rec).relative_to(Path(rec).parents[3])
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(rec, dest)
    seconds = [json.loads(Path(r).read_text())["seconds"] for r in keep["record"]]
    rows = [label.rsplit("-seed", 1)[0] for label in status["label"]]
    own = {rows[0]: seconds[0], rows[1]: seconds[1]}
    median = sorted(seconds)[0] + (sorted(seconds)[1] - sorted(seconds)[0]) / 2
    expect = sum(own.get(r, median) for i, r in enumerate(rows) if i > 1)
    by_row = sum(r in own for r in rows[2:])
    assert cli.main(["reproduce", "--table", "vptsp:Table 7", "--dry-run"]) == 0
    line = capsys.readouterr().out.splitlines()[-2]
    stored = sum(seconds)
    assert line.startswith(f"stored runs took {stored / 60:.0f} min in all" if stored >= 90 else
                           f"stored runs took {stored:.0f} s in all")
    shown = f"{expect / 60:.0f} min" if expect >= 90 else f"{expect:.0f} s"
    assert f"the {n - 2} missing should take about {shown} on one worker ({by_row} timed by their own row's" in line


def test_time_estimate_by_hand():
    import pandas as pd

    from umlkit.experiments.ops.table_runs import time_estimate
    status = pd.DataFrame({"label": ["a-seed0", "a-seed1", "b-seed0", "a-seed2", "b-seed1", "c-seed0", "x"],
                           "runner": [""] * 7,   # runners not known
                           "stored": [True, True, True, False, False, False, False],
                           "seconds": [10.0, 30.0, 100.0, float("nan"), float("nan"), float("nan"), float("nan")]})
    est = time_estimate(status)
    # a: median 20; b: 100; c and x: the median of all stored, 30
    assert est == {"stored": 140.0, "missing": 20 + 100 + 30 + 30, "by_row": 2, "by_runner": 0, "timed": 3}
    assert (time_estimate(status.assign(stored=False))["missing"]
            != time_estimate(status.assign(stored=False))["missing"])
    # with runners: c (a training run) takes the training runs' median (a, a: 20), x (evaluation only) its own 2
    runs = status.assign(runner=["train", "train", "eval", "train", "eval", "train", "eval"],
                         seconds=[10.0, 30.0, 2.0, *[float("nan")] * 4])
    est = time_estimate(runs)
    assert est == {"stored": 42.0, "missing": 20 + 2 + 20 + 2, "by_row": 2, "by_runner": 2, "timed": 3}


def test_table_names_match_whatever_their_spelling_and_an_ambiguous_or_unknown_name_lists_them():
    from umlkit.experiments.ops.table_runs import table_spec
    assert table_spec("vptsp", "table6").table == table_spec("vptsp", "TABLE_6").table == "Table 6"
    with pytest.raises(KeyError, match="its tables: Table 1, Table 2"):
        table_spec("vptsp", "table66")
    import types
    import unittest.mock

    from umlkit.experiments.ops import table_runs
    # two names that differ only in punctuation: the same slug
    specs = {name: types.SimpleNamespace(table=name, slug="table6") for name in ("Table 6", "Table-6")}
    paper = types.SimpleNamespace(claim_tables=lambda profile: specs)
    with unittest.mock.patch.object(table_runs, "get_paper", lambda name: paper):
        assert table_spec("x", "Table-6") is specs["Table-6"]
        with pytest.raises(KeyError, match="table 'table6' could be Table 6 or Table-6"):
            table_spec("x", "table6")


def test_a_failing_worker_is_named_with_the_end_of_its_output(tmp_path, monkeypatch, capsys):
    """The workers of reproduce --table --workers train in processes of their own: one that stops (here: the data
    root is a file) fails the command with its exit status, and the end of its output goes to stderr, not a silent
    gap in the table; the other worker is stopped."""
    from umlkit.experiments.ops.table_runs import table_jobs, train_in_workers
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path / "results"))
    (tmp_path / "not_a_folder").write_text("x")
    monkeypatch.setenv("UMLKIT_DATA", str(tmp_path / "not_a_folder"))
    with pytest.raises(RuntimeError, match=r"vptsp Table 7: worker \d/2 stopped with exit status 2 \([12] of 2 "
                                           r"failed; the others were stopped\)"):
        train_in_workers("vptsp", "Table 7", "quick", [], 2, table_jobs("vptsp", "Table 7"))
    err = capsys.readouterr().err
    assert "--- the end of worker" in err and "not_a_folder" in err
    assert not any((tmp_path / "results").rglob("*.json"))


def test_records_train_dry_run_lists_what_the_list_match_and_worker_select(capsys, no_training):
    assert cli.main(["records", "train", "vptsp", "tables", "--match", "^cub-Hyp-ViT-seed[0-2]$", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "worker 0/1: 3 jobs, 3 already stored, 0 to train"
    assert (out[1:4] == [f"stored   cub-Hyp-ViT-seed{s}" for s in range(3)]
            and out[-1].endswith("nothing was run (--dry-run)"))
    assert cli.main(["records", "train", "vptsp", "tables", "--match", "^cub-Hyp-ViT-seed[0-2]$", "--worker", "1/2",
                     "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines()[1:2] == ["stored   cub-Hyp-ViT-seed1"]     # every 2nd job from the 2nd


def test_reproduce_help_lists_every_registered_papers_tables_and_a_dry_run_names_its_csv(capsys):
    """Issue 82 item 7: the table names --table takes are in --help; --dry-run says which file the run would write."""
    from umlkit.experiments.tables.registry import papers
    with pytest.raises(SystemExit):
        cli.main(["reproduce", "--help"])
    out = " ".join(capsys.readouterr().out.split())   # wrapped lines joined
    for name, paper in papers().items():
        assert f"{name}: " in out and all(t in out for t in paper.claim_tables("quick")), name
    assert cli.main(["reproduce", "--table", "vptsp:table6", "--dry-run"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert "nothing was run" in last and last.endswith("vptsp_table6.csv)"), last


def test_an_unreadable_image_in_a_loader_worker_reaches_the_user_as_one_sentence(tmp_path, capsys):
    """issue 82, item 5: a corrupt training image once ended the run with torch's "Caught OSError in DataLoader
    worker process 0" and the worker's whole traceback flattened to ~2,000 characters; the user sees the image's own
    sentence and the check that finds every such image."""
    from umlkit.data import make_mini
    root = make_mini(tmp_path / "mini", seed=0, size="tiny", sources=["flowers"])
    bad = sorted((root / "flowers" / "jpg").glob("*.jpg"))[0]
    bad.write_bytes(b"not a jpeg")
    rc = cli.main(["train", "configs/examples/explicit_split.yaml", "--run-dir", str(tmp_path / "run"),
                   "--set", f"data.root={root}", "--set", "data.datasets=[flowers]", "--set", "data.splits={}",
                   "--set", "data.expected=null", "--set", "data.num_workers=1", "--set", "data.batch_size=8",
                   "--set", "train.epochs=1"])
    err = capsys.readouterr().err
    line = next(ln for ln in err.splitlines() if ln.startswith("umlkit: error:"))
    assert rc == 2 and f"cannot read image {bad}" in line and "umlkit data check --verify-images" in line
    assert "DataLoader worker" not in line and "Traceback" not in line and len(line) < 400, line


class _Unreadable(torch.utils.data.Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        raise OSError("cannot read image /data/x.jpg: cannot identify image file")


def test_a_loader_workers_traceback_is_cut_to_its_last_sentence():
    """torch re-raises a worker's exception with "Caught OSError in DataLoader worker process 0" and the worker's
    traceback; the CLI keeps the exception's own words."""
    with pytest.raises(OSError) as caught:
        next(iter(torch.utils.data.DataLoader(_Unreadable(), num_workers=1)))
    assert "DataLoader worker process 0" in str(caught.value) and "Traceback" in str(caught.value)
    said = cli._worker_sentence(str(caught.value))
    assert said.startswith("cannot read image /data/x.jpg: cannot identify image file (`umlkit data check")
    assert "Traceback" not in said and "\n" not in said
