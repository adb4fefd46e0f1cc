"""Reproduce one paper table: exactly its runs, then its cells beside the paper's and its claims.

A table's rows can share records with other tables (PUMA's Table 3 reuses a Table 2 run, VPTSP's Table 6 three of
Table 2's, ooDML's Tables S7/S8 are the few-shot analyses of S4/S5 runs), and a job list's labels repeat across tables,
so a label filter is no way to select "the runs of Table 6". Here the registered paper's table declaration gives them:
each (row, seed) it measures, each configuration once (:func:`umlkit.experiments.tables.table.distinct_jobs`). Records
are
found by their key, whatever folder or label trained them. Used by ``umlkit records train|status PAPER --table NAME``
and ``umlkit reproduce --paper PAPER --table NAME``. Before any job list trains, :func:`with_overrides` applies a
user's ``--set`` overrides and :func:`drop_absent` sets aside the full-profile jobs whose datasets are not there.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from umlkit.experiments.runs.records import find_record, normalise_key
from umlkit.experiments.tables import table as tables
from umlkit.experiments.tables.registry import get_paper

__all__ = ["table_spec", "table_jobs", "job_status", "time_estimate", "reproduce_table", "train_in_workers",
           "with_overrides", "configs_of", "absent_datasets", "drop_absent"]


def table_spec(paper: str, table: str, profile: str = "quick") -> tables.Table:
    """The registered paper's declaration of ``table`` (case, spaces and punctuation aside: ``table6`` is 'Table 6');
    an unknown name is an error listing the paper's tables."""
    specs = get_paper(paper).claim_tables(profile)
    if table not in specs:
        plain = "".join(ch for ch in table.lower() if ch.isalnum())   # as Table.slug spells a name
        same = [name for name, spec in specs.items() if spec.slug == plain]
        if len(same) > 1:
            raise KeyError(f"{paper}: table {table!r} could be {' or '.join(same)}; give the name as written")
        if not same:
            raise KeyError(f"{paper} has no table {table!r} in the {profile} profile; its tables: {', '.join(specs)}")
        table = same[0]
    return specs[table]


def table_jobs(paper: str, table: str, profile: str = "quick") -> list[tuple]:
    """(record folder, label, key, runner) of every run ``table`` measures, each configuration once. A table
    computed from other tables' records (ooDML's FID tables and AGS, VPTSP's Table 10) has none: an error says so."""
    spec = table_spec(paper, table, profile)
    if spec.derive is not None and not spec.rows:
        raise ValueError(f"{paper} {table} has no runs of its own: it is computed from other tables' records or "
                         f"files (reproduce those tables, then read this one in its chapter)")
    return tables.distinct_jobs({spec.table: spec}, profile)


def job_status(jobs: list[tuple], profile: str = "quick") -> pd.DataFrame:
    """One line per job: its label, whether a usable record of its key is stored (and where), the stored run's wall
    time in seconds (NaN where none is stored or the record does not say) and why a stored file is ``damaged``
    (unreadable, or another run than its name promises: never counted as stored)."""
    from umlkit.experiments.runs.records import DamagedRecord, load_record
    lines = []
    for job in jobs:
        path = find_record(normalise_key(job[2]), profile)
        seconds, damaged = float("nan"), ""
        if path is not None:
            try:
                seconds = float(load_record(path).get("seconds", "nan"))
            except DamagedRecord as err:   # shown, never counted as stored
                damaged = str(err)
            except (TypeError, ValueError):
                pass   # a record without a usable time: stored, no time to take from it
        lines.append({"label": job[1], "runner": job[3] if len(job) > 3 else "",
                      "stored": path is not None and not damaged, "record": str(path) if path else "",
                      "seconds": seconds, "damaged": damaged})
    return pd.DataFrame(lines, columns=["label", "runner", "stored", "record", "seconds", "damaged"])


def _row_of(label: str) -> str:
    """A job label without its seed: the runs of one row (``cub-VPTSP-seed3`` -> ``cub-VPTSP``)."""
    head, sep, tail = label.rpartition("-seed")
    return head if sep and tail.isdigit() else label


def time_estimate(status: pd.DataFrame) -> dict:
    """What the stored wall times say about a table: ``stored`` (the stored runs' seconds, summed), ``missing``
    (seconds the missing runs should take: each at the median of its own row's stored runs, else of the stored runs
    of its runner (an evaluation-only run takes seconds where a training run takes minutes), else of every stored run
    of the table; NaN where nothing is stored), ``by_row`` and ``by_runner`` (how many missing runs had their own
    row's, or their runner's, time)."""
    timed = status[status["stored"] & status["seconds"].notna()]
    missing = status.loc[~status["stored"]]
    own, by_runner, guesses = _guesses(status, missing)
    return {"stored": float(timed["seconds"].sum()), "missing": float(guesses.sum(min_count=len(guesses))),
            "by_row": int(own.notna().sum()), "by_runner": int(by_runner.sum()), "timed": len(timed)}


