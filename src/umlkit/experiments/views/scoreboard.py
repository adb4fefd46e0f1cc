"""One scoreboard of every declared claim of the book's papers, read from the stored records.

Each registered paper (:mod:`umlkit.experiments.tables.registry`) declares its tables (rows and claims,
:mod:`umlkit.experiments.tables.table`); :func:`scoreboard` measures every table from the records of a profile without
training anything or computing a side file (every stored seed of a row counts; a claim whose cells lack a record is
listed as "missing records", naming them), compares with the paper's numbers and checks the claims. The verdict
rule is :data:`umlkit.experiments.tables.table.VERDICT_RULE` (a two-sided Welch or paired t-test with at least three
seeds per cell, then Holm within each paper at the verdict plan's looks: *reproduced* / *smaller than the paper's* /
*contradicted* / *paper's gap excluded, no gain shown* / *no effect* / *inconclusive*, with a 95 % interval and the
seeds an open claim needs; with fewer seeds a preliminary *holds, n
seed(s)* / *not reproduced, n seed(s)*).
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pandas as pd

from umlkit.experiments.claims.editions import retrain_reason, with_first_edition
from umlkit.experiments.claims.evidence import MAX_SEEDS
from umlkit.experiments.claims.verdicts import (
    AT_CEILING,
    CONTRADICTED,
    DECIDED,
    INCONCLUSIVE,
    REPRODUCED,
    STALE,
    interval_text,
)
from umlkit.experiments.recipes.tuning import NotTuned
from umlkit.experiments.runs.records import MissingSideFile, normalise_key, read_only, stored_or_previous
from umlkit.experiments.tables.table import MISSING, Table, compare, holm_adjust, measure, table_claims
from umlkit.experiments.views.prose import signed

__all__ = ["scoreboard", "scoreboard_summary", "summary_view", "scoreboard_view", "declared_claims", "missing_records",
           "moved_verdicts", "scoreboard_facts", "save_scoreboard", "family_adjusted", "paper_summaries",
           "board_table", "linked", "moved_view", "paper_findings", "verdicts_beside"]


def _claim_tables(papers, profile: str):
    """(registered paper, table name, table) of every table with declared claims, in the registry's order."""
    from umlkit.experiments.tables.registry import get_paper
    from umlkit.experiments.tables.registry import papers as registered
    for name in papers or registered():
        for table, spec in get_paper(name).claim_tables(profile).items():
            yield name, table, spec


def scoreboard(profile: str = "quick", papers=None) -> pd.DataFrame:
    """Every declared claim: paper, table, claim, the paper's and the measured values, gap, seeds, seed spread,
    verdict (Holm-adjusted within each paper, :data:`umlkit.experiments.tables.table.HOLM_RULE`; ``raw verdict`` and
    ``p`` unadjusted beside it), and whether a record behind it is stale. A claim a cell of which has no stored
    record (or needs a side file that is not stored) keeps its line with the verdict "missing records" and the cells
    named in ``missing``; nothing is trained or written."""
    frames = []
    for paper, name, spec in _claim_tables(papers, profile):
        if not spec.claims:
            continue
        measured = measure(spec, profile, train=False, progress=False, log=None)   # every stored seed
        cmp = compare(measured, spec.paper) if not measured.empty else pd.DataFrame()
        claims = table_claims(spec, cmp)
        stale = bool(not measured.empty and measured["stale"].astype(bool).any())
        frames.append(claims.assign(paper=paper, table=name, profile=profile, stale=stale,
                                    in_progress=spec.in_progress or retrain_reason(paper, name)))
    if not frames:
        return pd.DataFrame(columns=["paper", "table", "claim", "verdict"])
    out = with_first_edition(_evidence(holm_adjust(pd.concat(frames, ignore_index=True), family="paper"), "paper"))
    if "missing" not in out:
        out["missing"] = ""
    out["missing"] = out["missing"].fillna("")
    first = ["paper", "table", "claim"]
    return out[first + [c for c in out.columns if c not in first]]


