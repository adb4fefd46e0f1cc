"""The example YAML files under configs/examples, run through ``umlkit train`` on a temporary UML-Mini tree: a
two-term objective with a class-embedding file (written here, into tmp_path), and an explicit class split."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from umlkit.cli import main
from umlkit.data.side_info import save_class_embeddings
from umlkit.train.config import load_config
from umlkit.train.engine import build_data

EXAMPLES = Path(__file__).resolve().parents[2] / "configs" / "examples"
DATA_CONFIG = {"input_size": (3, 32, 32), "mean": (0.5,) * 3, "std": (0.5,) * 3}


def _tiny(mini_root):
    return [f"data.root={mini_root}", "data.few_shot=4", "data.batch_size=16", "train.epochs=1",
            "model.pretrained=false", "model.embed_dim=16", "train.progress=false"]


def _train(path, run_dir, overrides):
    return main(["train", str(path), "--run-dir", str(run_dir), *[x for s in overrides for x in ("--set", s)]])


def test_the_examples_resolve(tmp_path):
    two = load_config(EXAMPLES / "two_term_objective.yaml")
    assert [(t["name"], t["weight"]) for t in two["objective"]] == [("multisimilarity", 1.0),
                                                                    ("language_guidance", 10.0)]
    split = load_config(EXAMPLES / "explicit_split.yaml")
    assert sorted(split["data"]["splits"]) == ["cub", "flowers"] and "loss" not in split


@pytest.mark.slow
def test_umlkit_train_runs_the_two_term_example(mini_root, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path / "results"))
    cfg = load_config(EXAMPLES / "two_term_objective.yaml", overrides=_tiny(mini_root))
    train, _, _ = build_data(cfg, DATA_CONFIG)
    vectors = np.random.default_rng(0).normal(size=(train.num_classes, 12))
    sha = save_class_embeddings(tmp_path / "names.npz", train.class_names(), vectors)
    ref = f"objective.1.options.language_embeddings={{file: {tmp_path / 'names.npz'}, sha256: {sha}}}"
    assert _train(EXAMPLES / "two_term_objective.yaml", tmp_path / "two", [*_tiny(mini_root), ref]) == 0
    assert f"run folder: {tmp_path / 'two'}" in capsys.readouterr().out
    logged = json.loads((tmp_path / "two" / "config.json").read_text())["config"]["objective"]
    assert [(t["name"], t["weight"]) for t in logged] == [("multisimilarity", 1.0), ("language_guidance", 10.0)]
    assert logged[1]["options"]["language_embeddings"] == {"file": str(tmp_path / "names.npz"), "sha256": sha}
    log = [json.loads(ln) for ln in (tmp_path / "two" / "log.jsonl").read_text().splitlines()]
    assert len(log) == 1 and np.isfinite(log[0]["loss"]) and "Unified" in log[0]["test"]
    # a changed file is refused by hash
    save_class_embeddings(tmp_path / "names.npz", train.class_names(), vectors + 1, overwrite=True)
    capsys.readouterr()
    assert _train(EXAMPLES / "two_term_objective.yaml", tmp_path / "again", [*_tiny(mini_root), ref]) == 2
    err = capsys.readouterr().err                                   # one line naming the file and both hashes
    assert re.search(f"names.npz has sha256 .* but the configuration expects {sha}", err) and "Traceback" not in err


@pytest.mark.slow
def test_umlkit_train_runs_the_explicit_split_example(mini_root, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path / "results"))
    assert _train(EXAMPLES / "explicit_split.yaml", tmp_path / "split", _tiny(mini_root)) == 0
    assert "run folder" in capsys.readouterr().out
    cfg = json.loads((tmp_path / "split" / "config.json").read_text())["config"]
    assert cfg["data"]["splits"]["cub"]["train"][-5:] == [26, 27, 28, 29, 30]
    train, test, val = build_data(cfg, DATA_CONFIG)
    assert [d.class_keys for d in train.datasets] == [[*range(1, 21), *range(26, 31)], list(range(1, 16))]
    assert [d.class_keys for d in test.datasets] == [[*range(21, 26), *range(31, 41)], list(range(21, 41))]
    assert [d.class_keys for d in val.datasets] == [list(range(16, 21))]
    assert any(n.startswith("cub:026.") for n in train.class_names())
    assert any(n.startswith("cub:021.") for n in test.class_names())
    log = json.loads((tmp_path / "split" / "log.jsonl").read_text().splitlines()[0])
    assert "Unified" in log["test"] and "Unified" in log["val"]
