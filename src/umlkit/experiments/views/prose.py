"""Numbers for a chapter's prose, taken from the compared tables and glued into the text (myst-nb ``glue``), so a
retrain or the full profile never leaves a stale sentence behind. A chapter collects its facts with :func:`cell`,
:func:`gap` and :func:`verdict` into a ``{name: text}`` dict and calls :func:`glue_facts`; the markdown refers to
them as ``{glue:text}`name```. Sentences whose truth depends on a result use a verdict fact, or carry a test in
``tests/experiments`` that fails when the records disagree."""
from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from umlkit.experiments.claims.verdicts import signed

__all__ = ["cell", "method_value", "fmt", "signed", "gap", "verdict", "glue_facts", "glue_markdown", "number",
           "verdict_counts", "book_display", "frame_html"]


def cell(cmp: pd.DataFrame, row: str, dataset: str, metric: str = "R@1", field: str = "measured",
         section: str | None = None) -> float:
    """One value of a compared table, selected by the reader's row label (and section when labels repeat)."""
    m = (cmp["row"] == row) & (cmp["dataset"] == dataset) & (cmp["metric"] == metric)
    if section is not None:
        m &= cmp["section"].str.startswith(section)
    if m.sum() != 1:
        raise KeyError(f"{row!r} / {dataset!r} / {metric!r}{f' in {section!r}' if section else ''} matches "
                       f"{int(m.sum())} cells, expected 1")
    return float(cmp.loc[m, field].iloc[0])


def method_value(cmp: pd.DataFrame | None, method: str, dataset: str, metric: str = "R@1",
                 field: str = "measured") -> float:
    """One cell of a compared table by its ``method`` cell and dataset; NaN when it was not measured (a chapter's
    prose then says "–")."""
    if cmp is None or cmp.empty:
        return float("nan")
    hit = cmp[(cmp["method"] == method) & (cmp["dataset"] == dataset) & (cmp["metric"] == metric)]
    return float(hit[field].iloc[0]) if len(hit) == 1 else float("nan")


def fmt(value: float, digits: int = 1, spread: float | None = None) -> str:
    text = f"{value:.{digits}f}"
    text = text.lstrip("-") if text.startswith("-") and float(text) == 0 else text   # no "-0.0"
    return text if spread is None or spread == 0 else f"{text} ± {spread:.{digits}f}"


_signed = signed   # for number(), whose keyword ``signed`` hides the function


def gap(a: float, b: float, digits: int = 1) -> str:
    return signed(a - b, digits)


def verdict(claims: pd.DataFrame, text: str) -> str:
    """The verdict of the claim whose text is ``text`` (from :func:`umlkit.experiments.tables.table.check_claims`)."""
    hit = claims[claims["claim"] == text]
    if len(hit) != 1:
        raise KeyError(f"no single claim {text!r}; claims: {claims['claim'].tolist()}")
    return str(hit["verdict"].iloc[0])


def glue_facts(facts: Mapping[str, str | float]) -> None:
    """Glue every fact for the page (nothing is displayed in the cell that calls this)."""
    from myst_nb import glue
    for name, value in facts.items():
        glue(name, value, display=False)


def glue_markdown(facts: Mapping[str, str]) -> None:
    """Glue whole sentences (a rule, a definition) as Markdown, for ``{glue:md}`name``` in the text: they read as
    the text around them, where ``{glue:text}`` would set them in bold like a number."""
    from IPython.display import Markdown
    from myst_nb import glue
    for name, value in facts.items():
        glue(name, Markdown(value), display=False)


def number(x: float | None, signed: bool = False, digits: int = 1) -> str:
    """``x`` rounded for prose ("–" for a missing value, never "-0.0"; ``signed``: "+1.2", but "0.0")."""
    import math
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return _signed(x, digits) if signed else f"{0.0 if round(x, digits) == 0 else x:.{digits}f}"


def verdict_counts(claims: pd.DataFrame, mask) -> str:
    """"2 reproduced, 1 inconclusive" for the selected claims (preliminary verdicts grouped with final ones)."""
    from umlkit.experiments.claims.verdicts import verdict_group
    sub = claims[mask] if not claims.empty else claims
    if sub.empty:
        return "not yet checked (no records)"
    counts = sub["verdict"].map(verdict_group).value_counts()
    return ", ".join(f"{n} {v}" for v, n in counts.items())


def frame_html(df: pd.DataFrame) -> str:
    """A DataFrame as the book shows it: pandas' own HTML table, with "–" for a missing value (NaN, None) instead of
    the raw "NaN"/"None", "0.0" for a value rounded to -0.0, the whole text of every cell (pandas'
    ``display.max_rows`` still applies), and column headers set left over a table of text only (pandas sets every
    header right, which suits numbers)."""
    floats = [i for i, t in enumerate(df.dtypes) if pd.api.types.is_float_dtype(t)]
    if floats:   # a value rounded to -0.0 reads "0.0"
        df = df.copy()
        for i in floats:
            df.isetitem(i, df.iloc[:, i] + 0.0)
    obj = [i for i, t in enumerate(df.dtypes) if pd.api.types.is_object_dtype(t)]
    if obj:   # pandas writes na_rep for NaN only; a None in a text column would read "None"
        df = df.copy()
        for i in obj:
            col = df.iloc[:, i]
            df.isetitem(i, col.where(col.notna(), "–"))
    text = len(df.columns) > 0 and all(pd.api.types.is_string_dtype(t) for t in df.dtypes)   # read from the left
    return df.to_html(na_rep="–", classes="dataframe", max_rows=pd.get_option("display.max_rows"),
                      max_cols=pd.get_option("display.max_columns"), border=0, justify="left" if text else None)


def book_display() -> None:
    """Register :func:`frame_html` as the HTML form of every DataFrame in this IPython kernel (IPython's display
    formatter API; pandas has no option for how a missing value is written) and show whole cell texts
    (``display.max_colwidth``: pandas cuts at 50 characters, which cut claims mid-word), and set matplotlib's
    default text sizes so that a figure's labels read at page width (>= 10 pt). Called by every chapter's
    set-up cell (:func:`umlkit._book.setup_source`); outside IPython only the pandas option is set."""
    pd.set_option("display.max_colwidth", None)
    import matplotlib as mpl  # one plotting style: text a reader can read at page width
    mpl.rcParams.update({"font.size": 10.5, "axes.titlesize": 11.5, "axes.labelsize": 10.5, "xtick.labelsize": 10,
                         "ytick.labelsize": 10, "legend.fontsize": 9.5, "figure.titlesize": 12})
    try:
        from IPython import get_ipython
    except ImportError:   # pragma: no cover - the book extra installs IPython
        return
    shell = get_ipython()
    if shell is not None:
        shell.display_formatter.formatters["text/html"].for_type(pd.DataFrame, frame_html)
