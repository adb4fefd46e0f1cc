"""Bad input across every CLI command: each fails with a non-zero exit and ONE line that starts with "umlkit: error"
(or argparse's own "umlkit <command>: error"), names the offending file, argument or value, and shows no traceback.
Nothing here trains: every case fails before the first step."""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from umlkit import cli
from umlkit.experiments.tables.registry import papers

CONFIG = str(Path(__file__).resolve().parents[1] / "configs" / "puma" / "puma.yaml")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    t = tmp_path_factory.mktemp("bad_inputs")
    x = np.random.default_rng(0).random((6, 4)).astype("float32")
    np.savez(t / "len.npz", embeddings=x, labels=np.array([0, 0, 1]))
    nan = x.copy()
    nan[0, 0] = np.nan
    np.savez(t / "nan.npz", embeddings=nan, labels=np.array([0, 0, 1, 1, 2, 2]))
    np.savez(t / "ok.npz", embeddings=x, labels=np.array([0, 0, 1, 1, 2, 2]))
    np.savez(t / "strlabels.npz", embeddings=x, labels=np.array(list("aabbcc")))
    np.save(t / "single.npy", x)
    ragged = np.empty(3, dtype=object)
    ragged[:] = [[1.0, 2.0], [1.0], [3.0, 4.0]]
    np.savez(t / "ragged.npz", embeddings=ragged, labels=np.array([0, 1, 0]))
    (t / "bad.yaml").write_text("model: [unclosed\n")
    (t / "typo.yaml").write_text("modle:\n  backbone: x\n")
    (t / "subtypo.yaml").write_text("train:\n  epoch: 2\n")
    (t / "list.yaml").write_text("- a\n- b\n")
    (t / "dupkey.yaml").write_text("model:\n  backbone: vit_tiny_uml\n  backbone: vit_tiny_uml_v2\n")
    (t / "profiletypo.yaml").write_text("profiles:\n  quik:\n    train: {epochs: 1}\n")
    (t / "metrictypo.yaml").write_text("train:\n  metrics: [R@1, MAP@RR]\n")
    (t / "wisetypo.yaml").write_text("train:\n  wise_ft: [2]\n")
    (t / "run").mkdir()
    (t / "run" / "config.json").write_text("{not json")
    (t / "run" / "last.pt").write_bytes(b"junk")
    (t / "orphan.pt").write_bytes(b"junk")
    (t / "emptyrun").mkdir()
    (t / "emptyrun" / "config.json").write_text('{"config": {}}')
    (t / "emptyrun" / "last.pt").write_bytes(b"junk")
    (t / "real").mkdir()
    (t / "real" / "mine.txt").write_text("keep")
    os.mkfifo(t / "pipe.npz")            # np.load waited on it forever
    (t / "weights").mkdir()
    (t / "weights" / "vit_tiny_uml_patch8_32.safetensors").write_text("mine")
    (t / "badsums").mkdir()
    (t / "badsums" / "SHA256SUMS").write_text("not a checksum line\n")
    (t / "empty.npz").write_bytes(b"")
    repo = "repository:\n  url: https://github.com/o/n\n  branch: main\n"
    for name, config, toc in (("nochapters", repo, "root: book/intro\nchapters:\n  - file: book/gone\n"),
                              ("listconfig", "- a\n", "root: intro\n"), ("badtoc", repo, "root: [\n")):
        (t / name).mkdir()
        (t / name / "_config.yml").write_text(config)
        (t / name / "_toc.yml").write_text(toc)
    (t / "junksplits").mkdir()
    for name in ("cub200_splits.pkl", "cars196_splits.pkl", "online_products_splits.pkl"):
        (t / "junksplits" / name).write_bytes(b"junk")
    (t / "listmanifest").mkdir()
    (t / "listmanifest" / "UML_MINI.json").write_text("[]")
    return t


