"""More seeds where they decide (issue 39, item 4): a second look at the claims that three seeds left open.

The rule, applied once to the three-seed scoreboard and frozen in ``configs/more_seeds.yaml`` before any of the new
runs: a claim whose Holm-adjusted verdict is *inconclusive* although its measured gap is larger than the seed
spread of its cells (the noise of one seed) gets the seeds of ``seeds`` (3 and 4, five in all) on the rows it
compares. Only claims of tables with rows of their own are extended; a claim of a table computed from other
tables' records (ooDML's AGS, Table S3) pools every split of a method, and extending it would retrain whole
tables.

Looking twice at a claim and stopping when the second look decides is a sequential design; a second look at the
same level would raise the chance of a false verdict above alpha. So a claim of the list tested on more seeds than
its first look counts as tested twice: its decision p-value is multiplied by :data:`LOOKS` (Bonferroni over the
two looks) before the per-paper Holm adjustment (:func:`umlkit.experiments.tables.table.holm_adjust`).

Why by hand: the selection is a filter over the scoreboard's columns and the extension a set of table rows; no
library models either.
"""
from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

import pandas as pd
import yaml

from umlkit._paths import repo_folder
from umlkit._yaml import read_yaml
from umlkit.experiments.claims.verdicts import signed

__all__ = ["RULE", "LOOKS", "PLAN_FILE", "SEED_PLAN_FILE", "SEED_PLAN_FILES", "stages", "plan_stamp",
           "select", "plan", "planned_seeds", "rows_of_claim", "looks_of", "jobs",
           "write_plan", "second_look", "second_look_facts", "second_look_view"]

PLAN_FILE = "more_seeds.yaml"
SEED_PLAN_FILE = "seed_plan.yaml"   # the later plan (:mod:`umlkit.experiments.claims.seed_plan`), per-claim seeds
# the seed plans in the order they were frozen: the first, the one made from the board after its runs, and the one
# that took claims left open with their needed seeds up to the cap
SEED_PLAN_FILES = (SEED_PLAN_FILE, "seed_plan_2.yaml", "seed_plan_3.yaml")
PROFILE = "quick"   # the profile whose scoreboard the plan was made from, and whose tables it extends
LOOKS = 2
RULE = (
    "Claims whose Holm-adjusted verdict was inconclusive at three seeds although the measured gap exceeded the seed "
    "spread of its cells got two more seeds (3 and 4) on the rows they compare; the list was fixed from the "
    "three-seed scoreboard before any of those runs. A claim tested on its extra seeds is looked at twice, so its "
    "p-value is doubled (Bonferroni over the two looks) before the Holm adjustment.")


def select(board: pd.DataFrame) -> pd.DataFrame:
    """The claims of a scoreboard (:func:`umlkit.experiments.views.scoreboard.scoreboard`) that the rule extends."""
    gap, spread = board["gap"].abs(), board["seed spread"].fillna(0.0)
    return board[(board["verdict"] == "inconclusive") & board["p adjusted"].notna() & (gap > spread)]


def write_plan(board: pd.DataFrame, path: Path | None = None, seeds=(3, 4),
               owners: Mapping[str, Mapping[str, str]] | None = None) -> Path:
    """Freeze the rule's selection on ``board`` into the plan file (``configs/more_seeds.yaml``), each claim with
    its first look (seeds, measured gap, Holm-adjusted p). ``owners``: ``{registered paper: {table: the paper whose
    table spec it is}}`` where they differ (the regime map's tables are PUMA's specs: pass
    ``{n: {t: s.paper for t, s in p.claim_tables("quick").items()} for n, p in papers().items()}``); by default
    each paper owns its tables."""
    from umlkit.results import atomic_write
    claims: dict = {}
    for r in select(board).to_dict("records"):
        owner = (owners or {}).get(r["paper"], {}).get(r["table"], r["paper"])
        first = {"seeds": int(r["seeds"]), "gap": float(r["gap"]), "p (Holm)": round(float(r["p adjusted"]), 4)}
        claims.setdefault(owner, {}).setdefault(r["table"], []).append(
            {"claim": r["claim"], "first look": first})
    plan_data = {"rule": RULE, "profile": PROFILE, "seeds": list(seeds), "claims": claims}
    text = yaml.safe_dump(plan_data, sort_keys=False, width=120,
                          allow_unicode=True)
    path = Path(path or plan_path())
    atomic_write(path, text)
    return path


