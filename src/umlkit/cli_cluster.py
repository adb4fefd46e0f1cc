"""The command line's cluster side: ``--executor slurm`` for ``reproduce --table/--paper`` and ``records train``,
the queue columns of ``records status``, and ``umlkit plan`` (what a paper or table costs before it is submitted).

The work is :mod:`umlkit.experiments.ops.cluster` (submitit) and :mod:`umlkit.experiments.ops.gpu_budget`; this module
turns arguments into those calls and prints what they return.
"""
from __future__ import annotations

import argparse
import math

__all__ = ["add_slurm_arguments", "submit_to_slurm", "print_queue", "add_plan", "slurm_settings"]


def add_slurm_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--executor", choices=("local", "slurm"), default="local",
                   help="local (default): train here; slurm: submit the missing runs as one Slurm job array "
                   "(submitit), each task one record or a few short ones")
    g = p.add_argument_group("Slurm (with --executor slurm; a `slurm:` block in --slurm-config or "
                             "UMLKIT_SLURM_CONFIG sets the same names)")
    g.add_argument("--slurm-config", default=None, metavar="FILE.yaml", help="YAML with a slurm: block")
    g.add_argument("--slurm-partition", default=None)
    g.add_argument("--slurm-account", default=None)
    g.add_argument("--slurm-gpus", type=int, default=None, help="GPUs per task (default: 1 full, 0 quick)")
    g.add_argument("--slurm-cpus", type=int, default=None, help="CPUs per task (default 1)")
    g.add_argument("--slurm-mem", type=float, default=None, metavar="GB", help="memory per task")
    g.add_argument("--slurm-time", type=int, default=None, metavar="MINUTES",
                   help="time limit per task (default: the longest task's estimate x 2 + 10 min)")
    g.add_argument("--slurm-array-parallelism", type=int, default=None, metavar="N",
                   help="tasks running at once (default 64)")


def slurm_settings(args: argparse.Namespace):
    from umlkit.experiments.ops.cluster import load_settings
    return load_settings(args.slurm_config, {
        "partition": args.slurm_partition, "account": args.slurm_account, "gpus": args.slurm_gpus,
        "cpus": args.slurm_cpus, "mem_gb": args.slurm_mem, "time_min": args.slurm_time,
        "array_parallelism": args.slurm_array_parallelism}, args.profile)


def _estimates(jobs: list[tuple], status, profile: str) -> list[float]:
    """Each job's expected seconds: its stored wall time or its table's rule; in the full profile, where nothing is
    stored, the GPU-time estimate."""
    from umlkit.experiments.ops.table_runs import job_seconds
    seconds = job_seconds(status)
    if profile == "full":
        from umlkit.experiments.ops.gpu_budget import gpu_seconds
        seconds = [s if not math.isnan(s) else gpu_seconds(job[2]) for s, job in zip(seconds, jobs)]
    return seconds


def _prepare_data(jobs: list[tuple], profile: str) -> None:
    """Generate UML-Mini once here, before the array starts (the tasks then find it complete; its lock covers a
    second submission doing the same); in the full profile, check the data folder exists."""
    from umlkit.experiments.ops.table_runs import configs_of
    from umlkit.train.engine import data_root_of
    roots = set()
    for job in jobs:
        for cfg in configs_of(job[2]):
            marker = (cfg["profile"], str(cfg["data"]["root"]))
            if marker not in roots:
                roots.add(marker)
                data_root_of(cfg)


