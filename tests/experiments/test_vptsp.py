"""umlkit.experiments.vptsp: configurations composed from configs/vptsp, the tuning protocol on training classes
only, the proxy learning-rate group, and rows that join the paper's cells."""
from __future__ import annotations

import pytest
import torch

from umlkit.experiments import oodml, vptsp
from umlkit.paper import paper_table


def test_run_config_composes_row_source_and_classes():
    cfg = vptsp.run_config("quick", row="VPTSP-G (B)", source="cars", lr=3e-3)
    m = cfg["model"]
    assert (m["method"], m["backbone"], m["embed_dim"]) == ("vptsp", "vit_tiny_uml_v2", 128)
    assert m["options"] == {"accumulator": "gru_relu", "class_prompts": 3, "num_prompts": 2, "prompt_depth": 6,
                            "proxy_bias_ratio": 0.7}   # the official Cars alpha
    assert cfg["objective"] == [{"name": "proxy_anchor_external", "weight": 1.0, "options": {}}]
    assert (cfg["data"]["sampler"], cfg["data"]["samples_per_class"], cfg["data"]["batch_size"]) == ("class_random", 2, 64)
    assert cfg["optimizer"]["lr"] == 3e-3 and cfg["optimizer"]["lr_mult"]["proxy"] == 20.0
    default = oodml.split_of("cars", oodml.default_split_id("cars"))
    assert cfg["data"]["splits"]["cars"] == {"train": default["train"], "test": default["test"]}
    no_bitfit = vptsp.run_config("quick", row="VPTSP-M", source="cub", lr=1e-3)["model"]["options"]
    assert no_bitfit["bitfit_backbone"] is False and no_bitfit["accumulator"] == "ema" and no_bitfit["proxy_bias_ratio"] == 0.5
    base = vptsp.run_config("quick", row="VPT (B)", source="cub", lr=1e-3)
    assert base["model"]["method"] == "vpt_deep" and base["model"]["options"]["bitfit"] is True
    assert base["objective"][0]["name"] == "proxy_anchor"
    table7 = vptsp.run_config("quick", row="VPTSP-G (B)", source="cub", lr=1e-3, options={"accumulator": "lstm"})
    assert table7["model"]["options"]["accumulator"] == "lstm"
    full = vptsp.run_config("full", row="VPTSP-G (B)", source="cub")
    assert full["model"]["backbone"] == "vit_s16_in21k" and full["model"]["options"]["num_prompts"] == 10
    with pytest.raises(KeyError, match="unknown VPTSP row"):
        vptsp.run_config("quick", row="VPTSP-X", lr=1e-3)
    with pytest.raises(KeyError, match="no VPTSP settings for source"):
        vptsp.run_config("quick", row="VPT", source="mars", lr=1e-3)


def test_tuning_never_sees_a_test_class():
    default = oodml.split_of("cub", oodml.default_split_id("cub"))
    for _, label, key in vptsp.sweep_jobs("quick"):
        s = key["config"]["data"]["splits"]["cub"]
        assert set(s["train"]) | set(s["test"]) == set(default["train"]), label
        assert not set(s["test"]) & set(default["test"])
        assert s["test"] == default["train"][-len(s["test"]):] and len(s["test"]) == round(0.3 * len(default["train"]))
    rows = {label.rsplit("-lr", 1)[0] for _, label, _ in vptsp.sweep_jobs("quick")}
    assert rows == set(vptsp.methods_config()["rows"])


def test_chosen_learning_rates_are_the_sweeps_choice():
    sweep = vptsp.lr_sweep("quick")
    chosen = sweep[sweep["chosen"]].set_index("row")["lr"]
    assert set(chosen.index) == set(vptsp.methods_config()["rows"])
    for row, lr in chosen.items():
        assert vptsp.chosen_lr(row, "quick") == pytest.approx(lr), row
    assert sweep.loc[sweep["chosen"], "interior"].all()  # every best value lies inside its grid


