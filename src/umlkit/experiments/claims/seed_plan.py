"""The seeds that decide (issue 61, item 2): a plan, frozen before its runs, that gives each open claim the seeds
its power calculation asks for, where that fits a budget.

From the board's inconclusive claims (:func:`umlkit.experiments.claims.evidence.with_needed_seeds`: seeds per side for
80 % power after Holm, from the observed noise), the rule takes, per paper, the claims that need at most
:data:`MAX_PLANNED` seeds and compare rows of their own table (a claim of a table computed from other tables, such as
ooDML's AGS, pools every split and would retrain whole tables), cheapest first, while the paper's estimated cost
stays within :data:`BUDGET_HOURS` on two workers (each run costs the median time of the row's stored records).
Each chosen claim's rows get the next seed numbers up to the needed count. The plan is written to
``configs/seed_plan.yaml`` with a stamp (sha256 of its claims), and :mod:`umlkit.experiments.claims.more_seeds` reads it
as a further stage: the rows train those seeds, and a claim tested on them has had one more look, which
multiplies its p-values before Holm.

Why by hand: the selection is the book's rule over its own board; statsmodels gives the power numbers.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from umlkit._yaml import read_yaml
from umlkit.experiments.claims.verdicts import INCONCLUSIVE

__all__ = ["MAX_PLANNED", "BUDGET_HOURS", "WORKERS", "RULE", "RULE_2", "RULE_3", "choose", "write", "plan_facts"]

MAX_PLANNED = 10      # seeds per side at most
BUDGET_HOURS = 3.0    # per paper, of quick-profile runs on WORKERS workers
WORKERS = 2
RULE = (f"Claims that stayed inconclusive and whose power calculation asks for at most {MAX_PLANNED} seeds per side "
        f"get those seeds on the rows they compare, cheapest first while a paper's estimated cost stays within "
        f"{BUDGET_HOURS:g} h of quick-profile runs on {WORKERS} workers; the list was fixed from the board before any "
        f"of the runs. A claim tested on them has been looked at once more, and its p-values are multiplied by its "
        f"looks before the Holm adjustment.")
RULE_2 = (f"After the first plan's runs, the same rule was applied once more to the board: claims still inconclusive "
          f"whose power calculation asks for at most {MAX_PLANNED} seeds per side got them, within the same budget; "
          f"a claim of a table computed from other tables' runs (ooDML's AGS pools every split of a method) gets its "
          f"seeds on every row it pools. The list was fixed before its runs, and a claim tested on them counts one "
          f"look more.")
RULE_3 = (f"A claim that had the seeds its power calculation asked for and still stayed open (80 % power leaves about "
          f"one such claim in five open) got, once, seeds up to the budget's cap of {MAX_PLANNED} per side; the "
          f"calculation itself now plans for the level of the look those seeds give (alpha divided by the look's "
          f"number as well as by Holm's rank). The list was fixed before its runs, and a claim tested on them counts "
          f"one look more.")


def _row_cost(spec, row, profile: str) -> float:
    """Median seconds of the row's stored records (0 when none is stored: the estimate then says nothing)."""
    from umlkit.experiments.runs.records import find_record
    secs = []
    for seed in spec.seeds_of(row, profile):
        path = find_record(spec.config(row, seed, profile, ()), profile)
        if path is not None:
            secs.append(float(json.loads(path.read_text()).get("seconds", 0.0)))
    return float(np.median(secs)) if secs else 0.0


def _extra(spec, claim, needed: int, profile: str) -> tuple[list, tuple[int, ...]]:
    from umlkit.experiments.claims.more_seeds import rows_of_claim
    rows = [r for r in rows_of_claim(spec, claim) if not r.seed_free]
    have = sorted({s for r in rows for s in spec.seeds_of(r, profile)})
    count = max(0, needed - min(len(spec.seeds_of(r, profile)) for r in rows)) if rows else 0
    start = (max(have) + 1) if have else 0
    return rows, tuple(range(start, start + count))


