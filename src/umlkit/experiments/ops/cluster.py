"""The Slurm executor: a job list's missing records as one Slurm job array, through ``submitit``.

Why submitit: it is the maintained way to send Python callables to Slurm (job arrays through ``executor.batch()``,
requeue on preemption through a callable's ``checkpoint()`` method, logs and results per task); umlkit adds only
what is its own: which runs are missing, how they are packed into tasks, what each task may take, and a ledger of
what was submitted so that a second submission sends only what is neither stored nor queued.

* **Tasks.** Each array task trains one record (or several short ones, packed to at least ``min_task_minutes``), in
  the order of the job list, with :func:`umlkit.experiments.runs.records.cached_record`: the record's lock, the atomic
  write and the damaged-file checks are the local ones. The array's task -> job mapping is fixed at submission and a
  job is in one task only, so no two tasks of an array write one record; a second array skips what the ledger shows
  queued, and the record lock (a POSIX record lock, which holds across NFS clients) stops the rest.
* **Time limit.** A task's estimate is the stored wall times of its runs (the table's ``time_estimate``: the run's
  own row, else its runner's, else the table's median) or, in the full profile, the GPU-hours estimate of
  :mod:`umlkit.experiments.ops.gpu_budget`; the array's limit is the longest task's estimate x ``margin`` (2) plus 10
  minutes, overridden by ``time_min``.
* **Preemption.** ``checkpoint()`` requeues the same task; its runs keep checkpoints under
  ``UMLKIT_CHECKPOINTS`` (``results/<profile>/checkpoints/<record key hash>/<configuration hash>``) and resume from
  the last epoch (the engine resumes bit-exactly), so the requeued task writes the record an uninterrupted one
  would; the checkpoints are removed once the record is written.
* **Ledger.** ``results/<profile>/queue/<record key hash>.json``: the Slurm job id, the log files, when. The state
  of a queued job comes from ``squeue``; a finished one's from submitit's result file (``failed`` with the error's
  last line) or from the record (``stored``). Accounting (``sacct``) is not needed.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from umlkit._paths import results_root
from umlkit._yaml import read_yaml
from umlkit.experiments.runs.records import cached_record, find_record, normalise_key
from umlkit.results import atomic_write, config_hash

__all__ = ["SlurmSettings", "load_settings", "plan_tasks", "submit", "queue_states", "RecordTask", "ledger_folder",
           "describe_plan"]

_MARGIN_MIN = 10


@dataclass
class SlurmSettings:
    """What each array task asks Slurm for. ``None`` leaves Slurm's (the partition's) default; ``gpus`` is per task
    (full profile: 1, quick: 0); ``time_min`` ``None``: from the estimate."""
    partition: str | None = None
    account: str | None = None
    gpus: int | None = None
    cpus: int = 1
    mem_gb: float | None = None
    time_min: int | None = None
    array_parallelism: int = 64
    min_task_minutes: float = 10.0
    margin: float = 2.0

    def __post_init__(self):
        for name, low in (("cpus", 1), ("array_parallelism", 1), ("gpus", 0), ("time_min", 1)):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
                raise ValueError(f"slurm setting {name} = {value!r}: expected an integer >= {low}")
        for name in ("min_task_minutes", "margin", "mem_gb"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise ValueError(f"slurm setting {name} = {value!r}: expected a number > 0")


def load_settings(path: str | Path | None = None, overrides: dict | None = None, profile: str = "quick") \
        -> SlurmSettings:
    """Settings from the ``slurm:`` block of a YAML file (``path``, else ``UMLKIT_SLURM_CONFIG``, else none), then
    ``overrides`` (the CLI's ``--slurm-*`` values; ``None`` values ignored). GPUs default to 1 in the full profile."""
    given: dict = {}
    path = path or os.environ.get("UMLKIT_SLURM_CONFIG")
    if path:
        path = Path(path).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"Slurm settings file {path} does not exist (expected a YAML file with a "
                                    f"`slurm:` block, e.g. slurm: {{partition: gpu, account: mylab}})")
        doc = read_yaml(path, {})
        if not isinstance(doc, dict) or not isinstance(doc.get("slurm"), dict):
            raise ValueError(f"{path}: expected a `slurm:` block (a mapping), e.g. slurm: {{partition: gpu}}")
        given = dict(doc["slurm"])
    given.update({k: v for k, v in (overrides or {}).items() if v is not None})
    known = {f.name for f in fields(SlurmSettings)}
    unknown = sorted(set(given) - known)
    if unknown:
        raise ValueError(f"unknown Slurm setting(s) {unknown}" + (f" in {path}" if path else "")
                         + f"; known: {', '.join(sorted(known))}")
    given.setdefault("gpus", 1 if profile == "full" else 0)
    return SlurmSettings(**given)


