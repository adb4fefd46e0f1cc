"""umlkit.experiments.papers.vptsp: configurations composed from configs/vptsp, the tuning protocol on training classes
only, the proxy learning-rate group, and rows that join the paper's cells."""
from __future__ import annotations

import pytest
import torch

from tests.experiments.retuning import tried_values, wait_while_retuning
from umlkit.experiments.claims.verdicts import TIMING
from umlkit.experiments.papers import oodml, vptsp
from umlkit.experiments.tables import table as tables
from umlkit.experiments.tables.paper_cells import paper_table


def test_run_config_composes_row_source_and_classes():
    cfg = vptsp.run_config("quick", row="VPTSP-G (B)", source="cars", lr=3e-3)
    m = cfg["model"]
    assert (m["method"], m["backbone"], m["embed_dim"]) == ("vptsp", "vit_tiny_uml_v2", 128)
    assert m["options"] == {"accumulator": "gru_relu", "class_prompts": 3, "num_prompts": 2, "prompt_depth": 6,
                            "proxy_bias_ratio": 0.7}   # the official Cars alpha
    assert cfg["objective"] == [{"name": "proxy_anchor_external", "weight": 1.0, "options": {}}]
    assert ((cfg["data"]["sampler"], cfg["data"]["samples_per_class"], cfg["data"]["batch_size"])
            == ("class_random", 2, 64))
    assert cfg["optimizer"]["lr"] == 3e-3 and cfg["optimizer"]["lr_mult"]["proxy"] == 20.0
    default = oodml.split_of("cars", oodml.default_split_id("cars"))
    assert cfg["data"]["splits"]["cars"] == {"train": default["train"], "test": default["test"]}
    no_bitfit = vptsp.run_config("quick", row="VPTSP-M", source="cub", lr=1e-3)["model"]["options"]
    assert (no_bitfit["bitfit_backbone"] is False and no_bitfit["accumulator"] == "ema"
            and no_bitfit["proxy_bias_ratio"] == 0.5)
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
    jobs = vptsp.sweep_jobs("quick")
    assert {key["config"]["data"]["datasets"][0] for _, _, key in jobs} == {"cub", "cars", "sop", "inshop"}
    for _, label, key in jobs:
        cfg = key["config"]
        src = cfg["data"]["datasets"][0]
        if src in oodml.SOURCES:   # explicit class lists: the last 30 % of the default training classes validate
            default = oodml.split_of(src, oodml.default_split_id(src))
            s = cfg["data"]["splits"][src]
            assert set(s["train"]) | set(s["test"]) == set(default["train"]), label
            assert not set(s["test"]) & set(default["test"])
            assert (s["test"] == default["train"][-len(s["test"]):]
                    and len(s["test"]) == round(0.3 * len(default["train"])))
            assert key["analysis"].get("evaluate", "test") == "test"   # its "test" classes are validation classes
        else:   # In-shop-like: its own split; val_fraction holds classes out and the analysis scores them
            assert cfg["data"]["splits"] == {} and cfg["data"]["val_fraction"] == 0.3, label
            assert key["analysis"]["evaluate"] == "val", label
    rows = {label.rsplit("-lr", 1)[0] for _, label, key in jobs if key["config"]["data"]["datasets"] == ["cub"]}
    assert rows == set(vptsp.methods_config()["rows"])
    for src in ("cars", "sop", "inshop"):   # every row a table reports on a source is tuned there
        reported = {r.spec["row"] for t in vptsp.TABLES("quick").values() for r in t.rows
                    if r.spec["source"] == src and "lr" not in r.spec and "row" in r.spec}
        assert reported <= set(vptsp.sweep_rows(src)), src


def test_chosen_learning_rates_are_the_sweeps_choice():
    sweep = vptsp.lr_sweep("quick")
    chosen = sweep[sweep["chosen"]]
    assert set(zip(chosen["source"], chosen["row"])) == {(s, r) for s in vptsp.methods_config()["sweep"]
                                                          for r in vptsp.sweep_rows(s)}
    best = {(s, r): lr for s, r, lr in zip(chosen["source"], chosen["row"], chosen["lr"])}
    wait_while_retuning("vptsp", "lr_sweep", {u: vptsp.chosen_lr(u[1], "quick", u[0]) for u in best}, best,
                        tried_values(sweep, ["source", "row"], "lr"))
    for source, row, lr in zip(chosen["source"], chosen["row"], chosen["lr"]):
        assert vptsp.chosen_lr(row, "quick", source) == pytest.approx(lr), (source, row)
    assert chosen["interior"].all()  # every best value lies inside its grid
    with pytest.raises(KeyError, match="no quick learning rate for 'Linear Prob' on 'sop'"):
        vptsp.chosen_lr("Linear Prob", "quick", "sop")


