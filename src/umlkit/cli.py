# size: the parsers of every command with thin handlers; one file keeps the command tree readable
"""The ``umlkit`` command line: ``umlkit --help`` lists the commands."""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path

import umlkit
from umlkit._paths import data_root, repo_root, results_root
from umlkit._yaml import safe_load_unique


def _positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _seed(text: str) -> int:
    """argparse type: a seed, an integer from 0 to 2**32 - 1 (NumPy's range)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number from 0 to 4294967295, got {text!r}") from None
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"expected a whole number from 0 to 4294967295, got {value}")
    return value


def _per_core(text: str) -> int:
    """argparse type: an integer from 1 to this machine's core count (threads or single-thread workers: more than
    one per core only slows each run, and a huge count exhausts memory before it starts)."""
    value = _positive_int(text)
    cores = os.cpu_count() or 1
    if value > cores:
        raise argparse.ArgumentTypeError(f"expected at most {cores} (this machine's cores: one thread or worker per "
                                         f"core), got {value}")
    return value


def _cmd_info(args: argparse.Namespace) -> int:
    import torch

    info = {
        "umlkit": umlkit.__version__,
        "torch": torch.__version__,
        "cuda_available": torch.cuda.is_available(),
        "repo_root": str(repo_root()) if repo_root() else None,
        "data_root": str(data_root()),
        "results_root": str(results_root()),
    }
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        for key, value in info.items():
            print(f"{key:>14}: {value}")
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    """Evaluate saved embeddings (.npz with 'embeddings' and 'labels', optional 'gallery', 'gallery_labels')."""
    import numpy as np

    from umlkit.metrics import evaluate_retrieval

    if Path(args.file).exists() and not Path(args.file).is_file():   # a folder, or a pipe np.load would wait on
        print(f"umlkit: error: {args.file} is not a regular file; expected an .npz file with arrays 'embeddings' and "
              "'labels' (numpy.savez)", file=sys.stderr)
        return 2
    try:
        blob = np.load(args.file, allow_pickle=False)
        if not hasattr(blob, "files"):
            raise ValueError("a single .npy array, not an .npz archive")
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:   # (an empty or a truncated file)
        reason = "not an .npz archive" if "pickled" in str(err) else str(err) or type(err).__name__
        print(f"umlkit: error: cannot read {args.file}: {reason}; expected an .npz file with arrays 'embeddings' "
              "and 'labels' (numpy.savez)", file=sys.stderr)
        return 2
    missing = [k for k in ("embeddings", "labels") if k not in blob]
    if missing:
        print(f"umlkit: error: {args.file} lacks array(s) {missing}; expected 'embeddings' and 'labels' "
              "(and optionally 'gallery', 'gallery_labels')", file=sys.stderr)
        return 2
    arrays = {}
    for name in ("embeddings", "labels", "gallery", "gallery_labels"):
        if name in blob:
            try:
                arrays[name] = blob[name]
            except ValueError:   # numpy refuses object arrays without pickle: ragged rows or Python objects
                kind = "numeric 2-D array" if name in ("embeddings", "gallery") else "1-D array of class labels"
                print(f"umlkit: error: {args.file}: array {name!r} is an object array (rows of different lengths, "
                      f"or Python objects); expected a {kind}", file=sys.stderr)
                return 2
    gallery, gallery_labels = arrays.get("gallery"), arrays.get("gallery_labels")
    metrics = args.metrics.split(",") if args.metrics else None
    if args.explain:
        _explain_search(arrays["embeddings"], gallery)
    try:
        res = evaluate_retrieval(arrays["embeddings"], arrays["labels"], gallery, gallery_labels, metrics=metrics)
    except (ValueError, TypeError) as err:
        # the library names the arrays as its arguments; the file calls them embeddings and labels
        text = re.sub(r"\bquery\b(?= (has|must))", "embeddings", str(err).replace("query_labels", "labels"))
        hint = "" if metrics or not re.search(r"R@|NMI|mAP", text) else \
            " (no --metrics: the default set R@1,2,4,8, MAP@R, RP, mAP@1000, NMI; choose with --metrics R@1,MAP@R)"
        raise type(err)(f"{args.file}: {text}{hint}") from err
    # JSON has no NaN (MAP@R of a set without positives): null
    print(json.dumps({k: (None if isinstance(v, float) and v != v else v) for k, v in res.items()}, indent=2))
    return 0


def _explain_search(embeddings, gallery) -> None:
    """Say on stderr which kernel the search will run and why (``evaluate --explain``); stdout keeps the JSON."""
    from umlkit.metrics.knn import explain_search, self_search_size
    shape = getattr(embeddings, "shape", ())
    if len(shape) != 2:
        return   # the evaluation names the bad array
    n, dim = shape
    m = n if gallery is None else getattr(gallery, "shape", (0,))[0]
    self_search = gallery is None and self_search_size(n)
    choice = explain_search(self_search, dim, n * m)
    kind = "self-search" if self_search else "search"
    from umlkit.metrics.deep_ap import STREAM_MIN_GALLERY, streams
    print(f"search kernel: {choice.kernel} for a {kind} of {n:,} x {m:,} items: {choice.reason}. (mAP@1000 on a "
          f"gallery of {STREAM_MIN_GALLERY:,} items or more is read from {streams()[1]}.)", file=sys.stderr)


def _cmd_data_check(args: argparse.Namespace) -> int:
    import pandas as pd

    from umlkit.data.check import CorruptImagesError, check_datasets

    root = args.root or data_root()
    try:
        table = check_datasets(root, args.datasets.split(",") if args.datasets else None, verify=args.verify_images,
                               on_error=args.on_error, counts=not args.no_count_check)
    except CorruptImagesError as err:
        print(f"umlkit: error: {err}", file=sys.stderr)
        return 1
    with pd.option_context("display.max_colwidth", 120, "display.width", 200):
        print(f"data root: {root}")
        print(table.drop(columns=["detail"]).to_string())
        for name, row in table.iterrows():
            if row["detail"]:
                print(f"\n[{name}] {row['status']}: {row['detail']}")
        weights_ok = _print_weights() if args.weights else True
    return 0 if (table["status"] == "found").all() and weights_ok else 1


def _print_weights() -> bool:
    """The full profile's pretrained weights per backbone (experiments.weights_identity); False on a mismatch."""
    from umlkit.experiments.ops.weights_identity import weights_report
    report, notes = weights_report("full")
    print("\nweights the full profile trains from (pins: configs/weights.yaml; else the first run's hash):")
    print(report.to_string(index=False) if not report.empty else "  none listed")
    for note in notes:
        print(f"  {note}")
    return not report["status"].str.startswith("MISMATCH").any()


