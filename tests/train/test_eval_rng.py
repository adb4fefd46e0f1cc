"""Evaluation inside fit does not consume the global torch random stream: evaluating every epoch trains exactly
the same model as evaluating only at the end."""
from __future__ import annotations

import pytest
import torch

from umlkit.train import fit
from umlkit.train.config import resolve_config
from umlkit.train.engine import _evaluate, build_data, build_model
from umlkit.train.evaluate import evaluate_model

DATA_CONFIG = {"input_size": (3, 32, 32), "mean": (0.5,) * 3, "std": (0.5,) * 3}


def _cfg(mini_root, **train):
    return resolve_config({"data": {"root": str(mini_root), "datasets": ["cub", "flowers"], "batch_size": 32,
                                    "few_shot": 4, "augment": True, "val_fraction": 0.2},
                           "model": {"method": "linear", "pretrained": False, "embed_dim": 16},
                           "train": {"epochs": 2, "progress": False, "eval_batch_size": 128, **train}})


def test_evaluation_leaves_the_random_state_as_it_found_it(mini_root):
    cfg = _cfg(mini_root)
    _, test, _ = build_data(cfg, DATA_CONFIG)
    model = build_model(cfg)
    torch.manual_seed(3)
    before = torch.random.get_rng_state()
    evaluate_model(model, test, ["R@1"], 128, torch.device("cpu"))
    assert not torch.equal(before, torch.random.get_rng_state())  # a DataLoader iterator draws a seed
    torch.manual_seed(3)
    _evaluate(model, test, cfg, torch.device("cpu"), None)
    assert torch.equal(before, torch.random.get_rng_state())


@pytest.mark.slow
def test_evaluating_every_epoch_trains_the_same_model_as_evaluating_at_the_end(mini_root, tmp_path):
    every = fit(_cfg(mini_root, eval_every=1), run_dir=tmp_path / "every")
    end = fit(_cfg(mini_root, eval_every=2), run_dir=tmp_path / "end")
    assert "test" in every.history[0] and "test" not in end.history[0]
    assert [h["loss"] for h in every.history] == [h["loss"] for h in end.history]
    assert every.history[-1]["test"] == end.history[-1]["test"] and every.history[-1]["val"] == end.history[-1]["val"]
    assert every.last.equals(end.last)
    assert all(torch.equal(a, b) for a, b in zip(every.model.state_dict().values(), end.model.state_dict().values()))