def test_table_rows_join_paper_cells():
    for name, spec in vptsp.TABLES("quick").items():
        paper = paper_table("vptsp", name, missing_ok=True)
        keys = {(m, s) for m, s in zip(paper["method"], paper["setting"].fillna(""))}
        rows = {(r.method, r.setting) for r in spec.rows if r.method != vptsp.ZERO_SHOT}   # the floor: beyond the paper
        if name in ("Fig. 3", "Rate transfer", "Diagnosis", "Table 8"):   # beyond the paper's cells (quick rows)
            assert not rows & keys and spec.columns, name
        else:
            assert rows <= keys and (rows or name in ("Table 3", "Table 10")), name   # rows join paper cells
        status = spec.unmeasured.get("quick", {})
        for method, setting in keys - rows:                       # every other paper cell says why
            reason = status.get(method, status.get("*")) if isinstance(status, dict) else status
            assert reason and reason.split(":")[0] in ("quoted", "full-profile only", "not measured"), (name, method)
        for claim in spec.claims:
            for cell in (claim.a, claim.b):
                if name in ("Table 8", "Diagnosis"):   # the book's own claims on its own rows
                    assert (cell["method"], cell["setting"]) in rows
                    continue
                hit = paper[(paper["method"] == cell["method"]) & (paper["setting"].fillna("") == cell["setting"])
                            & (paper["dataset"] == cell["dataset"])
                            & (paper["metric"] == cell.get("metric", claim.metric))]
                assert len(hit) == 1, (name, claim.text)
    t2 = vptsp.TABLES("quick")["Table 2"]
    assert {(r.method, r.spec["source"]) for r in t2.rows} == {(m, s) for m in (*vptsp.TABLE2, vptsp.ZERO_SHOT)
                                                               for s in vptsp.ALL_SOURCES}
    zs = [r for r in t2.rows if r.method == vptsp.ZERO_SHOT]
    assert all(r.seed_free for r in zs) and t2.floor.frozen == vptsp.ZERO_SHOT
    key = t2.config(zs[0], 0, "quick")   # the frozen backbone, evaluated as the table's rows are, nothing tuned in
    assert key["config"]["model"]["method"] == "zero_shot" and key["config"]["optimizer"]["lr"] == 0.0
    assert [r.spec["metrics"] for r in t2.rows if r.spec["source"] == "sop"][0] == ["R@1", "R@10", "R@100", "MAP@R"]
    t1 = vptsp.TABLES("quick")["Table 1"]   # parameter counts join the paper's cells (filed under CUB)
    counts = paper_table("vptsp", "Table 1").query("metric == 'TrainableParams(M)'")
    assert set(counts["dataset"]) == {t1.params_dataset} and t1.params
    t7 = vptsp.TABLES("quick")["Table 7"]   # its GRU-ReLU row prints Table 1's VPTSP-G (no BitFit): 86.1 / 52.1
    assert {r.spec["row"] for r in t7.rows if r.method != vptsp.ZERO_SHOT} == {"VPTSP-G"}
    for name, sources in (("Table 1", {"cub"}), ("Table 4", {"cub", "cars"}), ("Table 5", {"cub", "cars"}),
                          ("Table 7", {"cub"})):   # each table's floor is Table 2's zero-shot record of its sources
        spec = vptsp.TABLES("quick")[name]
        floor = [r for r in spec.rows if r.method == vptsp.ZERO_SHOT]
        assert spec.floor.frozen == vptsp.ZERO_SHOT and {r.spec["source"] for r in floor} == sources
        assert all(spec.config(r, 0, "quick") == t2.config(next(z for z in zs if z.spec["source"] == r.spec["source"]),
                                                           0, "quick") for r in floor)
    assert paper_table("vptsp", "Table 7").query("method == 'GRU with Relu' and metric == 'R@1'")["value"].item() == \
        paper_table("vptsp", "Table 1").query("method == 'VPTSP-G' and metric == 'R@1'")["value"].item()
    full8 = vptsp.TABLES("full")["Table 8"]
    assert {r.setting for r in full8.rows} == set(paper_table("vptsp", "Table 8")["setting"])
    key = full8.config(full8.rows[0], 0, "full", ())
    assert key["config"]["model"]["backbone"] == "dino_s16" and key["config"]["model"]["embed_dim"] == 384


