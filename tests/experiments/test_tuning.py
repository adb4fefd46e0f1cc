"""experiments.tuning.chosen: the first configured number along the candidate paths, or one error naming them."""
import pytest

from umlkit.experiments.papers import language_guidance as lg
from umlkit.experiments.papers import oodml, puma, vptsp
from umlkit.experiments.papers.language_guidance import language_store
from umlkit.experiments.recipes.tuning import NotTuned, chosen


def test_the_most_specific_path_wins_and_a_mapping_does_not_count():
    block = {"quick": {"cars": {"VPT": 0.003, "default": 0.001}, "default": 0.01, "sop": {"x": {"y": 1}}}}
    paths = lambda src, row: [("quick", src, row), ("quick", src, "default"), ("quick", "default")]  # noqa: E731
    assert chosen(block, paths("cars", "VPT"), file="f", what="w", sweep="s") == 0.003
    assert chosen(block, paths("cars", "LoRA"), file="f", what="w", sweep="s") == 0.001
    assert chosen(block, paths("cub", "VPT"), file="f", what="w", sweep="s") == 0.01
    assert chosen(block, [("quick", "sop", "x"), ("quick", "default")], file="f", what="w", sweep="s") == 0.01
    with pytest.raises(NotTuned, match=r"m.yaml has no full rate \(looked for full.cub or full.default\): run it"):
        chosen(block, [("full", "cub"), ("full", "default")], file="m.yaml", what="full rate", sweep="run it")
    with pytest.raises(KeyError):   # NotTuned is a KeyError: callers that caught KeyError still do
        chosen(None, [("a",)], file="f", what="w", sweep="s")


def test_the_papers_readers_return_the_configured_values():
    assert oodml.chosen_lr("Margin (D)", "quick") == float(oodml.methods_config()["lr"]["quick"].get(
        "Margin (D)", oodml.methods_config()["lr"]["quick"].get("default")))
    omega = language_store.lg_config()["omega"]["quick"]["Multisimilarity + ELG"]
    for source in ("cub", "cars", "sop"):       # chosen per source on its validation classes
        assert lg.chosen_omega("Multisimilarity", "ELG", source, "quick") == float(omega[source])
    assert lg.chosen_omega("Multisimilarity", "ELG", "sop", "full") == 1.0        # per source in the full profile
    unit = next(iter(puma.second_pass()["lr"]))
    assert puma.chosen_lr(unit) == float(puma.second_pass()["lr"][unit])
    assert vptsp.chosen_lr("VPT (B)", "quick", source="cars") == float(
        vptsp.methods_config()["lr"]["quick"]["cars"]["VPT (B)"])
    with pytest.raises(NotTuned, match=r"configs/vptsp/methods.yaml has no quick learning rate for 'VPT \(B\)' on "
                                       r"'nowhere' \(looked for quick.nowhere.VPT \(B\) or quick.nowhere.default or "
                                       r"quick.default\)"):
        vptsp.chosen_lr("VPT (B)", "quick", source="nowhere")
