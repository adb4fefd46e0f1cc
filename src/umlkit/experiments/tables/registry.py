"""The registry of the book's papers (and of its own experiments built on them, e.g. the regime map), in the style of
the loss and method registries (:mod:`umlkit._registry`) and of timm's ``register_model``: each paper package
registers itself once (``ENTRY = register_paper(Paper(...))`` in its ``__init__``), and every consumer - the
scoreboard, ``umlkit records train|status``, ``umlkit reproduce`` - reads :func:`papers`.

The shared layer names no paper. :func:`papers` *discovers* them: every package under ``experiments/papers/`` that
holds a ``tables.yaml``, then every paper package in the folders of ``UMLKIT_PAPERS`` (a researcher's own paper,
outside the source tree), is imported once, and importing it registers it. Nothing keeps a second list, so adding
a paper is its package, its configs, its paper-table CSV and its chapter (the README's development section).
The order is the book's: the position of a paper's first chapter in ``_toc.yml``; the book's own experiments
(``own=True``) come after the papers they build on, and a paper whose chapter is not in the book comes last.

A :class:`Paper` says what the rest of the book needs of a paper and nothing more: the tables whose claims go on the
scoreboard, the named job lists that fill its record set outside a chapter, the folder its records live in, and
its chapters.
"""
from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from umlkit._registry import add_entry
from umlkit._yaml import read_yaml

__all__ = ["Paper", "register_paper", "papers", "get_paper", "paper_packages", "PAPERS_ENV"]

PAPERS_ENV = "UMLKIT_PAPERS"   # folders (os.pathsep-separated) of paper packages outside the source tree


@dataclass(frozen=True)
class Paper:
    """``name``: the registry key (the CLI's and the scoreboard's name); ``claim_tables(profile)``: its tables with
    declared claims, by name; ``job_lists``: ``{name: builder(profile) -> [(table, label, key[, runner])]}``;
    ``records``: the folder under ``results/<profile>/records/`` its job lists write to (default: ``name``);
    ``chapters``: the book chapters (notebook stems) that present it; ``headline``: the declared claim the front
    page quotes with its verdict; ``link``: the paper's public page, which the front page and its first chapter's
    opening paragraph link (a test checks both)."""
    name: str
    claim_tables: Callable[[str], dict]
    job_lists: Mapping[str, Callable[[str], list]] = field(default_factory=dict)
    records: str = ""
    chapters: tuple[str, ...] = ()
    title: str = ""
    headline: str = ""   # the claim the front page quotes for this paper (a declared claim's text)
    link: str = ""       # where the paper is published (arXiv abstract page); the front page and chapter link it
    own: bool = False    # the book's own experiment built on the papers (listed after them)

    @property
    def build(self) -> Callable:   # the registry's duplicate rule compares what builds an entry
        return self.claim_tables

    @property
    def records_folder(self) -> str:
        return self.records or self.name

    @property
    def job_list_names(self) -> list[str]:
        """The paper's own job lists, then ``more_seeds`` (every paper has it: the extra seeds
        :mod:`umlkit.experiments.claims.more_seeds` plans for its claims)."""
        return [*self.job_lists, *([MORE_SEEDS] if MORE_SEEDS not in self.job_lists else [])]

    def job_list(self, name: str, profile: str = "quick") -> list[tuple]:
        """The named job list for ``profile``; an unknown name is an error naming the paper's lists."""
        if name == MORE_SEEDS and name not in self.job_lists:
            from umlkit.experiments.claims import more_seeds
            return more_seeds.jobs(self.claim_tables(profile), profile)
        if name not in self.job_lists:
            raise KeyError(f"unknown {self.name} job list {name!r}; choose one of {', '.join(self.job_list_names)}")
        return self.job_lists[name](profile)


MORE_SEEDS = "more_seeds"
_PAPERS: dict[str, Paper] = {}


def register_paper(paper: Paper) -> Paper:
    """Add ``paper`` under its name (the same paper registered again replaces its entry; another under a taken name
    is an error)."""
    add_entry(_PAPERS, "paper", paper.name, paper)
    return paper


def _is_package(folder: Path) -> bool:
    return (folder / "__init__.py").is_file() and (folder / "tables.yaml").is_file() and folder.name.isidentifier()