def test_tables_share_identical_runs_once():
    jobs = vptsp.table_jobs("quick", seeds=(0,))
    labels = [(folder, label) for folder, label, *_ in jobs]
    assert len(labels) == len(set(labels))
    # runs two tables share are listed once: 11 (Table 1) + 16 (Table 2: other metrics) + 6 (Table 4, Cars) + 3 proxy
    # sources x 2 sources (Table 5) + 1 (Table 6's full fine-tuning; Hyp and VPTSP are Table 2's) + 4 accumulators
    # (Table 7) + 4 (Table 8's v1; v2 is Table 2's VPTSP-G) + 9 (Fig. 3; the tables' values are Table 1's run) + 4
    # (Cars at the CUB-like rates: VPTSP (GRU)'s and VPTSP (EMA)'s two rates coincide, 1e-2, so those runs are
    # Table 4's) + 21 (the diagnosis on validation classes: 7 rows x 3 sources) + 4 (Table 2's frozen backbone, one
    # per source: its floor) + 4 (Table 8's v1 frozen backbone, its rows' floor; v2's is Table 2's)
    assert len(jobs) == 11 + 16 + 6 + 6 + 1 + 4 + 4 + 9 + 4 + 21 + 4 + 4
    t1 = vptsp.TABLES("quick")["Table 1"]
    g = [r for r in t1.rows if r.method == "VPTSP-G (B)"][0]
    f3 = vptsp.TABLES("quick")["Fig. 3"]
    for r in f3.rows:
        same = f3.config(r, 0, "quick", ()) == t1.config(g, 0, "quick", ())
        assert same == (r.setting in ("num_prompts=2", "prompt_depth=6", "batch_size=64", "proxy_bias_ratio=0.5"))
    for r in vptsp.TABLES("quick")["Rate transfer"].rows:   # the first chapter's Cars runs used the CUB-like rates
        where = "cub" if r.setting.endswith("CUB") else "cars"
        assert r.spec["lr"] == vptsp.chosen_lr(r.spec["row"], "quick", where) and r.spec["source"] == "cars"


def test_full_profile_follows_the_official_configs():
    """Every full-profile run resolves without data or weights, with each benchmark's official recipe, and the
    full profile's record labels are unique per table."""
    cub = vptsp.run_config("full", row="VPTSP-G (B)", source="cub")
    assert cub["optimizer"]["name"] == "sgd" and cub["optimizer"]["lr"] == 5e-3 and cub["data"]["batch_size"] == 64
    sop = vptsp.run_config("full", row="VPTSP-G (B)", source="sop")
    assert (sop["data"]["batch_size"], sop["data"]["samples_per_class"]) == (32, 1)
    assert sop["optimizer"]["lr"] == 1e-4 and sop["optimizer"]["lr_mult"]["proxy"] == 500.0
    assert sop["model"]["options"]["class_prompts_device"] == "cpu" and sop["model"]["options"]["num_prompts"] == 90
    cars = vptsp.run_config("full", row="VPTSP-G (B)", source="cars")
    assert cars["model"]["options"]["prompt_step"] == 2 and cars["model"]["options"]["proxy_bias_ratio"] == 0.7
    assert vptsp.run_config("full", row="Hyp-ViT", source="sop")["data"]["samples_per_class"] == 2  # the loss needs 2
    assert "class_prompts" not in vptsp.run_config("full", row="VPT (B)", source="sop")["model"]["options"]
    fig3 = vptsp.run_config("full", row="VPTSP-G (B)", source="cub", options={"num_prompts": 50})
    assert fig3["model"]["options"]["num_prompts"] == 50   # a table's option wins over the source's recipe
    jobs = vptsp.table_jobs("full", seeds=(0,))
    assert len({(f, label) for f, label, *_ in jobs}) == len(jobs)
    assert vptsp.table10_file("full").name == "vptsp_table10_full_cuda.json"
    assert vptsp.table10_file("quick").name == "vptsp_table10_quick_cpu.json"