def submit_to_slurm(args: argparse.Namespace, paper: str, jobs: list[tuple], title: str) -> int:
    """Submit the jobs of ``jobs`` that are neither stored nor queued (pending or running) as one array; with
    ``--dry-run`` print the array and submit nothing."""
    from umlkit.experiments.ops.cluster import describe_plan, plan_tasks, queue_states, submit
    from umlkit.experiments.ops.table_runs import job_status
    from umlkit.experiments.tables.registry import get_paper
    settings = slurm_settings(args)
    status = job_status(jobs, args.profile)
    damaged = status[status["damaged"] != ""]
    if len(damaged) and not getattr(args, "replace_damaged", False):
        raise ValueError(f"{len(damaged)} stored record(s) of {title} are damaged (`umlkit records verify` lists "
                         f"them; `umlkit records train ... --replace-damaged` trains them again), first: "
                         f"{damaged['damaged'].iloc[0]}")
    try:
        queued = queue_states(jobs, args.profile)
    except RuntimeError:
        if not args.dry_run:
            raise
        queued = {}
        print("(Slurm cannot be asked here: the queue is not read; the array below counts every missing run)")
    live = {label for label, q in queued.items() if q["state"] not in ("failed", "ended")}
    seconds = _estimates(jobs, status, args.profile)
    todo = [(j, s) for j, s, stored in zip(jobs, seconds, status["stored"]) if not stored and j[1] not in live]
    runner = getattr(args, "runner", "train_analysis")
    todo_jobs = [(j[0], j[1], j[2], j[3] if len(j) > 3 else runner) for j, _ in todo]
    tasks = plan_tasks(todo_jobs, [s for _, s in todo], settings.min_task_minutes)
    print(f"{title} ({args.profile}): {len(jobs)} runs, {int(status['stored'].sum())} stored, {len(live)} queued "
          f"or running, {len(todo_jobs)} to submit")
    if not tasks:
        print("nothing to submit")
        return 0
    print(describe_plan(tasks, settings, title))
    from umlkit.experiments.ops.preflight import preflight
    try:
        preflight(todo_jobs, args.profile, record=not args.dry_run)   # found here, not in every task of the array
    except ValueError as err:
        if not args.dry_run:
            raise
        print(f"the submission would be refused: {err}")
        print("nothing was submitted (--dry-run)")
        return 1
    if args.dry_run:
        print("nothing was submitted (--dry-run)")
        return 0
    _prepare_data(todo_jobs, args.profile)
    submitted = submit(get_paper(paper).records_folder, tasks, args.profile, settings, f"umlkit-{paper}")
    ids = sorted({j.job_id.split("_")[0] for j in submitted})
    print(f"submitted {len(submitted)} task(s) as Slurm job {', '.join(ids)}; logs under "
          f"{submitted[0].paths.folder}; `umlkit records status {paper} --table ... --list` follows them")
    return 0


def print_queue(jobs: list[tuple], status, profile: str) -> dict[str, int]:
    """One line per job: stored / missing / damaged, or its Slurm state with the job id and the log; returns the
    count per state."""
    from umlkit.experiments.ops.cluster import queue_states
    try:
        queued = queue_states(jobs, profile)
    except RuntimeError as err:
        queued = {}
        print(f"(the Slurm queue could not be read: {err})")
    counts: dict[str, int] = {}
    for _, line in status.iterrows():
        q = queued.get(line["label"])
        if line.get("damaged"):
            state, extra = "damaged", ""
        elif line["stored"]:
            state, extra = "stored", ""
        elif q is not None:
            state, extra = q["state"], f"  [job {q['job_id']}] {q['detail']}"
        else:
            state, extra = "missing", ""
        counts[state] = counts.get(state, 0) + 1
        print(f"{state:<8} {line['label']}{extra}")
    return counts


def add_plan(sub) -> None:
    p = sub.add_parser("plan", help="what a paper's (or table's) missing runs cost before you submit them: jobs, "
                       "GPU-hours, wall time on N GPUs, disk")
    p.add_argument("--paper", default=None, help="a registered paper (with --second-edition: default every paper)")
    p.add_argument("--table", default=None, metavar="NAME", help="one of its tables (default: its tables job list)")
    p.add_argument("--profile", choices=("quick", "full"), default=None,
                   help="default full (quick with --second-edition)")
    p.add_argument("--gpus", type=int, default=1, help="GPUs the array may use at once (default 1)")
    p.add_argument("--gpu", choices=("h200", "h100"), default="h200",
                   help="the GPU the estimate is scaled to (measured on an H200; an H100 is priced at the same "
                   "arithmetic rate, so the same hours: the epoch is loader- and launch-bound)")
    p.add_argument("--second-edition", action="store_true",
                   help="the board's second edition (quick profile): every run of the job lists without a current "
                   "record, stale or missing, with its CPU-hours, in the order `umlkit records train PAPER "
                   "second_edition` takes them (sweeps, then the headline's, decided, open claims' runs, the rest)")
    p.add_argument("--workers", type=int, default=2, help="with --second-edition: single-thread workers (default 2)")
    p.set_defaults(func=cmd_plan)