def _cmd_data_make_mini(args: argparse.Namespace) -> int:
    import time

    from umlkit.data import make_mini, mini_table

    root = args.root or (data_root() / ("uml_mini" if args.size == "default" else f"uml_mini_{args.size}"))
    from umlkit.results import check_writable
    check_writable(Path(root), _MINI_BYTES[args.size], f"data make-mini --root {root}", "the tree needs",
                   "UML-Mini's images and annotation files", "nothing was generated")
    t0 = time.perf_counter()
    make_mini(root, seed=args.seed, overwrite=args.overwrite, progress=True, size=args.size)
    print(mini_table(args.size).drop(columns=["class-defining", "nuisance"]).to_string())
    print(f"UML-Mini (seed {args.seed}) at {root} ({time.perf_counter() - t0:.1f} s)")
    return 0


def _cmd_data_pretrain_mini(args: argparse.Namespace) -> int:
    from umlkit.models.pretrain import pretrain_tiny_vit

    if args.out is not None:   # the weights, heads and report (about 3 MB) must fit before the training
        from umlkit.results import check_writable
        check_writable(Path(args.out), 16 * 2**20, f"data pretrain-mini --out {args.out}", "the files need",
                       "weights, heads and report", "nothing was trained")
    report = pretrain_tiny_vit(args.out, epochs=args.epochs, seed=args.seed, recipe=args.recipe,
                               overwrite=args.overwrite, device=args.device)
    print(json.dumps(report, indent=1))
    return 0