def test_table10_reads_a_benchmark_file(tmp_path):
    import json
    results = [{"method": m, "row": r, "batch_size": b, "round": k, "ms": ms}
               for k, scale in ((0, 1.0), (1, 2.0), (2, 1.0))
               for b in (32,)
               for (m, r), ms in zip(vptsp.TABLE10_ROWS.items(), (100.0 * scale, 20.0, 40.0, 40.0, 50.0, 80.0 * scale))]
    path = tmp_path / "t10.json"
    path.write_text(json.dumps({"machine": "CPU: test", "device": "cpu", "profile": "quick", "backbone": "tiny",
                                "image_size": 32, "precision": "fp32", "steps": 1, "warmup": 0, "rounds": 3,
                                "date": "2026-11-24", "results": results}))
    measured, head = vptsp.table10_measured(path)
    assert head["machine"] == "CPU: test" and len(measured) == 6 * 3 * 2
    frame = tables.compare(measured, "vptsp")
    ratio = frame[frame["metric"] == "Latency (x full)"].set_index("method")
    assert ratio.loc["VPTSP", "measured"] == pytest.approx(0.8) and ratio.loc["VPTSP", "spread"] == pytest.approx(0.0)
    # round 1 ran everything but full fine-tuning and VPTSP twice as fast: the ratio follows the round's own baseline
    assert ratio.loc["VPT", "values"] == pytest.approx({0: 0.5, 1: 0.25, 2: 0.5})
    # the paper's ratio is derived from its printed times (umlkit.experiments.tables.paper_cells.RATIO_OF), never typed
    assert (ratio.loc["VPTSP", "paper"] == pytest.approx(166 / 191)
            and ratio.loc["linear", "paper"] == pytest.approx(115 / 191))
    ms = frame[frame["metric"] == "Latency(ms)"].set_index("method")
    assert ms.loc["Full Fine-tuning (PA)", "measured"] == pytest.approx(400 / 3) and ms.loc["BitFit", "paper"] == 130
    claims = tables.check_claims(frame, vptsp.table10_claims()[:5])
    verdicts = dict(zip(claims["claim"], claims["verdict"]))
    # a timing is a measured ratio with its repeat spread, not a test (repeats are not seeds; issue 76)
    assert set(verdicts.values()) == {TIMING}
    gaps = dict(zip(claims["claim"], claims["gap"]))
    assert gaps["VPTSP's step takes longer than linear's (batch 32)"] > 0
    assert gaps["full fine-tuning's step takes longer than VPTSP's (batch 32)"] > 0
    assert vptsp.table10_measured(tmp_path / "missing.json")[0].empty
    spec = vptsp.TABLES("quick")["Table 10"]   # the chapter's Table 10 reads the committed benchmark file
    assert spec.derive("quick", False)["record"].iloc[0] == str(vptsp.table10_file("quick"))


def test_proxy_bias_trains_in_its_own_group():
    from umlkit.losses import create_loss
    from umlkit.models import create_model
    from umlkit.train.engine import build_optimizer, param_groups
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
    from umlkit.losses import create_loss
    from umlkit.models import create_model
    from umlkit.train.engine import build_optimizer, param_groups
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


