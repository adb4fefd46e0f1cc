"""The second edition's retrain plan: every run a paper's job lists hold that has no current record, in claim order.

The board's second edition retrains every quick-profile record once under the faithful methods, the pinned numerics
and the verdict plan. This module lists what that costs before the compute, and the order the workers take:

0. **sweeps** (job lists named ``*sweep*`` / ``*tuning*``): a changed loss's rate is chosen again on validation
   classes before the table runs that use it (the chosen rate is part of their keys, so those table runs are listed
   after the sweep, with the keys of today's configured rates: re-plan once the rates are chosen again);
1. **headline**: the runs of the table behind the paper's headline claim (:attr:`Paper.headline`);
2. **decided**: the runs of tables with a claim the first edition decided (reproduced, contradicted, smaller, no
   effect, paper's gap excluded; ``data/boards/first_edition.csv``);
3. **open**: the runs of tables whose claims were inconclusive or at the ceiling;
4. **rest**: runs no claim reads (budgets, extra rows, diagnosis sweeps).

A run's state is ``current`` (a record of its key, current fingerprint), ``stale`` (a record of its key trained by
older code, or the previous record of a run whose loss options or method variant changed:
:func:`umlkit.experiments.runs.records.stored_record`) or ``missing``. Its cost is the stored record's training time
(stale), else the median of its row's stored runs, else of its table's (``hours`` is NaN where nothing is known).
Written by hand: the ordering rule is this project's (issue 78).
"""
from __future__ import annotations

import math

import pandas as pd

from umlkit.experiments.claims.editions import first_edition
from umlkit.experiments.claims.verdicts import DECIDED
from umlkit.experiments.runs.records import config_hash, find_record, load_record, normalise_key, stored_record
from umlkit.experiments.tables.registry import get_paper, papers

__all__ = ["run_state", "PRIORITIES", "SECOND_EDITION", "plan_frame", "plan_summary", "ordered_jobs"]

SECOND_EDITION = "second_edition"   # the job-list name `umlkit records train PAPER second_edition` takes
PRIORITIES = ("sweeps", "headline", "decided", "open", "rest")
_SWEEP_WORDS = ("sweep", "tuning")


def _table_priorities(name: str, profile: str) -> dict[str, int]:
    """Per table slug of paper ``name``: 1 headline, 2 a decided first-edition verdict, 3 open claims only."""
    paper, board = get_paper(name), first_edition()
    board = board[board["paper"] == name]
    specs = paper.claim_tables(profile)
    out = {}
    for table, spec in specs.items():
        mine = board[board["table"] == table]
        if paper.headline and (mine["claim"] == paper.headline).any():
            out[spec.slug] = 1
        elif mine["verdict"].isin(DECIDED).any():
            out[spec.slug] = 2
        elif len(mine):
            out[spec.slug] = 3
    return out


def _slug(text: str) -> str:
    return "".join(ch for ch in str(text).lower() if ch.isalnum())


def _state(key: dict, profile: str) -> tuple[str, float]:
    """(state, stored seconds) of one run: current / stale / missing."""
    path = find_record(normalise_key(key), profile)
    rec = load_record(path) if path is not None else stored_record(key, profile)
    if rec is None:
        return "missing", math.nan
    seconds = float(rec["seconds"]) if rec.get("seconds") is not None else math.nan
    return ("stale" if rec["stale"] else "current"), seconds


def _paper_rows(name: str, profile: str) -> list[dict]:
    """Every distinct run of paper ``name``'s job lists (sweeps first), with its priority and state."""
    paper, tables = get_paper(name), _table_priorities(name, profile)
    rows, seen = [], set()
    for order, list_name in sorted(enumerate(paper.job_list_names),
                                   key=lambda t: (not any(w in t[1] for w in _SWEEP_WORDS), t[0])):
        sweep = any(w in list_name for w in _SWEEP_WORDS)
        for job in paper.job_list(list_name, profile):
            h = config_hash(normalise_key(job[2]))
            if h in seen:
                continue
            seen.add(h)
            state, seconds = _state(job[2], profile)
            priority = 0 if sweep else tables.get(_slug(job[0]), 4)
            rows.append({"paper": name, "list": list_name, "table": job[0], "label": job[1], "key_hash": h,
                         "runner": job[3] if len(job) > 3 else "train_analysis", "priority": priority,
                         "state": state, "seconds": seconds, "job": job})
    return rows


def _fill_estimates(frame: pd.DataFrame) -> pd.DataFrame:
    """Runs without a stored time: the median of their row's known runs (label without its seed), else their table's."""
    row = frame["label"].str.replace(r"-seed\d+$", "", regex=True)
    for group in (row, frame["table"]):
        median = frame.groupby([frame["paper"], group])["seconds"].transform("median")
        frame["seconds"] = frame["seconds"].fillna(median)
    return frame


def plan_frame(profile: str = "quick", paper: str | None = None) -> pd.DataFrame:
    """One line per distinct run of every registered paper (or ``paper``): priority, state, estimated seconds; in the
    order the workers take them (priority, then paper, then job-list order)."""
    names = [paper] if paper else list(papers())
    rows = [r for n in names for r in _paper_rows(n, profile)]
    frame = _fill_estimates(pd.DataFrame(rows))
    frame["class"] = [PRIORITIES[p] for p in frame["priority"]]
    frame["order"] = range(len(frame))
    return frame.sort_values(["priority", "order"], kind="stable").reset_index(drop=True)


def plan_summary(frame: pd.DataFrame, workers: int = 2) -> pd.DataFrame:
    """Per class and paper: runs to train (stale + missing), CPU-hours (one thread each), runs without an estimate,
    and the hours until the class is done on ``workers`` workers taken in order."""
    todo = frame[frame["state"] != "current"]
    out = (todo.groupby(["priority", "class", "paper"], sort=True)
           .agg(stale=("state", lambda s: int((s == "stale").sum())),
                missing=("state", lambda s: int((s == "missing").sum())),
                hours=("seconds", lambda s: s.sum() / 3600), unknown=("seconds", lambda s: int(s.isna().sum())))
           .reset_index().drop(columns="priority"))
    out["done after (h)"] = out["hours"].cumsum() / max(1, workers)
    return out.round({"hours": 1, "done after (h)": 1})


def run_state(key: dict, profile: str = "quick") -> str:
    """current / stale / missing: whether the second edition still has to train a run."""
    return _state(key, profile)[0]


def ordered_jobs(paper: str, profile: str = "quick", name: str = SECOND_EDITION) -> list[tuple]:
    """The second edition's jobs of ``paper``, in plan order, those with a current record included, so that the
    list (and each ``--worker I/N`` share of it) is the same whenever a worker starts, however many records the
    others have renewed meanwhile (``records train PAPER second_edition`` trains the runs of its share that have no
    current record, a stale one replaced); ``second_edition:sweeps`` (or another class of :data:`PRIORITIES`) only
    that class's."""
    _, _, cls = name.partition(":")
    if cls and cls not in PRIORITIES:
        raise KeyError(f"{name!r}: the second edition's classes are {', '.join(PRIORITIES)} "
                       f"(e.g. {SECOND_EDITION}:{PRIORITIES[0]})")
    frame = plan_frame(profile, paper)
    return list(frame.loc[frame["class"] == cls, "job"] if cls else frame["job"])
