"""Multi-term objectives (declared inputs, weighted sums, legacy `loss` sections), explicit class splits and
class-embedding side information, through `fit` and through `umlkit train` from the example YAML files."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from umlkit.cli import main
from umlkit.losses import create_loss, loss_inputs
from umlkit.train import fit
from umlkit.train.config import resolve_config
from umlkit.train.engine import _explicit_split, build_data
from umlkit.train.side_info import SideInfoError, load_class_embeddings, save_class_embeddings, write_split_file

EXAMPLES = Path(__file__).resolve().parents[2] / "configs" / "examples"


def test_legacy_loss_section_and_overrides_map_onto_the_objective():
    cfg = resolve_config({"loss": {"name": "margin", "options": {"margin": 0.1}, "extra_weight": 0.5}})
    assert "loss" not in cfg and cfg["objective"] == [
        {"name": "margin", "weight": 1.0, "options": {"margin": 0.1}},
        {"name": "model_regularizer", "weight": 0.5, "options": {}}]
    cfg = resolve_config({}, overrides=["loss.name=multisimilarity", "loss.options.alpha=3", "loss.extra_weight=2",
                                        "objective.0.weight=0.5"])
    assert cfg["objective"][0] == {"name": "multisimilarity", "weight": 0.5, "options": {"alpha": 3}}
    assert cfg["objective"][1]["weight"] == 2.0
    with pytest.raises(KeyError, match="no item '5'"):
        resolve_config({}, overrides=["objective.5.weight=1"])
    with pytest.raises(KeyError, match="unknown key"):
        resolve_config({"objective": [{"name": "margin", "wieght": 1}]})
    with pytest.raises(KeyError, match="both 'loss' and 'objective'"):
        resolve_config({"loss": {"name": "margin"}, "objective": [{"name": "margin"}]})


def test_losses_declare_their_inputs():
    assert loss_inputs(create_loss("margin", num_classes=3)) == ("embeddings", "labels")
    assert loss_inputs(create_loss("s2sd", num_classes=3, embedding_size=8)) == ("embeddings", "labels", "aux", "features")
    assert "views" in loss_inputs(create_loss("diva", num_classes=3, embedding_size=8))
    assert "views" not in loss_inputs(create_loss("diva", num_classes=3, embedding_size=8, alpha_selfsup=0.0))
    assert loss_inputs(create_loss("proxy_anchor_external")) == ("embeddings", "labels", "proxies")
    assert loss_inputs(create_loss("model_regularizer")) == ("model",)


def _tiny(mini_root, tmp_path, **over):
    base = {"data": {"root": str(mini_root), "datasets": ["cub", "flowers"], "batch_size": 32, "few_shot": 4,
                     "augment": False},
            "model": {"method": "linear", "pretrained": False}, "train": {"epochs": 1, "progress": False}}
    return resolve_config(base, overrides=[f"{k}={v}" for k, v in over.items()])


def test_a_weighted_sum_of_terms_is_the_sum_of_weighted_runs(mini_root, tmp_path):
    """Objective [margin x 1] vs [margin x 2]: with plain SGD and no momentum the first step's loss doubles."""
    one = _tiny(mini_root, tmp_path, **{"objective": "[{name: multisimilarity, weight: 1.0}]"})
    two = _tiny(mini_root, tmp_path, **{"objective": "[{name: multisimilarity, weight: 2.0}]"})
    for c in (one, two):
        c["optimizer"].update(name="sgd", lr=0.0, momentum=0.0)
    a = fit(one, run_dir=tmp_path / "a").history[0]["loss"]
    b = fit(two, run_dir=tmp_path / "b").history[0]["loss"]
    assert b == pytest.approx(2 * a, rel=1e-6) and a > 0


def test_evaluation_every_epoch_trains_the_same_model(mini_root, tmp_path):
    runs = []
    for every in (1, 2):
        cfg = _tiny(mini_root, tmp_path, **{"train.epochs": 2, "train.eval_every": every, "data.augment": True})
        runs.append(fit(cfg, run_dir=tmp_path / f"e{every}"))
    assert [h["loss"] for h in runs[0].history] == [h["loss"] for h in runs[1].history]
    assert runs[0].last.equals(runs[1].last)