def _guesses(status: pd.DataFrame, which: pd.DataFrame) -> tuple[pd.Series, pd.Series, pd.Series]:
    """For the jobs of ``which``: their own row's median stored seconds, whether their runner's median was used,
    and the guess (own row, else runner, else the table's median; NaN where nothing is stored)."""
    timed = status[status["stored"] & status["seconds"].notna()]
    rows = timed.assign(row=timed["label"].map(_row_of)).groupby("row")["seconds"].median()
    runners = timed[timed["runner"] != ""].groupby("runner")["seconds"].median()   # "": not known
    overall = float(timed["seconds"].median()) if len(timed) else float("nan")
    own = which["label"].map(_row_of).map(rows)
    by_runner = own.isna() & which["runner"].isin(runners.index)
    return own, by_runner, own.fillna(which["runner"].map(runners)).fillna(overall)


def job_seconds(status: pd.DataFrame) -> list[float]:
    """Each job's expected wall time by the stored runs (its own where stored, else :func:`time_estimate`'s rule)."""
    guesses = _guesses(status, status)[2]
    return [float(s) if stored and s == s else float(g)
            for stored, s, g in zip(status["stored"], status["seconds"], guesses)]


def reproduce_table(paper: str, table: str, profile: str = "quick", train: bool = True, progress: bool = True,
                    overrides=()) -> tuple[str, pd.DataFrame, pd.DataFrame]:
    """Train the table's missing records (unless ``train=False``; with the config ``overrides``, and without the
    rows whose datasets are absent), then measure it, compare it with the paper and write
    ``results/<profile>/<paper>_<table>.csv``. Returns (that path, the compared cells, the claims with their
    unadjusted verdicts; the book adjusts them over the paper's claims)."""
    spec = table_spec(paper, table, profile)
    rows = [r for r in spec.rows
            if not absent_datasets(spec.config(r, spec.seeds_of(r, profile)[0], profile, tuple(overrides)))]
    measured = tables.measure(spec, profile, rows=rows if spec.rows else None, train=train, progress=progress,
                              log=None, overrides=tuple(overrides))
    if measured.empty:
        raise ValueError(f"{paper} {table}: no stored record in the {profile} profile (run without --dry-run, or "
                         f"`umlkit records train {paper} --table '{table}'`)")
    cmp = tables.compare(measured, spec.paper)
    path = tables.save_results(spec, cmp, profile)
    return str(path), cmp, tables.table_claims(spec, cmp)


def _stored_count(jobs: list[tuple], profile: str) -> int:
    return sum(find_record(normalise_key(job[2]), profile) is not None for job in jobs)


def _start_worker(paper: str, table: str, profile: str, overrides, i: int, workers: int, log):
    import os
    import subprocess
    import sys
    cmd = [sys.executable, "-m", "umlkit.cli", "records", "train", paper, "--table", table, "--profile", profile,
           "--worker", f"{i}/{workers}", "--threads", "1"]
    cmd += [arg for item in overrides for arg in ("--set", item)]
    env = {**os.environ, "UMLKIT_PROGRESS": "0", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)


def _watch(procs: list, jobs: list[tuple], profile: str, desc: str) -> int | None:
    """Wait for the workers under one bar over the missing jobs (records counted every 5 s); the index of the first
    worker that fails (the others are then stopped), else None."""
    import time

    from umlkit._progress import tqdm
    before = _stored_count(jobs, profile)
    with tqdm(total=len(jobs) - before, desc=desc, unit="run") as bar:
        polled = time.monotonic()
        while any(p.poll() is None for p in procs):
            bad = next((i for i, p in enumerate(procs) if p.returncode), None)
            if bad is not None:
                for p in procs:
                    p.terminate()
                return bad
            time.sleep(0.2)
            if time.monotonic() - polled > 5:
                polled = time.monotonic()
                bar.update(max(0, _stored_count(jobs, profile) - before - bar.n))
        bar.update(max(0, _stored_count(jobs, profile) - before - bar.n))
    return next((i for i, p in enumerate(procs) if p.returncode), None)