@pytest.mark.slow
def test_train_analysis_scores_validation_classes_and_inshop_query_against_gallery(mini_root):
    """A tuning run (``evaluate: val``) is scored on the held-out training classes only; In-shop's test split is
    searched query against gallery, as unified_evaluation (and every In-shop table) does."""
    from umlkit.experiments.runs.runners import run
    from umlkit.metrics import evaluate_retrieval
    from umlkit.models import create_model
    from umlkit.models.backbones import backbone_data_config
    from umlkit.train.config import DEFAULTS, merge
    from umlkit.train.engine import build_data
    from umlkit.train.evaluate import evaluate_model, extract_embeddings
    cfg = merge(DEFAULTS, {"data": {"root": str(mini_root), "datasets": ["inshop"], "batch_size": 16},
                           "model": {"method": "zero_shot", "embed_dim": 16, "pretrained": True,
                                     "backbone": "vit_tiny_uml"},
                           "train": {"epochs": 1, "progress": False}})
    out = run("train_analysis", {"config": cfg, "analysis": {"metrics": ["R@1", "R@10"]}})
    model = create_model("vit_tiny_uml", "zero_shot", pretrained=True)
    train, test, _ = build_data(cfg, backbone_data_config("vit_tiny_uml"))
    assert not test.is_query.all()
    want = evaluate_model(model, test, batch_size=256)
    # 10.5: the README's v1 zero-shot In-shop R@1
    assert out["test"]["R@1"]["InShop"] == pytest.approx(want.loc["inshop", "R@1"], abs=1e-3)
    emb, labels = extract_embeddings(model, test, batch_size=256)
    self_search = 100 * evaluate_retrieval(emb, labels, metrics=["R@1"])["R@1"]
    # not the union searched against itself
    assert out["test"]["R@1"]["InShop"] != pytest.approx(self_search, abs=1e-3)
    cub = merge(cfg, {"data": {"datasets": ["cub"], "val_fraction": 0.3}})
    val = run("train_analysis", {"config": cub, "analysis": {"metrics": ["R@1"], "evaluate": "val"}})
    _, test_cub, val_cub = build_data(cub, backbone_data_config("vit_tiny_uml"))
    e, y = extract_embeddings(model, val_cub, batch_size=256)
    assert val["test"]["R@1"]["CUB"] == pytest.approx(100 * evaluate_retrieval(e, y, metrics=["R@1"])["R@1"], abs=1e-3)
    with pytest.raises(ValueError, match="needs validation classes"):
        run("train_analysis", {"config": merge(cub, {"data": {"val_fraction": 0.0}}),
                               "analysis": {"metrics": ["R@1"], "evaluate": "val"}})
    with pytest.raises(ValueError, match="query/gallery split"):
        run("train_analysis", {"config": cfg, "analysis": {"metrics": ["R@1"], "fixed_classes": 5}})


def test_diagnosis_changes_one_thing_per_row():
    """Each diagnosis row is VPTSP-G (B) on validation classes with alpha and/or the loss normalisation changed, at
    VPTSP-G (B)'s rate on the source (VPT (B) at its own); nothing else differs."""
    spec = vptsp.TABLES("quick")["Diagnosis"]
    keys = {(r.method, r.spec["source"]): spec.config(r, 0, "quick", ())["config"] for r in spec.rows}
    for src in vptsp.DIAGNOSIS_SOURCES:
        ref = keys[("VPTSP-G (B)", src)]
        default = oodml.split_of(src, oodml.default_split_id(src))
        held_out = ref["data"]["splits"][src]["test"]   # the validation classes: training classes, never test ones
        assert set(held_out) <= set(default["train"]) and not set(held_out) & set(default["test"])
        a1 = keys[("alpha = 1 (no semantic memory)", src)]
        assert a1["model"]["options"] == {**ref["model"]["options"], "proxy_bias_ratio": 1.0}
        assert {**a1, "model": ref["model"]} == ref
        orig = keys[("original normalisation", src)]
        assert orig["objective"][0]["options"] == {"normalisation": "original"}
        assert {**orig, "objective": ref["objective"]} == ref
        vpt = keys[("VPT (B)", src)]
        assert vpt["optimizer"]["lr"] == vptsp.chosen_lr("VPT (B)", "quick", src)
        assert ref["optimizer"]["lr"] == vptsp.chosen_lr("VPTSP-G (B)", "quick", src)


def test_proxy_bias_init_pml_draws_as_pml_proxy_anchor():
    """``proxy_bias_init="pml"`` (the diagnosis row) draws the bias from PML's ProxyAnchorLoss distribution
    (kaiming-normal, fan_out: row norm sqrt(2 / classes * dim)); the default keeps the official xavier-uniform / 8."""
    from pytorch_metric_learning.losses import ProxyAnchorLoss

    from umlkit.models import create_model
    kw = dict(pretrained=False, embed_dim=16, num_classes=40, num_prompts=1, prompt_depth=1, class_prompts=1)
    official = create_model("vit_tiny_uml", "vptsp", **kw).proxy_bias.detach()
    bound = (6 / (40 + 16)) ** 0.5 / 8
    assert float(official.abs().max()) <= bound + 1e-7 and float(official.abs().max()) > 0.5 * bound
    torch.manual_seed(3)
    model = create_model("vit_tiny_uml", "vptsp", proxy_bias_init="pml", **kw)
    assert torch.allclose(model.proxy_bias.norm(dim=1).mean(), torch.tensor((2 / 40 * 16) ** 0.5), rtol=0.15)
    torch.manual_seed(0)
    pml = ProxyAnchorLoss(40, 16).proxies
    assert torch.allclose(pml.std(), model.proxy_bias.std(), rtol=0.15)   # the same distribution's spread
    with pytest.raises(ValueError, match="proxy_bias_init must be"):
        create_model("vit_tiny_uml", "vptsp", proxy_bias_init="zeros", **kw)