def _evidence(board: pd.DataFrame, family: str) -> pd.DataFrame:
    """The adjusted board with the seeds an open claim needs and the paper's gap against each interval
    (:mod:`umlkit.experiments.claims.evidence`)."""
    from umlkit.experiments.claims.evidence import with_effect_answers, with_needed_seeds
    return with_effect_answers(with_needed_seeds(board, family))


UNDER_WAY = "with runs under way"   # the missing claims of a table declared before its runs (Table.in_progress)


def _groups(board: pd.DataFrame) -> pd.Series:
    """Each claim's verdict group (:func:`umlkit.experiments.tables.table.verdict_group`), with the missing claims of a
    table declared before its runs (``in_progress``) as :data:`UNDER_WAY`."""
    from umlkit.experiments.tables.table import verdict_group
    groups = board["verdict"].map(verdict_group)
    if "in_progress" in board:
        groups = groups.where(~(board["in_progress"].fillna("").astype(bool) & (groups == MISSING)), UNDER_WAY)
    return groups


def scoreboard_summary(board: pd.DataFrame, declared: dict[str, int] | None = None) -> pd.DataFrame:
    """Claims per paper and verdict (counts; preliminary verdicts grouped as "holds (< 3 seeds)" / "not reproduced
    (< 3 seeds)"), with how many were declared when ``declared`` is given; "checked" leaves out the claims with
    missing records, which have a column of their own (as do those of a table declared before its runs: "runs under
    way")."""
    if board.empty:
        return pd.DataFrame()
    board = board.assign(verdict=_groups(board))
    counts = board.pivot_table(index="paper", columns="verdict", values="claim", aggfunc="count", fill_value=0)
    counts.insert(0, "checked", counts.drop(columns=[MISSING, UNDER_WAY], errors="ignore").sum(axis=1))
    if declared is not None:
        counts.insert(0, "declared", [declared.get(p, 0) for p in counts.index])
    return counts


# the summary's column heads: a verdict's short name where the full one would widen the table past the page
SHORT_HEADS = {"no effect (paper's gap inside the margin)": "no effect, as the paper",
               "paper's gap excluded, no gain shown": "paper's gap excluded", "timing (not a test)": "timing",
               "not a test: the two cells hold the same numbers": "not a test",
               "smaller than the paper's": "smaller than paper"}


def summary_view(summary: pd.DataFrame) -> pd.DataFrame:
    """:func:`scoreboard_summary` as the Every-claim page shows it: one column per paper by its name ("ooDML", not
    "oodml") and one row per verdict (a dozen verdicts side by side would widen the table past the page), the long
    verdict names shortened (:data:`SHORT_HEADS`), no axis labels over the counts."""
    from umlkit.experiments.tables.registry import papers
    names = {k: p.title.split(" (")[0] for k, p in papers().items()}
    out = summary.rename(index=names, columns=SHORT_HEADS).T
    out.index.name = out.columns.name = None
    return out


def _short_test(test: str, p: float) -> str:
    if not isinstance(test, str):   # a claim with missing records was not tested
        return "–"
    if test.startswith("TOST"):
        return f"TOST p={p:.2g}"
    if test.startswith("Welch"):
        return f"Welch p={p:.2g}"
    if test.startswith("paired"):
        return f"paired p={p:.2g}"
    return "exact" if test.startswith("exact") else "–"


def _gap_interval(gap, low, high) -> str:
    """"+1.2 [-0.5, +2.9]": the measured gap and its 95 % interval ("+1.2" without one, "–" without a gap)."""
    if pd.isna(gap):
        return "–"
    ci = interval_text(low, high) if pd.notna(low) and pd.notna(high) and low != high else ""
    return f"{signed(gap)} {ci}".strip()


