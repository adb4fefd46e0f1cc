"""Tables as data: a paper table declares its rows, seeds, runners, claims and columns; this module does the rest.

Every paper module (``umlkit.experiments.papers.puma``, ...) describes each of its tables as a :class:`Table`:

* ``rows``: one :class:`Row` per row of the paper, keyed by the paper's own ``section``/``method``/``setting``
  cells (spelled as in ``data/paper_tables/<paper>.csv``, so every measured cell joins its paper cell), with the
  arguments the paper's configuration builder needs (``spec``) and the runner that measures it
  (:mod:`umlkit.experiments.runs.runners`). A row that has no counterpart in the paper (a quick-profile-only variant)
  gets a ``setting`` the paper does not use, and its cells get no paper value.
* ``config``: the paper's builder, ``config(row, seed, profile, overrides) -> record key`` (configurations come
  from ``configs/<paper>/*.yaml``: the YAML files are the single source of settings).
* ``claims``: the paper's "A beats B" statements as :class:`Claim` (two cells each).
* ``unmeasured``: per profile, the reason a paper cell that no row measures cannot be measured
  (``"full-profile only: ..."``); it fills the ``status`` column of the saved results.

Shared functions then run or read the records (:func:`measure`), compare with the paper (:func:`compare`), write
``results/<profile>/<paper>_<table>.csv`` in the long format every paper uses (:func:`save_results`), show the
table in the paper's layout (:func:`side_by_side`) and give each claim a verdict (:func:`check_claims`).
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from umlkit.experiments.claims.more_seeds import planned_seeds
from umlkit.experiments.claims.verdicts import (
    ALPHA,
    HOLM_RULE,
    MIN_SEEDS,
    MISSING,
    NOT_A_TEST,
    NOT_COMPARABLE,
    VERDICT_RULE,
    VERDICT_SUMMARY,
    VERDICTS,
    claim_test,
    holm_adjust,
    is_final,
    verdict_group,
)
from umlkit.experiments.recipes.tuning import NotTuned
from umlkit.experiments.runs.records import (
    DamagedRecord,
    MissingSideFile,
    cached_record,
    normalise_key,
    read_only,
    stored_or_previous,
)
from umlkit.experiments.tables import memo
from umlkit.experiments.tables.claim_check import at_ceiling, check_claims, table_claims
from umlkit.experiments.tables.floors import (
    BELOW,
    COLLAPSED,
    FLOOR_NOISE,
    MARKS,
    Floor,
    floor_noise,
    floor_note,
    mark_floors,
)
from umlkit.experiments.tables.labels import readable
from umlkit.experiments.tables.paper_cells import paper_table
from umlkit.results import atomic_write

__all__ = ["Row", "Claim", "Table", "KEYS", "RESULT_COLUMNS", "ALPHA", "MIN_SEEDS", "VERDICTS", "VERDICT_RULE",
           "VERDICT_SUMMARY",
           "claim_test", "is_final", "MISSING", "HOLM_RULE", "holm_adjust", "Floor", "mark_floors", "floor_note",
           "NOT_COMPARABLE", "NOT_A_TEST", "FLOOR_NOISE", "floor_noise", "BELOW", "COLLAPSED", "verdict_group",
           "measure", "compare", "results_frame", "save_results", "table_claims", "at_ceiling",
           "side_by_side", "metric_blocks",
           "wanted_runs", "missing_runs", "missing_sentence",
           "quoted_rows", "check_claims", "run_table", "stale_note", "borrowed_note",
           "params_rows", "score_rows", "rank_view",
           "rank_views"]

KEYS = ["table", "section", "method", "setting", "dataset", "metric"]
RESULT_COLUMNS = [*KEYS, "measured", "spread", "seeds", "paper", "delta", "status"]


@dataclass(frozen=True)
class Row:
    """One row of a paper table. ``name`` is what a reader sees (default: method or setting); ``spec`` holds the
    arguments of the paper's configuration builder; ``group`` lets a chapter select rows (e.g. Table 2's (a))."""
    method: str = ""
    setting: str = ""
    section: str = ""
    spec: Mapping = field(default_factory=dict)
    runner: str = "train"
    group: str = ""
    name: str = ""
    label: str = ""
    seed_free: bool = False  # the value does not depend on the seed (a frozen pretrained backbone): one record is exact

    @property
    def title(self) -> str:
        return self.name or self.method or self.setting

    def cell(self, dataset: str, metric: str = "R@1") -> dict:
        return {"section": self.section, "method": self.method, "setting": self.setting, "dataset": dataset,
                "metric": metric}


@dataclass(frozen=True)
class Claim:
    """"A beats B": two cells (column values of the compared frame) and the metric. ``paired``: both cells are
    numbers of the same runs (e.g. before and after adaptation), so the test pairs them by seed. ``margin``: the
    claim is "A matches B within margin" (e.g. "PLG is about as good as ELG"), tested by TOST."""
    text: str
    a: Mapping
    b: Mapping
    metric: str = "R@1"
    paired: bool = False
    margin: float | None = None   # "A matches B within margin" (equivalence, TOST) instead of "A beats B"


@dataclass
class Table:
    paper: str
    table: str                      # the paper's table name, e.g. "Table 2"
    rows: list[Row]
    config: Callable[..., dict]     # (row, seed, profile, overrides) -> record key
    seeds: Sequence[int] | Mapping[str, Sequence[int]] = (0,)   # or {group: seeds, "*": every other group}
    scores: Callable[[dict, Row], dict] | None = None  # record result -> {dataset: value}; default result["test"]
    claims: list[Claim] = field(default_factory=list)
    unmeasured: Mapping[str, str | Mapping[str, str]] = field(default_factory=dict)  # profile -> reason for the
                                    # unmeasured paper cells, or {paper method: reason, "*": every other method}
    columns: Sequence[str] | None = None  # the datasets in display order (default: the paper table's); a table
                                          # beyond the paper (no paper rows) must name them
    metric: str = "R@1"
    params: bool = True             # also report the trainable parameters (TrainableParams(M))
    params_dataset: str = ""        # the dataset cell the paper files its parameter counts under ("" for none)
    derive: Callable[..., pd.DataFrame] | None = None  # (profile, train) -> measured frame, for a table computed
                                                       # from other tables' records (no rows of its own)
    floor: Floor | None = None      # where the frozen backbone's (and random init's) cells are, for the floor marks
    in_progress: str | None = None  # a table declared before its runs exist: why its missing records are expected
                                    # (shown with them; the completeness check admits them only for such a table)

    @property
    def slug(self) -> str:
        # "Table S1" -> "tables1", "Fig. S1" -> "figs1"
        return "".join(ch for ch in self.table.lower() if ch.isalnum())

    def seeds_of(self, row: Row, profile: str | None = None) -> tuple[int, ...]:
        """The seeds a row trains with: its own (``spec["seeds"]``), else the table's, or its group's entry when the
        table gives them per group; then, in ``profile``, the extra seeds the plan of
        :mod:`umlkit.experiments.claims.more_seeds` gives the rows its claims compare (none without a profile)."""
        if "seeds" in (row.spec or {}):
            own = tuple(row.spec["seeds"])
        elif isinstance(self.seeds, Mapping):
            own = tuple(self.seeds.get(row.group, self.seeds["*"]))
        else:
            own = tuple(self.seeds)
        return own + tuple(s for s in planned_seeds(self, row, profile) if s not in own)

    def select(self, groups: Sequence[str] | None = None, names: Sequence[str] | None = None) -> list[Row]:
        """Rows of the chosen groups whose title, method or setting is in ``names`` (None: all)."""
        return [r for r in self.rows if (groups is None or r.group in groups)
                and (names is None or {r.title, r.method, r.setting} & set(names))]


def score_rows(table: str, row: Row, seed: int, scores: Mapping, metric: str, columns: Sequence[str]):
    """Long rows of one record's scores: ``{dataset: value}`` in ``metric``, or ``{(dataset, metric): value}`` for
    a table with several metrics."""
    order = {d: i for i, d in enumerate(columns)}
    cells = [((k, metric) if not isinstance(k, tuple) else k, v) for k, v in scores.items()]
    return [{"table": table, "section": row.section, "method": row.method, "setting": row.setting, "row": row.title,
             "seed": seed, "dataset": d, "metric": m, "value": float(v)}
            for (d, m), v in sorted(cells, key=lambda c: order.get(c[0][0], len(order)))]


def params_rows(table: str, row: Row, seed: int, n: int, dataset: str = ""):
    return [{"table": table, "section": row.section, "method": row.method, "setting": row.setting, "row": row.title,
             "seed": seed, "dataset": dataset, "metric": "TrainableParams(M)", "value": n / 1e6}]


def _columns(spec: Table) -> list[str]:
    if spec.columns is not None:
        return list(spec.columns)
    p = paper_table(spec.paper, spec.table)
    return [d for d in dict.fromkeys(p["dataset"].dropna()) if d]


MAX_SEEDS = 10   # every stored seed 0..9 of a row counts (measure's default, the scoreboard)


def measure(spec: Table, profile: str = "quick", rows: Sequence[Row] | None = None,
            seeds: Sequence[int] | Mapping[str, Sequence[int]] | None = None, rerun: bool = False,
            progress: bool = True, log=print, overrides: Sequence[str] = (), train: bool = True) -> pd.DataFrame:
    """Measured cells of ``spec`` in long format (one line per cell and seed), from records or new runs
    (``train=False``: from stored records only; rows without one are left out).

    ``seeds``: one list for every row, or ``{group: seeds}`` (rows of other groups use the table's seeds); a
    seed-free row is measured at the first of its seeds only. By default (``seeds=None``) a row counts every stored
    seed below :data:`MAX_SEEDS`, as the scoreboard does: its own seeds (:meth:`Table.seeds_of`, trained when missing
    and allowed) and any other stored one (read, never trained; e.g. the extra seeds another table's claims asked
    for), so that a run shows the same numbers in every table and chapter.
    Columns: table, section, method, setting, row (the reader's label), seed, dataset, metric, value, record
    (its path), stale (the fingerprint parts that changed, "" when current) and borrowed (True for a seed outside
    the row's own, read because another table's claims asked for it)."""
    return memo.through(spec, profile, seeds, overrides, rows, not train and not rerun,   # a reading: once per process
                        lambda: _measured(spec, profile, rows, seeds, rerun, progress, log, overrides, train))


def wanted_runs(spec: Table, profile: str, rows=None, seeds=None) -> list[tuple[Row, list[int]]]:
    """Each row (of ``rows``, default all) with the seeds :func:`measure` trains or reads as its own: ``seeds`` (one
    list, or ``{group: seeds}``), else the row's (:meth:`Table.seeds_of`); a seed-free row its first seed only."""
    out = []
    for r in list(spec.rows if rows is None else rows):
        own = spec.seeds_of(r, profile)
        s = seeds.get(r.group, own) if isinstance(seeds, Mapping) else (seeds or own)
        s = list(s)[:1] if r.seed_free else list(s)   # one record is exact (as in distinct_jobs)
        out.append((r, [int(x) for x in s]))
    return out


def missing_runs(spec: Table, measured: pd.DataFrame, profile: str, rows=None, seeds=None) -> list[tuple[str, int]]:
    """The (row title, seed) runs of :func:`wanted_runs` that ``measured`` holds no line of (a derived table: none
    are counted, its records belong to other tables)."""
    if spec.derive is not None:
        return []
    have = (set(zip(measured["row"], measured["seed"].astype(int)))
            if not measured.empty and {"row", "seed"} <= set(measured) else set())
    return [(r.title, x) for r, s in wanted_runs(spec, profile, rows, seeds) for x in s if (r.title, x) not in have]


def missing_sentence(missing: Sequence[tuple[str, int]], total: int, most: int = 4) -> str:
    """"missing records: 3 of 12 runs (A: seeds 1, 2; B: seed 0) ..." naming at most ``most`` rows."""
    by_row: dict[str, list[int]] = {}
    for title, seed in missing:
        by_row.setdefault(title, []).append(seed)
    named = [f"{t}: seed{'s' if len(v) > 1 else ''} {', '.join(map(str, v))}" for t, v in list(by_row.items())[:most]]
    more = f"; and {len(by_row) - most} more rows" if len(by_row) > most else ""
    return (f"missing records: {len(missing)} of {total} runs of this table under this chapter's settings "
            f"({'; '.join(named)}{more}); TRAIN=True trains them")


def _measured(spec: Table, profile: str, rows, seeds, rerun: bool, progress: bool, log, overrides,
              train: bool) -> pd.DataFrame:
    """:func:`measure` without the memo."""
    if spec.derive is not None:
        with (nullcontext() if train or rerun else read_only()):
            return spec.derive(profile, train)
    cols = _columns(spec)
    jobs = []
    for r, s in wanted_runs(spec, profile, rows, seeds):
        jobs += [(r, x, True) for x in s]
        if seeds is None and not r.seed_free:
            jobs += [(r, x, False) for x in range(MAX_SEEDS) if x not in s]
    it = jobs
    if progress:
        from umlkit._progress import tqdm
        it = tqdm(jobs, desc=f"{spec.paper} {spec.table}", unit="run")
    out = []
    with (nullcontext() if train or rerun else read_only()):
        for row, seed, own in it:
            lines = _measure_one(spec, row, seed, profile, cols, rerun and own, log, overrides, train and own)
            out += [{**ln, "borrowed": not own} for ln in lines]
    return pd.DataFrame(out)


_DAMAGED_SEEN: set[str] = set()


def _skip_damaged(err: DamagedRecord) -> None:
    """Say once per file (on stderr) that a damaged record was skipped: its run reads as missing."""
    if str(err) not in _DAMAGED_SEEN:
        _DAMAGED_SEEN.add(str(err))
        print(f"skipped: {err}; its cells read as missing records", file=sys.stderr)


def _measure_one(spec: Table, row: Row, seed: int, profile: str, cols, rerun: bool, log, overrides,
                 train: bool) -> list[dict]:
    """The long rows of one (row, seed): its record's scores, trained first when allowed and missing; nothing
    when reading only and the record (or a side file its key needs) is not stored."""
    try:
        key = spec.config(row, seed, profile, overrides)
    except (MissingSideFile, NotTuned):   # read-only: a row whose side file or tuned rate is not there yet is missing
        if train or rerun:
            raise
        return []
    label = f"{row.label or row.title}-seed{seed}"
    if not train and not rerun and stored_or_previous(normalise_key(key), profile) is None:
        return []
    try:
        rec = cached_record(spec.paper, spec.slug, label, key, row.runner, profile, rerun=rerun, log=log)
    except DamagedRecord as err:   # a reader: the damaged file is named once and its cells read as missing
        _skip_damaged(err)
        return []
    result = rec["result"]
    scores = spec.scores(result, row) if spec.scores else result["test"]
    lines = score_rows(spec.table, row, seed, scores, spec.metric, cols)
    if spec.params and "trainable_model" in result:
        lines += params_rows(spec.table, row, seed, result["trainable_model"], spec.params_dataset)
    for ln in lines:
        ln.update(record=rec["path"], stale=",".join(rec["stale"]), seed_free=row.seed_free)
    return lines


def run_table(spec: Table, profile: str = "quick", *, seeds=None, train: bool = False,
              overrides: Sequence[str] = (), floors: bool = True, save_unmeasured: bool = False,
              rows: Sequence[Row] | None = None, rerun: bool = False):
    """One table as a chapter runs it: measured (missing records trained when ``train``; ``rows``: some rows only;
    ``rerun``: retrained even when stored), compared with the paper, floors marked (``floors``) and saved; an
    unmeasured table only with ``save_unmeasured`` and no rows of its own. Returns (measured, compared)."""
    m = measure(spec, profile, rows=rows, seeds=seeds, train=train, rerun=rerun, progress=False,
                overrides=overrides)
    cmp = compare(m, spec.paper) if not m.empty else m
    if floors and not m.empty:
        cmp = mark_floors(spec, cmp)
    if not m.empty or (save_unmeasured and not spec.rows):
        save_results(spec, cmp, profile, rows)
    return m, cmp


def _per_seed(d: pd.DataFrame) -> dict:
    """``{seed: value}`` of one cell (finite values only); a seed measured twice is an error."""
    d = d[np.isfinite(d["value"].astype(float))]
    if d["seed"].duplicated().any():
        raise ValueError(f"a cell has several values for seed(s) {sorted(set(d.loc[d['seed'].duplicated(), 'seed']))}")
    return dict(zip(d["seed"].astype(int), d["value"].astype(float)))


def compare(measured: pd.DataFrame, paper: str | pd.DataFrame) -> pd.DataFrame:
    """Mean, spread (the sample standard deviation over seeds; 0 for one seed) and seed count of every measured
    cell, beside the paper's value (matched on all six keys) and the difference; ``row`` and ``stale`` carried over,
    and, for the claim test, ``values`` (``{seed: value}``) and ``seed_free``."""
    keys = [*KEYS, "row"]
    g = measured.groupby(keys, sort=False)
    out = pd.DataFrame({"measured": g["value"].mean(), "spread": g["value"].std(ddof=1).fillna(0.0),
                        "seeds": g["value"].count()})
    if "seed" in measured:
        out["values"] = g[["seed", "value"]].apply(_per_seed)
    out["seed_free"] = (g["seed_free"].agg(lambda x: bool(x.fillna(False).astype(bool).all()))
                        if "seed_free" in measured else False)
    if "borrowed" in measured:   # seeds read beyond the row's own (another table's claims asked for them)
        out["borrowed"] = g["borrowed"].agg(lambda b: int(b.fillna(False).astype(bool).sum()))
    if "stale" in measured:
        out["stale"] = g["stale"].agg(lambda s: ",".join(sorted({p for v in s for p in v.split(",") if p})))
    out = out.reset_index()
    if isinstance(paper, str):
        paper = pd.concat([paper_table(paper, t, missing_ok=True) for t in measured["table"].unique()])
    p = paper[KEYS + ["value"]].rename(columns={"value": "paper"}).fillna({k: "" for k in KEYS})
    out = out.merge(p, on=KEYS, how="left")
    out["delta"] = out["measured"] - out["paper"]
    return out


def _unmeasured_reason(spec: Table, profile: str, method: str) -> str | None:
    """The table's declared reason (``unmeasured``) why ``method``'s paper cells have no value in ``profile``."""
    status = spec.unmeasured.get(profile)
    if isinstance(status, Mapping):
        status = status.get(method, status.get("*"))
    return status


def results_frame(spec: Table, cmp: pd.DataFrame, profile: str, rows: Sequence[Row] | None = None) -> pd.DataFrame:
    """The saved long format: every measured cell, and every paper cell of the table that no measured cell joins,
    with ``status`` saying why (the table's reason for this profile, or "not run" for a row the chapter skipped)."""
    p = paper_table(spec.paper, spec.table, missing_ok=True).fillna({k: "" for k in KEYS})
    measured = cmp.assign(status="") if not cmp.empty else pd.DataFrame(columns=[*RESULT_COLUMNS])
    if not cmp.empty and spec.floor is not None:   # trained cells below their frozen backbone say so
        marked = mark_floors(spec, cmp)
        measured["status"] = [f"{f}: frozen backbone {z:.1f}" if f else "" for f, z in
                              zip(marked["floor"], marked["frozen"])]
    have = set(map(tuple, measured[KEYS].astype(str).to_numpy()))
    declared = {(r.section, r.method, r.setting) for r in spec.rows}
    chosen = {(r.section, r.method, r.setting) for r in (rows if rows is not None else spec.rows)}
    missing = []
    for _, c in p.iterrows():
        if tuple(str(c[k]) for k in KEYS) in have:
            continue
        rk = (c["section"], c["method"], c["setting"])
        if rk in declared and rk not in chosen:
            status = "not run: row not selected in this execution"
        elif rk in declared:   # a row that runs, but reports nothing for this metric: the table says why
            status = _unmeasured_reason(spec, profile, c["method"]) or \
                f"not measured: this profile reports no {c['metric']} for this row (no reason declared in the table)"
        else:
            status = _unmeasured_reason(spec, profile, c["method"]) or "not measured in this profile"
        missing.append({**{k: c[k] for k in KEYS}, "measured": np.nan, "spread": np.nan, "seeds": 0,
                        "paper": c["value"], "delta": np.nan, "status": status})
    out = pd.concat([measured, pd.DataFrame(missing)], ignore_index=True) if missing else measured
    extra = [c for c in ("row", "stale") if c in out]
    return out[RESULT_COLUMNS + extra]


def save_results(spec: Table, cmp: pd.DataFrame, profile: str, rows: Sequence[Row] | None = None):
    """Write ``results/<profile>/<paper>_<table>.csv`` (long format, see :data:`RESULT_COLUMNS`); returns the path."""
    from umlkit._paths import results_root
    frame = results_frame(spec, cmp, profile, rows)
    path = results_root(profile) / f"{spec.paper}_{spec.slug}.csv"
    atomic_write(path, frame.to_csv(index=False))
    return path


def short_label(label: str) -> str:
    """'(b) Unified metric learning (Full fine-tuning)' -> '(b)'; other labels unchanged."""
    return label.split(" ", 1)[0] if label.startswith("(") and label[1:3].endswith(")") else label


def side_by_side(cmp: pd.DataFrame, metric: str = "R@1", digits: int = 1, columns: Sequence[str] | None = None,
                 paper: bool = True, spread: bool = True) -> pd.DataFrame:
    """The table in the paper's layout: one line per row (in the order measured), one column per dataset, each
    cell "measured ±spread (paper)" (the spread only with several seeds and where it is not 0, "±<0.1" where it rounds
    to 0; the paper's value only where it has one; a
    stale record is marked with †, a cell counting seeds borrowed from another table's runs with ‡, a cell
    below its frozen backbone with ↓ and a collapsed one with ⊥ when ``cmp`` went through :func:`mark_floors`)."""
    sub = cmp[cmp["metric"] == metric]
    cols = list(columns or dict.fromkeys(sub["dataset"]))
    lines = {}
    for _, r in sub.iterrows():
        idx = (short_label(r["section"]), readable(r["row"])) if r["section"] else ("", readable(r["row"]))
        text = f"{r['measured']:.{digits}f}"
        if spread and r["seeds"] > 1 and r["spread"] > 0:   # a spread of 0 (a count, a frozen backbone): none
            small = round(r["spread"], digits) == 0
            text += f" ±<{10 ** -digits:.{digits}f}" if small else f" ±{r['spread']:.{digits}f}"
        if paper:
            text += f" ({r['paper']:.{digits}f})" if pd.notna(r["paper"]) else ""   # no paper cell: no brackets
        if r.get("stale"):
            text += " †"
        if r.get("borrowed", 0) > 0:
            text += " ‡"
        if r.get("floor"):
            text += f" {MARKS[r['floor']]}"
        lines.setdefault(idx, {})[r["dataset"]] = text
    out = pd.DataFrame.from_dict(lines, orient="index")
    out = out[[c for c in cols if c in out.columns]].fillna("")
    out.columns = [c if c else metric for c in out.columns]   # a metric without datasets (parameters) names its column
    out.index = pd.MultiIndex.from_tuples(out.index, names=["", "row"]) if any(i[0] for i in out.index) else \
        pd.Index([i[1] for i in out.index], name="row")
    return out


def metric_blocks(cmp: pd.DataFrame, spec: Table, skip: Sequence[str] = ("R@1",), digits: int = 1) -> pd.DataFrame:
    """The paper's metric blocks of a table in one frame: per dataset, the metrics its paper table prints (in its
    order, less ``skip``, e.g. R@1 shown on its own with its verdicts), columns (dataset, metric), each cell
    "measured (paper)" (the seed spreads are in the R@1 table; left out here so that the blocks fit the page)."""
    p = paper_table(spec.paper, spec.table, missing_ok=True)
    blocks = {d: [m for m in dict.fromkeys(g["metric"]) if m not in skip] for d, g in p.groupby("dataset", sort=False)}
    parts = {}
    for dataset, metrics in blocks.items():
        for metric in metrics:
            view = side_by_side(cmp, metric, digits, columns=[dataset], spread=False)
            if dataset in view:
                parts[(dataset, metric)] = view[dataset]
    if not parts:
        return pd.DataFrame()
    out = pd.DataFrame(parts).fillna("")
    out.columns = pd.MultiIndex.from_tuples(out.columns, names=["", ""])
    return out


def quoted_rows(spec: Table, cmp: pd.DataFrame, profile: str) -> pd.DataFrame:
    """The paper's rows of ``spec`` that this profile does not measure (a row of another backbone, another method's
    published result), one line per row with the reason its cells carry (:func:`results_frame`'s ``status``)."""
    res = results_frame(spec, cmp, profile)
    have = set(zip(cmp["method"], cmp["setting"])) if not cmp.empty else set()
    out = res[res["measured"].isna() & res["status"].astype(bool)]
    out = out[[(m, s) not in have for m, s in zip(out["method"], out["setting"])]]
    out = out.drop_duplicates(["method", "setting"])[["method", "setting", "status"]]
    return (out.assign(setting=out["setting"].map(readable)).rename(columns={"status": "why not measured here"})
            .reset_index(drop=True))


def stale_note(cmp: pd.DataFrame) -> str:
    """A sentence for the chapter: which records behind the table are stale, or that none is."""
    stale = cmp[cmp.get("stale", pd.Series("", index=cmp.index)).astype(str) != ""] if "stale" in cmp else cmp.iloc[:0]
    if stale.empty:
        return "Every record behind this table is current (data, weights and code fingerprints match)."
    parts = sorted({p for v in stale["stale"] for p in v.split(",") if p})
    rows = sorted(set(stale["row"]))
    how = ("`umlkit reproduce --stale` retrains them" if "options" not in parts else
           "`umlkit reproduce --stale` retrains those stale in code, data or weights, `umlkit reproduce` trains the "
           "new configuration of those stale in options")
    shown = ", ".join(rows[:8]) + (f" and {len(rows) - 8} more" if len(rows) > 8 else "")
    text = (f"† {len(rows)} row(s) come from stale records ({', '.join(parts)} changed since they were trained): "
            f"{shown}. No verdict rests on them until {how}.")
    import textwrap
    return textwrap.fill(text, width=92, break_long_words=False, break_on_hyphens=False)   # printed: page width


def borrowed_note(cmp: pd.DataFrame) -> str:
    """A sentence for the chapter naming the rows whose cells count seeds beyond the row's own (‡): the same runs
    (identical keys) that another table's claims asked more seeds of, read here, never trained; "" when none."""
    if "borrowed" not in cmp or not (cmp["borrowed"] > 0).any():
        return ""
    lent = cmp[cmp["borrowed"] > 0]
    rows = [f"{readable(r)} ({int(n)} of {int(k)} seeds)" for r, n, k in
            lent.drop_duplicates("row")[["row", "borrowed", "seeds"]].itertuples(index=False)]
    text = (f"‡ {len(rows)} row(s) also count seeds that another table's claims asked for: the same runs (identical "
            f"record keys), read here, not trained by this table: {', '.join(rows)}.")
    import textwrap
    return textwrap.fill(text, width=92, break_long_words=False, break_on_hyphens=False)


def rank_view(cmp: pd.DataFrame, dataset: str = "Harmonic", metric: str = "R@1", sections: Sequence[str] | None = None,
              gain: tuple[tuple[str, str], tuple[str, str]] | None = None) -> pd.DataFrame:
    """A view of a compared table that carries across scales: each row's rank (1 = best, ties share the better
    rank) among the rows with both a paper and a measured value, in the paper and measured; and, with ``gain =
    ((section prefix, row), (section prefix, row))`` naming a low and a high reference row (e.g. zero-shot and full
    fine-tuning), each row's normalised gain (value - low) / (high - low) in both. The Spearman correlation of the
    two rankings is in ``.attrs["spearman"]``."""
    from scipy.stats import spearmanr
    sub = cmp[(cmp["dataset"] == dataset) & (cmp["metric"] == metric) & cmp["paper"].notna() & cmp["measured"].notna()]
    if sections is not None:
        sub = sub[sub["section"].str.startswith(tuple(sections))]
    if len(sub) < 2:
        raise ValueError(f"rank_view needs at least 2 rows with paper and measured {metric} on {dataset}, "
                         f"got {len(sub)}")
    out = sub[["section", "row", "paper", "measured"]].copy()
    out["paper rank"] = out["paper"].rank(ascending=False, method="min").astype(int)
    out["measured rank"] = out["measured"].rank(ascending=False, method="min").astype(int)
    out["rank shift"] = out["paper rank"] - out["measured rank"]
    if gain is not None:
        def ref(prefix_row):
            prefix, row = prefix_row
            hit = cmp[(cmp["dataset"] == dataset) & (cmp["metric"] == metric) & (cmp["row"] == row)
                      & cmp["section"].str.startswith(prefix)]
            if len(hit) != 1:
                raise KeyError(f"gain reference {prefix_row} matches {len(hit)} rows, expected 1")
            return hit.iloc[0]
        low, high = ref(gain[0]), ref(gain[1])
        for col in ("paper", "measured"):
            out[f"{col} gain"] = ((out[col] - low[col]) / (high[col] - low[col])).round(2)
    out.attrs["spearman"] = float(spearmanr(out["paper"], out["measured"]).correlation)
    out["measured"] = out["measured"].round(1)
    return out.sort_values("paper rank").reset_index(drop=True)


def rank_views(cmps: Mapping[str, pd.DataFrame], dataset: str = "Harmonic", metric: str = "R@1") -> dict:
    """:func:`rank_view` of several compared tables (``{name: cmp}``), keyed ``"<name> (<dataset>)"``; a table with
    fewer than two rows that have both a paper and a measured value (e.g. a chapter run on a subset) is left out."""
    out = {}
    for name, cmp in cmps.items():
        joined = cmp[(cmp["dataset"] == dataset) & (cmp["metric"] == metric) & cmp["paper"].notna()
                     & cmp["measured"].notna()]
        if len(joined) >= 2:
            out[f"{name} ({dataset})"] = rank_view(cmp, dataset, metric)
    return out


def distinct_jobs(specs: Mapping[str, Table], profile: str = "quick",
                  seeds: Sequence[int] | None = None) -> list[tuple]:
    """(record folder, label, key, runner) of every run of the tables ``specs``, seed-major, each configuration once
    (a run two tables share is one job): ``seeds`` for every row, else each row's own (:meth:`Table.seeds_of`), a
    seed-free row only at its first seed."""
    import json
    jobs, seen = [], set()
    order = seeds if seeds is not None else sorted({s for spec in specs.values() for r in spec.rows
                                                    for s in spec.seeds_of(r, profile)})
    for seed in order:
        for spec in specs.values():
            for row in spec.rows:
                own = tuple(seeds) if seeds is not None else spec.seeds_of(row, profile)
                if seed not in own or (row.seed_free and seed != own[0]):
                    continue
                key = spec.config(row, seed, profile, ())
                ident = json.dumps(normalise_key(key), sort_keys=True, default=str)
                if ident not in seen:
                    seen.add(ident)
                    jobs.append((spec.slug, f"{row.label or row.title}-seed{seed}", key, row.runner))
    return jobs