def ledger_folder(profile: str) -> Path:
    return results_root(profile) / "queue"


def _ledger_path(key: dict, profile: str) -> Path:
    return ledger_folder(profile) / f"{config_hash(normalise_key(key))}.json"


class RecordTask:
    """One array task: train the records of ``jobs`` (``(table, label, key, runner)``) into ``folder``, in order.
    Picklable (submitit sends it to the node); ``checkpoint()`` makes a preempted or timed-out task requeue itself."""

    def __init__(self, folder: str, jobs: list[tuple], profile: str, env: dict, threads: int = 1):
        self.folder, self.jobs, self.profile, self.env, self.threads = folder, jobs, profile, env, threads

    def __call__(self) -> list[str]:
        import torch
        os.environ.update(self.env)
        torch.set_num_threads(self.threads)
        paths = []
        for table, label, key, runner in self.jobs:
            rec = cached_record(self.folder, table, label, key, runner, self.profile, log=print)
            paths.append(rec["path"])
        return paths

    def checkpoint(self, *args, **kwargs):
        """Requeue this very task: its runs resume from their checkpoints (``UMLKIT_CHECKPOINTS``)."""
        import submitit
        print(f"umlkit: task of {len(self.jobs)} record(s) interrupted; requeued, resuming from its checkpoints",
              flush=True)
        return submitit.helpers.DelayedSubmission(self)


@dataclass
class PlannedTask:
    jobs: list[tuple]
    seconds: float
    unknown: int = 0   # jobs without an estimate (priced at the minimum task length)

    @property
    def labels(self) -> list[str]:
        return [j[1] for j in self.jobs]


def plan_tasks(jobs: list[tuple], seconds: list[float], min_task_minutes: float) -> list[PlannedTask]:
    """Pack jobs, in order, into tasks of at least ``min_task_minutes`` (a job longer than that is a task alone);
    ``seconds`` is each job's estimate (NaN: unknown, priced at the minimum, so unknown jobs are not packed)."""
    floor = min_task_minutes * 60
    tasks: list[PlannedTask] = []
    current: list[tuple] = []
    total, unknown = 0.0, 0
    for job, sec in zip(jobs, seconds):
        if sec is None or math.isnan(sec):
            sec, unknown = floor, unknown + 1
        current.append(job)
        total += float(sec)
        if total >= floor:
            tasks.append(PlannedTask(current, total, unknown))
            current, total, unknown = [], 0.0, 0
    if current:
        tasks.append(PlannedTask(current, total, unknown))
    return tasks


def time_limit_min(tasks: list[PlannedTask], settings: SlurmSettings) -> int:
    """The array's time limit: ``time_min`` when given, else the longest task x margin + 10 minutes."""
    if settings.time_min is not None:
        return settings.time_min
    longest = max((t.seconds for t in tasks), default=0.0)
    return int(math.ceil(longest * settings.margin / 60)) + _MARGIN_MIN


def describe_plan(tasks: list[PlannedTask], settings: SlurmSettings, title: str) -> str:
    """The array a submission would send: tasks, resources, limit and GPU-hours, one paragraph."""
    limit = time_limit_min(tasks, settings)
    gpu_hours = sum(t.seconds for t in tasks) / 3600 * (settings.gpus or 0)
    runs = sum(len(t.jobs) for t in tasks)
    where = ", ".join(f"{k} {v}" for k, v in (("partition", settings.partition), ("account", settings.account))
                      if v) or "the default partition"
    lines = [f"{title}: {runs} run(s) in a Slurm array of {len(tasks)} task(s) on {where}; each task "
             f"{settings.cpus} CPU(s), {settings.gpus or 0} GPU(s)"
             + (f", {settings.mem_gb:g} GB" if settings.mem_gb else "")
             + f", time limit {limit} min; at most {settings.array_parallelism} at once; estimated "
             f"{sum(t.seconds for t in tasks) / 3600:.2f} h of task time"
             + (f" = {gpu_hours:.1f} GPU-hours" if settings.gpus else "")]
    unknown = sum(t.unknown for t in tasks)
    if unknown:
        lines.append(f"  {unknown} run(s) have no stored time to estimate from: each is priced at the minimum task "
                     f"length ({settings.min_task_minutes:g} min); give --slurm-time if they need longer")
    for i, t in enumerate(tasks[:12]):
        more = f" + {len(t.labels) - 3} more" if len(t.labels) > 3 else ""
        est = "no estimate" if t.unknown == len(t.jobs) else f"~{t.seconds / 60:.1f} min"
        lines.append(f"  task {i}: {', '.join(t.labels[:3])}{more} ({est})")
    if len(tasks) > 12:
        lines.append(f"  ... {len(tasks) - 12} more task(s)")
    return "\n".join(lines)