def test_explicit_split_equal_to_the_default_gives_the_same_data(mini_root):
    from umlkit.data import load_dataset
    tr, te = load_dataset("cub", mini_root, "train"), load_dataset("cub", mini_root, "test")
    d = {"cache": False}
    a, b, v = _explicit_split("cub", mini_root, {"train": tr.class_names, "test": te.class_names}, d)
    assert v is None and a.class_names == tr.class_names and b.class_names == te.class_names
    assert [p.name for p in a.paths] == [p.name for p in tr.paths] and list(a.labels) == list(tr.labels)
    swapped = {"train": tr.class_names[1:] + te.class_names[:1], "test": te.class_names[1:] + tr.class_names[:1]}
    a, b, _ = _explicit_split("cub", mini_root, swapped, d)
    assert te.class_names[0] in a.class_names and tr.class_names[0] in b.class_names and a.num_classes == 25
    with pytest.raises(ValueError, match="not in cub"):
        _explicit_split("cub", mini_root, {"train": ["nope"], "test": []}, d)
    with pytest.raises(ValueError, match="in both train and test"):
        _explicit_split("cub", mini_root, {"train": tr.class_names[:2], "test": tr.class_names[1:3]}, d)


def test_split_files_and_class_embeddings_are_verified(tmp_path):
    sha = write_split_file(tmp_path / "s.json", {"train": ["a"], "test": ["b"]})
    with pytest.raises(FileExistsError):
        write_split_file(tmp_path / "s.json", {"train": []})
    names = ["cub:001.A", "flowers:x"]
    sha = save_class_embeddings(tmp_path / "e.npz", names, np.eye(2, 3))
    got = load_class_embeddings({"file": str(tmp_path / "e.npz"), "sha256": sha}, ["flowers:x", "cub:001.A"])
    assert torch.equal(got, torch.tensor([[0.0, 1, 0], [1, 0, 0]]))
    with pytest.raises(SideInfoError, match="sha256"):
        load_class_embeddings({"file": str(tmp_path / "e.npz"), "sha256": "0" * 64}, names)
    with pytest.raises(SideInfoError, match="no row"):
        load_class_embeddings({"file": str(tmp_path / "e.npz"), "sha256": sha}, ["cars:y"])


@pytest.mark.slow
def test_umlkit_train_runs_the_example_yaml_files(mini_root, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path / "results"))
    common = [f"data.root={mini_root}", "data.few_shot=4", "train.epochs=1", "model.pretrained=false",
              "train.progress=false"]
    # two terms: multi-similarity + 10 x language guidance over a class-embedding file
    cfg = resolve_config({"data": {"root": str(mini_root), "datasets": ["cub", "flowers"]}})
    train, _, _ = build_data(cfg, {"input_size": (3, 32, 32), "mean": (0.5,) * 3, "std": (0.5,) * 3})
    rng = np.random.default_rng(0)
    sha = save_class_embeddings(tmp_path / "names.npz", train.class_names(), rng.normal(size=(train.num_classes, 16)))
    ref = f"{{file: {tmp_path / 'names.npz'}, sha256: {sha}}}"
    args = ["train", str(EXAMPLES / "two_term_objective.yaml"), "--run-dir", str(tmp_path / "two")]
    args += [x for s in [*common, f"objective.1.options.language_embeddings={ref}"] for x in ("--set", s)]
    assert main(args) == 0
    import json
    logged = json.loads((tmp_path / "two" / "config.json").read_text())["config"]["objective"]
    assert [t["name"] for t in logged] == ["multisimilarity", "language_guidance"] and logged[1]["weight"] == 10.0
    # an explicit class split: training sees exactly the listed classes
    args = ["train", str(EXAMPLES / "explicit_split.yaml"), "--run-dir", str(tmp_path / "split")]
    args += [x for s in common for x in ("--set", s)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "run folder" in out
    from umlkit.train.config import load_config
    split_cfg = load_config(EXAMPLES / "explicit_split.yaml", overrides=common)
    train, test, _ = build_data(split_cfg, {"input_size": (3, 32, 32), "mean": (0.5,) * 3, "std": (0.5,) * 3})
    assert train.num_classes == 25 and test.num_classes == 15
    assert "cub:026.Mini_bird_026" in train.class_names() and "cub:021.Mini_bird_021" in test.class_names()
