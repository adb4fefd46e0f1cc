"""WiSE-FT (umlkit.train.wise_ft): the weight-space mixture by hand, the model restored, and the engine's curve whose
end points are the untrained and the trained model."""
import pytest
import torch
from torch import nn

from umlkit.train import fit
from umlkit.train.wise_ft import check_alphas, initial_state, mixed, wise_ft_curve


def test_the_mixture_is_the_linear_interpolation_and_the_model_comes_back():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    start = initial_state(net)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(1.5)
    net[1].num_batches_tracked += 7          # an integer buffer keeps the final value
    end = {k: v.clone() for k, v in net.state_dict().items()}
    with mixed(net, start, 0.25):
        w = net[0].weight
        assert torch.allclose(w, 0.75 * start["0.weight"] + 0.25 * end["0.weight"])
        assert int(net[1].num_batches_tracked) == 7
    assert all(torch.equal(v, end[k]) for k, v in net.state_dict().items())
    curve = wise_ft_curve(net, start, [0.0, 1.0], lambda m: {"w": float(m[0].weight.detach().sum())})
    assert curve[0] == {"alpha": 0.0, "w": pytest.approx(float(start["0.weight"].sum()), abs=1e-5)}
    assert curve[1]["w"] == pytest.approx(float(end["0.weight"].sum()), abs=1e-5)


@pytest.mark.parametrize("bad", [[], [1.5], ["a"], 0.5, [True]])
def test_bad_coefficients_are_refused_naming_the_key(bad):
    with pytest.raises(ValueError, match="train.wise_ft"):
        check_alphas(bad)


def _cfg(root, method="full", **train):
    return {"name": "tiny", "data": {"root": str(root), "datasets": ["flowers"], "batch_size": 32},
            "model": {"method": method, "pretrained": False, "embed_dim": 16}, "loss": {"name": "cosface"},
            "optimizer": {"lr": 1e-3}, "train": {"epochs": 1, "progress": False, **train}}


def test_the_engine_evaluates_the_curve_at_the_end(small_root, tmp_path):
    res = fit(_cfg(small_root, wise_ft=[0.0, 1.0]), run_dir=tmp_path / "run")
    assert [p["alpha"] for p in res.wise_ft] == [0.0, 1.0]
    last = {src: {m: round(float(v), 4) for m, v in row.items()} for src, row in res.last.iterrows()}
    assert res.wise_ft[1]["test"] == last   # alpha = 1 is the trained model
    untrained = fit(_cfg(small_root, epochs=1), run_dir=tmp_path / "zero", overrides=["optimizer.lr=0"])
    assert res.wise_ft[0]["test"] == {s: {m: round(float(v), 4) for m, v in row.items()}
                                      for s, row in untrained.last.iterrows()}   # alpha = 0: the model as built
    assert fit(_cfg(small_root), run_dir=tmp_path / "plain").wise_ft is None


def test_layernorm_tuning_trains_the_norms_and_the_head_only(small_root):
    from umlkit.models import create_model
    model = create_model("vit_tiny_uml", method="layernorm", embed_dim=16, pretrained=False)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    norms = {f"{n}.{k}" for n, m in model.named_modules() if isinstance(m, nn.LayerNorm) for k in ("weight", "bias")}
    assert norms and norms <= trainable
    assert {n for n in trainable - norms} == {n for n, _ in model.head.named_parameters(prefix="head")}