def load_plugins(paths) -> None:
    """Import each user file (``--plugin``) so that its ``register_loss`` / ``register_method`` calls run before a
    configuration names what it registers; a missing file or one that fails on import is named."""
    import importlib.util
    for i, path in enumerate(paths or []):
        file = Path(path).expanduser()
        if not file.is_file() or file.suffix != ".py":
            raise ValueError(f"--plugin {path}: expected an existing .py file that registers losses or methods")
        spec = importlib.util.spec_from_file_location(f"umlkit_plugin_{i}_{file.stem}", file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        try:
            spec.loader.exec_module(module)
        except (Exception, SystemExit) as err:   # a plugin that calls sys.exit() must not end the command with 0
            del sys.modules[spec.name]
            raise ValueError(f"--plugin {path} failed on import ({type(err).__name__}: {err}); nothing was run") \
                from err


def _plugin_blame(err: BaseException, plugins) -> str | None:
    """Where in a ``--plugin`` file ``err`` was raised: "FILE:LINE, CLASS.FUNCTION" of the deepest plugin frame of its
    traceback (None when no plugin frame is on it)."""
    files = {str(Path(p).expanduser().resolve()) for p in plugins or []}
    found, tb = None, err.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if str(Path(frame.f_code.co_filename).resolve()) in files:
            owner = frame.f_locals.get("self")
            where = f"{type(owner).__name__}.{frame.f_code.co_name}" if owner is not None else frame.f_code.co_name
            found = f"{frame.f_code.co_filename}:{tb.tb_lineno}, {where}"
        tb = tb.tb_next
    return found


def _cmd_train(args: argparse.Namespace) -> int:
    try:
        return _train(args)
    except Exception as err:   # a plugin's own failure names the plugin file and class it came from
        blame = _plugin_blame(err, args.plugin)
        if blame is None:
            raise
        raise RuntimeError(f"the plugin code at {blame} failed: {type(err).__name__}: {err}") from err


def _train(args: argparse.Namespace) -> int:
    from umlkit.train import fit, load_config

    load_plugins(args.plugin)
    try:
        cfg = load_config(args.config, profile=args.profile, overrides=args.set)
    except (KeyError, ValueError, TypeError) as err:
        msg = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
        raise ValueError(msg if str(args.config) in str(msg) else f"{args.config}: {msg}") from err
    if args.run_dir is None or Path(args.run_dir).is_file():   # a fresh folder of its own (or fit's own error)
        result = fit(cfg, run_dir=args.run_dir, resume=args.resume)
    else:   # one writer per run folder; the folder must take a checkpoint before the first step
        from umlkit.results import check_writable, owner_lock
        check_writable(Path(args.run_dir), _NEED_BYTES[args.profile or "quick"], f"--run-dir {args.run_dir}")
        run = Path(args.run_dir)   # the lock beside the folder: fit writes only into a new or empty one
        with owner_lock(run.parent / f".{run.name}.umlkit-lock", f"the run folder {args.run_dir}"):
            result = fit(cfg, run_dir=args.run_dir, resume=args.resume)
    print(f"run folder: {result.run_dir}")
    if result.last is not None:
        print(result.summary(cfg["train"]["metrics"][0]).round(2).to_string())
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    from umlkit.data import build_transforms, load_unified
    from umlkit.metrics.retrieval import parse_metrics
    from umlkit.train import evaluate_model, load_checkpoint

    load_plugins(args.plugin)
    from umlkit.train.engine import build_model, check_registered

    if args.metrics:   # checked before the test set is embedded
        parse_metrics(args.metrics.split(","), ())
    ckpt = Path(args.checkpoint)
    if not ckpt.is_file():
        raise FileNotFoundError(f"checkpoint {ckpt} does not exist (expected a run folder's last.pt or best.pt)")
    cfg_file = ckpt.parent / "config.json"
    if not cfg_file.is_file():
        raise FileNotFoundError(f"{cfg_file} not found; umlkit eval needs the run folder's config.json beside the "
                                f"checkpoint {ckpt.name}")
    try:
        saved = json.loads(cfg_file.read_text())
        cfg = saved["config"]
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{cfg_file}: not a umlkit run configuration ({err})") from err
    if not isinstance(cfg, dict) or not all(isinstance(cfg.get(k), dict) for k in ("model", "data", "train")):
        raise ValueError(f"{cfg_file}: not a umlkit run configuration (expected its config to hold the sections "
                         f"model, data and train)")
    check_registered(cfg, cfg_file, saved.get("plugins"))   # a plugin's method or loss: the file to pass
    state = load_checkpoint(ckpt)
    num_classes = state["model"]["proxy_bias"].shape[0] if cfg["model"]["method"] == "vptsp" else None
    model = build_model(cfg, num_classes)
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as err:
        from umlkit.models.backbones import state_dict_mismatch
        first = state_dict_mismatch(err)
        raise ValueError(f"checkpoint {ckpt} does not fit the model that {cfg_file} describes ({first}); was the "
                         f"checkpoint copied from another run folder?") from err
    names = args.datasets.split(",") if args.datasets else cfg["data"]["datasets"]
    test = load_unified(args.data, "test", names, transform=build_transforms(cfg["data"]["transform"],
                                                                              model.data_config, train=False),
                        expected=None if args.no_count_check else "auto")
    metrics = args.metrics.split(",") if args.metrics else cfg["train"]["metrics"]
    table = evaluate_model(model, test, metrics, device=args.device, progress=True)
    print(table.round(2).to_string())
    return 0


def _cmd_stale(args: argparse.Namespace) -> int:
    """Retrain exactly the stored records whose data, weights or code fingerprint changed."""
    from umlkit._progress import tqdm
    from umlkit.experiments.runs.records import recompute, stale_records
    stale = stale_records(args.profile, _records_folder(args.paper) if args.paper else None)
    if not stale:
        print(f"no stale records in the {args.profile} profile" + (f" of {args.paper}" if args.paper else ""))
        return 0
    for rec in stale:
        print(f"stale ({', '.join(rec['stale'])} changed): {rec['path']}")
    if args.dry_run:
        print(f"{len(stale)} stale record(s); run without --dry-run to retrain them")
        return 0
    for rec in tqdm(stale, desc="retraining stale records", unit="record"):
        recompute(rec, log=None)
    print(f"retrained {len(stale)} record(s)")
    return 0


def _job_list(paper: str, name: str | None, profile: str, table: str | None = None):
    """A registered paper's named job list (:mod:`umlkit.experiments.tables.registry`), or the runs of one of its
    tables."""
    from umlkit.experiments.tables.registry import get_paper
    try:
        entry = get_paper(paper)   # an unknown paper is named before anything else
    except KeyError as err:
        raise ValueError(err.args[0]) from None
    if (name is None) == (table is None):
        raise ValueError(f"give {paper}'s job list ({', '.join(entry.job_list_names)}) or --table NAME, one of the two"
                         + (f"; got both {name!r} and --table {table!r}" if name else ""))
    try:
        if table is not None:
            from umlkit.experiments.ops.table_runs import table_jobs
            return table_jobs(paper, table, profile)
        from umlkit.experiments.ops.second_edition import SECOND_EDITION, ordered_jobs
        if name.split(":")[0] == SECOND_EDITION:   # every run without a current record, in the plan's order
            return ordered_jobs(paper, profile, name)
        return entry.job_list(name, profile)
    except KeyError as err:
        raise ValueError(err.args[0]) from None


def _jobs_name(args: argparse.Namespace) -> str:
    return args.jobs if args.jobs else f"--table {args.table!r}"


def _records_folder(paper: str) -> str:
    """The records folder a registered paper's job lists write to (the regime map's records live with PUMA's)."""
    from umlkit.experiments.tables.registry import get_paper
    return get_paper(paper).records_folder


def _parse_worker(text: str) -> tuple[int, int]:
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise ValueError(f"--worker expects I/N (e.g. 0/2), got {text!r}") from None
    if not 0 <= i < n:
        raise ValueError(f"--worker {text}: I must be in 0..N-1")
    return i, n


def _prepared_jobs(args: argparse.Namespace) -> list[tuple]:
    """The selected job list with the ``--set`` overrides applied, less the full-profile jobs whose datasets are
    absent (one line says which and how many)."""
    from umlkit.experiments.ops.table_runs import drop_absent, with_overrides
    jobs = with_overrides(_job_list(args.paper, args.jobs, args.profile, args.table), args.set)
    jobs, absent = drop_absent(jobs)
    if absent:
        from umlkit._paths import data_root
        names = ", ".join(f"{d} ({n} job{'s' if n > 1 else ''})" for d, n in sorted(absent.items()))
        print(f"skipped, dataset not under {data_root()} (UMLKIT_DATA, or --set data.root=...): {names}; their "
              f"rows stay unmeasured (`umlkit data check` says where to get them)")
    return jobs


def _cmd_records_status(args: argparse.Namespace) -> int:
    jobs = _prepared_jobs(args)
    stored, damaged = _stored(jobs, args.profile)
    have = len(stored)
    queued = ""
    if args.list:
        from umlkit.cli_cluster import print_queue
        from umlkit.experiments.ops.table_runs import job_status
        counts = print_queue(jobs, job_status(jobs, args.profile), args.profile)
        queued = "".join(f", {n} {state}" for state, n in sorted(counts.items())
                         if state not in ("stored", "missing", "damaged"))
    print(f"{args.paper} {_jobs_name(args)} ({args.profile}): {have} of {len(jobs)} records stored, "
          f"{len(jobs) - have} to train{queued}")
    return _report_unreadable([why for _, why in damaged])


def _print_job_status(status) -> None:
    """One line per job: "stored ", "missing" or "damaged", then its label."""
    for _, line in status.iterrows():
        state = "damaged" if line.get("damaged") else "stored " if line["stored"] else "missing"
        print(f"{state}  {line['label']}")


def _stored(jobs, profile) -> tuple[list[Path], list[tuple[Path, str]]]:
    """The usable stored records of ``jobs``, and (path, why) of each damaged one (truncated, edited, or another run
    than its name promises: counted as neither stored nor to train)."""
    from umlkit.experiments.runs.records import DamagedRecord, find_record, load_record, normalise_key
    stored, damaged = [], []
    for job in jobs:
        path = find_record(normalise_key(job[2]), profile)
        if path is None:
            continue
        try:
            load_record(path)
            stored.append(path)
        except DamagedRecord as err:
            damaged.append((path, str(err)))
    return stored, damaged


def _report_unreadable(broken: list[str]) -> int:
    if not broken:
        return 0
    raise ValueError(f"{len(broken)} stored record(s) are damaged and are not used (`umlkit records verify` lists "
                     f"them; `umlkit records train ... --replace-damaged` trains their runs again and keeps each bad "
                     f"file beside it), first: {broken[0]}")


def _cmd_records_verify(args: argparse.Namespace) -> int:
    """``records verify``: every stored record of the profile (of one paper's folder) that cannot be used; with
    ``--sample N``, N of them retrained here and compared field by field
    (:mod:`umlkit.experiments.runs.record_check`)."""
    from umlkit.experiments.runs.records import damaged_records, list_records
    folder = _records_folder(args.paper) if args.paper else None
    if args.sample:
        return _verify_sample(args, folder)
    found = damaged_records(args.profile, folder)
    for path, why in found:
        print(f"damaged: {path}\n    {why}")
    total = len(list_records(args.profile, folder))
    print(f"{total} record(s) checked, {len(found)} damaged" + (f" ({args.paper})" if args.paper else ""))
    return 1 if found else 0


def _verify_sample(args: argparse.Namespace, folder: str | None) -> int:
    """``records verify --sample N``: retrain N stored records on this machine, each field against its cell's seed
    spread; exit 1 when a metric lies outside it."""
    import re

    from umlkit.experiments.runs.record_check import TOLERANCE_SDS, retrain_and_compare, sample_records
    from umlkit.experiments.runs.records import DamagedRecord, list_records, load_record
    records = []
    for path in list_records(args.profile, folder):
        try:
            records.append(load_record(path))
        except DamagedRecord:
            continue   # listed by `records verify`; never retrained as though it were stored
    pool = records
    if args.match:
        try:
            pattern = re.compile(args.match)
        except re.error as err:
            raise ValueError(f"--match {args.match!r} is not a regular expression: {err}") from err
        pool = [r for r in records if pattern.search(r["label"])]
    chosen = sample_records(pool, args.sample, args.seed)
    found = retrain_and_compare(records, chosen)
    for c in found:
        print(f"{c.worst}: {c.label} ({c.differing} of {c.fields} fields differ)  {c.path}")
        for key, old, new, s, kind in c.judged:
            spread = "no seed spread" if not s else f"seed s.d. {s:.3g}, tolerance {TOLERANCE_SDS * s:.3g}"
            print(f"    {key}: stored {old:g}, retrained {new:g} (diff {new - old:+.3g}; {spread}): {kind}")
    outside = sum(c.worst == "outside the seed spread" for c in found)
    same = sum(c.worst == "identical" for c in found)
    metrics = sum(c.worst.startswith("metrics identical") for c in found) + same
    print(f"{len(found)} record(s) retrained: {metrics} identical in every metric ({same} in every field), {outside} "
          f"with a metric outside the seed spread "
          f"(tolerance: {TOLERANCE_SDS:.2f} x the cell's seed s.d., the 95 % range of two independent seeds' "
          f"difference)")
    return 1 if outside else 0


# free space a run needs before it starts (its checkpoints and records; the full profile's ViT-S/16 checkpoints with
# optimizer state are ~0.5 GB, the tiny ViT's a few MB)
_NEED_BYTES = {"quick": 64 * 2**20, "full": 2 * 2**30}
# UML-Mini's trees on disk with headroom (measured: the default tree is 53 MB)
_MINI_BYTES = {"default": 128 * 2**20, "large": 256 * 2**20}


def _cmd_records_train(args: argparse.Namespace) -> int:
    """Fill a paper's job list with records; N processes with --worker I/N share the list without a lock."""
    import time

    import torch

    from umlkit._progress import tqdm
    from umlkit.experiments.runs.records import cached_record, find_record, normalise_key
    i, n = _parse_worker(args.worker)
    torch.set_num_threads(args.threads)
    import re
    jobs = _prepared_jobs(args)
    if args.match:
        try:
            pattern = re.compile(args.match)
        except re.error as err:
            raise ValueError(f"--match {args.match!r} is not a regular expression: {err}") from err
        every, jobs = jobs, [j for j in jobs if pattern.search(j[1])]
        if not jobs and every:
            raise ValueError(f"--match {args.match!r} matches none of the {len(every)} job labels of {args.paper} "
                             f"{_jobs_name(args)} (e.g. {every[0][1]!r})")
    if args.executor == "slurm":
        if n > 1:
            raise ValueError(f"--worker {args.worker} goes with the local executor; Slurm splits the list itself")
        from umlkit.cli_cluster import submit_to_slurm
        return submit_to_slurm(args, args.paper, jobs, f"{args.paper} {_jobs_name(args)}")
    jobs = [j for k, j in enumerate(jobs) if k % n == i]
    damaged = _stored(jobs, args.profile)[1]
    if damaged and not args.replace_damaged:   # before training: the user decides what to do with them
        _report_unreadable([why for _, why in damaged])
    if damaged and not args.dry_run:
        from umlkit.experiments.runs.records import set_aside
        for path, _ in damaged:
            print(f"damaged {path.name}: kept beside as {set_aside(path).name}; its run is trained again")
    gone = {str(p) for p, _ in damaged}
    from umlkit.experiments.ops.second_edition import SECOND_EDITION, run_state
    renew = (args.jobs or "").split(":")[0] == SECOND_EDITION   # no current record: a stale one is replaced
    todo = [j for j in jobs if (run_state(j[2], args.profile) != "current" if renew else
                                (f := find_record(normalise_key(j[2]), args.profile)) is None or str(f) in gone)]
    folder = _records_folder(args.paper)
    print(f"worker {i}/{n}: {len(jobs)} jobs, {len(jobs) - len(todo)} already stored, {len(todo)} to train")
    if args.dry_run:   # what the list, --match and --worker select
        from umlkit.experiments.ops.table_runs import job_status
        _print_job_status(job_status(jobs, args.profile))
        print(f"worker {i}/{n}: nothing was run (--dry-run)")
        return 0
    from umlkit._paths import results_root
    from umlkit.experiments.ops.preflight import preflight
    from umlkit.results import Busy, check_writable
    preflight(todo, args.profile)   # every reason a run would be refused, at once, before the first one trains
    if todo:   # before the first run: a finished run must not be lost at its write
        check_writable(results_root(args.profile) / "records", _NEED_BYTES[args.profile] + len(todo) * 2**20,
                       f"records train {args.paper}")
    start, busy = time.perf_counter(), []
    for table, label, key, *runner in tqdm(todo, desc=f"{args.paper} {args.jobs or args.table} [{i}/{n}]", unit="run"):
        # a job names its runner when it is not the default (e.g. the unified setting's plain "train" runs)
        try:
            cached_record(folder, table, label, key, runner[0] if runner else args.runner, args.profile,
                          rerun="stale" if renew else False, log=None)
        except Busy as err:   # another process trains this very run: leave it to that one
            busy.append(label)
            print(f"skipped {label}: {err}", file=sys.stderr)
    print(f"worker {i}/{n}: trained {len(todo) - len(busy)} record(s) in {time.perf_counter() - start:.0f} s"
          + (f"; {len(busy)} left to the process that holds them" if busy else ""))
    return 1 if busy else 0


def _cmd_oodml_import(args: argparse.Namespace) -> int:
    from umlkit._paths import data_root
    from umlkit.experiments.papers import oodml
    path = oodml.import_published_splits(args.pkl_dir, args.root or data_root(), overwrite=args.overwrite)
    print(f"wrote {path}")
    return 0


def _cmd_book_sync(args: argparse.Namespace) -> int:
    from umlkit._book import sync_colab
    changed = sync_colab(args.root, check=args.check)
    for path in changed:
        print(f"{'out of date' if args.check else 'updated'}: {path}")
    if args.check and changed:
        print("umlkit book sync-colab: run it without --check to write them", file=sys.stderr)
        return 1
    if not changed:
        print("every chapter's Colab badge and set-up cell match _config.yml")
    return 0


def _cmd_book_toc(args: argparse.Namespace) -> int:
    """``book toc``: the chapters registered papers name that _toc.yml lacks (``--write`` appends them)."""
    from umlkit._book import book_chapters, missing_toc_entries
    missing = missing_toc_entries(args.root)
    for stem, path in book_chapters(args.root).items():
        print(f"{stem}: {path}")
    if not missing:
        print("_toc.yml lists every registered paper's chapters")
        return 0
    print(f"not in _toc.yml: {', '.join(missing)}")
    if not args.write:
        print("umlkit book toc: run it with --write to append them", file=sys.stderr)
        return 1
    from umlkit.results import atomic_write
    toc = Path(args.root) / "_toc.yml"
    atomic_write(toc, toc.read_text().rstrip("\n") + "\n" + "".join(f"  - file: {m}\n" for m in missing))
    print(f"appended {len(missing)} chapter(s) to {toc}")
    return 0


def _cmd_book_check(args: argparse.Namespace) -> int:
    from umlkit._book import check_html
    found = check_html(args.build_dir)
    for f in found:
        print(f"{f['page']}: {f['defect']}: {f['excerpt']}")
    pages = {f["page"] for f in found}
    print(f"{len(found)} defect(s) on {len(pages)} page(s)" if found else f"{args.build_dir}: no defects found")
    return 1 if found else 0


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from umlkit.reproduce import reproduce

    if args.table is not None:
        return _cmd_reproduce_table(args)
    if args.executor == "slurm":
        if not args.paper or args.stale or args.chapters:
            raise ValueError("--executor slurm goes with --table PAPER:TABLE or --paper PAPER (its tables' missing "
                             "runs), without --stale or --chapters")
        from umlkit.cli_cluster import submit_to_slurm
        from umlkit.experiments.ops.table_runs import drop_absent, with_overrides
        jobs, absent = drop_absent(with_overrides(_job_list(args.paper, "tables", args.profile), args.set))
        if absent:
            print(f"skipped, dataset absent: {', '.join(f'{d} ({n} runs)' for d, n in sorted(absent.items()))}")
        return submit_to_slurm(args, args.paper, jobs, f"{args.paper} tables")
    if args.workers > 1:
        raise ValueError(f"--workers {args.workers} goes with --table (the table's missing runs); chapters run one "
                         f"at a time, and `umlkit records train PAPER LIST --worker I/N` splits a job list")
    if not args.stale and args.dry_run:
        # (without --stale, --dry-run would be ignored and the chapters executed)
        raise ValueError("--dry-run goes with --stale or --table (list what would be trained); nothing was run")
    if args.stale:
        code = _cmd_stale(args)
        if code or not args.chapters:
            return code
    chapters = args.chapters.split(",") if args.chapters else None
    if args.paper and not args.stale:   # the registered paper's chapters
        from umlkit.experiments.tables.registry import get_paper
        try:
            chapters = list(get_paper(args.paper).chapters)
        except KeyError as err:
            raise ValueError(err.args[0]) from None
        if args.chapters:
            raise ValueError("--paper (without --stale) runs the paper's chapters: give --paper or --chapters")

    import yaml
    params = {}
    for item in args.parameter:
        if "=" not in item:
            print(f"umlkit: error: -p expects NAME=VALUE (a YAML value), got {item!r}", file=sys.stderr)
            return 2
        name, value = item.split("=", 1)
        if name.strip() == "PROFILE":   # reproduce sets it from --profile; the -p value was dropped without a word
            raise ValueError(f"-p {item!r}: choose the profile with --profile {value.strip() or 'quick|full'}")
        try:
            params[name.strip()] = safe_load_unique(value)
        except yaml.YAMLError as err:
            raise ValueError(f"-p {item!r}: the value is not valid YAML ({' '.join(str(err).split())})") from err
    table = reproduce(profile=args.profile, chapters=chapters, parameters=params)
    print(table.to_string())
    return 0 if (table["status"] == "ok").all() else 1


def _minutes(seconds: float) -> str:
    if seconds >= 5400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def _print_estimate(status, workers: int = 1) -> None:
    """The stored runs' wall time and what the missing ones should take by it (:func:`time_estimate`)."""
    from umlkit.experiments.ops.table_runs import time_estimate
    est = time_estimate(status)
    missing, stored = int((~status["stored"]).sum()), int(status["stored"].sum())
    line = (f"stored runs took {_minutes(est['stored'])} in all" + (f" ({est['timed']} of {stored} timed)"
            if est["timed"] < stored else "")) if est["timed"] else "no stored run has a wall time"
    if missing and est["timed"]:
        on = f"on {workers} workers" if workers > 1 else "on one worker"
        line += (f"; the {missing} missing should take about {_minutes(est['missing'] / workers)} {on} "
                 f"({est['by_row']} timed by their own row's stored runs, "
                 + (f"{est['by_runner']} by their runner's, " if est["by_runner"] else "")
                 + "the rest by the table's median)")
    elif missing:
        line += (f", so no estimate for the {missing} missing (benchmarks/README.md's GPU-hours table gives the "
                 f"full profile's tables)")
    print(line)


def _cmd_reproduce_table(args: argparse.Namespace) -> int:
    """``reproduce --table [PAPER:]TABLE``: train exactly the table's missing runs (in ``--workers`` processes), then
    save and print its cells and claims (``--dry-run``: list its runs, stored or missing, with the time the stored
    wall times predict, and train nothing)."""
    from umlkit.experiments.ops.table_runs import (
        drop_absent,
        job_status,
        reproduce_table,
        table_jobs,
        table_spec,
        with_overrides,
    )
    given = args.table
    if ":" in args.table:
        paper, table = (part.strip() for part in args.table.split(":", 1))
        if args.paper and args.paper != paper:
            raise ValueError(f"--paper {args.paper} --table {given!r}: two papers; give one of them")
        args.paper, args.table = paper, table
    if not args.paper or args.stale or args.chapters:
        raise ValueError(f"--table {given!r} goes with --paper (the paper whose table it is) or names it as "
                         f"PAPER:TABLE (e.g. --table vptsp:table6), without --stale or --chapters")
    try:
        args.table = table_spec(args.paper, args.table, args.profile).table   # 'table6' -> 'Table 6'
    except KeyError as err:
        raise ValueError(err.args[0]) from None
    jobs, absent = drop_absent(with_overrides(table_jobs(args.paper, args.table, args.profile), args.set))
    if absent:
        print(f"skipped, dataset absent: {', '.join(f'{d} ({n} runs)' for d, n in sorted(absent.items()))}")
    if args.executor == "slurm":   # the missing runs go to Slurm; the table is read once their records exist
        from umlkit.cli_cluster import submit_to_slurm
        code = submit_to_slurm(args, args.paper, jobs, f"{args.paper} {args.table}")
        if not args.dry_run:
            print(f"when the array has finished: umlkit reproduce --table {args.paper}:{given.split(':')[-1]} "
                  f"--profile {args.profile} (trains nothing that is stored; writes the table's CSV)")
        return code
    status = job_status(jobs, args.profile)
    missing = int((~status["stored"]).sum())
    if args.dry_run:
        _print_job_status(status)
        _print_estimate(status)
        from umlkit._paths import results_root
        csv = results_root(args.profile) / f"{args.paper}_{table_spec(args.paper, args.table, args.profile).slug}.csv"
        print(f"{args.paper} {args.table} ({args.profile}): {len(jobs)} runs, {missing} to train; nothing was run "
              f"(the run would write {csv})")
        return 0
    damaged = [why for why in status["damaged"] if why]
    if damaged:   # before training, as `records train`: the user decides what becomes of the bad files
        _report_unreadable(damaged)
    print(f"{args.paper} {args.table} ({args.profile}): {len(jobs)} runs, {missing} to train")
    _print_estimate(status, args.workers)
    from umlkit.experiments.ops.preflight import preflight
    preflight([j for j, stored in zip(jobs, status["stored"]) if not stored], args.profile)
    if missing:   # before the first run: a finished run must not be lost at its write
        from umlkit._paths import results_root
        from umlkit.results import check_writable
        check_writable(results_root(args.profile) / "records", _NEED_BYTES[args.profile] + missing * 2**20,
                       f"reproduce --table {args.paper}:{args.table}")
    if missing and args.workers > 1:
        from umlkit.experiments.ops.table_runs import train_in_workers
        train_in_workers(args.paper, args.table, args.profile, args.set, args.workers, jobs)
    path, cmp, claims = reproduce_table(args.paper, args.table, args.profile, overrides=args.set)
    print(f"wrote {path} ({len(cmp)} measured cells)")
    if not claims.empty:
        import pandas as pd
        with pd.option_context("display.max_colwidth", 90, "display.width", 160):
            view = claims.assign(paper=claims["paper A"] - claims["paper B"]).rename(columns={"gap": "measured"})
            print(view[["claim", "paper", "measured", "p", "verdict"]].round(3).to_string(index=False))
        print("verdicts unadjusted; the book's chapters and scoreboard adjust them over the paper's claims (Holm)")
    return 0


def _add_run_commands(sub) -> None:
    """The subcommands info, evaluate, train and eval: one configuration or one checkpoint."""
    p = sub.add_parser("info", help="print versions and the resolved data/results folders")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_info)
    p = sub.add_parser("evaluate", help="retrieval metrics of embeddings saved in an .npz file")
    p.add_argument("file", help="npz with arrays 'embeddings', 'labels' [, 'gallery', 'gallery_labels']")
    p.add_argument("--metrics", default=None, help="comma-separated, e.g. R@1,MAP@R (default: all)")
    p.add_argument("--explain", action="store_true",
                   help="say on stderr which search kernel (fp32, bf16, int8) this machine runs for the file and why")
    p.set_defaults(func=_cmd_evaluate)

    p = sub.add_parser("train", help="train one configuration (YAML) and evaluate it")
    p.add_argument("config", help="configs/<paper>/<experiment>.yaml")
    p.add_argument("--profile", choices=("quick", "full"), default=None)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config entry, e.g. --set optimizer.lr=1e-4 (repeatable)")
    p.add_argument("--run-dir", default=None, help="output folder (default results/<profile>/runs/<name>-<hash>)")
    p.add_argument("--resume", nargs="?", const=True, default=False, metavar="CHECKPOINT",
                   help="continue from the run folder's latest.pt, or from the CHECKPOINT given "
                        "(e.g. the run folder's previous.pt after a crash truncated latest.pt)")
    p.add_argument("--plugin", action="append", default=[], metavar="FILE.py",
                   help="a Python file to import first, e.g. one that registers a loss (umlkit.losses.register_loss) "
                        "or a method (umlkit.models.register_method) the config names (repeatable)")
    p.set_defaults(func=_cmd_train)
    p = sub.add_parser("eval", help="evaluate a checkpoint (its run folder's config.json rebuilds the model)")
    p.add_argument("checkpoint", help="path to latest.pt / best.pt")
    p.add_argument("--data", required=True, help="data root holding the datasets")
    p.add_argument("--datasets", default=None, help="comma-separated (default: the run's datasets)")
    p.add_argument("--metrics", default=None, help="comma-separated, e.g. R@1,MAP@R")
    p.add_argument("--plugin", action="append", default=[], metavar="FILE.py",
                   help="a Python file to import first (the file that registered the run's loss or method)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--no-count-check", action="store_true", help="accept subsets (no dataset count check)")
    p.set_defaults(func=_cmd_eval)


