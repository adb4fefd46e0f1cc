"""The loss registry: register_loss as decorator and call, create_loss and loss_table through it, declared inputs,
auxiliary heads declared with the loss."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from umlkit.losses import (
    INPUTS,
    LOSSES,
    TERMS,
    _registry,
    aux_heads_for,
    create_loss,
    loss_inputs,
    loss_table,
    model_requirements,
    register_loss,
)


@pytest.fixture
def scratch_names():
    """Names registered by a test are removed afterwards, so the registry stays as the package built it."""
    added = []
    yield added
    for name in added:
        _registry._REGISTRY.pop(name, None)
        LOSSES.pop(name, None)
        TERMS.pop(name, None)


class _Scaled(nn.Module):
    inputs = ("embeddings", "labels")

    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def forward(self, embeddings, labels):
        return self.factor * embeddings.sum()


def test_register_loss_as_decorator_feeds_create_loss_and_the_table(scratch_names):
    scratch_names.append("scaled_sum")

    @register_loss("scaled_sum", implementation="test _Scaled", source="a test", defaults={"factor": 2.0},
                   aux_heads=lambda dim, **o: {"extra": (dim * 2, "linear")})
    def build(num_classes, embedding_size, factor):
        return _Scaled(factor)

    loss = create_loss("scaled_sum")
    assert isinstance(loss, _Scaled) and loss.factor == 2.0
    assert create_loss("scaled_sum", factor=3.0).factor == 3.0
    assert float(loss(embeddings=torch.ones(2, 3), labels=torch.zeros(2))) == 12.0
    row = loss_table().loc["scaled_sum"]
    assert (row["implementation"], row["source"], row["defaults"]) == ("test _Scaled", "a test", "factor=2.0")
    assert aux_heads_for("scaled_sum", 8) == {"extra": (16, "linear")}
    with pytest.raises(ValueError, match="'scaled_sum' is already registered"):
        register_loss("scaled_sum", lambda n, d: _Scaled(1.0), implementation="x", source="y")
    # the same builder again (a module imported twice) replaces the entry
    register_loss("scaled_sum", build, implementation="again", source="a test", defaults={"factor": 5.0})
    assert create_loss("scaled_sum").factor == 5.0 and loss_table().loc["scaled_sum", "implementation"] == "again"


def test_register_loss_as_a_call_and_as_a_term(scratch_names):
    scratch_names.append("const_term")
    register_loss("const_term", lambda n, d: _Scaled(0.0), implementation="test", source="test", term=True)
    assert "const_term" in TERMS and "const_term" not in LOSSES
    assert list(loss_table().index)[-1] == "const_term"


def test_table_order_and_errors_are_the_builtin_ones():
    assert list(loss_table().index) == [*LOSSES, *TERMS]
    assert list(LOSSES)[:3] == ["triplet", "margin", "r_margin"] and list(TERMS) == ["model_regularizer"]
    with pytest.raises(ValueError, match=r"unknown loss 'npair'; choose one of triplet, margin, .*, model_regularizer"):
        create_loss("npair")
    with pytest.raises(ValueError, match="'proxy_anchor' has learnable proxies and needs num_classes and "
                                         "embedding_size"):
        create_loss("proxy_anchor")
    with pytest.raises(TypeError, match="model_regularizer takes no options"):
        create_loss("model_regularizer", weight=2)


def test_every_loss_declares_inputs_from_the_vocabulary():
    expected = {"proxy_anchor_external": ("embeddings", "labels", "proxies"),
                "s2sd": ("embeddings", "labels", "aux", "features"),
                "diva": ("embeddings", "labels", "aux", "features", "views"),
                "model_regularizer": ("model",)}
    for name in [*LOSSES, *TERMS]:
        extra = {"language_embeddings": torch.randn(4, 6)} if name.startswith("language_") else {}
        if name == "language_token_prediction":
            extra["feature_width"] = 8
        loss = create_loss(name, num_classes=4, embedding_size=8, **extra)
        assert "inputs" in dir(loss), name
        assert loss_inputs(loss) == expected.get(name, ("embeddings", "labels")), name
        assert set(loss_inputs(loss)) <= set(INPUTS)
    # DiVA asks for the second view only while its self-supervised head trains
    assert "views" not in loss_inputs(create_loss("diva", num_classes=4, embedding_size=8, alpha_selfsup=0.0))


def test_loss_inputs_rejects_undeclared_and_unknown_inputs():
    class Bare(nn.Module):
        pass

    class Odd(nn.Module):
        inputs = ("embeddings", "images")

    with pytest.raises(TypeError, match="Bare declares no inputs"):
        loss_inputs(Bare())
    with pytest.raises(ValueError, match=r"Odd asks for input\(s\) \['images'\]; the training engine provides "
                                         "embeddings, labels, aux"):
        loss_inputs(Odd())


def test_aux_heads_come_from_the_registry_and_from_every_term():
    assert aux_heads_for("s2sd", 8, target_dims=(16, 32), weight=1.0) == {"s2sd_0": (16, "mlp2"),
                                                                          "s2sd_1": (32, "mlp2")}
    assert aux_heads_for("diva", 8) == {"shared": (8, "linear"), "intra": (8, "linear"), "selfsup": (8, "linear")}
    assert aux_heads_for("margin", 8) == {} and aux_heads_for("model_regularizer") == {}
    objective = [{"name": "s2sd", "options": {"target_dims": [24]}}, {"name": "margin", "options": {}},
                 {"name": "diva", "options": {"alpha_selfsup": 0.0}}]
    need = model_requirements(objective, 8)
    assert need == {"aux_heads": {"s2sd_0": (24, "mlp2"), "shared": (8, "linear"), "intra": (8, "linear"),
                                  "selfsup": (8, "linear")}, "eval_concat_aux": True}
    assert model_requirements([{"name": "s2sd", "options": {}}], 8)["eval_concat_aux"] is False
    assert model_requirements([{"name": "margin"}, {"name": "model_regularizer"}], 8) == {}