def test_table_rows_join_paper_cells():
    for name, spec in vptsp.TABLES("quick").items():
        paper = paper_table("vptsp", name)
        methods = set(paper["method"])
        assert {r.method for r in spec.rows} == methods, name
        keys = {(m, s) for m, s in zip(paper["method"], paper["setting"].fillna(""))}
        assert {(r.method, r.setting) for r in spec.rows} == keys, name    # every row joins its paper cells
        assert ("VPT", "L=12;N=10") in keys or name != "Table 1"
        for claim in spec.claims:
            for cell in (claim.a, claim.b):
                hit = paper[(paper["method"] == cell["method"]) & (paper["setting"].fillna("") == cell["setting"])
                            & (paper["dataset"] == cell["dataset"]) & (paper["metric"] == cell["metric"])]
                assert len(hit) == 1, (name, claim.text)


def test_tables_share_identical_runs_once():
    jobs = vptsp.table_jobs("quick", seeds=(0,))
    labels = [label for _, label, _ in jobs]
    assert len(labels) == len(set(labels))
    # Table 4's CUB rows and Tables 5/7's VPTSP-G (B) rows are runs of Tables 1 and 4: 11 (Table 1) + 6 (Table 4,
    # Cars) + 3 proxy sources x 2 sources (Table 5) + 4 accumulators (Table 7)
    assert len(jobs) == 11 + 6 + 6 + 4


def test_proxy_bias_trains_in_its_own_group():
    from umlkit.models import create_model
    from umlkit.train.engine import build_optimizer, param_groups
    from umlkit.losses import create_loss
    model = create_model("vit_tiny_uml", "vptsp", pretrained=False, embed_dim=8, num_classes=4, num_prompts=1,
                         prompt_depth=2, class_prompts=1)
    groups = param_groups(model, create_loss("proxy_anchor_external"))
    assert [p is model.proxy_bias for p in groups["proxy"]] == [True]
    assert not any(p is model.proxy_bias for g in ("backbone", "new", "head") for p in groups[g])
    cfg = {"optimizer": {"name": "adamw", "lr": 0.01, "weight_decay": 0.0,
                         "lr_mult": {"backbone": 1.0, "new": 3.0, "head": 2.0, "loss": 1.0}}}
    lrs = {g["name"]: g["lr"] for g in build_optimizer(cfg, groups).param_groups}
    assert lrs["proxy"] == pytest.approx(0.03) and lrs["new"] == pytest.approx(0.03)   # default: the new group's
    cfg["optimizer"]["lr_mult"]["proxy"] = 20.0
    lrs = {g["name"]: g["lr"] for g in build_optimizer(cfg, groups).param_groups}
    assert lrs["proxy"] == pytest.approx(0.2) and lrs["head"] == pytest.approx(0.02)


def test_separate_proxy_group_changes_no_update():
    """build_optimizer with the proxy bias in its own group (no lr_mult.proxy) updates every parameter exactly as it
    did when the bias sat in the ``new`` group (the records trained before the group existed)."""
    from umlkit.models import create_model
    from umlkit.train.engine import build_optimizer, param_groups
    from umlkit.losses import create_loss
    torch.manual_seed(0)
    model = create_model("vit_tiny_uml", "vptsp", pretrained=False, embed_dim=8, num_classes=4, num_prompts=1,
                         prompt_depth=2, class_prompts=1)
    split = param_groups(model, create_loss("proxy_anchor_external"))
    merged = {**split, "new": split["new"] + split["proxy"], "proxy": []}
    params = [p for g in split.values() for p in g]
    start = [p.detach().clone() for p in params]
    grads = [torch.randn_like(p) for p in params]
    cfg = {"optimizer": {"name": "adamw", "lr": 0.01, "weight_decay": 1e-4,
                         "lr_mult": {"backbone": 1.0, "new": 10.0, "head": 2.0, "loss": 20.0}}}

    def steps(groups):
        for p, s, g in zip(params, start, grads):
            p.data.copy_(s)
            p.grad = g.clone()
        opt = build_optimizer(cfg, groups)
        for _ in range(3):
            opt.step()
        return [p.detach().clone() for p in params]

    after_split, after_merged = steps(split), steps(merged)
    assert not torch.equal(after_split[-1], start[-1])   # the parameters did move
    for a, b in zip(after_split, after_merged):
        assert torch.equal(a, b)