def _add_reproduce(sub) -> None:
    """The subcommands reproduce: execute chapters, or retrain stale records."""
    p = sub.add_parser("reproduce", help="execute the book's chapters with papermill and summarise")
    p.add_argument("--profile", choices=("quick", "full"), default="quick")
    p.add_argument("--chapters", default=None, help="comma-separated chapter names (default: all in _toc.yml)")
    p.add_argument("-p", "--parameter", action="append", default=[], metavar="NAME=VALUE",
                   help="set a parameters-cell variable in every chapter, e.g. -p RERUN=True -p 'SEEDS=[0,1]'")
    p.add_argument("--stale", action="store_true",
                   help="retrain the stored run records whose data, weights or code fingerprint changed (then run "
                        "--chapters, if given)")
    p.add_argument("--paper", default=None, help="a registered paper (e.g. puma; a name not registered is answered "
                   "with the list): run its chapters; with --stale: retrain only its stale records")
    p.add_argument("--table", default=None, metavar="[PAPER:]NAME",
                   help="train exactly one table's missing runs, then save its results CSV and print its claims "
                        "(e.g. --table vptsp:table6, or --paper vptsp --table 'Table 6')")
    p.add_argument("--workers", type=_per_core, default=1,
                   help="with --table: train the missing runs in N processes of one thread each (default 1; at most "
                   "the machine's cores)")
    p.add_argument("--dry-run", action="store_true",
                   help="with --stale or --table: list the records it would train, train nothing")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="with --table: a config override for every run, e.g. --set data.num_workers=4 (repeatable)")
    from umlkit.cli_cluster import add_slurm_arguments
    add_slurm_arguments(p)
    p.set_defaults(func=_cmd_reproduce)
    plain = p.format_help   # the table list is built when --help is asked for (it imports every paper)
    p.format_help = lambda: plain() + "\n" + _tables_help()


