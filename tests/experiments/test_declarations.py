"""tables.yaml as data: the loader's loops, defaults and aliases give exactly the claims written out by hand."""
import pytest

from umlkit.experiments.tables.declarations import claims_of, expand, load_declarations
from umlkit.experiments.tables.table import Claim


def test_for_loops_expand_like_nested_comprehensions_first_key_outermost():
    out = expand([{"for": {"m": ["A", "B"], "d": [1, 2]}, "text": "{m} at {d}", "cell": {"x": "{m}"}},
                  {"text": "plain {braces stay}"}])
    assert [o["text"] for o in out] == ["A at 1", "A at 2", "B at 1", "B at 2", "plain {braces stay}"]
    assert [o["cell"]["x"] for o in out[:4]] == ["A", "A", "B", "B"]
    assert all("for" not in o for o in out)


def test_claim_cells_take_the_group_defaults_and_aliases():
    group = {"cell": {"setting": "s0", "dataset": "Harmonic"}, "aliases": {"section": {"b": "(b) long name"}},
             "list": [{"text": "X beats Y", "a": {"section": "b", "method": "X"},
                       "b": {"method": "Y", "dataset": "Unified"}, "metric": "MAP@R"}]}
    assert claims_of(group) == [Claim("X beats Y", {"section": "(b) long name", "method": "X", "setting": "s0",
                                                    "dataset": "Harmonic"},
                                      {"section": "", "method": "Y", "setting": "s0", "dataset": "Unified"},
                                      metric="MAP@R")]


def test_an_unknown_cell_field_is_named():
    group = {"list": [{"text": "X beats Y", "a": {"methd": "X"}, "b": {"method": "Y"}}]}
    with pytest.raises(ValueError, match=r"demo\[0\] \('X beats Y'\): unknown cell field\(s\) \['methd'\]"):
        claims_of(group, "demo")


def test_pumas_declared_claims_are_the_papers_statements():
    """28 Table 2 claims (1 zero-shot, 1 unified vs the specialists' ensemble, 2 headline, 6 PEFT rows, 9 losses x 2
    columns; specialists vs unified on Harmonic is Table 4's claim, the same runs); the headline against the
    dataset-specific Hyp models reads the paper's cells."""
    from umlkit.experiments.papers import puma
    doc = load_declarations(puma.config.__file__)
    t2 = claims_of(doc["claims"]["Table 2"])
    assert len(t2) == 1 + 1 + 2 + 6 + 9 * 2 and len({c.text for c in t2}) == len(t2)
    hyp = next(c for c in t2 if c.text == "PUMA beats the dataset-specific Hyp models (Unified)")
    assert hyp.a == {"section": "(c) Unified metric learning (Parameter-efficient fine-tuning)", "method": "Ours",
                     "setting": "arch=ViT-S/16;dim=128", "dataset": "Unified"}
    assert hyp.b["section"] == "(a) Dataset-specific metric learning (Full fine-tuning)" and hyp.b["method"] == "Hyp"
    assert [c.text for c in claims_of(doc["claims"]["Few-shot"])][-1] == \
        "PUMA beats full fine-tuning with 16 image(s) per class (Harmonic)"


def test_a_package_without_tables_yaml_is_an_error_naming_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="tables.yaml"):
        load_declarations(str(tmp_path / "config.py"))