def _to_decide(verdict: str, needed, beyond, seeds=float("nan")) -> str:
    """What an inconclusive claim would need: "12 seeds per side", "over 1000 per side"; a claim that already has
    the seeds its power calculation asks for says so (80 % power leaves one such claim in five open); "" for the
    others."""
    if verdict != INCONCLUSIVE:
        return ""
    if pd.notna(needed) and pd.notna(seeds) and int(seeds) >= int(needed):
        return f"has the {int(needed)} seeds per side it needs; still open"
    if pd.notna(needed):
        return f"{int(needed)} seeds per side"
    return f"over {MAX_SEEDS} per side" if bool(beyond) else ""


def _shown_verdict(board: pd.DataFrame) -> list[str]:
    """The verdict, with the metric it was decided on where R@1 sat at the ceiling ("inconclusive (on MAP@R)": the
    gap and interval beside it are that metric's)."""
    on = board["decided on"].fillna("") if "decided on" in board else pd.Series("", index=board.index)
    first = board["first edition"].fillna("") if "first edition" in board else pd.Series("", index=board.index)
    return [f"{v} (first edition: {f})" if f else (f"{v} (on {m})" if m else v)
            for v, m, f in zip(board["verdict"], on, first)]


def scoreboard_view(board: pd.DataFrame) -> pd.DataFrame:
    """The board as a reader reads it: per claim the paper's gap (A - B), the measured gap with its 95 % interval,
    the seeds, the test (its kind and the two-sided p times the looks, as Holm adjusts it, "–" before three seeds),
    the Holm-adjusted p, the verdict (a claim at the ceiling with its MAP@R comparison) and, for an inconclusive
    claim, the seeds per side that would decide it; indexed by paper and table when the frame has them (a
    chapter's own claims table has neither)."""
    if board.empty:
        return board
    nothing = pd.Series(np.nan, index=board.index)   # a table none of whose claims has records yet lacks the columns
    board = board.assign(**{c: board[c] if c in board else nothing
                            for c in ("paper A", "paper B", "gap", "p", "test", "low", "high", "seeds needed",
                                      "beyond")})
    keys = [k for k in ("paper", "table") if k in board]
    # the p of the direction the verdict tests (A > B, or B > A for a negative gap), as Holm adjusts it
    shown_p = board["p decision"].fillna(board["p"]) if "p decision" in board else board["p"]
    out = pd.DataFrame({
        **{k: board[k] for k in keys}, "claim": board["claim"],
        "paper gap": (board["paper A"] - board["paper B"]).round(1),
        "measured gap [95 % interval]": [_gap_interval(*t) for t in zip(board["gap"], board["low"], board["high"])],
        "seeds": board["seeds"].astype("Int64"),   # a count: "3", not "3.0" (no count where nothing is measured)
        "test": [_short_test(t, p) for t, p in zip(board["test"], shown_p)],
        **({"p (Holm)": board["p adjusted"].map(lambda x: f"{x:.2g}" if pd.notna(x) else "–")}
           if "p adjusted" in board else {}),
        "verdict": _shown_verdict(board)})
    decide = [_to_decide(*t) for t in zip(board["verdict"], board["seeds needed"], board["beyond"], board["seeds"])]
    if any(decide):
        out["to decide"] = decide
    if "missing" in board and board["missing"].fillna("").astype(bool).any():   # which cells lack records
        out["missing records"] = board["missing"].fillna("")
    return out.set_index(keys) if keys else out