def _tables_help(profile: str = "quick") -> str:
    """``reproduce --help``'s list of every registered paper's tables, the names ``--table`` takes."""
    import textwrap

    from umlkit.experiments.tables.registry import papers
    lines = ["tables (--table PAPER:NAME; the name as listed, or its letters and digits: vptsp:table6):"]
    for name, paper in papers().items():
        lines += textwrap.wrap("; ".join(paper.claim_tables(profile)), width=100, initial_indent=f"  {name}: ",
                               subsequent_indent="    ")
    return "\n".join(lines) + "\n"


def _add_records(sub) -> None:
    """The subcommands records train|status: a registered paper's job lists."""
    rec = sub.add_parser("records", help="fill a paper's run records outside its chapter (large record sets)")
    rsub = rec.add_subparsers(dest="records_command", metavar="RECORDS_COMMAND", required=True)
    for name, func, text in (("train", _cmd_records_train, "train the missing records of a job list"),
                             ("status", _cmd_records_status, "how many records of a job list are stored")):
        p = rsub.add_parser(name, help=text)
        p.add_argument("paper", help="a registered paper (e.g. puma; a name not registered is answered with the list)")
        p.add_argument("jobs", nargs="?", default=None,
                       help="the paper's job list: oodml: lr_sweep, lr_sweep_cars, lr_sweep_sop, tables; "
                       "language_guidance: omega_sweep, tables, semantic, unified_sweep, unified; vptsp: lr_sweep, "
                       "tables; puma: tuning, few_shot_tuning, few_shot, tables, second_tables, budget; regime: map, "
                       "map2, map2-tuning; every paper: more_seeds (the extra seeds of configs/more_seeds.yaml) and "
                       "second_edition (every run without a current record, in the retrain plan's order: `umlkit plan "
                       "--second-edition`)")
        p.add_argument("--table", default=None, metavar="NAME",
                       help="instead of a job list: exactly the runs of one of the paper's tables, e.g. 'Table 6'")
        p.add_argument("--profile", choices=("quick", "full"), default="quick")
        p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="a config override for every job, e.g. --set data.num_workers=4 (repeatable; the runs "
                       "become records of their own)")
        if name == "status":
            p.add_argument("--list", action="store_true", help="also print every job's label and state: stored, "
                           "missing, damaged, or its Slurm state (pending, running, failed) with the job id and log")
        if name == "train":
            p.add_argument("--worker", default="0/1", help="I/N: this process takes every N-th job from the I-th")
            p.add_argument("--threads", type=_per_core, default=1,
                           help="torch threads per worker (default 1; at most the machine's cores)")
            p.add_argument("--match", default=None, metavar="REGEX",
                           help="only jobs whose label matches, e.g. '^sop-.*-seed0$' (before --worker splits them)")
            p.add_argument("--dry-run", action="store_true",
                           help="list the jobs the list, --match and --worker select (stored or missing); train none")
            p.add_argument("--runner", default="train_analysis", help=argparse.SUPPRESS)
            p.add_argument("--replace-damaged", action="store_true",
                           help="train the runs whose stored file is damaged again, keeping each bad file beside it "
                           "as <name>.damaged (without it, damaged records stop the command before anything runs)")
            from umlkit.cli_cluster import add_slurm_arguments
            add_slurm_arguments(p)
        p.set_defaults(func=func)
    p = rsub.add_parser("verify", help="list the stored records that cannot be used: unreadable, edited, or another "
                        "run than the file name promises (exit 1 when there are any)")
    p.add_argument("--paper", default=None, help="only this registered paper's records folder")
    p.add_argument("--profile", choices=("quick", "full"), default="quick")
    p.add_argument("--sample", type=_positive_int, default=None, metavar="N",
                   help="retrain N stored records here (one thread, a temporary folder: nothing in results/ changes) "
                   "and compare every field with the stored one, judged against the cell's seed spread")
    p.add_argument("--seed", type=int, default=0, help="with --sample: which records are drawn (default 0)")
    p.add_argument("--match", default=None, metavar="REGEX", help="with --sample: draw among labels matching it")
    p.set_defaults(func=_cmd_records_verify)