def cmd_plan_second_edition(args: argparse.Namespace) -> int:
    """``umlkit plan --second-edition``: the retrain's summary per class and paper."""
    import pandas as pd

    from umlkit.experiments.ops.second_edition import plan_frame, plan_summary
    if args.workers < 1:
        raise ValueError(f"--workers {args.workers}: expected 1 or more")
    profile = args.profile or "quick"
    frame = plan_frame(profile, args.paper)
    summary = plan_summary(frame, args.workers)
    counts = frame["state"].value_counts()
    print(f"second edition ({profile}): {len(frame)} runs, {counts.get('current', 0)} current, "
          f"{counts.get('stale', 0)} stale, {counts.get('missing', 0)} missing")
    with pd.option_context("display.width", 160, "display.max_rows", 200):
        print(summary.to_string(index=False))
    unknown = int(summary["unknown"].sum())
    print(f"  CPU-hours (one thread each): {summary['hours'].sum():.1f}"
          + (f" and {unknown} run(s) without an estimate" if unknown else "")
          + f"; about {summary['hours'].sum() / args.workers:.1f} h on {args.workers} worker(s)")
    print("  order: sweeps first; once they are in, choose the changed rates again (the chapters' sweep tables; a "
          "test compares the configured rates with them) and plan again: the table runs' keys hold the rates")
    return 0


# disk per stored record (JSON with curves) and per run's checkpoints (latest + previous + best) while it trains
_RECORD_MB = 0.1
_CHECKPOINT_MB = {"quick": 15.0, "full": 3 * 300.0}


def cmd_plan(args: argparse.Namespace) -> int:
    from umlkit.experiments.ops.table_runs import job_status, table_jobs, table_spec
    from umlkit.experiments.tables.registry import get_paper
    if args.second_edition:
        return cmd_plan_second_edition(args)
    if args.paper is None:
        raise ValueError("umlkit plan needs --paper PAPER (or --second-edition for every paper's retrain)")
    args.profile = args.profile or "full"
    if args.gpus < 1:
        raise ValueError(f"--gpus {args.gpus}: expected 1 or more")
    try:
        paper = get_paper(args.paper)
        if args.table:
            args.table = table_spec(args.paper, args.table, args.profile).table
            jobs = table_jobs(args.paper, args.table, args.profile)
        else:
            jobs = paper.job_list("tables", args.profile)
    except KeyError as err:
        raise ValueError(err.args[0]) from None
    status = job_status(jobs, args.profile)
    seconds = _estimates(jobs, status, args.profile)
    missing = [s for s, stored in zip(seconds, status["stored"]) if not stored]
    known = [s for s in missing if not math.isnan(s)]
    hours = sum(known) / 3600
    longest = max(known, default=0.0) / 3600
    wall = max(hours / args.gpus, longest)
    title = f"{args.paper} {args.table or 'tables'} ({args.profile})"
    print(f"{title}: {len(jobs)} runs, {int(status['stored'].sum())} stored, {len(missing)} to train")
    unit = "GPU-hours" if args.profile == "full" else "CPU-hours (one thread each)"
    print(f"  {unit}: {hours:.1f}" + (f" ({len(missing) - len(known)} run(s) without an estimate)"
                                       if len(known) < len(missing) else ""))
    print(f"  wall time on {args.gpus} {args.gpu.upper() if args.profile == 'full' else 'worker'}(s): about "
          f"{wall:.1f} h (the longest run alone {longest:.1f} h)")
    disk = len(missing) * _RECORD_MB + min(args.gpus, len(missing)) * _CHECKPOINT_MB[args.profile]
    print(f"  disk: about {disk / 1024:.2f} GB ({len(missing)} records of ~{_RECORD_MB * 1000:.0f} kB, and the "
          f"checkpoints of the {min(args.gpus, len(missing))} run(s) training at once, ~"
          f"{_CHECKPOINT_MB[args.profile]:.0f} MB each, removed when their record is written)")
    if args.profile == "full":
        print("  estimate: the measured H200 epoch pace x the real datasets' image counts, within about a factor of "
              "two (umlkit.experiments.ops.gpu_budget)")
    return 0
