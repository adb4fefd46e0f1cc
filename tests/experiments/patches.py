"""Test helpers that replace a configuration block where every consumer reads it (the shared recipe modules), so a
paper package that imported the reader by name sees the replacement too."""
from umlkit.experiments.papers.language_guidance import language_store
from umlkit.experiments.recipes import unified as unified_recipe


def use_second_pass(monkeypatch, second_pass: dict) -> None:
    """Every reader of configs/puma/methods.yaml's ``second_pass`` block sees ``second_pass``."""
    blocks = {**unified_recipe.methods_blocks(), "second_pass": second_pass}
    monkeypatch.setattr(unified_recipe, "methods_blocks", lambda: blocks)


def use_lg_config(monkeypatch, cfg: dict) -> None:
    """The language store and the language-guidance package both read ``cfg`` as language_guidance.yaml."""
    from umlkit.experiments.papers.language_guidance import config
    monkeypatch.setattr(language_store, "lg_config", lambda: cfg)
    monkeypatch.setattr(config, "lg_config", lambda: cfg)