def missing_records(profile: str = "quick", papers=None) -> pd.DataFrame:
    """Every declared (row, seed) of every table that has no stored record, read-only: paper, table, row, seed and
    why (``no record`` for a key no record has, or the missing side file its key names). A table computed from
    other tables' records (``derive``) is covered by those tables. Empty when the record set is complete."""
    lines = []
    with read_only():
        for paper, name, spec in _claim_tables(papers, profile):
            if spec.derive is not None:
                continue
            for row in spec.rows:
                seeds = spec.seeds_of(row, profile)[:1] if row.seed_free else spec.seeds_of(row, profile)
                for seed in seeds:
                    why = _why_missing(spec, row, int(seed), profile)
                    if why:
                        lines.append({"paper": paper, "table": name, "row": row.title, "seed": int(seed), "why": why,
                                      "in progress": spec.in_progress or retrain_reason(paper, name)})
    return pd.DataFrame(lines, columns=["paper", "table", "row", "seed", "why", "in progress"])


def _why_missing(spec: Table, row, seed: int, profile: str) -> str:
    try:
        key = spec.config(row, seed, profile, ())
    except MissingSideFile as err:
        return f"side file: {err}"
    except NotTuned as err:
        return f"rate not chosen yet: {err}"
    return "" if stored_or_previous(normalise_key(key), profile) is not None else "no record"


_FAMILIES: dict[tuple, pd.DataFrame] = {}


def family_board(paper: str, profile: str) -> pd.DataFrame:
    """The registered paper's board, read once per process and results folder (a chapter asks for it twice)."""
    from umlkit._paths import results_root
    memo = (paper, profile, str(results_root(profile)))
    if memo not in _FAMILIES:
        _FAMILIES[memo] = scoreboard(profile, papers=[paper])
    return _FAMILIES[memo]


def family_adjusted(claims: pd.DataFrame, paper: str, profile: str = "quick") -> pd.DataFrame:
    """A chapter's checked claims with the verdicts the scoreboard reports: Holm-adjusted within the paper's family
    (every declared claim of the registered ``paper``), using the chapter's own p-values for its claims and the
    stored records' for the rest of the family. Adds ``raw verdict``, ``p decision`` and ``p adjusted``; ``verdict``
    becomes the adjusted one. The family's board is read once per process and results folder."""
    if claims.empty:
        return claims
    board = family_board(paper, profile)
    cols = [c for c in ("claim", "p", "p against", "looks", "planned looks", "metric", "test gap", "se", "df",
                        "margin", "paper gap", "seeds", "low", "high") if c in board]
    keep = ~board["claim"].isin(set(claims["claim"]))
    # the verdicts of the same rows: a whole Series assigned to an empty selection would bring back every row of the
    # board (with no claim), counting a chapter that holds the whole family twice in the adjustment
    others = board.loc[keep, cols].assign(verdict=board.loc[keep, "raw verdict"])
    fam = pd.concat([claims.assign(_own=True), others.assign(_own=False)], ignore_index=True).assign(_family=paper)
    out = _evidence(holm_adjust(fam, "_family"), "_family")
    out = out[out["_own"].astype(bool)].drop(columns=["_own", "_family"]).reset_index(drop=True)
    return with_first_edition(out, paper)


def paper_findings(paper: str, profile: str = "quick") -> dict[str, str]:
    """A chapter's findings box: ``findings_counts`` (the registered paper's claims by Holm-adjusted verdict) and
    ``findings_headline`` (its headline claim with the paper's and the measured gap), from the paper's family as the
    scoreboard reads it (computed once per process, shared with :func:`family_adjusted`)."""
    facts = paper_summaries(family_board(paper, profile), only=paper)
    return {"findings_counts": facts[f"sum_{paper}"], "findings_headline": facts[f"head_{paper}"]}