def plan_path() -> Path:
    return repo_folder("configs", what="the plan of extra seeds") / PLAN_FILE


@lru_cache(maxsize=4)
def _load(path: str) -> dict:
    p = Path(path)
    if not p.exists():
        return {"seeds": [], "claims": {}, "first": {}, "profile": PROFILE}
    data = read_yaml(p, {})
    raw = data.get("claims") or {}
    if not isinstance(raw, Mapping) or not all(isinstance(s, int) for s in data.get("seeds", [])) or not all(
            isinstance(t, Mapping) for t in raw.values()):
        raise ValueError(f"{p}: expected 'seeds: [int, ...]' and 'claims: {{paper: {{table: [{{claim: text, "
                         f"first look: {{...}}}}, ...]}}}}'")
    _check_stamp(p, data)
    _no_repeats(p, "seeds", data.get("seeds", []))
    claims, first, own, pooled = {}, {}, {}, {}
    for paper, tables in raw.items():
        for table, entries in tables.items():
            for e in entries:
                text = e["claim"] if isinstance(e, Mapping) else str(e)
                claims.setdefault(paper, {}).setdefault(table, []).append(text)
                first[(paper, table, text)] = dict(e.get("first look", {})) if isinstance(e, Mapping) else {}
                if text in claims[paper][table][:-1]:
                    raise ValueError(f"{p}: claim {text!r} is listed twice under {paper} / {table}; each claim once")
                own[(paper, table, text)] = tuple(e.get("seeds") or data.get("seeds", [])) \
                    if isinstance(e, Mapping) else tuple(data.get("seeds", []))
                _no_repeats(p, f"seeds of {text!r}", own[(paper, table, text)])
                if isinstance(e, Mapping) and e.get("pooled rows"):
                    pooled[(paper, table, text)] = _pooled_rows(p, e["pooled rows"])
    return {"seeds": list(data.get("seeds", [])), "claims": claims, "first": first, "claim_seeds": own,
            "pooled": pooled, "profile": data.get("profile", PROFILE)}


def _no_repeats(path: Path, what: str, seeds) -> None:
    """A seed named twice would train one run where the plan counts two: refused, naming the file and the seed."""
    seen = [s for i, s in enumerate(seeds) if s in list(seeds)[:i]]
    if seen:
        raise ValueError(f"{path}: {what} lists seed {seen[0]} twice ({list(seeds)}); each seed once")


def _pooled_rows(path: Path, value) -> tuple[str, tuple[str, ...]]:
    """A claim of a table computed from another table's runs (ooDML's AGS pools every split of a method) names
    the rows it pools: ``{table: name, methods: [...]}``; the plan's seeds go to every row of those methods."""
    if not (isinstance(value, Mapping) and isinstance(value.get("table"), str)
            and isinstance(value.get("methods"), list) and value["methods"]):
        raise ValueError(f"{path}: 'pooled rows' = {value!r}: expected {{table: name, methods: [method, ...]}}")
    return value["table"], tuple(str(m) for m in value["methods"])


