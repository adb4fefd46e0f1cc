"""The chapter helper every paper chapter uses (issue 73, item 4): one object per chapter that measures its tables
(missing records trained when the chapter's ``TRAIN`` says so), shows each in the paper's shape with the claims on
it right below (Holm-adjusted over the paper's family, as the scoreboard has them), and gathers the chapter's
checked claims for its claims section. A chapter keeps its parameters cell, a few of these calls and its prose.

Written by hand: it is the glue of this library's own services (:func:`umlkit.experiments.tables.table.run_table`,
:func:`~umlkit.experiments.tables.table.side_by_side`, :func:`~umlkit.experiments.views.scoreboard.verdicts_beside`,
:func:`~umlkit.experiments.views.scoreboard.family_adjusted`).
"""
from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

import pandas as pd

from umlkit.experiments.tables import table as tables
from umlkit.experiments.tables.table import Table
from umlkit.experiments.views.scoreboard import family_adjusted, verdicts_beside

__all__ = ["Chapter", "CLAIMS_HEADING", "MISSING_TEXT", "missing_figure"]

CLAIMS_HEADING = "The claims on this table (Holm-adjusted; their tests are under The claims):"
MISSING_TEXT = ("missing records: no stored run of this table under this chapter's settings "
                "(TRAIN=True trains them)")
_OWN = object()   # "the chapter's own seeds" (None is a value: every stored seed)


def missing_figure(what: str):
    """A figure that says its records are missing (a chapter read with an override or before its runs exist)."""
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 1.0))
    ax.axis("off")
    ax.text(0.5, 0.5, f"missing records: no stored run to draw {what} from", ha="center", va="center")
    return fig


def _display(obj) -> None:
    from IPython.display import display
    display(obj)