def moved_verdicts(board: pd.DataFrame) -> pd.DataFrame:
    """The claims whose raw verdict ("reproduced" or "contradicted" at p < alpha) the family-wise adjustment took
    away: paper, table, claim, raw and adjusted verdict, raw and adjusted p (an open claim that the effect-size
    questions then decide is not a moved verdict)."""
    if board.empty or "raw verdict" not in board:
        return pd.DataFrame(columns=["paper", "table", "claim", "raw verdict", "verdict", "p", "looks", "p (Holm)"])
    moved = board[board["raw verdict"].isin([REPRODUCED, CONTRADICTED]) & (board["raw verdict"] != board["verdict"])
                  ].copy()
    moved["looks"] = moved["looks"].fillna(1).astype(int) if "looks" in moved else 1
    # the raw verdict's p (of its direction), before any doubling for a second look and the cap at 1
    moved["p"] = (np.fmin(moved["p"], moved["p against"]) if "p against" in moved
                  else moved["p decision"] / moved["looks"])
    cols = {"paper": "paper", "table": "table", "claim": "claim", "raw verdict": "raw verdict", "verdict": "verdict",
            "p": "p", "looks": "looks", "p adjusted": "p (Holm)"}
    return moved[list(cols)].rename(columns=cols).reset_index(drop=True)


def moved_view(board: pd.DataFrame) -> pd.DataFrame:
    """:func:`moved_verdicts` as the page shows it, four columns that fit the article: where (paper · table), the
    claim, the verdict before and after the correction, and the p values (unadjusted → Holm; a claim looked at
    twice says that its p was doubled before Holm, so that a raw "reproduced" never stands beside a p above 0.05)."""
    m = moved_verdicts(board)
    return pd.DataFrame({"where": m["paper"] + " · " + m["table"], "claim": m["claim"],
                         "verdict (before → after Holm)": m["raw verdict"] + " → " + m["verdict"],
                         "p → Holm p": [f"{a:.2g} → {b:.2g}" + (f" (x{n}: {n} looks)" if n > 1 else "")
                                        for a, n, b in zip(m["p"], m["looks"], m["p (Holm)"])]})


def scoreboard_facts(board: pd.DataFrame) -> dict[str, str]:
    """Numbers the front page states about the board: claims tested (final verdicts before the correction), how
    many of them p < 0.05 would pass by chance alone, and how many verdicts the correction moved."""
    from umlkit.experiments.tables.table import ALPHA, is_final
    raw = board["raw verdict"] if "raw verdict" in board else board.get("verdict", pd.Series(dtype=str))
    tested = int(raw.map(is_final).sum()) if len(raw) else 0
    return {"n_tested": str(tested), "n_chance": f"{tested * ALPHA:.0f}", "n_moved": str(len(moved_verdicts(board)))}


def save_scoreboard(board: pd.DataFrame, profile: str) -> Path:
    """``results/<profile>/scoreboard.csv``: every claim with its raw and Holm-adjusted p-value and verdict (the
    per-seed values are left out); returns the path."""
    from umlkit._paths import results_root
    from umlkit.results import atomic_write
    path = results_root(profile) / "scoreboard.csv"
    atomic_write(path, board.drop(columns=[c for c in ("values",) if c in board]).to_csv(index=False))
    return path


def paper_summaries(board: pd.DataFrame, only: str | None = None) -> dict[str, str]:
    """The front page's sentences, per registered paper (or ``only`` that one): ``sum_<paper>`` (its claims' verdicts,
    Holm-adjusted) and ``head_<paper>`` (its headline claim: the paper's gap, the measured gap and the verdict)."""
    from umlkit.experiments.tables.registry import papers
    out = {}
    for name, paper in papers().items():
        if only is not None and name != only:
            continue
        sub = board[board["paper"] == name] if not board.empty else board
        counts = _groups(sub).value_counts() if len(sub) else pd.Series(dtype=int)
        order = [*DECIDED, INCONCLUSIVE, STALE, AT_CEILING, "not comparable", "missing records", UNDER_WAY]
        parts = [f"{counts[v]} {v}" for v in order if counts.get(v, 0)]
        parts += [f"{n} {v}" for v, n in counts.items() if v not in order]
        out[f"sum_{name}"] = f"{len(sub)} claims: {', '.join(parts) or 'none checked'}"
        out[f"why_{name}"] = _why_undecided(sub)
        hit = sub[sub["claim"] == paper.headline] if len(sub) else sub
        if len(hit) != 1:
            out[f"head_{name}"] = f"“{paper.headline}”: not on the board"
            continue
        h = hit.iloc[0]
        pg = h.get("paper A", float("nan")) - h.get("paper B", float("nan"))
        paper_gap = f"paper {signed(pg)}, " if pd.notna(pg) else ""   # (the book's own claims have no paper gap)
        gap = signed(h["gap"]) if pd.notna(h.get("gap")) else "–"
        out[f"head_{name}"] = f"“{h['claim']}”: {paper_gap}measured {gap} points, {h['verdict']}"
    return out