def _add_book(sub) -> None:
    """The subcommands book sync-colab|check-html: the book's sources and pages."""
    book = sub.add_parser("book", help="the book's sources: Colab badges and set-up cells from _config.yml")
    bsub = book.add_subparsers(dest="book_command", metavar="BOOK_COMMAND", required=True)
    p = bsub.add_parser("sync-colab", help="write every chapter's Colab badge and set-up cell from the repository "
                        "block of _config.yml")
    p.add_argument("--root", default=".", help="the book's root (holds _config.yml and _toc.yml; default .)")
    p.add_argument("--check", action="store_true", help="only report chapters that are out of date (exit 1)")
    p.set_defaults(func=_cmd_book_sync)
    p = bsub.add_parser("toc", help="list the book's chapters; name those of registered papers that _toc.yml lacks "
                        "(exit 1), or append them with --write")
    p.add_argument("--root", default=".", help="the book's root (holds _toc.yml; default .)")
    p.add_argument("--write", action="store_true", help="append the missing chapters to _toc.yml")
    p.set_defaults(func=_cmd_book_toc)
    p = bsub.add_parser("check-html", help="fail on what a reader must not see in the built pages: truncated "
                        "tables, warnings, machine paths, progress-bar fragments, missing images")
    p.add_argument("build_dir", nargs="?", default="_build/html", help="the built book (default _build/html)")
    p.set_defaults(func=_cmd_book_check)