def test_the_floor_facts_glue_names_of_their_own():
    """The chapter glues floor_facts on top of chapter_facts; one shared name (t2_hyp_sop: Hyp-ViT's R@1 there, the
    VPTSP-G - Hyp-ViT gap here) once printed Hyp-ViT's own R@1 as the gap."""
    import pandas as pd

    from umlkit.experiments.papers.vptsp import chapter
    later = chapter._later_table_facts({}, {}, vptsp.methods_config())
    floors = chapter.floor_facts(pd.DataFrame(columns=["table", "section", "method", "setting", "row", "dataset",
                                                       "metric", "measured"]))
    assert "t2_hyp_sop" in later and "t2_hypvit_sop" in floors and not set(later) & set(floors)


def test_the_findings_box_floor_sentence_holds_in_the_committed_records():
    """The chapter's findings box says VPTSP-G ends below the frozen backbone on the SOP- and In-shop-like sources
    (Table 2, R@1) and that its claims there are not comparable; on the CUB- and Cars-like sources it is above."""
    spec = vptsp.TABLES("quick")["Table 2"]
    measured = tables.measure(spec, "quick", train=False, progress=False, log=None)
    if measured.empty:
        pytest.skip("Table 2's records are not in this checkout")
    marked = tables.mark_floors(spec, tables.compare(measured, "vptsp"))
    r1 = marked[(marked["method"] == "VPTSP-G") & (marked["metric"] == "R@1")].set_index("dataset")
    assert (r1.loc[["SOP", "InShop"], "floor"] == tables.BELOW).all()
    assert (r1.loc[["CUB", "Cars"], "measured"] > r1.loc[["CUB", "Cars"], "frozen"]).all()
    claims = tables.table_claims(spec, marked)
    for d in ("SOP", "InShop"):
        mine = claims[claims["claim"].str.contains("VPTSP-G", regex=False)
                      & claims["claim"].str.contains(f"({d}", regex=False)]
        assert len(mine) and mine["verdict"].str.startswith(tables.NOT_COMPARABLE).all(), mine[["claim", "verdict"]]


def test_table8s_v1_rates_are_its_own_validation_choice_and_interior():
    """Table 8 compares two pretrainings; each runs at the rate its own validation classes chose (the v1 rows once
    ran at v2's rates). Every rate entered under table8_v1_lr is the best of v1's sweep on that source, inside the
    grid, and a source whose sweep is complete has its rate entered."""
    from umlkit.experiments.papers.vptsp import chapter
    frame = chapter.lr_sweep("quick", backbone=vptsp.config.TABLE8_V1)
    if frame.empty:
        pytest.skip("Table 8's v1 sweep records are not in this checkout")
    grid = len(vptsp.methods_config()["rows"]["VPTSP-G (B)"].get("lr_grid") or vptsp.methods_config()["lr_grid"])
    complete = {s for s, g in frame.groupby("source") if len(g) >= grid}
    entered, edge = vptsp.config.TABLE8_V1_LR, vptsp.config.DECLARED.get("table8_v1_no_interior") or {}
    wait_while_retuning("vptsp", "table8_tuning", dict(entered),
                        dict(zip(frame.loc[frame["chosen"], "source"], frame.loc[frame["chosen"], "lr"])),
                        tried_values(frame, ["source"], "lr"))
    assert complete <= set(entered) | set(edge), f"tuned but not entered: {complete - set(entered) - set(edge)}"
    for source in edge:   # declared edge-bound: its best is the smallest rate tried
        mine = frame[frame["source"] == source]
        assert mine.loc[mine["chosen"], "lr"].iloc[0] == mine["lr"].min()
    for source, lr in entered.items():
        best = frame[(frame["source"] == source) & frame["chosen"]].iloc[0]
        assert best["lr"] == pytest.approx(lr) and best["interior"], (source, frame[frame["source"] == source])
    spec = vptsp.TABLES("quick")["Table 8"]
    v1 = [r for r in spec.rows
          if r.method == "VPTSP" and f"model.backbone={vptsp.config.TABLE8_V1}" in r.spec["overrides"]]
    assert {r.spec["source"]: r.spec.get("lr") for r in v1} == {s: entered.get(s) for s in vptsp.config.ALL_SOURCES}