def _executor(folder: Path, settings: SlurmSettings, limit: int, name: str):
    import submitit
    ex = submitit.SlurmExecutor(folder=str(folder), max_num_timeout=3)
    params = {"time": limit, "cpus_per_task": settings.cpus, "array_parallelism": settings.array_parallelism,
              "job_name": name, "signal_delay_s": 60 if limit <= 30 else 120}
    if settings.partition:
        params["partition"] = settings.partition
    if settings.account:
        params["account"] = settings.account
    if settings.gpus:
        params["gpus_per_node"] = settings.gpus
    if settings.mem_gb:
        params["mem"] = f"{int(math.ceil(settings.mem_gb))}GB"
    ex.update_parameters(**params)
    return ex


def submit(folder: str, tasks: list[PlannedTask], profile: str, settings: SlurmSettings, name: str) -> list:
    """Send ``tasks`` as one array (a single task as one job); write each record's ledger entry; return the jobs."""
    if not tasks:
        return []
    logs = results_root(profile) / "slurm" / folder
    env = {"UMLKIT_RESULTS": str(results_root(profile).parent), "UMLKIT_PROGRESS": "0",
           "UMLKIT_CHECKPOINTS": str(results_root(profile) / "checkpoints"),
           "OMP_NUM_THREADS": str(settings.cpus)}
    for var in ("UMLKIT_DATA", "UMLKIT_CACHE", "UMLKIT_SEARCH_DTYPE", "UMLKIT_SEARCH_THREADS", "HF_HOME",
                "TORCH_HOME"):
        if os.environ.get(var):
            env[var] = os.environ[var]
    ex = _executor(logs, settings, time_limit_min(tasks, settings), name)
    with ex.batch():
        jobs = [ex.submit(RecordTask(folder, t.jobs, profile, env, settings.cpus)) for t in tasks]
    when = time.strftime("%Y-%m-%d %H:%M:%S")
    for job, task in zip(jobs, tasks):
        for table, label, key, _ in task.jobs:
            entry = {"job_id": job.job_id, "label": label, "table": table, "folder": folder, "submitted": when,
                     "stdout": str(job.paths.stdout), "stderr": str(job.paths.stderr),
                     "result": str(job.paths.result_pickle)}
            atomic_write(_ledger_path(key, profile), json.dumps(entry, indent=1))
    return jobs


def _squeue() -> dict[str, str]:
    """Slurm job id -> state of the jobs Slurm still holds (pending, running, ...); an unreachable Slurm is an
    error naming the command."""
    try:
        out = subprocess.run(["squeue", "-h", "-r", "-o", "%i %T"], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise RuntimeError("squeue is not on PATH: the Slurm client commands are needed to read the queue") from None
    if out.returncode:
        raise RuntimeError(f"squeue failed ({out.stderr.strip() or out.returncode}): is SLURM_CONF set and the "
                           f"controller reachable?")
    return dict(line.split(None, 1) for line in out.stdout.splitlines() if line.strip())


def _finished_state(entry: dict) -> tuple[str, str]:
    """(state, detail) of a job Slurm no longer holds, from submitit's result file."""
    import pickle
    result = Path(entry["result"])
    if not result.is_file():
        return "failed", f"ended without a result (killed?); log {entry['stderr']}"
    try:
        outcome, value = pickle.loads(result.read_bytes())
    except Exception as err:   # an unreadable result file is reported, not raised
        return "failed", f"unreadable result file {result} ({err}); log {entry['stderr']}"
    if outcome == "success":
        return "ended", f"finished without its record; log {entry['stdout']}"
    last = str(value).strip().splitlines()[-1] if str(value).strip() else "no message"
    return "failed", f"{last}; log {entry['stderr']}"


def queue_states(jobs: list[tuple], profile: str, ask_slurm: bool = True) -> dict[str, dict]:
    """Label -> {state, job_id, detail} for every job of ``jobs`` that the ledger lists and that is not stored:
    ``pending`` / ``running`` (and Slurm's other live states, lower-cased) while Slurm holds it, ``failed`` (with
    the error and the log) or ``ended`` once it does not."""
    out: dict[str, dict] = {}
    live = None
    for job in jobs:
        path = _ledger_path(job[2], profile)
        if not path.is_file() or find_record(normalise_key(job[2]), profile) is not None:
            continue
        entry = json.loads(path.read_text())
        if live is None:
            live = _squeue() if ask_slurm else {}
        state = live.get(entry["job_id"])
        if state is not None:
            out[job[1]] = {"state": state.lower(), "job_id": entry["job_id"], "detail": f"log {entry['stdout']}"}
        else:
            state, detail = _finished_state(entry)
            out[job[1]] = {"state": state, "job_id": entry["job_id"], "detail": detail}
    return out


def settings_dict(settings: SlurmSettings) -> dict:
    return asdict(settings)
