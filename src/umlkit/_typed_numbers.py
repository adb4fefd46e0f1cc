"""Numbers typed into the book's prose (issue 59, item 3): a sentence that states a measured number by hand goes
stale when the records change, so every number in a chapter's markdown must be glued, a paper's number, a setting,
or allowed with a reason.

What is read: the markdown cells of ``book/*.ipynb``, without glued roles, inline code, math, link targets,
cross-reference roles, code blocks, table / figure / equation / section / split references, citation years and
citation brackets; a number is a run of digits (with thousands commas and decimals) that is not part of a name
(``R@1``, ``ViT-S/16``, ``CUB200`` and ``128-d`` are names). Allowed without a word: a value of the papers' tables
(``data/paper_tables/*.csv``, as printed with 0, 1 or 2 decimals) and any number written in a configuration or a
paper's declarations (``configs/**/*.yaml``, ``src/umlkit/experiments/papers/*/tables.yaml``). Everything else
needs an entry in ``book/_typed_numbers.yaml`` (``{chapter: {number: reason}}``); an entry no chapter uses any more
is reported too, so the list cannot outlive its sentences.

Why by hand: no prose linter knows which numbers a book glues; the rule is this book's.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from umlkit._yaml import read_yaml

__all__ = ["typed_numbers", "unexplained_numbers", "ALLOW_FILE"]

ALLOW_FILE = "book/_typed_numbers.yaml"
NUMBER = re.compile(r"(?<![\w.@/\-])(\d+(?:,\d{3})*(?:\.\d+)?)(?![\w@/]|\.\d)")
_REFERENCE = re.compile(r"\b(?:Tables?|Figs?\.|Figures?|Eqs?\.|Secs?\.|Sections?|Appendix|splits?)\s+S?\d+(?:\.\d+)?"
                        r"(?:\s*(?:[–\-,]|and)\s*S?\d+(?:\.\d+)?)*")
_STRIP = [re.compile(p, re.S) for p in (
    r"```.*?```", r"\{glue:[a-z]+\}`[^`]*`", r"\{(?:doc|ref|numref|eq)\}`[^`]*`", r"`[^`]*`", r"\$\$.*?\$\$",
    r"\$[^$]*\$", r"<!--.*?-->")]


def _prose(text: str) -> str:
    for pattern in _STRIP:
        text = pattern.sub(" ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    text = _REFERENCE.sub(" ", text)
    text = re.sub(r"\bS\d+\b|\b(?:19|20)\d\d\b|\[\d+(?:,\s*\d+)*\]", " ", text)
    return text


def typed_numbers(root: str | Path = ".") -> list[dict]:
    """Every number typed in a chapter's markdown: ``{"chapter", "cell", "number", "context"}``."""
    out = []
    for path in sorted(Path(root, "book").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            text = _prose("".join(cell["source"]))
            for m in NUMBER.finditer(text):
                context = " ".join(text[max(0, m.start() - 50):m.end() + 30].split())
                out.append({"chapter": path.stem, "cell": cell.get("id", ""), "number": m.group(1),
                            "context": context})
    return out


def _known_numbers(root: Path) -> set[str]:
    """The papers' table values (0, 1 and 2 decimals) and every number written in a configuration."""
    import csv
    known: set[str] = set()
    for path in Path(root, "data", "paper_tables").glob("*.csv"):
        with open(path, newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                try:
                    v = float(row["value"])
                except (TypeError, ValueError):
                    continue
                known |= {f"{v:g}", f"{v:.1f}", f"{v:.2f}", f"{v:,.0f}"}
    declared = Path(root, "src", "umlkit", "experiments", "papers").glob("*/tables.yaml")
    for path in [*Path(root, "configs").rglob("*.yaml"), *declared]:
        known |= {m.group(1) for m in NUMBER.finditer(path.read_text(encoding="utf-8"))}
    return {k.replace(",", "") for k in known}


def unexplained_numbers(root: str | Path = ".") -> tuple[list[dict], list[str]]:
    """(typed numbers that are neither known nor allowed, allow-list entries no chapter uses any more)."""
    root = Path(root)
    allow_path = root / ALLOW_FILE
    allowed = read_yaml(allow_path) if allow_path.exists() else {}
    if not isinstance(allowed, dict) or not all(isinstance(v, dict) and all(isinstance(r, str) and r.strip()
                                                                            for r in v.values())
                                                for v in allowed.values()):
        raise ValueError(f"{allow_path}: expected {{chapter: {{number: reason}}}} with a reason for every number")
    known, found, used = _known_numbers(root), [], set()
    for t in typed_numbers(root):
        key = (t["chapter"], t["number"])
        if t["number"] in {str(k) for k in allowed.get(t["chapter"], {})}:
            used.add(key)
        elif t["number"].replace(",", "") not in known:   # "2,000" in prose is 2000 in a configuration
            found.append(t)
    stale = [f"{c}: {n}" for c, entries in allowed.items() for n in entries if (c, str(n)) not in used]
    return found, stale