def _why_undecided(sub: pd.DataFrame) -> str:
    """Why a paper's undecided claims are undecided, in one sentence for the front page: how many sit at the R@1
    ceiling, how many compare a run below (or never off) its frozen backbone, and what the inconclusive ones would
    need (the median seeds per side of those with a number)."""
    if sub.empty:
        return "nothing checked yet"
    v = sub["verdict"].astype(str)
    parts = []
    if (n := int((v == STALE).sum())):
        parts.append(f"{n} read records trained before the second edition's fixes (their first-edition verdicts "
                     f"stand beside them until the retrain)")
    if (n := int((v == AT_CEILING).sum())):
        parts.append(f"{n} compare two cells at the R@1 ceiling (both at 95 or more, so no gain can show)")
    if (n := int(v.str.startswith("not comparable").sum())):
        parts.append(f"{n} compare a run that fell below, or never moved off, its frozen backbone")
    open_ = sub[v == INCONCLUSIVE]
    if len(open_):
        need = open_["seeds needed"].dropna() if "seeds needed" in open_ else pd.Series(dtype=float)
        parts.append(f"{len(open_)} are inconclusive" + (f" (the median one would need {need.median():.0f} seeds per "
                                                         f"side)" if len(need) else ""))
    return ("Undecided: " + "; ".join(parts) + ".") if parts else "Every checked claim is decided."


def board_table(board: pd.DataFrame) -> pd.DataFrame:
    """The board for the interactive page: one line per claim, the claim's full text, the verdict, gaps rounded to one
    decimal ("–" where there is no paper cell or no measurement), the test with its raw and Holm-adjusted p and its
    seeds in one column, and why a claim is not comparable or which cells lack records; no NaN."""
    if board.empty:
        return pd.DataFrame(columns=["paper", "table", "claim", "verdict"])
    view = scoreboard_view(board).reset_index()

    def num(x, digits=1):
        return signed(x, digits) if pd.notna(x) else "–"
    view["paper gap"] = view["paper gap"].map(num)
    view["seeds"] = view["seeds"].fillna(0).astype(int)
    from umlkit.experiments.tables.table import NOT_COMPARABLE
    why = view["verdict"].str.extract(rf"^{NOT_COMPARABLE}: (.*)$")[0]   # the reason gets a column of its own
    view["verdict"] = view["verdict"].where(why.isna(), NOT_COMPARABLE)
    notes = why.fillna("")
    if "missing records" in view:
        reason = board["in_progress"].fillna("").astype(str).to_numpy() if "in_progress" in board \
            else np.full(len(view), "")   # a table declared before its runs, or retrained: say so, not only what
        head = np.where(reason == "", "missing: ",
                        np.where(np.char.startswith(reason.astype(str), "second edition"),
                                 "runs under way (second edition): ", "runs under way (declared before them): "))
        missing = view.pop("missing records").replace("", "–")
        notes = notes.where(notes != "", head + missing)
    if "to decide" in view:   # an open claim's seeds to decide are its note
        decide = view.pop("to decide").fillna("")
        notes = notes.where(decide == "", "to decide: " + decide)
    if "rules out" in board:   # a decided verdict's note: what its data rule out (unadjusted)
        rules = board["rules out"].fillna("").to_numpy()
        notes = notes.where((notes != "") | (rules == ""), "rules out " + pd.Series(rules, index=notes.index))
    view["note"] = notes.replace({"": "–", "missing: –": "–"})
    view.insert(0, "where", view.pop("paper") + " · " + view.pop("table"))   # one narrow column for both
    view.insert(2, "verdict", view.pop("verdict"))   # beside the claim: what a reader looks for first
    view = view.rename(columns={"paper gap": "paper", "measured gap [95 % interval]": "measured [95 % interval]"}
                       ).fillna("–")
    # the test, its seeds and both p values in one column, so that the page needs no sideways scrolling
    holm = view.pop("p (Holm)") if "p (Holm)" in view else pd.Series("–", index=view.index)
    seeds, test = view.pop("seeds"), view.pop("test").astype(str)
    view.insert(5, "test (p → Holm p)", [f"{t}{' → ' + str(h) if h not in ('', '–') else ''}, {n} seeds" if t != "–"
                                         else "–" for t, h, n in zip(test, holm, seeds)])
    return view