def train_in_workers(paper: str, table: str, profile: str, overrides, workers: int, jobs: list[tuple]) -> None:
    """Train the table's missing runs in ``workers`` processes of one thread each (``umlkit records train PAPER
    --table TABLE --worker I/N``: each takes every N-th job and writes its records atomically), with one bar over
    the missing ones of ``jobs`` (the table's jobs as the workers select them: overrides applied, absent datasets
    dropped). The first worker that fails stops the others; the end of its output goes to stderr and the error
    names it. Ctrl-C, or any error here, stops them all (the runs they finished stay stored)."""
    import sys
    import tempfile
    procs, logs = [], []
    with tempfile.TemporaryDirectory(prefix="umlkit-workers-") as folder:
        try:
            for i in range(workers):
                logs.append(open(Path(folder) / f"worker{i}.log", "w"))
                procs.append(_start_worker(paper, table, profile, overrides, i, workers, logs[-1]))
            bad = _watch(procs, jobs, profile, f"{paper} {table}: {workers} workers")
        except BaseException:
            for p in procs:
                p.terminate()
            raise
        finally:
            for p in procs:
                p.wait()
            for log in logs:
                log.close()
        if bad is not None:
            tail = (Path(folder) / f"worker{bad}.log").read_text()[-1500:]
            print(f"--- the end of worker {bad}/{workers}'s output ---\n{tail}", file=sys.stderr)
            failed = sum(1 for p in procs if p.returncode not in (0, -15))
            raise RuntimeError(f"{paper} {table}: worker {bad}/{workers} stopped with exit status "
                               f"{procs[bad].returncode} ({failed} of {workers} failed; the others were stopped); "
                               f"its output's end is printed above")


def with_overrides(jobs: list[tuple], overrides) -> list[tuple]:
    """``jobs`` with ``--set KEY=VALUE`` overrides applied to each job's training configurations
    (:func:`configs_of`). The keys change with them, so the runs are records of their own
    beside the declared ones."""
    if not overrides:
        return jobs
    import copy

    from umlkit.train.config import apply_overrides
    out = []
    for folder, label, key, *rest in jobs:
        key = copy.deepcopy(key)
        for cfg in configs_of(key):        # every configuration of the key (one per source for specialists)
            new = apply_overrides(cfg, overrides)
            cfg.clear()
            cfg.update(new)
        out.append((folder, label, key, *rest))
    return out


def configs_of(key: dict) -> list[dict]:
    """The training configurations in a record key: ``key["config"]``, the key itself, or a specialists key's one
    configuration per source."""
    if isinstance(key.get("config"), dict):
        return [key["config"]]
    if "model" in key:
        return [key]
    return [v for v in key.values() if isinstance(v, dict) and "model" in v]


def absent_datasets(key: dict) -> list[str]:
    """The datasets a full-profile job trains or tests on whose folder is not under its data root (``data.root``,
    else ``UMLKIT_DATA``); none in the quick profile, whose UML-Mini is generated on first use."""
    from umlkit._paths import data_root
    from umlkit.data.datasets import DATASETS
    from umlkit.data.mini import mini_alias
    out = []
    for cfg in configs_of(key):
        root = cfg.get("data", {}).get("root")
        if cfg.get("profile", "quick") == "quick" or mini_alias(root):
            continue
        base = Path(root).expanduser() if root else data_root()
        out += [d for d in cfg.get("data", {}).get("datasets", []) if d in DATASETS and d not in out
                and not (base / DATASETS[d].folder).is_dir()]
    return out


def drop_absent(jobs: list[tuple]) -> tuple[list[tuple], dict[str, int]]:
    """(the jobs whose datasets are all present, {absent dataset: how many jobs need it}). A full-profile data root
    that does not exist at all is an error naming it (a mistyped UMLKIT_DATA), not a list of absent datasets."""
    from umlkit._paths import data_root
    from umlkit.data.mini import mini_alias
    roots = {Path(c["data"]["root"]).expanduser() if c.get("data", {}).get("root") else data_root()
             for job in jobs for c in configs_of(job[2])
             if c.get("profile", "quick") == "full" and not mini_alias(c.get("data", {}).get("root"))}
    for root in sorted(r for r in roots if not r.is_dir()):
        raise FileNotFoundError(f"the full profile reads its datasets from {root} (UMLKIT_DATA, or --set "
                                f"data.root=...), which does not exist; point UMLKIT_DATA at the folder holding "
                                f"CUB_200_2011/, cars196/, ... and run `umlkit data check` to see what is there")
    kept, absent = [], {}
    for job in jobs:
        missing = absent_datasets(job[2])
        if missing:
            for d in missing:
                absent[d] = absent.get(d, 0) + 1
        else:
            kept.append(job)
    return kept, absent
