"""The book's papers, and its own experiments built on them: the one place that lists them, in the book's order.
Each paper module describes itself in an ``ENTRY`` (:class:`umlkit.experiments.registry.Paper`); this module
registers them (:func:`~umlkit.experiments.registry.register_paper`), and the scoreboard, ``umlkit records`` and
``umlkit reproduce --paper`` read the registry. A new paper is one module (or package) and one line here."""
from umlkit.experiments import language_guidance, oodml, puma, regime, vptsp
from umlkit.experiments.registry import register_paper

for _module in (puma, oodml, language_guidance, vptsp, regime):
    register_paper(_module.ENTRY)
