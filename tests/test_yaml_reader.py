"""The one YAML reader (umlkit._yaml): every file the project reads refuses a key given twice, naming the file and
both lines, and no module parses YAML around it."""
import ast
from pathlib import Path

import pytest
import yaml

from umlkit._yaml import DuplicateKey, read_yaml, safe_load_unique

ROOT = Path(__file__).resolve().parents[1]


def test_read_yaml_refuses_a_repeated_key_naming_the_file_and_both_lines(tmp_path):
    f = tmp_path / "plan.yaml"
    f.write_text("model:\n  backbone: vit_tiny\n  dim: 128\n  backbone: vit_small\n")
    with pytest.raises(DuplicateKey) as err:
        read_yaml(f)
    text = str(err.value)
    assert "'backbone'" in text and "lines 2 and 4" in text and str(f) in text


def test_read_yaml_reads_what_safe_load_reads_and_gives_the_default_for_an_empty_file(tmp_path):
    text = "a: 1\nb: [1e-4, 0.5, x]\nc: {d: null, e: true}\n"
    f = tmp_path / "ok.yaml"
    f.write_text(text)
    assert read_yaml(f) == yaml.safe_load(text) == safe_load_unique(text)
    (tmp_path / "empty.yaml").write_text("# nothing\n")
    assert read_yaml(tmp_path / "empty.yaml", {}) == {}
    assert read_yaml(tmp_path / "empty.yaml") is None


def test_a_merge_key_and_the_keys_that_override_it_are_not_duplicates():
    text = "base: &b {lr: 0.1, epochs: 3}\nrun:\n  <<: *b\n  lr: 0.2\n"
    assert safe_load_unique(text) == yaml.safe_load(text) == {"base": {"lr": 0.1, "epochs": 3},
                                                              "run": {"lr": 0.2, "epochs": 3}}


def test_a_syntax_error_names_the_file(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("a: [1, 2\n")
    with pytest.raises(yaml.YAMLError, match="bad.yaml"):
        read_yaml(f)


def test_a_tables_yaml_with_a_repeated_key_is_refused(tmp_path):
    """One of the readers that used plain yaml.safe_load before: a paper's declarations."""
    from umlkit.experiments.tables.declarations import load_declarations
    (tmp_path / "tables.yaml").write_text("tables:\n  Table 1:\n    rows: []\n  Table 1:\n    rows: []\n")
    with pytest.raises(DuplicateKey, match="'Table 1'.*lines 2 and 4"):
        load_declarations(str(tmp_path / "config.py"))


def _direct_parses(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in {"safe_load", "load", "full_load", "unsafe_load", "load_all", "safe_load_all"}
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "yaml"):
            out.append(f"{path.relative_to(ROOT)}:{node.lineno} yaml.{node.func.attr}")
    return out


def test_no_module_parses_yaml_around_the_one_reader():
    files = [p for d in ("src", "tools", "benchmarks") for p in sorted((ROOT / d).rglob("*.py"))]
    bad = [hit for p in files if p.name != "_yaml.py" for hit in _direct_parses(p)]
    assert not bad, bad


def test_the_check_sees_a_direct_parse(tmp_path, monkeypatch):
    f = tmp_path / "m.py"
    f.write_text("import yaml\n\n\ndef f(p):\n    return yaml.safe_load(open(p))\n")
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    assert _direct_parses(f) == ["m.py:5 yaml.safe_load"]