def linked(view: pd.DataFrame) -> pd.DataFrame:
    """:func:`board_table` with each "where" cell a link to the chapter that shows its table (:func:`_chapter_of`)
    and every other text escaped (for an HTML page; itables shows it with ``allow_html=True``)."""
    from html import escape
    view = view.assign(**{c: view[c].map(lambda v: escape(v) if isinstance(v, str) else v)
                          for c in view.columns if c != "where"})   # every other cell stays text
    pages = [_chapter_of(*w.split(" · ", 1)) if " · " in w else None for w in view["where"]]
    return view.assign(where=[f'<a href="{page}.html">{escape(w)}</a>' if page else escape(w)
                              for w, page in zip(view["where"], pages)])


def _chapter_of(paper: str, table: str) -> str | None:
    """The chapter of ``paper`` that shows ``table``: the first whose markdown headings name it (PUMA's Table 3 is on
    its ablations page), else the paper's first chapter; None for an unknown paper."""
    from umlkit.experiments.tables.registry import papers
    entry = papers().get(paper)
    if entry is None or not entry.chapters:
        return None
    for chapter in entry.chapters:
        if table.lower() in _headings(chapter):
            return chapter
    return entry.chapters[0]


@functools.lru_cache(maxsize=16)
def _headings(chapter: str) -> str:
    """The markdown headings of ``book/<chapter>.ipynb``, lower case, one per line ("" when it is not there)."""
    import json

    from umlkit._paths import repo_root
    path = repo_root() / "book" / f"{chapter}.ipynb"
    if not path.is_file():
        return ""
    cells = json.loads(path.read_text())["cells"]
    return "\n".join(line.lower() for c in cells if c["cell_type"] == "markdown"
                     for line in "".join(c["source"]).splitlines() if line.startswith("#"))


def declared_claims(profile: str = "quick") -> dict[str, int]:
    """How many claims each registered paper declares."""
    out: dict[str, int] = {}
    for paper, _, spec in _claim_tables(None, profile):
        out[paper] = out.get(paper, 0) + len(spec.claims)
    return out


def verdicts_beside(spec: Table, cmp: pd.DataFrame, paper: str, profile: str = "quick") -> pd.DataFrame:
    """The claims on one table, to show right under it: claim, the paper's gap, the measured gap with its 95 %
    interval, the seeds and the verdict (Holm-adjusted within ``paper``'s family, as the board has it); an empty
    frame for a table without claims or records. The full test of each stays in the chapter's claims section."""
    shown = ["claim", "paper gap", "measured gap [95 % interval]", "seeds", "verdict"]
    if not spec.claims or cmp.empty:
        return pd.DataFrame(columns=shown)
    view = scoreboard_view(family_adjusted(table_claims(spec, cmp), paper, profile))
    keep = [c for c in (*shown, "to decide") if c in view]
    return view[keep].set_index("claim")