def plan_stamp(claims) -> str:
    import hashlib
    import json
    return hashlib.sha256(json.dumps(claims, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _check_stamp(path: Path, data: Mapping) -> None:
    """A plan that carries a ``stamp`` (the sha256 of its claims block, written when it was frozen) must still
    match it: a plan edited after it was frozen is refused."""
    if "stamp" in data and data["stamp"] != plan_stamp(data.get("claims") or {}):
        raise ValueError(f"{path}: the plan was edited after it was frozen (stamp {data['stamp']} does not match its "
                         f"claims); make a new plan instead of editing this one")


def stages() -> list[dict]:
    """Every frozen plan, in the order they were made: ``configs/more_seeds.yaml`` (the second look), then
    ``configs/seed_plan.yaml`` (the seeds that decide, :mod:`umlkit.experiments.claims.seed_plan`) and
    ``configs/seed_plan_2.yaml`` (the same rule on the board after the first plan's runs) and
    ``configs/seed_plan_3.yaml`` (open claims that had their needed seeds, up to the cap) when present."""
    extra = [plan_path().with_name(name) for name in SEED_PLAN_FILES]
    return [plan(), *(_load(str(path)) for path in extra if path.exists())]


def plan(path: Path | None = None) -> dict:
    """``{"seeds": [...], "claims": {paper: {table: [claim text, ...]}}, "first": {(paper, table, text): first
    look}}`` from the plan file (empty without one);
    ``paper`` is the tables' own paper (:attr:`umlkit.experiments.tables.table.Table.paper`)."""
    return _load(str(path or plan_path()))


def _planned_claims(spec, stage: dict | None = None) -> list:
    texts = set((stage or plan())["claims"].get(spec.paper, {}).get(spec.table, []))
    return [c for c in spec.claims if c.text in texts]


def _cells(claims) -> set[tuple[str, str, str]]:
    """The (section, method, setting) row cells ``claims`` compare."""
    return {(s.get("section", ""), s.get("method", ""), s.get("setting", "")) for c in claims for s in (c.a, c.b)}


def looks_of(spec, text: str, seeds: int) -> int:
    """How many looks the test of claim ``text`` of table ``spec`` at ``seeds`` seeds had: one, plus one for every
    plan (:func:`stages`) that lists it and whose seeds it is tested on (more seeds than that plan's first look);
    a listed claim still at a plan's first look, in a table the plan could not extend or in another profile, was
    not looked at again."""
    looks = 1
    for stage in stages():
        first = stage["first"].get((spec.paper, spec.table, text))
        if first is not None and seeds > int(first.get("seeds", 0)):
            looks += 1
    return looks


def rows_of_claim(spec, claim) -> list:
    """The rows of ``spec`` whose cells ``claim`` compares (none for a table computed from other tables)."""
    cells = _cells([claim])
    return [r for r in spec.rows if (r.section, r.method, r.setting) in cells]


def _row_seeds(spec) -> dict:
    """``{(section, method, setting): extra seeds}`` of the rows the plans' claims on ``spec`` compare (once per
    table object)."""
    cached = spec.__dict__.get("_planned_cells")
    if cached is None:
        cached = {}
        for stage in stages():
            for c in _planned_claims(spec, stage):
                extra = stage["claim_seeds"].get((spec.paper, spec.table, c.text), ())
                for cell in _cells([c]):
                    cached[cell] = tuple(sorted(set(cached.get(cell, ())) | set(extra)))
            for (paper, claim_table, text), (table, methods) in stage.get("pooled", {}).items():
                if (paper, table) != (spec.paper, spec.table):
                    continue
                extra = stage["claim_seeds"][(paper, claim_table, text)]
                for cell in {(r.section, r.method, r.setting) for r in spec.rows if r.method in methods}:
                    cached[cell] = tuple(sorted(set(cached.get(cell, ())) | set(extra)))
        spec.__dict__["_planned_cells"] = cached
    return cached


def planned_seeds(spec, row, profile: str | None) -> tuple[int, ...]:
    """The extra seeds the plans give ``row`` of ``spec`` in ``profile`` (empty when no planned claim compares it,
    or in another profile than the plans')."""
    if profile != plan()["profile"] or not spec.claims:
        return ()
    return _row_seeds(spec).get((row.section, row.method, row.setting), ())


def jobs(specs: Mapping, profile: str = "quick") -> list[tuple]:
    """(record folder, label, key, runner) of every planned extra run of ``specs`` (a run two claims share once;
    none in another profile than the plans')."""
    import json

    from umlkit.experiments.runs.records import normalise_key
    out, seen = [], set()
    if profile != plan()["profile"]:
        return out
    planned = sorted({s for spec in specs.values() for row in spec.rows for s in planned_seeds(spec, row, profile)})
    for seed in planned:   # seed by seed: every planned claim gets its next seed on both rows before the one after
        for spec in specs.values():
            for row in spec.rows:
                if seed not in planned_seeds(spec, row, profile):
                    continue
                key = spec.config(row, seed, profile, ())
                ident = json.dumps(normalise_key(key), sort_keys=True, default=str)
                if ident not in seen and not row.seed_free:
                    seen.add(ident)
                    out.append((spec.slug, f"{row.label or row.title}-seed{seed}", key, row.runner))
    return out


def second_look(board: pd.DataFrame, stage: int = 0) -> pd.DataFrame:
    """The claims of plan ``stage`` (:func:`stages`; 0: ``configs/more_seeds.yaml``) on ``board`` beside the look
    the plan was made from: paper, table, claim, that look's gap and Holm p, and now the seeds, gap, Holm p (with
    the multiplied p) and verdict."""
    plans = stages()
    first = {(t, c): v for (_, t, c), v in plans[stage]["first"].items()} if stage < len(plans) else {}
    rows = []
    for r in board.to_dict("records"):
        f = first.get((r["table"], r["claim"]))
        if f is None:
            continue
        rows.append({"paper": r["paper"], "table": r["table"], "claim": r["claim"], "gap (3 seeds)": f.get("gap"),
                     "p Holm (3 seeds)": f.get("p (Holm)"), "seeds (first look)": f.get("seeds"),
                     "seeds": r["seeds"], "gap": r["gap"], "p Holm": r.get("p adjusted"), "verdict": r["verdict"]})
    return pd.DataFrame(rows, columns=["paper", "table", "claim", "gap (3 seeds)", "p Holm (3 seeds)",
                                       "seeds (first look)", "seeds", "gap", "p Holm", "verdict"])


def second_look_facts(board: pd.DataFrame) -> dict[str, str]:
    """Glue for the prose: how many claims the plan lists (``more_n``), how many of them have their extra seeds
    (``more_done``) and how many not (``more_left``: claims of tables computed from whole other tables, such as
    ooDML's AGS, which the plan cannot extend), and how many of those extended the second look decided
    (``more_decided``); and how many seeds the plan adds (``more_extra``) to a first look's (``more_first``)."""
    from umlkit.experiments.claims.verdicts import DECIDED, MIN_SEEDS
    view = second_look(board)
    done = view[view["seeds"] > view["seeds (first look)"]]
    return {"more_n": str(len(view)), "more_done": str(len(done)), "more_left": str(len(view) - len(done)),
            "more_decided": str(int((done["verdict"].isin(DECIDED)).sum())),
            "more_extra": str(len(plan().get("seeds") or ())), "more_first": str(MIN_SEEDS)}


def second_look_view(board: pd.DataFrame, stage: int = 0) -> pd.DataFrame:
    """:func:`second_look` as the page shows it, five columns that fit the article: where (paper · table), claim,
    the plan's look and the claim now (gap in points and Holm p), and the verdict."""
    v = second_look(board, stage)

    def look(g, p, n) -> str:   # a claim that is not comparable (a row below its floor) has no test, so no p
        return f"{signed(g)}, {'not tested' if pd.isna(p) else f'p {p:.2g}'} ({int(n)} seeds)"

    return pd.DataFrame({
        "where": v["paper"] + " · " + v["table"], "claim": v["claim"],
        "first look": [look(*t) for t in zip(v["gap (3 seeds)"], v["p Holm (3 seeds)"], v["seeds (first look)"])],
        "now": [look(*t) for t in zip(v["gap"], v["p Holm"], v["seeds"])],
        "verdict": v["verdict"]})