# paper packages that could not be used: folder -> why (named by get_paper and papers(); the others still work)
BROKEN: dict[str, str] = {}


def _half_package(folder: Path) -> str | None:
    """Why an outside folder that looks like a paper package is not one (None when it is one, or is no package)."""
    if (folder / "__init__.py").is_file() and not (folder / "tables.yaml").is_file():
        return f"{folder}: has __init__.py but no tables.yaml (every paper package declares its tables there)"
    if (folder / "tables.yaml").is_file() and not (folder / "__init__.py").is_file():
        return f"{folder}: has tables.yaml but no __init__.py (the file that registers the paper)"
    return None


def paper_packages() -> list[tuple[str, Path]]:
    """(importable module name, folder) of every paper package: those under ``experiments/papers/``, then those of
    ``UMLKIT_PAPERS`` (each entry a paper package's folder or a folder of them; a missing folder is an error naming
    the variable)."""
    here = Path(__file__).resolve().parents[1] / "papers"
    found = [(f"umlkit.experiments.papers.{p.name}", p) for p in sorted(here.iterdir()) if _is_package(p)]
    for entry in filter(None, os.environ.get(PAPERS_ENV, "").split(os.pathsep)):
        folder = Path(entry).expanduser().resolve()
        if not folder.is_dir():
            raise FileNotFoundError(f"{PAPERS_ENV}={entry!r}: no such folder; expected a paper package (a folder "
                                    f"with __init__.py and tables.yaml) or a folder of them")
        candidates = [folder] if _is_package(folder) or _half_package(folder) else sorted(folder.iterdir())
        for p in candidates:
            if p.is_dir() and (why := _half_package(p)):
                BROKEN[str(p)] = why
        found += [(p.name, p) for p in candidates if _is_package(p)]
    return found


def _discover() -> None:
    """Import every paper package once (each registers itself on import); an outside package is imported by its
    folder's name with the folder's parent on ``sys.path``."""
    for module, folder in paper_packages():
        if module in sys.modules or str(folder) in BROKEN:
            continue
        if "." not in module and str(folder.parent) not in sys.path:
            sys.path.insert(0, str(folder.parent))
        before = dict(_PAPERS)
        try:
            importlib.import_module(module)
        except Exception as err:   # named; the other papers keep working
            sys.modules.pop(module, None)
            BROKEN[str(folder)] = f"{folder}: importing {module} failed ({type(err).__name__}: {err})"
            continue
        if all(_PAPERS.get(k) is v for k, v in before.items()) and len(_PAPERS) == len(before):
            BROKEN[str(folder)] = (f"{folder}: {module} registers no paper (its __init__.py must call "
                                   f"register_paper(Paper(...)))")


def broken_note() -> str:
    """One sentence naming the paper packages that could not be used ("" when none)."""
    return ("" if not BROKEN else f"; {len(BROKEN)} paper package(s) could not be used: " + "; ".join(BROKEN.values()))


def _book_order() -> list[str]:
    """The chapter stems of the book's ``_toc.yml``, in order (empty outside a checkout)."""

    from umlkit._paths import repo_root
    root = repo_root()
    toc = root / "_toc.yml" if root is not None else None
    if toc is None or not toc.is_file():
        return []
    data = read_yaml(toc, {})
    parts = data.get("parts") or [{"chapters": data.get("chapters") or []}]
    return [Path(str(c.get("file", ""))).stem for part in parts for c in part.get("chapters") or []]


def papers() -> dict[str, Paper]:
    """Every registered paper (discovered on first use), in the book's order: papers by their first chapter's place
    in ``_toc.yml``, then the book's own experiments, each group ending with the chapters the book lacks."""
    _discover()
    order = {stem: i for i, stem in enumerate(_book_order())}

    def place(p: Paper):
        return (p.own, min((order[c] for c in p.chapters if c in order), default=len(order)), p.name)
    return {p.name: p for p in sorted(_PAPERS.values(), key=place)}


def get_paper(name: str) -> Paper:
    """The registered paper ``name``; an unknown name is an error listing the registered ones."""
    known = papers()
    if name not in known:
        raise KeyError(f"unknown paper {name!r}; registered: {', '.join(known)}{broken_note()}")
    return known[name]
