"""The book's papers, and its own experiments built on them: the one place that lists them, in the book's order.
Each paper package (``umlkit.experiments.papers.<paper>``) describes itself in an ``ENTRY``
(:class:`umlkit.experiments.registry.Paper`); this module registers them
(:func:`~umlkit.experiments.registry.register_paper`), and the scoreboard, ``umlkit records`` and
``umlkit reproduce --paper`` read the registry. A new paper is one package and one line here."""
from umlkit.experiments.papers import language_guidance, oodml, puma, regime, vptsp
from umlkit.experiments.registry import register_paper

for _package in (puma, oodml, language_guidance, vptsp, regime):
    register_paper(_package.ENTRY)