def _pooled_extra(source, methods, needed: int, profile: str) -> tuple[list, tuple[int, ...]]:
    """A pooled claim has a seed where every pooled row has it: the lowest seeds some row lacks, up to ``needed``."""
    rows = [r for r in source.rows if r.method in methods and not r.seed_free]
    if not rows:
        return [], ()
    common = set.intersection(*(set(source.seeds_of(r, profile)) for r in rows))
    free = (s for s in range(10 * MAX_PLANNED) if s not in common)
    return rows, tuple(next(free) for _ in range(max(0, needed - len(common))))


def choose(board: pd.DataFrame, specs: dict, profile: str = "quick", pooled: dict | None = None,
           to_cap: bool = False) -> pd.DataFrame:
    """The claims the rule takes from ``board`` (needs ``seeds needed``), with ``extra seeds`` and ``hours``
    (estimated, on :data:`WORKERS` workers). ``specs``: ``{(paper, table): Table}`` of the board's claims.
    ``pooled``: ``{(paper, table): f(claim) -> (source Table, methods)}`` for tables computed from another table's
    runs (such a claim gets its seeds on every row of those methods; the entry carries ``pooled rows``).
    ``to_cap`` (:data:`RULE_3`): instead, the claims that already have their needed seeds and stayed open, each
    taken up to :data:`MAX_PLANNED` seeds per side."""
    cand = board[(board["verdict"] == INCONCLUSIVE) & (board["seeds needed"] <= MAX_PLANNED)]
    if to_cap:
        cand = cand[(cand["seeds"] >= cand["seeds needed"]) & (cand["seeds"] < MAX_PLANNED)]
        cand = cand.assign(**{"power seeds": cand["seeds needed"], "seeds needed": MAX_PLANNED})
    chosen, spent = [], {}
    for r in cand.sort_values("seeds needed", kind="stable").to_dict("records"):
        spec = specs.get((r["paper"], r["table"]))
        claim = next((c for c in spec.claims if c.text == r["claim"]), None) if spec is not None else None
        if claim is None:
            continue
        pool = (pooled or {}).get((r["paper"], r["table"]))
        source, methods = pool(claim) if pool is not None else (spec, None)
        rows, seeds = _pooled_extra(source, methods, int(r["seeds needed"]), profile) if pool is not None \
            else _extra(spec, claim, int(r["seeds needed"]), profile)
        if not rows or not seeds:
            continue
        hours = sum(_row_cost(source, row, profile) for row in rows) * len(seeds) / 3600 / WORKERS
        if spent.get(r["paper"], 0.0) + hours > BUDGET_HOURS:
            continue
        spent[r["paper"]] = spent.get(r["paper"], 0.0) + hours
        chosen.append({**r, "owner": spec.paper, "extra seeds": seeds, "hours": hours,
                       "pooled rows": {"table": source.table, "methods": list(methods)} if methods else None})
    return pd.DataFrame(chosen)


def write(chosen: pd.DataFrame, path: Path, profile: str = "quick", rule: str = RULE) -> Path:
    """Freeze ``chosen`` into the plan file, stamped (see :mod:`umlkit.experiments.claims.more_seeds`)."""
    from umlkit.experiments.claims.more_seeds import plan_stamp
    from umlkit.results import atomic_write
    claims: dict = {}
    for r in chosen.to_dict("records"):
        first = {"seeds": int(r["seeds"]), "gap": float(r["gap"]), "p (Holm)": round(float(r["p adjusted"]), 4),
                 "seeds needed": int(r.get("power seeds", r["seeds needed"]))}
        claims.setdefault(r["owner"], {}).setdefault(r["table"], []).append(
            {"claim": r["claim"], "first look": first, "seeds": [int(s) for s in r["extra seeds"]],
             "hours": round(float(r["hours"]), 3), **({"pooled rows": r["pooled rows"]} if r.get("pooled rows")
                                                      else {})})
    data = {"rule": rule, "profile": profile, "budget hours per paper": BUDGET_HOURS, "stamp": plan_stamp(claims),
            "claims": claims}
    atomic_write(Path(path), yaml.safe_dump(data, sort_keys=False, width=120, allow_unicode=True))
    return Path(path)