# (argv with {t} for the inputs folder, what the one line must contain)
CASES = [
    (["evaluate", "{t}/missing.npz"], "{t}/missing.npz"),
    (["evaluate", "{t}/bad.yaml"], "{t}/bad.yaml: not an .npz archive"),
    (["evaluate", "{t}/empty.npz"], "cannot read {t}/empty.npz"),
    (["evaluate", "{t}/pipe.npz"], "{t}/pipe.npz is not a regular file"),
    (["evaluate", "{t}/real"], "{t}/real is not a regular file"),
    (["evaluate", "{t}/single.npy"], "{t}/single.npy"),
    (["evaluate", "{t}/len.npz"], "{t}/len.npz: labels has 3 entries but embeddings has 6 rows"),
    (["evaluate", "{t}/strlabels.npz"], "{t}/strlabels.npz: "),
    (["evaluate", "{t}/ok.npz"], "{t}/ok.npz: R@8 needs k=8 neighbours but the gallery offers only 5 per query (no "
                                 "--metrics: the default set"),
    (["reproduce", "-p", "PROFILE=full"], "-p 'PROFILE=full': choose the profile with --profile full"),
    (["evaluate", "{t}/nan.npz"], "{t}/nan.npz: embeddings has 1 row(s) with NaN"),
    # issue 79: a ragged object array, a negative seed, a thread count beyond the cores
    (["evaluate", "{t}/ragged.npz"], "{t}/ragged.npz: array 'embeddings' is an object array (rows of different "
                                     "lengths, or Python objects); expected a numeric 2-D array"),
    (["data", "make-mini", "--seed", "-1", "--root", "{t}/mini"], "argument --seed: expected a whole number from 0 "
                                                                  "to 4294967295, got -1"),
    (["evaluate", "{t}/ok.npz", "--metrics", "FOO"], "unknown metric 'FOO'"),
    (["evaluate", "{t}/ok.npz", "--metrics", "R@0"], "R@k needs k >= 1"),
    (["train", "{t}/missing.yaml"], "{t}/missing.yaml does not exist"),
    (["train", "{t}/bad.yaml"], "{t}/bad.yaml is not valid YAML"),
    (["train", "{t}/typo.yaml"], "{t}/typo.yaml: unknown config section(s) ['modle']"),
    (["train", "{t}/list.yaml"], "{t}/list.yaml must hold a mapping"),
    # configs checked at load (issue 65 item 4): a repeated key, a misspelt profile block, metric or key
    (["train", "{t}/dupkey.yaml"], "{t}/dupkey.yaml: key 'backbone' appears twice in one mapping (lines 2 and 3)"),
    (["train", "{t}/profiletypo.yaml"], "{t}/profiletypo.yaml: unknown profile block(s) ['quik'] under profiles "
                                        "(did you mean 'quick'?)"),
    (["train", "{t}/metrictypo.yaml"], "{t}/metrictypo.yaml: config key train.metrics = ['R@1', 'MAP@RR']: expected "
                                       "metric names"),
    (["train", CONFIG, "--set", "train.metrics=[R@1,MAPR]"], "'MAPR' is none (did you mean 'MAP@R'?)"),
    (["train", CONFIG, "--set", "train.epoch=3"], "unknown key 'epoch' in train (did you mean 'epochs'?)"),
    (["train", "{t}/wisetypo.yaml"], "config key train.wise_ft = [2]: expected a list of mixing coefficients in "
                                     "[0, 1]"),
    (["train", CONFIG, "--profile", "quick", "--set", "model.method=layernorm", "--set",
      "model.options.adapter_dim=3", "--run-dir", "{t}/r"], "unexpected option(s) for method 'layernorm'"),
    (["train", CONFIG, "--set", "noequals"], "override 'noequals' must look like key.sub=value"),
    (["train", CONFIG, "--set", "nosuch.key=1"], "unknown key 'nosuch'"),
    (["train", CONFIG, "--set", "model.backbone=nosuchnet", "--run-dir", "{t}/r"], "unknown backbone 'nosuchnet'"),
    (["train", CONFIG, "--set", "data.root={t}/nodata", "--run-dir", "{t}/r"], "not found under {t}/nodata"),
    (["train", CONFIG, "--resume", "{t}/none.pt", "--run-dir", "{t}/r"], "checkpoint {t}/none.pt does not exist"),
    (["train", CONFIG, "--set", "model.embed_dim=abc"], "config key model.embed_dim = 'abc': expected an integer >= 1"),
    (["train", CONFIG, "--set", "train.epochs=-1"], "config key train.epochs = -1: expected an integer >= 1"),
    (["train", CONFIG, "--set", "optimizer.lr=-1"], "config key optimizer.lr = -1: expected a finite number >= 0"),
    (["train", CONFIG, "--set", "optimizer.lr=.inf"], "config key optimizer.lr = inf: expected a finite number"),
    (["train", CONFIG, "--set", "precision=fp8"], "config key precision = 'fp8': expected fp32, bf16, fp16 or auto"),
    (["train", CONFIG, "--set", "device=gpu0"], "config key device = 'gpu0': expected auto, cpu, cuda or cuda:N"),
    (["train", CONFIG, "--set", "objective.0.weight=abc"], "config key objective.0.weight = 'abc': expected a number"),
    (["train", CONFIG, "--set", "seed=99999999999999999999"], "config key seed = 99999999999999999999: expected"),
    (["train", CONFIG, "--set", "train.select_on=foo", "--run-dir", "{t}/r"],
     "config key train.select_on = 'foo': expected one of ["),
    (["train", CONFIG, "--run-dir", "{t}/real"], "run_dir {t}/real is not a umlkit run folder (files a run does "
                                                 "not write (mine.txt))"),
    (["train", CONFIG, "--run-dir", "{t}/run"], "run_dir {t}/run is not a umlkit run folder"),
    (["train", CONFIG, "--run-dir", "{t}/ok.npz"], "run_dir {t}/ok.npz is a file"),
    (["train", CONFIG, "--set", "data.batch_size=1.5"], "config key data.batch_size = 1.5: expected an integer"),
    (["train", CONFIG, "--set", "model.pretrained=maybe"], "config key model.pretrained = 'maybe': expected true"),
    (["train", CONFIG, "--set", "optimizer.lr_mult.head=-2"], "optimizer.lr_mult.head = -2: expected a finite number"),
    (["train", "{t}/subtypo.yaml"], "{t}/subtypo.yaml: unknown key(s) ['epoch'] in config section train"),
    (["train", CONFIG, "--set", "optimizer.lr_mult.bakcbone=0"], "unknown parameter group(s) ['bakcbone'] in "
                                                                   "optimizer.lr_mult"),
    (["train", CONFIG, "--set", "clip.max=-1"], "config key clip.max = -1: expected a finite number > 0"),
    (["train", CONFIG, "--set", "schedule.milestones=5"], "config key schedule.milestones = 5: expected a list"),
    (["train", CONFIG, "--set", "data.augment='no'"], "config key data.augment = 'no': expected true or false"),
    (["train", CONFIG, "--set", "objective.0.weight=-1"], "config key objective.0.weight = -1.0: expected a finite "
                                                          "number >= 0"),
    (["eval", "{t}/missing.pt", "--data", "{t}"], "checkpoint {t}/missing.pt does not exist"),
    (["eval", "{t}/orphan.pt", "--data", "{t}"], "{t}/config.json not found"),
    (["eval", "{t}/run/last.pt", "--data", "{t}"], "{t}/run/config.json: not a umlkit run configuration"),
    (["eval", "{t}/run/last.pt"], "the following arguments are required: --data"),
    (["eval", "{t}/emptyrun/last.pt", "--data", "{t}"], "{t}/emptyrun/config.json: not a umlkit run configuration "
                                                        "(expected its config to hold the sections model, data"),
    (["eval", "{t}/missing.pt", "--data", "{t}", "--metrics", "R@1,FOO"], "unknown metric 'FOO'"),
    (["data", "check", "--root", "{t}/nothere"], "data root {t}/nothere does not exist"),
    (["data", "check", "--root", "{t}", "--datasets", "foo"], "unknown dataset(s) ['foo']"),
    (["data", "make-mini", "--root", "{t}/real"], "{t}/real"),
    (["data", "make-mini", "--root", "{t}/listmanifest"], "{t}/listmanifest/UML_MINI.json is not a UML-Mini "
                                                          "manifest: expected a JSON object, found a list"),
    (["data", "make-mini", "--size", "huge"], "argument --size: invalid choice: 'huge'"),
    (["data", "pretrain-mini", "--epochs", "0", "--out", "{t}/w"],
     "argument --epochs: expected a positive integer, got 0"),
    (["data", "pretrain-mini"], "pretraining would replace "),      # the shipped weights: only with --overwrite
    (["data", "pretrain-mini", "--out", "{t}/weights"], "pretraining would replace {t}/weights/vit_tiny_uml_patch8_32"
                                                        ".safetensors; pass overwrite=True (CLI: --overwrite)"),
    (["data", "pretrain-mini", "--out", "{t}/badsums"], "{t}/badsums/SHA256SUMS, line 1: expected '<sha256> <file "
                                                        "name>'"),
    (["records", "train", "oodml", "tables", "--worker", "3/2"], "--worker 3/2"),
    (["records", "train", "oodml", "tables", "--worker", "half"], "expects I/N"),
    (["records", "train", "oodml", "tables", "--match", "("], "--match '(' is not a regular expression"),
    (["records", "train", "oodml", "tables", "--threads", "0"], "argument --threads: expected a positive integer"),
    (["records", "train", "puma", "nope"], "unknown puma job list 'nope'; choose one of tuning, few_shot_tuning"),
    (["records", "train", "inat", "tables"],
     f"unknown paper 'inat'; registered: {', '.join(papers())}"),
    (["records", "status", "language_guidance", "everything"],
     "unknown language_guidance job list 'everything'; choose one of omega_sweep"),
    (["records", "status", "oodml", "everything"],
     "unknown oodml job list 'everything'; choose one of lr_sweep, lr_sweep_cars, lr_sweep_sop, tables"),
    (["records", "status", "nosuch"], "unknown paper 'nosuch'; registered: puma"),
    (["records", "status", "oodml"], "give oodml's job list (lr_sweep, lr_sweep_cars"),
    (["records", "status", "oodml", "tables", "--profile", "weird"], "argument --profile: invalid choice: 'weird'"),
    (["data", "check", "--root", "{t}/bad.yaml"], "data root {t}/bad.yaml does not exist or is not a folder"),
    (["book", "check-html", "{t}/bad.yaml"], "{t}/bad.yaml: no built book here"),
    (["oodml", "import-splits", "{t}/junksplits", "--root", "{t}"], "{t}/junksplits/cub200_splits.pkl: not a "
                                                                     "readable ooDML split file"),
    (["plan", "--paper", "puma", "--gpus", "abc"], "argument --gpus: invalid int value: 'abc'"),
    (["reproduce", "--chapters", "nonexistent"], "unknown chapter(s) ['nonexistent']"),
    (["reproduce", "-p", "NOEQUALS"], "-p expects NAME=VALUE"),
    (["reproduce", "-p", "SEEDS=[0,"], "-p 'SEEDS=[0,': the value is not valid YAML"),
    (["reproduce", "--dry-run", "--chapters", "evaluation"], "--dry-run goes with --stale"),
    (["reproduce", "--stale", "--paper", "nosuch"], "unknown paper 'nosuch'; registered: puma, oodml"),
    (["records", "train", "oodml", "tables", "--match", "zzz"], "--match 'zzz' matches none of the 750 job labels"),
    (["reproduce", "--profile", "weird"], "argument --profile: invalid choice: 'weird'"),
    (["oodml", "import-splits", "{t}/nope", "--root", "{t}"], "{t}/nope lacks ['cub200_splits.pkl'"),
    (["book", "sync-colab", "--root", "{t}/nope"], "{t}/nope/_config.yml: cannot read the book configuration"),
    (["book", "sync-colab", "--root", "{t}/nochapters", "--check"], "{t}/nochapters/_toc.yml lists 2 chapter(s) "
                                                                    "that do not exist: {t}/nochapters/book/intro"),
    (["book", "sync-colab", "--root", "{t}/listconfig"], "{t}/listconfig/_config.yml: expected a mapping"),
    (["book", "sync-colab", "--root", "{t}/badtoc"], "{t}/badtoc/_toc.yml: cannot read the table of contents"),
    (["book", "check-html", "{t}/nope"], "{t}/nope: no built book here"),
    (["nosuchcommand"], "invalid choice: 'nosuchcommand'"),
    # the cluster side (issue 60): plans and Slurm submissions refuse bad settings before anything is submitted
    (["plan", "--paper", "nosuch"], "unknown paper 'nosuch'; registered: puma"),
    (["plan", "--paper", "puma", "--gpus", "0"], "--gpus 0: expected 1 or more"),
    (["plan", "--paper", "vptsp", "--table", "Table 99"], "Table 99"),
    (["reproduce", "--executor", "slurm"], "--executor slurm goes with --table PAPER:TABLE or --paper PAPER"),
    (["reproduce", "--table", "vptsp:table6", "--executor", "slurm", "--slurm-cpus", "0"],
     "slurm setting cpus = 0: expected an integer >= 1"),
    (["reproduce", "--table", "vptsp:table6", "--executor", "slurm", "--slurm-config", "{t}/nope.yaml"],
     "Slurm settings file {t}/nope.yaml does not exist"),
    (["reproduce", "--table", "vptsp:table6", "--executor", "slurm", "--slurm-config", "{t}/listconfig/_config.yml"],
     "{t}/listconfig/_config.yml: expected a `slurm:` block"),
    (["records", "train", "vptsp", "tables", "--executor", "slurm", "--worker", "1/2"],
     "--worker 1/2 goes with the local executor"),
    (["records", "train", "vptsp", "tables", "--executor", "cloud"], "argument --executor: invalid choice: 'cloud'"),
    (["reproduce", "--table", "vptsp:table2", "--profile", "full", "--set", "data.root={t}/nothere"],
     "reads its datasets from {t}/nothere"),
]


