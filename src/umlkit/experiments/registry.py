"""The registry of the book's papers (and of its own experiments built on them, e.g. the regime map), in the style of
the loss and method registries (:mod:`umlkit._registry`): each paper module registers itself once with
:func:`register_paper`, and every consumer - the scoreboard, ``umlkit records train|status``, ``umlkit reproduce`` -
reads :func:`papers` instead of keeping its own list of module names.

A :class:`Paper` says what the rest of the book needs of a paper and nothing more: the tables whose claims go on the
scoreboard, the named job lists that fill its record set outside a chapter, the folder its records live in, and
its chapters. :mod:`umlkit.experiments.catalog` is the one place that imports the paper modules (so that they
register); a new paper is one module and one line there.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from umlkit._registry import add_entry

__all__ = ["Paper", "register_paper", "papers", "get_paper"]


@dataclass(frozen=True)
class Paper:
    """``name``: the registry key (the CLI's and the scoreboard's name); ``claim_tables(profile)``: its tables with
    declared claims, by name; ``job_lists``: ``{name: builder(profile) -> [(table, label, key[, runner])]}``;
    ``records``: the folder under ``results/<profile>/records/`` its job lists write to (default: ``name``);
    ``chapters``: the book chapters (notebook stems) that present it; ``headline``: the declared claim the front
    page quotes with its verdict."""
    name: str
    claim_tables: Callable[[str], dict]
    job_lists: Mapping[str, Callable[[str], list]] = field(default_factory=dict)
    records: str = ""
    chapters: tuple[str, ...] = ()
    title: str = ""
    headline: str = ""   # the claim the front page quotes for this paper (a declared claim's text)

    @property
    def build(self) -> Callable:   # the registry's duplicate rule compares what builds an entry
        return self.claim_tables

    @property
    def records_folder(self) -> str:
        return self.records or self.name

    @property
    def job_list_names(self) -> list[str]:
        """The paper's own job lists, then ``more_seeds`` (every paper has it: the extra seeds
        :mod:`umlkit.experiments.more_seeds` plans for its claims)."""
        return [*self.job_lists, *([MORE_SEEDS] if MORE_SEEDS not in self.job_lists else [])]

    def job_list(self, name: str, profile: str = "quick") -> list[tuple]:
        """The named job list for ``profile``; an unknown name is an error naming the paper's lists."""
        if name == MORE_SEEDS and name not in self.job_lists:
            from umlkit.experiments import more_seeds
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


def papers() -> dict[str, Paper]:
    """Every registered paper, in the catalogue's order (importing the catalogue registers them)."""
    import umlkit.experiments.catalog  # noqa: F401 - each paper module registers itself on import
    return dict(_PAPERS)


def get_paper(name: str) -> Paper:
    """The registered paper ``name``; an unknown name is an error listing the registered ones."""
    known = papers()
    if name not in known:
        raise KeyError(f"unknown paper {name!r}; registered: {', '.join(known)}")
    return known[name]
