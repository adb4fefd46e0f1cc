"""Configurations checked at load (issue 65, item 4): a key given twice, a misspelt profile block, a misspelt
section, key or metric is refused before anything trains, naming the file or key, the value and the nearest valid
name."""
import pytest
import yaml

from umlkit._yaml import DuplicateKey, nearest, safe_load_unique
from umlkit.train.config import apply_overrides, load_config, resolve_config


def _write(tmp_path, text):
    path = tmp_path / "run.yaml"
    path.write_text(text)
    return path


def test_a_key_given_twice_is_refused_with_both_lines(tmp_path):
    text = "name: x\nmodel:\n  backbone: vit_tiny_uml\n  backbone: vit_tiny_uml_v2\n"
    assert yaml.safe_load(text)["model"]["backbone"] == "vit_tiny_uml_v2"   # what plain YAML does: the last wins
    with pytest.raises(DuplicateKey, match=r"key 'backbone' appears twice in one mapping \(lines 3 and 4\)"):
        safe_load_unique(text)
    with pytest.raises(ValueError, match=r"run.yaml: key 'backbone' appears twice .*lines 3 and 4"):
        load_config(_write(tmp_path, text))
    # the same key in two different mappings is fine
    assert safe_load_unique("a: {k: 1}\nb: {k: 2}\n") == {"a": {"k": 1}, "b": {"k": 2}}


def test_a_misspelt_profile_block_is_refused_not_ignored(tmp_path):
    path = _write(tmp_path, "name: x\nmodel: {backbone: vit_tiny_uml}\nprofiles:\n  quik:\n    train: {epochs: 1}\n")
    with pytest.raises(KeyError, match=r"unknown profile block\(s\) \['quik'\] under profiles \(did you mean "
                                       r"'quick'\?\); known: quick, full"):
        load_config(path, "quick")
    with pytest.raises(KeyError, match=r"unknown config section\(s\) \['trian'\] \(did you mean 'train'\?\)"):
        resolve_config({"profiles": {"quick": {"trian": {"epochs": 1}}}}, "quick")


def test_misspelt_keys_and_metrics_name_the_nearest_valid_one():
    with pytest.raises(KeyError, match=r"unknown key\(s\) \['epoch'\] in config section train \(did you mean "
                                       r"'epochs'\?\)"):
        resolve_config({"train": {"epoch": 3}})
    with pytest.raises(KeyError, match=r"unknown key 'lrr' in optimizer \(did you mean 'lr'\?\)"):
        apply_overrides(resolve_config({}), ["optimizer.lrr=1"])
    with pytest.raises(ValueError, match=r"train.metrics = \['R@1', 'MAP@RR'\].*'MAP@RR' is none \(did you mean "
                                         r"'MAP@R'\?\)"):
        resolve_config({"train": {"metrics": ["R@1", "MAP@RR"]}})
    with pytest.raises(ValueError, match=r"'R@0' is none"):
        resolve_config({"train": {"metrics": ["R@0"]}})
    assert resolve_config({"train": {"metrics": ["R@16", "NMI", "mAP@1000"]}})["train"]["metrics"] == [
        "R@16", "NMI", "mAP@1000"]
    assert nearest("zzzz", ["quick", "full"]) == ""


def test_a_misspelt_model_option_names_the_nearest_one_and_the_list_covers_every_option_read():
    import re
    from pathlib import Path

    from umlkit.models import _factory, create_model
    with pytest.raises(TypeError, match=r"unexpected option\(s\) for method 'puma': \['adaptr_dim'\] \(did you "
                                        r"mean 'adapter_dim'\?\)"):
        create_model("vit_tiny_uml", "puma", pretrained=False, adaptr_dim=3)
    import ast
    source = Path(_factory.__file__).read_text()
    read = set(re.findall(r"kw\.pop\(\"(\w+)\"", source))
    for node in ast.walk(ast.parse(source)):   # the calls of pop_options (not its docstrings' examples)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("pop_options", "_pop"):
            read |= {k.arg for k in node.keywords}
    assert read == set(_factory.OPTION_NAMES)