@pytest.mark.parametrize("argv, expected", CASES, ids=[" ".join(a[:3]) + f" #{i}" for i, (a, _) in enumerate(CASES)])
def test_bad_input_gives_one_line_naming_it(inputs, capsys, argv, expected):
    t = str(inputs)
    argv = [a.replace("{t}", t) for a in argv]
    before = sorted(p.relative_to(inputs).as_posix() for p in inputs.rglob("*"))
    try:
        code = cli.main(argv)
    except SystemExit as e:        # argparse: usage + one error line
        code = e.code
    err = capsys.readouterr().err
    assert code not in (0, None), argv
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("umlkit") and "error" in ln]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert expected.replace("{t}", t) in errors[0], err
    # the hint is the only other line (argparse prints its usage instead)
    assert all(ln in errors or ln.startswith(("(run again with --debug", "usage:", " ")) for ln in lines), err
    after = sorted(p.relative_to(inputs).as_posix() for p in inputs.rglob("*"))
    assert after == before or argv[0] == "train", (before, after)   # nothing created or removed...
    shutil.rmtree(inputs / "r", ignore_errors=True)                    # ...except a refused run's own folder
    assert (inputs / "real" / "mine.txt").read_text() == "keep"


def test_an_unexpected_exception_is_one_line_naming_its_type(monkeypatch, capsys):
    """An error none of umlkit's checks anticipated (here a ZeroDivisionError inside a command) still prints one
    line, with the exception's type, and the traceback only with --debug."""
    def boom(args):
        raise ZeroDivisionError("division by zero")
    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    parser._subparsers._group_actions[0].choices["evaluate"].set_defaults(func=boom)
    assert cli.main(["evaluate", "x.npz"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[0] == "umlkit: error: ZeroDivisionError: division by zero" and "Traceback" not in err
    with pytest.raises(ZeroDivisionError):
        cli.main(["--debug", "evaluate", "x.npz"])


def test_an_unreadable_stored_record_is_reported_not_counted(tmp_path, monkeypatch, capsys):
    """A truncated record file is neither "stored" nor silently skipped by ``records train``: both commands name it."""
    from umlkit.experiments.runs.records import find_record, normalise_key
    jobs = cli._job_list("vptsp", "tables", "quick")
    job = next(j for j in jobs if find_record(normalise_key(j[2]), "quick"))
    source = find_record(normalise_key(job[2]), "quick")
    target = tmp_path / "quick" / source.relative_to(source.parents[3])
    target.parent.mkdir(parents=True)
    target.write_text(source.read_text()[:40])
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path))
    assert cli.main(["records", "status", "vptsp", "tables"]) == 2
    out = capsys.readouterr()
    assert f"0 of {len(jobs)} records stored" in out.out
    assert "1 stored record(s) are damaged and are not used" in out.err
    assert f"first: run record {target} cannot be read" in out.err
    assert cli.main(["records", "train", "vptsp", "tables", "--match", "zzz|" + re.escape(job[1]) + "$"]) == 2
    assert f"run record {target} cannot be read" in capsys.readouterr().err
    assert target.read_text() == source.read_text()[:40]