def plan_facts(board: pd.DataFrame) -> dict[str, str]:
    """Glue for the prose: the plan's claims (``sp_n``), how many have their planned seeds (``sp_done``) and how
    many of those the new look decided (``sp_decided``), the plan's estimated hours (``sp_hours``); the same for the
    second and third plans with the prefixes ``sp2_`` and ``sp3_``; and on the whole board the claims still
    inconclusive (``open_n``,
    ``open_share`` of the tested ones), how many of them need more than :data:`MAX_PLANNED` seeds per side
    (``open_beyond``; the others, ``open_within``, had the seeds a plan gave them) and the median they need
    (``open_median``), and those numbers as one sentence (``open_sentence``; another sentence where none is open)."""
    from umlkit.experiments.claims.verdicts import VERDICTS
    out = {**_stage_facts(board, 1, "sp"), **_stage_facts(board, 2, "sp2"), **_stage_facts(board, 3, "sp3")}
    tested = board[board["raw verdict"].isin(VERDICTS)] if "raw verdict" in board else board.iloc[:0]
    open_ = board[board["verdict"] == INCONCLUSIVE]
    need = open_["seeds needed"] if "seeds needed" in open_ else pd.Series(dtype=float)
    beyond = int(((need > MAX_PLANNED) | need.isna()).sum())
    facts = {**out, "sp_max": str(MAX_PLANNED), "sp_budget": f"{BUDGET_HOURS:g}",
             "open_n": str(len(open_)), "open_share": f"{100 * len(open_) / max(1, len(tested)):.0f} %",
             "open_beyond": str(beyond), "open_within": str(len(open_) - beyond),
             "open_median": f"{need.median():.0f}" if need.notna().any() else "–"}
    facts["open_sentence"] = (
        f"On the whole board {facts['open_n']} claims ({facts['open_share']} of the tested ones) remain inconclusive; "
        f"{beyond} of them need more than {MAX_PLANNED} seeds per side (median {facts['open_median']}), beyond what "
        f"the quick profile's budget of {BUDGET_HOURS:g} h per paper buys, and their line says how many; the other "
        f"{facts['open_within']} were given the seeds a plan asked for and stayed open." if len(open_) else
        "On the whole board no tested claim is inconclusive now: while the second edition retrains, a claim on "
        "stale records is not tested (its verdict reads \"stale records\").")
    return facts


def _stage_facts(board: pd.DataFrame, stage: int, prefix: str) -> dict[str, str]:
    from umlkit.experiments.claims.more_seeds import SEED_PLAN_FILES, plan_path, second_look, stages
    from umlkit.experiments.claims.verdicts import DECIDED
    plans = stages()
    view = second_look(board, stage) if len(plans) > stage else pd.DataFrame(columns=["seeds", "seeds (first look)"])
    done = view[view["seeds"] > view["seeds (first look)"]]
    path = plan_path().with_name(SEED_PLAN_FILES[stage - 1])
    hours = sum(float(e.get("hours", 0.0)) for t in _entries(path) for e in t) if len(plans) > stage else 0.0
    decided = int(done["verdict"].isin(DECIDED).sum()) if len(done) else 0
    return {f"{prefix}_n": str(len(view)), f"{prefix}_done": str(len(done)), f"{prefix}_decided": str(decided),
            f"{prefix}_hours": f"{hours:.1f}"}


def _entries(path: Path) -> list:
    """A seed plan's raw entries (with their estimated hours), read from its file."""
    data = read_yaml(path, {}) if path.exists() else {}
    return [entries for tables in (data.get("claims") or {}).values() for entries in tables.values()]
