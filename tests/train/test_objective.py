"""Objectives as weighted terms: the config format (legacy ``loss`` sections and overrides included), the weighted
sum in the training step (hand-computed, and bit-identical to the one-loss engine), declared inputs, auxiliary
heads from every term, parameter groups, and old checkpoints."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from umlkit.losses import ModelRegularizer, create_loss
from umlkit.models import create_model
from umlkit.train import fit
from umlkit.train.config import load_config, resolve_config
from umlkit.train.engine import _objective_state, _TrainStep, build_model, param_groups

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
DEFAULT_OBJECTIVE = [{"name": "curricularface", "weight": 1.0, "options": {}},
                     {"name": "model_regularizer", "weight": 1.0, "options": {}}]


# --------------------------------------------------------------------------------------------------- config
def test_default_objective_and_no_loss_key():
    cfg = resolve_config({})
    assert cfg["objective"] == DEFAULT_OBJECTIVE and "loss" not in cfg


def test_legacy_loss_section_becomes_two_terms():
    cfg = resolve_config({"loss": {"name": "margin", "options": {"margin": 0.1}, "extra_weight": 0.5}})
    assert "loss" not in cfg and cfg["objective"] == [
        {"name": "margin", "weight": 1.0, "options": {"margin": 0.1}},
        {"name": "model_regularizer", "weight": 0.5, "options": {}}]
    # partial legacy sections take the old defaults (curricularface, extra_weight 1)
    assert resolve_config({"loss": {"name": "cosface"}})["objective"] == [
        {"name": "cosface", "weight": 1.0, "options": {}}, {"name": "model_regularizer", "weight": 1.0, "options": {}}]
    # in a profile block too
    cfg = resolve_config({"profiles": {"quick": {"loss": {"name": "hyp", "extra_weight": 0.0}}}})
    assert [(t["name"], t["weight"]) for t in cfg["objective"]] == [("hyp", 1.0), ("model_regularizer", 0.0)]
    with pytest.raises(KeyError, match="both 'loss' and 'objective'"):
        resolve_config({"loss": {"name": "margin"}, "objective": [{"name": "margin"}]})


def test_legacy_overrides_address_the_first_term_and_the_regulariser():
    cfg = resolve_config({}, overrides=["loss.name=multisimilarity", "loss.options.alpha=3", "loss.extra_weight=2"])
    assert cfg["objective"] == [{"name": "multisimilarity", "weight": 1.0, "options": {"alpha": 3}},
                                {"name": "model_regularizer", "weight": 2.0, "options": {}}]
    # the regulariser is found wherever it is
    cfg = resolve_config({"objective": [{"name": "margin"}, {"name": "hyp"}, {"name": "model_regularizer"}]},
                         overrides=["loss.extra_weight=1e-3"])
    assert cfg["objective"][2]["weight"] == 0.001
    with pytest.raises(KeyError, match="the objective has no model_regularizer term"):
        resolve_config({"objective": [{"name": "margin"}]}, overrides=["loss.extra_weight=2"])
    with pytest.raises(KeyError, match="loss.weight"):
        resolve_config({}, overrides=["loss.weight=2"])


def test_indexed_and_whole_list_overrides():
    cfg = resolve_config({}, overrides=["objective.1.weight=10", "objective.0.options.margin=0.3",
                                        "objective.0.name=arcface"])
    assert cfg["objective"] == [{"name": "arcface", "weight": 1.0, "options": {"margin": 0.3}},
                                {"name": "model_regularizer", "weight": 10.0, "options": {}}]
    cfg = resolve_config({}, overrides=["objective=[{name: multisimilarity}, {name: language_guidance, weight: 7.5, "
                                        "options: {shift: 0.5}}]"])
    assert cfg["objective"] == [{"name": "multisimilarity", "weight": 1.0, "options": {}},
                                {"name": "language_guidance", "weight": 7.5, "options": {"shift": 0.5}}]
    with pytest.raises(KeyError, match="objective has 2 items, no item '5'"):
        resolve_config({}, overrides=["objective.5.weight=1"])
    with pytest.raises(KeyError, match=r"objective.0 \(margin\): unknown key\(s\) \['wieght'\]"):
        resolve_config({"objective": [{"name": "margin", "wieght": 1}]})
    with pytest.raises(ValueError, match="objective must be a non-empty list"):
        resolve_config({"objective": []})


def test_puma_configs_use_the_objective_list():
    cfg = load_config(CONFIGS / "puma" / "puma.yaml")
    assert cfg["objective"] == [{"name": "curricularface", "weight": 1.0, "options": {"margin": 0.3, "scale": 32.0}},
                                {"name": "model_regularizer", "weight": 1.0, "options": {}}]
    cfg = load_config(CONFIGS / "puma" / "full_finetune.yaml", overrides=["loss.name=margin"])
    assert cfg["objective"] == [{"name": "margin", "weight": 1.0, "options": {}},
                                {"name": "model_regularizer", "weight": 1.0, "options": {}}]


# -------------------------------------------------------------------------------------------- training step
class _Recorder(nn.Module):
    """A term that records the keywords it is called with and returns a fixed function of them."""

    def __init__(self, inputs, value):
        super().__init__()
        self.inputs, self.value, self.calls = tuple(inputs), value, []

    def forward(self, **kw):
        self.calls.append(sorted(kw))
        return self.value(kw)


class _FakeModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.forwards = 0

    def forward_train(self, x, y):
        self.forwards += 1
        return {"embeddings": x * 1.0, "features": x * 2.0, "aux": {"selfsup": x * 3.0}, "proxies": x[:1]}

    def extra_loss(self):
        return torch.tensor(0.25)


def test_the_step_is_the_weighted_sum_of_the_terms_called_with_their_declared_inputs():
    x, y = torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.tensor([0, 1])
    a = _Recorder(("embeddings", "labels"), lambda kw: kw["embeddings"].sum())          # 10
    b = _Recorder(("features", "aux"), lambda kw: kw["features"].sum() + kw["aux"]["selfsup"].sum())  # 20 + 30
    c = _Recorder(("proxies",), lambda kw: kw["proxies"].sum())                           # 3
    model = _FakeModel()
    step = _TrainStep(model, nn.ModuleList([a, b, c, ModelRegularizer()]), [2.0, 0.5, -1.0, 4.0], world_size=1)
    total = step(x, y)
    assert float(total) == 2.0 * 10 + 0.5 * 50 - 1.0 * 3 + 4.0 * 0.25
    assert a.calls == [["embeddings", "labels"]] and b.calls == [["aux", "features"]] and c.calls == [["proxies"]]
    assert model.forwards == 1  # no term asked for views: one forward


def test_views_are_drawn_lazily_after_the_first_forward():
    from umlkit.train.engine import _second_view
    x, y = torch.arange(2 * 3 * 32 * 32, dtype=torch.float32).view(2, 3, 32, 32), torch.tensor([0, 1])
    model = _FakeModel()
    v = _Recorder(("views",), lambda kw: kw["views"].sum())
    torch.manual_seed(5)
    got = _TrainStep(model, nn.ModuleList([v]), [1.0], 1)(x, y)
    after = torch.randint(0, 1000, (3,))
    torch.manual_seed(5)
    want = (_second_view(x) * 3.0).sum()
    assert model.forwards == 2 and torch.equal(got, want)
    assert torch.equal(after, torch.randint(0, 1000, (3,)))  # one draw for the view, as the one-loss engine made


@pytest.mark.parametrize("loss_name", ["curricularface", "cosface"])
def test_one_term_plus_regulariser_is_bit_identical_to_loss_plus_extra_weight(loss_name):
    """The one-loss engine computed ``loss(emb, labels) + extra_weight * model.extra_loss()``."""
    torch.manual_seed(0)
    model = create_model("vit_tiny_uml", "puma", embed_dim=16, adapter_dim=4, pool_size=3, prompt_length=1)
    loss = create_loss(loss_name, num_classes=4, embedding_size=16)
    x, y = torch.randn(8, 3, 32, 32), torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    for extra_weight in (1.0, 10.0, 0.001):
        model.eval(), loss.eval()  # no stochastic adapters, no CurricularFace t update: both see the same state
        with torch.no_grad():
            old = loss(model.forward_train(x, y)["embeddings"], y) + extra_weight * model.extra_loss()
            step = _TrainStep(model, nn.ModuleList([loss, ModelRegularizer()]), [1.0, extra_weight], 1)
            new = step(x, y)
        assert model.extra_loss() != 0 and torch.equal(old, new)


def test_model_regulariser_is_the_models_penalty_or_zero():
    torch.manual_seed(0)
    puma = create_model("vit_tiny_uml", "puma", embed_dim=8, adapter_dim=4, pool_size=3, prompt_length=1)
    assert torch.equal(ModelRegularizer()(puma), puma.extra_loss()) and float(puma.extra_loss().detach()) > 0
    assert ModelRegularizer()(create_model("vit_tiny_uml", "linear", embed_dim=8)) == 0.0
    assert ModelRegularizer()(nn.Linear(2, 2)) == 0.0


def test_build_model_collects_auxiliary_heads_from_every_term():
    cfg = resolve_config({"model": {"method": "full", "embed_dim": 8, "pretrained": False},
                          "objective": [{"name": "s2sd", "options": {"target_dims": [16]}},
                                        {"name": "diva", "weight": 0.5}, {"name": "model_regularizer"}]})
    model = build_model(cfg)
    assert list(model.aux_heads) == ["s2sd_0", "shared", "intra", "selfsup"] and model.eval_concat_aux
    assert model.aux_heads["s2sd_0"][-1].out_features == 16
    plain = build_model(resolve_config({"model": {"method": "full", "embed_dim": 8, "pretrained": False}}))
    assert len(plain.aux_heads) == 0 and not plain.eval_concat_aux


def test_loss_group_holds_every_terms_parameters_in_term_order():
    torch.manual_seed(0)
    model = create_model("vit_tiny_uml", "linear", embed_dim=8)
    first = create_loss("cosface", num_classes=3, embedding_size=8)
    second = create_loss("proxy_anchor", num_classes=3, embedding_size=8)
    groups = param_groups(model, nn.ModuleList([first, ModelRegularizer()]))
    assert [id(p) for p in groups["loss"]] == [id(p) for p in first.parameters()]
    groups = param_groups(model, nn.ModuleList([first, second]))
    assert [id(p) for p in groups["loss"]] == [id(p) for p in [*first.parameters(), *second.parameters()]]


def test_checkpoints_of_the_one_loss_engine_load_into_the_objective():
    loss = create_loss("cosface", num_classes=3, embedding_size=4)
    objective = nn.ModuleList([create_loss("cosface", num_classes=3, embedding_size=4), ModelRegularizer()])
    objective.load_state_dict(_objective_state(loss.state_dict()))
    assert torch.equal(objective[0].loss.W, loss.loss.W)
    assert _objective_state(objective.state_dict()).keys() == objective.state_dict().keys()


# ------------------------------------------------------------------------------------------------------- fit
def _tiny(mini_root, **over):
    base = {"data": {"root": str(mini_root), "datasets": ["cub", "flowers"], "batch_size": 32, "few_shot": 4,
                     "augment": False, "sampler": "m_per_class"},
            "model": {"method": "linear", "pretrained": False, "embed_dim": 16},
            "optimizer": {"name": "sgd", "lr": 0.0, "momentum": 0.0},
            "train": {"epochs": 1, "progress": False}}
    return resolve_config(base, overrides=[f"{k}={v}" for k, v in over.items()])


@pytest.mark.slow
def test_fit_with_two_terms_sums_the_weighted_single_term_losses(mini_root, tmp_path):
    """With lr 0 every step sees the same model: the epoch's loss of [A x 2, B x 0.5] is 2 a + 0.5 b."""
    runs = {}
    for key, objective in {"a": "[{name: multisimilarity}]", "b": "[{name: triplet}]",
                           "ab": "[{name: multisimilarity, weight: 2.0}, {name: triplet, weight: 0.5}]"}.items():
        runs[key] = fit(_tiny(mini_root, objective=objective), run_dir=tmp_path / key).history[0]["loss"]
    assert runs["a"] > 0 and runs["b"] > 0
    assert runs["ab"] == pytest.approx(2 * runs["a"] + 0.5 * runs["b"], rel=1e-6)  # float32 steps


def test_build_model_reads_run_folders_written_before_the_objective_list():
    """``umlkit eval`` rebuilds the model from a run folder's config.json, which may still hold ``loss``."""
    old = {"model": {"backbone": "vit_tiny_uml", "method": "full", "embed_dim": 8, "pretrained": False,
                     "weights": None, "options": {}},
           "loss": {"name": "diva", "options": {}, "extra_weight": 1.0}}
    model = build_model(old)
    assert list(model.aux_heads) == ["shared", "intra", "selfsup"] and model.eval_concat_aux