class Chapter:
    """A paper chapter's tables. ``tables``: the paper's declared tables by name (or a list of them, named by their
    ``table``); ``seeds``, ``train``, ``overrides``, ``rerun``: the chapter's parameters, used by every :meth:`run`;
    ``floors``: mark floors when measuring."""

    def __init__(self, paper: str, tables: Mapping[str, Table] | Sequence[Table], profile: str = "quick", *,
                 seeds=None,
                 train: bool = False, overrides: Sequence[str] = (), floors: bool = False,
                 save_unmeasured: bool = False, rerun: bool = False):
        named = tables if isinstance(tables, Mapping) else {spec.table: spec for spec in tables}
        self.paper, self.tables, self.profile = paper, dict(named), profile
        self.seeds, self.train, self.overrides, self.rerun = seeds, bool(train), list(overrides or ()), bool(rerun)
        self.floors, self.save_unmeasured = floors, save_unmeasured
        self.measured: dict[str, pd.DataFrame] = {}
        self.compared: dict[str, pd.DataFrame] = {}
        self.rows: dict[str, Sequence | None] = {}
        self._seeds: dict[str, object] = {}

    def spec(self, name: str) -> Table:
        if name not in self.tables:
            raise KeyError(f"{self.paper} has no table {name!r}; its tables: {', '.join(self.tables)}")
        return self.tables[name]

    def run(self, name: str, seeds=_OWN, *, train: bool | None = None, overrides: Sequence[str] | None = None,
            rows: Sequence | None = None) -> pd.DataFrame:
        """One table: its records (missing ones trained when the chapter trains; ``rows``: some of its rows),
        compared with the paper and saved; the compared frame (empty without records). ``seeds``, ``train``,
        ``overrides``: this table's own, where it differs from the chapter's (a table read from other tables'
        records trains nothing itself)."""
        self.rows[name] = rows
        self._seeds[name] = self.seeds if seeds is _OWN else seeds
        self.measured[name], self.compared[name] = tables.run_table(
            self.spec(name), self.profile, seeds=self._seeds[name],
            train=self.train if train is None else train,
            overrides=self.overrides if overrides is None else list(overrides), floors=self.floors,
            save_unmeasured=self.save_unmeasured, rows=rows, rerun=self.rerun)
        return self.compared[name]

    def complete(self, name: str) -> bool:
        """Whether every row of the table (of those it was run with) has a stored record: a view that reads across
        rows (the prose's facts, a figure of every row) needs them all; a partial table is shown as it is."""
        measured = self.measured.get(name)
        if measured is None or measured.empty:
            return False
        wanted = {r.title for r in (self.rows.get(name) or self.spec(name).rows)}
        return wanted <= set(measured["row"])

    def missing(self, name: str) -> str:
        """"missing records: N of M runs ... (the rows and seeds)" for the runs of the table (as it was run) that have
        no stored record; "" when none is missing."""
        spec, measured = self.spec(name), self.measured.get(name, pd.DataFrame())
        wanted = tables.wanted_runs(spec, self.profile, self.rows.get(name), self._seeds.get(name))
        gone = tables.missing_runs(spec, measured, self.profile, self.rows.get(name), self._seeds.get(name))
        text = tables.missing_sentence(gone, sum(len(s) for _, s in wanted)) if gone else ""
        return textwrap.fill(text, 110)   # printed: a line the book's page can hold

    def mark_floors(self, name: str, fallback: str = "") -> pd.DataFrame:
        """The table's cells with their floor marks (↓: below its frozen backbone), the floor note printed (or
        ``fallback`` when no cell is marked); the marked frame replaces the chapter's."""
        marked = tables.mark_floors(self.spec(name), self.compared[name])
        print(tables.floor_note(marked) or fallback)
        self.compared[name] = marked
        return marked

    def show(self, name: str, metrics: Sequence = ("R@1",), *, paper: bool = True, views: Sequence | None = None,
             stale: bool = False, claims: bool = True, empty: str | None = MISSING_TEXT) -> None:
        """The table in the paper's shape, then its claims block. ``metrics``: names, or ``(name, digits)`` pairs,
        one :func:`~umlkit.experiments.tables.table.side_by_side` each (titled when more than one); ``views``:
        frames to show instead; ``stale``: print the stale note first. A table without records prints ``empty``
        (None: nothing). Returns nothing, so that a cell ending with it shows no value."""
        cmp = self.compared.get(name)
        if cmp is None:
            raise KeyError(f"table {name!r} was not run in this chapter; call .run({name!r}) first")
        missing = self.missing(name)
        if cmp.empty:
            if empty:
                print(missing or empty if empty is MISSING_TEXT else empty)
            return
        if missing and empty is MISSING_TEXT:   # a partial table is shown as it is, its missing runs named first
            print(missing)
        if stale:
            print(tables.stale_note(cmp))
        for view in views if views is not None else self._sides(cmp, metrics, paper):
            if isinstance(view, str):
                print(view)
            else:
                _display(view)
        if note := tables.borrowed_note(cmp):
            print(note)
        if claims:
            self.claims_block(name)

    @staticmethod
    def _sides(cmp: pd.DataFrame, metrics: Sequence, paper: bool) -> list:
        out = []
        for m in metrics:
            metric, digits = (m, 1) if isinstance(m, str) else m
            out += [metric] if len(metrics) > 1 else []
            out.append(tables.side_by_side(cmp, metric, digits=digits, paper=paper))
        return out

    def claims_block(self, name: str, cmp: pd.DataFrame | None = None) -> None:
        """The claims on one table right under it (nothing for a table without claims or records)."""
        spec, cmp = self.spec(name), self.compared[name] if cmp is None else cmp
        if spec.claims and not cmp.empty:
            print(CLAIMS_HEADING)
            _display(verdicts_beside(spec, cmp, self.paper, self.profile))

    def claims(self, names: Sequence[str] | None = None) -> pd.DataFrame:
        """Every checked claim of the tables this chapter ran (of ``names``, in that order), Holm-adjusted within the
        paper's family."""
        order = list(self.compared) if names is None else list(names)
        checked = [tables.table_claims(self.tables[n], self.compared[n]) for n in order
                   if self.tables[n].claims and not self.compared[n].empty]
        frame = (pd.concat(checked, ignore_index=True) if checked
                 else pd.DataFrame(columns=["claim", "verdict", "margin", "test"]))
        return family_adjusted(frame, self.paper, self.profile)