def _add_oodml(sub) -> None:
    """The subcommands oodml import-splits: ooDML's published split files."""
    ood = sub.add_parser("oodml", help="ooDML: import the published split files for the full profile")
    osub = ood.add_subparsers(dest="oodml_command", metavar="OODML_COMMAND", required=True)
    p = osub.add_parser("import-splits", help="map datasplits/*.pkl onto DATA_ROOT's classes "
                        "(writes <UMLKIT_DATA>/oodml/splits_full.json)")
    p.add_argument("pkl_dir", help="folder with cub200_splits.pkl, cars196_splits.pkl, online_products_splits.pkl")
    p.add_argument("--root", default=None, help="the full profile's data root (default: UMLKIT_DATA)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing splits_full.json")
    p.set_defaults(func=_cmd_oodml_import)


def _add_data(sub) -> None:
    """The subcommands data check|make-mini|pretrain-mini: data roots and UML-Mini."""
    data = sub.add_parser("data", help="datasets: check a data root, generate UML-Mini, pretrain the tiny ViT")
    dsub = data.add_subparsers(dest="data_command", metavar="DATA_COMMAND", required=True)
    p = dsub.add_parser("check", help="table of every dataset under ROOT: found / missing / count mismatch")
    p.add_argument("--root", default=None, help="data root (default: UMLKIT_DATA or <repo>/data)")
    p.add_argument("--datasets", default=None, help="comma-separated subset, e.g. cub,cars")
    p.add_argument("--verify-images", action="store_true", help="decode every image and report unreadable ones")
    p.add_argument("--on-error", choices=("report", "fail"), default="report",
                   help="with --verify-images: report unreadable images (default) or stop at once")
    p.add_argument("--no-count-check", action="store_true",
                   help="accept a deliberate subset: do not compare image and class counts with the real dataset's "
                        "(train on it with --set data.expected=null)")
    p.add_argument("--weights", action="store_true",
                   help="also list the pretrained weights each paper's full-profile runs train from: the file, its "
                        "sha256, and whether it is present, pinned (configs/weights.yaml) or seen before; a file "
                        "whose hash differs fails the check")
    p.set_defaults(func=_cmd_data_check)
    p = dsub.add_parser("make-mini", help="generate UML-Mini (8 datasets in their real on-disk formats)")
    p.add_argument("--root", default=None, help="output folder (default: <data root>/uml_mini)")
    p.add_argument("--seed", type=_seed, default=0, help="the generator's seed (default 0)")
    p.add_argument("--overwrite", action="store_true", help="regenerate even if a tree with this seed exists")
    p.add_argument("--size", choices=("default", "large"), default="default",
                   help="'large': more classes per source, for ooDML's shifted splits (default root uml_mini_large)")
    p.set_defaults(func=_cmd_data_make_mini)
    p = dsub.add_parser("pretrain-mini", help="pretrain the tiny ViT on the synthetic pretraining set "
                        "(recipe v1: 767 s on 2 busy CPU cores; v2: see its pretrain_report_v2.json)")
    p.add_argument("--out", default=None, help="folder for the weights (default: the shipped location)")
    p.add_argument("--recipe", choices=("v1", "v2", "narrow", "broad", "wide"), default="v1",
                   help="v1: the weights of UML-Mini v1; v2: longer, with unobservable targets masked; narrow, broad, "
                   "wide: the regime map's second edition (v2's recipe on narrower and broader worlds; "
                   "wide: twice the width)")
    p.add_argument("--epochs", type=_positive_int, default=None, help="default: the recipe's")
    p.add_argument("--seed", type=_seed, default=0)
    p.add_argument("--device", default="cpu", help="where to train, e.g. cuda (default: cpu; the random draws stay on "
                   "the CPU, so a GPU run differs from a CPU run by rounding only)")
    p.add_argument("--overwrite", action="store_true", help="replace existing weights, heads and report (the shipped "
                   "ones without --out)")
    p.set_defaults(func=_cmd_data_pretrain_mini)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="umlkit",
        description="umlkit: reproduction toolkit for deep metric learning (PUMA, ooDML, VPTSP, language guidance).",
    )
    parser.add_argument("--version", action="version", version=f"umlkit {umlkit.__version__}")
    parser.add_argument("--debug", action="store_true", help="show the full Python traceback when a command fails")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_run_commands(sub)
    _add_reproduce(sub)
    _add_records(sub)
    _add_book(sub)
    _add_oodml(sub)
    _add_data(sub)
    from umlkit.cli_cluster import add_plan
    add_plan(sub)
    return parser