def test_eval_names_a_checkpoint_that_does_not_fit_its_run_configuration(tmp_path, capsys):
    """A checkpoint copied next to another run's config.json (here: another embedding size) is named with that file,
    not left to torch's size-mismatch message."""
    import json

    from umlkit.train import load_config
    from umlkit.train.checkpoint import save_checkpoint
    from umlkit.train.engine import build_model
    cfg = load_config(CONFIG, profile="quick")
    other = load_config(CONFIG, profile="quick", overrides=["model.embed_dim=16"])
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"config": cfg, "config_hash": "x"}, default=str))
    save_checkpoint({"model": build_model(other).state_dict()}, run / "best.pt")
    assert cli.main(["eval", str(run / "best.pt"), "--data", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"checkpoint {run / 'best.pt'} does not fit the model that {run / 'config.json'} describes (size " \
           "mismatch" in err.splitlines()[0]


def test_no_command_is_a_failing_exit_with_the_usage(capsys):
    assert cli.main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: umlkit") and err.rstrip().endswith("umlkit: error: give a command (e.g. umlkit info)")


def test_a_results_folder_that_is_a_file_is_refused_by_name(tmp_path, monkeypatch, capsys):
    """UMLKIT_RESULTS pointing at a file read as '0 of 750 stored' (exit 0); now the variable and value are named."""
    target = tmp_path / "results.txt"
    target.write_text("not a folder")
    monkeypatch.setenv("UMLKIT_RESULTS", str(target))
    assert cli.main(["records", "status", "vptsp", "--table", "Table 6"]) == 2
    assert f"UMLKIT_RESULTS={str(target)!r}: expected a folder (it is a file)" in capsys.readouterr().err
    assert target.read_text() == "not a folder"


def test_split_files_with_a_duplicate_id_or_a_nan_are_neither_written_nor_read(tmp_path, monkeypatch):
    from umlkit.experiments.papers.oodml import split_making
    from umlkit.experiments.splits import committed as class_splits
    good = {"sources": {"cub": {"splits": [{"id": 1, "fid": 1.5}, {"id": 2, "fid": 3.0}]}}}
    path = tmp_path / "splits_quick.json"
    assert split_making.splits_json(good, path).startswith('{"sources":')
    twice = {"sources": {"cub": {"splits": [{"id": 1, "fid": 1.5}, {"id": 1, "fid": 3.0}]}}}
    with pytest.raises(ValueError, match=r"splits_quick.json: source 'cub' numbers two splits alike \(ids \[1, 1\]\)"):
        split_making.splits_json(twice, path)
    nan = {"sources": {"cub": {"splits": [{"id": 1, "fid": float("nan")}]}}}
    with pytest.raises(ValueError, match="NaN or infinite number"):
        split_making.splits_json(nan, path)
    assert not path.exists()
    import json
    path.write_text(json.dumps(twice))                       # a file written by hand with a duplicate id
    monkeypatch.setattr(class_splits, "splits_path", lambda profile: path)
    class_splits.load_splits.cache_clear()
    try:
        with pytest.raises(ValueError, match="numbers two splits alike"):
            class_splits.load_splits("quick")
        path.unlink()
        with pytest.raises(FileNotFoundError, match="umlkit oodml import-splits DATASPLITS_DIR"):
            class_splits.load_splits("full")
    finally:
        class_splits.load_splits.cache_clear()


def test_imported_full_profile_splits_live_beside_the_users_data(tmp_path, monkeypatch):
    """`umlkit oodml import-splits` wrote into configs/ of the installed source tree; the full profile's split file
    is now the user's: <UMLKIT_DATA>/oodml/splits_full.json (the quick profile's stays committed in configs/)."""
    from umlkit.experiments.splits import committed as class_splits
    monkeypatch.setenv("UMLKIT_DATA", str(tmp_path))
    assert class_splits.splits_path("full") == tmp_path.resolve() / "oodml" / "splits_full.json"
    assert class_splits.splits_path("quick").parts[-3:] == ("configs", "oodml", "splits_quick.json")


def test_set_overrides_every_job_and_makes_them_runs_of_their_own(capsys):
    assert cli.main(["records", "status", "vptsp", "--table", "Table 6"]) == 0
    stored = int(re.search(r"(\d+) of (\d+) records stored", capsys.readouterr().out).group(1))
    assert stored >= 9                                        # the committed records
    assert cli.main(["records", "status", "vptsp", "--table", "Table 6", "--set", "optimizer.lr=0.5"]) == 0
    assert re.search(r": 0 of (\d+) records stored", capsys.readouterr().out)     # other keys: nothing stored
    assert cli.main(["records", "status", "vptsp", "--table", "Table 6", "--set", "optimizer.lrr=1"]) == 2
    assert "unknown key 'lrr' in optimizer" in capsys.readouterr().err


def test_full_profile_jobs_of_absent_datasets_are_skipped_with_one_line(tmp_path, monkeypatch, capsys):
    from umlkit.experiments.ops.table_runs import absent_datasets, drop_absent
    (tmp_path / "CUB_200_2011").mkdir()
    monkeypatch.setenv("UMLKIT_DATA", str(tmp_path))
    assert cli.main(["records", "status", "vptsp", "tables", "--profile", "full"]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"skipped, dataset not under {re.escape(str(tmp_path))} .*: cars \(\d+ jobs\), inshop "
                     r"\(\d+ jobs\), sop \(\d+ jobs\)", out)
    full = {"profile": "full", "model": {}, "data": {"root": None, "datasets": ["cub", "cars"]}}
    assert absent_datasets(full) == ["cars"] and absent_datasets({**full, "profile": "quick"}) == []
    assert absent_datasets({"config": {**full, "data": {"root": str(tmp_path / "x"), "datasets": ["cub"]}}}) == ["cub"]
    kept, absent = drop_absent([("t", "a", full), ("t", "b", {**full, "data": {"root": None, "datasets": ["cub"]}})])
    assert [j[1] for j in kept] == ["b"] and absent == {"cars": 1}
    specialists = {src: {**full, "data": {"root": None, "datasets": [src]}} for src in ("cub", "sop")}
    assert absent_datasets(specialists) == ["sop"]     # one configuration per source, each checked
    from umlkit.experiments.ops.table_runs import with_overrides
    (_, _, both), = with_overrides([("t", "s", specialists)], ["data.root=/d"])
    assert [c["data"]["root"] for c in both.values()] == ["/d", "/d"] and specialists["cub"]["data"]["root"] is None


_FULL_DISK = """
import resource, signal, sys, torch
from pathlib import Path
from umlkit.train.checkpoint import CheckpointError, save_checkpoint
run = Path(sys.argv[1])
save_checkpoint({"w": torch.zeros(10)}, run / "latest.pt")            # a small, complete checkpoint
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)                         # past the limit a write fails (EFBIG)
resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))         # as a disk with 200 kB free would
try:
    save_checkpoint({"w": torch.zeros(1_000_000)}, run / "latest.pt")
except CheckpointError as err:
    print(err)
"""


def test_a_checkpoint_that_does_not_fit_on_the_disk_leaves_no_partial_file(tmp_path):
    """A full disk during a checkpoint left `.latest.pt.tmp` and torch's raw "enforce fail"; now the partial file is
    removed, the error names the checkpoint and the likely cause, and the last complete checkpoint is intact."""
    import subprocess
    import sys

    import torch
    run = tmp_path / "run"
    out = subprocess.run([sys.executable, "-c", _FULL_DISK, str(run)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    msg = out.stdout.strip()
    assert msg.startswith(f"could not write the checkpoint {run / 'latest.pt'} (") and "is the disk full" in msg, msg
    assert msg.endswith(f"{run / 'latest.pt'} is still the last complete checkpoint."), msg
    assert sorted(p.name for p in run.iterdir()) == ["latest.pt"]
    assert torch.load(run / "latest.pt", weights_only=True)["w"].shape == (10,)