# the library's hints for Python callers, and what a command-line user types instead
_CLI_HINTS = {"Pass expected=None to load a deliberate subset.":
              "For a deliberate subset, train with --set data.expected=null (umlkit data check --no-count-check "
              "lists it as found)."}


def _in_cli_terms(text: str) -> str:
    for python, cli in _CLI_HINTS.items():
        text = text.replace(python, cli)
    return text


def _pin_record_numerics(args: argparse.Namespace) -> None:
    """The commands that train quick-profile records pin the CPU numerics first (:mod:`umlkit._numerics`), so
    that a record retrains to the same numbers on another kind of CPU; ``UMLKIT_NUMERICS=native`` opts out."""
    trains = args.func in (_cmd_records_train, _cmd_reproduce) or (
        args.func is _cmd_records_verify and getattr(args, "sample", None))
    if trains and getattr(args, "profile", "quick") == "quick" and not getattr(args, "dry_run", False):
        from umlkit._numerics import pin_for_records
        pin_for_records()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):   # no command: the usage, and a failing exit status (scripts notice)
        parser.print_help(sys.stderr)
        print("umlkit: error: give a command (e.g. umlkit info)", file=sys.stderr)
        return 2
    try:
        from umlkit._env import check_environment
        check_environment()   # again here: a script or test may change the variables after the import
        _pin_record_numerics(args)
        return args.func(args)
    except KeyboardInterrupt:
        print("umlkit: interrupted", file=sys.stderr)
        return 130
    except Exception as err:   # one line; the traceback with --debug
        if getattr(args, "debug", False):
            raise
        msg = err.args[0] if isinstance(err, KeyError) and len(err.args) == 1 else err
        text = _in_cli_terms(" ".join(_worker_sentence(str(msg)).split()))
        if not isinstance(err, (ValueError, OSError, RuntimeError, KeyError, TypeError)):
            # not one of umlkit's own checks (those raise the five above with a full message): say what it was
            text = f"{type(err).__name__}: {text}" if text else type(err).__name__
        print(f"umlkit: error: {text}", file=sys.stderr)
        print("(run again with --debug for the full traceback)", file=sys.stderr)
        return 2


def _worker_sentence(text: str) -> str:
    """A DataLoader worker's exception arrives as torch's "Caught X in DataLoader worker process N" and the worker's
    whole traceback: only its last line (the exception's own words) is kept; an unreadable image, in a worker or
    not, points at the check that finds them all."""
    if "DataLoader worker process" in text:
        text = [ln for ln in text.splitlines() if ln.strip()][-1].strip()
        text = re.sub(r"^[A-Za-z_.]*(Error|Exception): ", "", text)
    if "cannot read image" in text:
        text += " (`umlkit data check --verify-images` decodes every image of the data root and lists each " \
                "unreadable one)"
    return text


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
