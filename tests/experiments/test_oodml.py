"""umlkit.experiments.papers.oodml: the committed quick splits, configurations, rows that join every paper cell, AGS and
the analysis runner."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from tests.experiments.retuning import tried_values, wait_while_retuning
from umlkit.experiments.papers import oodml
from umlkit.experiments.papers.oodml import split_making
from umlkit.experiments.tables.paper_cells import paper_table


def test_committed_splits_follow_table_s1_layout():
    data = oodml.load_splits("quick")
    assert data["backbone"] == "vit_tiny_uml_v2" and data["world"].startswith("uml_mini:v2:large")
    n_classes = {"cub": 200, "cars": 196, "sop": 1000}
    for src, n in zip(oodml.SOURCES, (9, 8, 8)):
        splits = data["sources"][src]["splits"]
        assert [s["id"] for s in splits] == list(range(1, n + 1))
        assert set(oodml._paper_settings(oodml.SHIFT_TABLES[src])) == set(range(1, n + 1))
        fids = [s["fid"] for s in splits]
        assert fids == sorted(fids) and len(set(fids)) == n
        assert [s["id"] for s in splits if s["default"]] == [oodml.default_split_id(src)]
        assert oodml.default_split_id(src) == (3 if src == "cub" else 1)  # as the official ood_main.py
        for s in splits:
            assert not set(s["train"]) & set(s["test"])
            assert len(set(s["train"]) | set(s["test"])) <= n_classes[src]
            if s["kind"] == "removal":
                assert len(s["train"]) == len(s["test"]) < n_classes[src] / 2
        assert data["sources"][src]["default_fid"] == splits[oodml.default_split_id(src) - 1]["fid"]
        # the hardest split is at least 5x the default's FID (the quick world's requirement)
        assert fids[-1] >= 5 * data["sources"][src]["default_fid"]
    assert [s["kind"] for s in data["sources"]["cub"]["splits"][:2]] == ["inverse", "inverse"]


def test_the_inputs_of_the_committed_splits_are_those_last_recomputed():
    """The recomputation below runs in `make test-all`; here its inputs are compared with those it last passed on."""
    from tests._artefacts import inputs_hash, stored_hash
    assert inputs_hash("oodml_quick_splits") == stored_hash("oodml_quick_splits"), (
        "the code, configuration, data generator or weights behind configs/oodml/splits_quick.json changed since the "
        "splits were last recomputed: run `make test-all` (it recomputes them and, when they still match, stores the "
        "new inputs hash in tests/artefact_inputs.json)")


@pytest.mark.recompute
def test_committed_splits_are_what_make_splits_computes():
    """The same classes in every split; the FIDs (4 decimals) to their last digit, which another CPU kind's float
    kernels can move (an AVX2-only EPYC changed 7 of them by 1e-4, no class)."""
    fresh = oodml.make_splits("quick")
    stored = oodml.load_splits("quick")
    import json

    def same(a, b, path=""):
        if isinstance(a, dict) and isinstance(b, dict):
            assert set(a) == set(b), path
            for k in a:
                same(a[k], b[k], f"{path}.{k}")
        elif isinstance(a, list) and isinstance(b, list):
            assert len(a) == len(b), path
            for i, (x, y) in enumerate(zip(a, b)):
                same(x, y, f"{path}[{i}]")
        elif isinstance(a, float) and isinstance(b, float):
            assert a == pytest.approx(b, abs=2e-4), path
        else:
            assert a == b, path
    same(json.loads(json.dumps(fresh)), stored)
    from tests._artefacts import certify
    certify("oodml_quick_splits")


def test_run_config_tunes_on_training_classes_only():
    val = oodml.run_config("quick", method="Margin (D)", source="cub", lr=1e-3, validation=True)
    test = oodml.run_config("quick", method="Margin (D)", source="cub", lr=1e-3)
    default = oodml.split_of("cub", oodml.default_split_id("cub"))
    sv, st = val["data"]["splits"]["cub"], test["data"]["splits"]["cub"]
    assert st == {"train": default["train"], "test": default["test"]}
    assert set(sv["train"]) | set(sv["test"]) == set(default["train"]) and not set(sv["test"]) & set(default["test"])
    assert len(sv["test"]) == round(0.3 * len(default["train"]))
    assert val["data"]["root"] == "uml_mini:large" and val["model"]["backbone"] == "vit_tiny_uml_v2"
    assert ((val["data"]["sampler"], val["data"]["samples_per_class"], val["data"]["batch_size"])
            == ("m_per_class", 2, 112))
    sop = oodml.run_config("quick", method="DiVA", source="sop", lr=1e-3, split=8)
    assert sop["train"]["epochs"] == 4 and sop["objective"][0]["options"]["decorrelation"] == 150.0
    assert sop["data"]["splits"]["sop"]["test"] == oodml.split_of("sop", 8)["test"]
    with pytest.raises(KeyError, match="unknown ooDML method"):
        oodml.run_config("quick", method="Triplet")


def test_chosen_learning_rates_are_the_sweeps_choice():
    sweep = oodml.lr_sweep("quick")
    chosen = sweep[sweep["chosen"]].set_index("method")["lr"]
    assert set(chosen.index) == set(oodml.methods_config()["methods"])
    wait_while_retuning("oodml", "lr_sweep", {m: oodml.chosen_lr(m, "quick") for m in chosen.index},
                        chosen.to_dict(), tried_values(sweep, ["method"], "lr"))
    for method, lr in chosen.items():
        assert oodml.chosen_lr(method, "quick") == pytest.approx(lr), method
    assert sweep.loc[sweep["chosen"], "interior"].all()  # every best value lies inside its grid


@pytest.mark.parametrize("table", ["Table S4", "Table S5", "Table S6", "Table S7", "Table S8"])
def test_rows_cover_every_paper_cell(table):
    tables = oodml.TABLES("quick")
    spec = tables[table]
    paper = paper_table("oodml", table).fillna("")
    want = set(map(tuple, paper[["method", "setting", "dataset", "metric"]].to_numpy()))
    ds = paper["dataset"].iloc[0]
    have = {(r.method, r.setting, ds, m) for r in spec.rows for m in ("R@1", "mAP@1000")}
    assert want <= have
    extra = {(m, s) for m, s, _, _ in have - want}
    assert {m for m, _ in extra} <= set(oodml.GENERIC)  # only the generic representations have no paper cell


def test_ags_frame_by_hand():
    fids = oodml.split_fids("quick")["Cars"]
    settings = list(fids)
    scores = np.linspace(90, 60, len(settings))
    measured = pd.DataFrame([{"table": "Table S5", "section": "", "method": "R-Margin (D)", "setting": s,
                              "row": "R-Margin (D)", "seed": 0, "dataset": "Cars", "metric": "R@1", "value": v,
                              "stale": ""} for s, v in zip(settings, scores)])
    out = oodml.ags_frame(measured)
    assert list(out["method"]) == ["R-Margin"] and list(out["metric"]) == ["AGS-R@1"]
    x = np.array([fids[s] for s in settings])
    x = (x - x.min()) / (x.max() - x.min())
    by_hand = sum((x[i + 1] - x[i]) * (scores[i + 1] + scores[i]) / 2 for i in range(len(x) - 1))
    assert out["value"].iloc[0] == pytest.approx(by_hand)
    assert oodml.ags_frame(measured.iloc[:-1]).empty  # a split missing: no AGS


def test_fixed_class_recall_is_the_mean_over_class_subsets():
    from umlkit.experiments.runs.runners import fixed_class_recall
    from umlkit.metrics import evaluate_retrieval
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(8), 5)
    emb = torch.nn.functional.normalize(torch.from_numpy(rng.normal(size=(40, 6)) + labels[:, None] * 0.3).float(),
                                        dim=1)
    g = np.random.default_rng(4)
    expected = []
    for _ in range(3):
        keep = np.isin(labels, g.choice(np.arange(8), 5, replace=False))
        expected.append(evaluate_retrieval(emb[keep], labels[keep], metrics=["R@1"])["R@1"])
    assert fixed_class_recall(emb, labels, 5, draws=3, seed=4) == pytest.approx(100 * np.mean(expected), abs=1e-3)
    assert fixed_class_recall(emb, labels, 8, draws=1) == pytest.approx(
        100 * evaluate_retrieval(emb, labels, metrics=["R@1"])["R@1"], abs=1e-3)
    with pytest.raises(ValueError, match="only 8 classes"):
        fixed_class_recall(emb, labels, 9)


def test_mini_alias_names_the_generated_world_without_a_path():
    from umlkit.data.mini import mini_alias
    assert mini_alias("uml_mini") == "default" and mini_alias("uml_mini:large") == "large"
    assert mini_alias("uml_mini:huge") is None and mini_alias("/data/uml_mini") is None and mini_alias(None) is None
    from umlkit.experiments.runs.fingerprint import data_fingerprint
    cfg = oodml.run_config("quick", method="Margin (D)", lr=1e-3)
    assert data_fingerprint(cfg) == "uml_mini:v2:large:seed0"


@pytest.mark.slow
def test_few_shot_analysis_takes_the_official_scripts_steps_and_beta():
    """OOD-Study_FewShot.sh: 1,000 steps at 2 shots and 1,500 at 5 (full); S2SD's runs pass --loss_margin_beta 0.6,
    the others keep the criterion's 1.2 (no beta in their key)."""
    from umlkit.experiments.papers.oodml.config import analysis_for, methods_config
    from umlkit.experiments.runs.runners import _per_shot
    assert _per_shot(methods_config()["few_shot"]["iterations"]["full"]) == {2: 1000, 5: 1500}
    assert _per_shot({"2": 1000, "5": 1500}) == {2: 1000, 5: 1500} and _per_shot(100) == 100   # as a record reads
    assert analysis_for("S2SD", "cub", 3, "quick")["few_shot"]["beta"] == 0.6
    quick = analysis_for("ArcFace", "cars", 1, "quick")["few_shot"]
    assert quick["iterations"] == 100 and "beta" not in quick
    assert "few_shot" not in analysis_for("ProxyAnchor", "cub", 3, "quick")


def test_train_analysis_measures_what_its_key_asks(mini_root):
    from umlkit.experiments.runs.runners import run
    from umlkit.train.config import DEFAULTS, merge
    cfg = merge(DEFAULTS, {"data": {"root": str(mini_root), "datasets": ["cub"], "batch_size": 16,
                                    "sampler": "m_per_class", "samples_per_class": 2,
                                    "splits": {"cub": {"train": list(range(1, 21)), "test": list(range(21, 41))}}},
                           "model": {"method": "full", "embed_dim": 16},
                           "objective": [{"name": "margin", "weight": 1.0, "options": {}}],
                           "train": {"epochs": 1, "progress": False}})
    key = {"config": cfg, "analysis": {"metrics": ["R@1", "mAP@1000"], "fixed_classes": 10, "structure": True,
                                       "few_shot": {"shots": [2], "episodes": 2, "iterations": 3},
                                       "transfer": ["cars"]}}
    out = run("train_analysis", key)
    assert set(out["test"]) == {"R@1", "mAP@1000", "R@1@10cls"} and set(out["test"]["R@1"]) == {"CUB"}
    assert 0 <= out["test"]["R@1"]["CUB"] <= 100
    assert set(out["structure"]) == {"train", "test"} and out["structure"]["test"]["pi_ratio"] > 0
    fs = out["few_shot"]["2"]
    assert len(fs["zero"]["R@1"]) == 2 and set(fs["few_mean"]) == {"R@1", "mAP@1000"}
    assert set(out["transfer"]) == {"Cars"} and out["curves"][-1]["epoch"] == 1
    zs = run("train_analysis", {"config": {**cfg, "model": {**cfg["model"], "method": "zero_shot"}},
                                "analysis": {"metrics": ["R@1"]}})
    assert zs["trainable_model"] == 0 and "loss" not in zs


def _fake_pickles(mini_root, folder):
    """Official-format split files built from a UML-Mini tree (class names as the authors' files spell them)."""
    import pickle

    from umlkit.data import load_dataset
    made = {}
    for src in oodml.SOURCES:
        names = {}
        for part in ("train", "test"):
            names.update(split_making._published_names(src, load_dataset(src, mini_root, part, cache=False)))
        order = sorted(names, key=lambda n: str(names[n]))
        half = len(order) // 2
        raw = {1: {"train": order[:half], "test": order[half:], "fid": 8.59, "split_train": order[:half - 2],
                   "split_val": order[half - 2:half]},
               2: {"train": order[1:half + 1], "test": [order[0]] + order[half + 1:], "fid": 14.33}}
        if src == "cub":   # ooDML's default split of CUB is split 3
            raw[3] = {"train": order[2:half + 2], "test": order[:2] + order[half + 2:], "fid": 20.1}
        (folder / split_making.PUBLISHED_FILES[src]).write_bytes(pickle.dumps(raw))
        made[src] = (names, order, half)
    return made


def test_published_split_files_map_onto_the_loaders_class_keys(mini_root, tmp_path, monkeypatch):
    made = _fake_pickles(mini_root, tmp_path)
    from umlkit.experiments.papers.oodml import split_making
    from umlkit.experiments.splits import committed as class_splits
    path_of = lambda profile: tmp_path / f"splits_{profile}.json"  # noqa: E731
    monkeypatch.setattr(class_splits, "splits_path", path_of)
    monkeypatch.setattr(split_making, "splits_path", path_of)
    path = oodml.import_published_splits(tmp_path, mini_root)
    data = oodml.load_splits("full")
    for src in oodml.SOURCES:
        names, order, half = made[src]
        s1, s2, *s3 = data["sources"][src]["splits"]
        assert s1["train"] == [names[n] for n in order[:half]] and s1["val"] == [names[n] for n in order[half - 2:half]]
        assert s2["test"][0] == names[order[0]] and s2["fid"] == 14.33
        defaults = [s["default"] for s in (s1, s2, *s3)]
        assert defaults == ([False, False, True] if src == "cub" else [True, False])
    # the full profile's configuration trains the published classes with the paper's recipe
    cfg = oodml.run_config("full", method="ProxyAnchor", source="cars", split=2, overrides=["data.root=/data"])
    assert cfg["data"]["splits"]["cars"]["test"] == data["sources"]["cars"]["splits"][1]["test"]
    assert ((cfg["model"]["backbone"], cfg["model"]["embed_dim"], cfg["model"]["options"])
            == ("resnet50", 512, {"freeze_bn": True}))
    assert (cfg["optimizer"]["lr"], cfg["optimizer"]["lr_mult"]["loss"], cfg["train"]["epochs"]) == (1e-5, 2000.0, 200)
    assert oodml.run_config("full", method="Margin (D)", source="cars", split=1)["optimizer"]["lr_mult"]["loss"] == 50.0
    with pytest.raises(FileExistsError):
        (tmp_path / "splits_full.json").write_text("{}")
        oodml.import_published_splits(tmp_path, mini_root)
    assert path.name == "splits_full.json"


def test_a_published_file_without_its_default_split_is_refused(mini_root, tmp_path):
    import pickle
    made = _fake_pickles(mini_root, tmp_path)
    raw = pickle.loads((tmp_path / "cub200_splits.pkl").read_bytes())
    del raw[3]
    (tmp_path / "cub200_splits.pkl").write_bytes(pickle.dumps(raw))
    with pytest.raises(ValueError, match=r"cub200_splits.pkl: no split 3, ooDML's default split of cub .*split\(s\) "
                                         r"\[1, 2\]"):
        split_making.read_published_splits(tmp_path / "cub200_splits.pkl", "cub", mini_root)
    assert made


def test_a_published_class_the_data_root_lacks_is_named(mini_root, tmp_path):
    import pickle
    (tmp_path / "cub200_splits.pkl").write_bytes(
        pickle.dumps({1: {"train": ["999.Dodo"], "test": ["998.Moa"], "fid": 1.0}}))
    with pytest.raises(KeyError, match="999.Dodo"):
        split_making.read_published_splits(tmp_path / "cub200_splits.pkl", "cub", mini_root)


def test_malformed_or_impossible_published_splits_are_named(mini_root, tmp_path):
    """Bare "fid" / "invalid literal for int()" messages before; empty and overlapping splits were accepted."""
    import pickle
    made = _fake_pickles(mini_root, tmp_path)
    names, order, half = made["cub"]
    path = tmp_path / "cub200_splits.pkl"
    cases = [({1: {"train": order[:half], "test": order[half:]}},
              r"split 1 lacks the key\(s\) \['fid'\]; an official split holds train, test"),
             ({"a": {"train": order[:half], "test": order[half:], "fid": 1.0}}, r"split id 'a' is not an integer"),
             ({1: [1, 2]}, r"split 1 = \[1, 2\]: expected \{train: \[class names\]"),
             ({1: {"train": order[:half], "test": order[half:], "fid": "abc"}},
              r"split 1 has fid 'abc'; expected a num"),
             ({1: {"train": [], "test": [], "fid": 1.0}},
              r"split 1: \[.train., .test.\] must be non-empty lists of class names"),
             ({1: {"train": order, "test": order, "fid": 1.0}}, rf"split 1 trains and tests on {len(order)} shared cl")]
    for raw, message in cases:
        path.write_bytes(pickle.dumps(raw))
        with pytest.raises(ValueError, match=f"{path}: .*" + message):
            split_making.read_published_splits(path, "cub", mini_root)


class _Evil:
    def __reduce__(self):
        import os
        return (os.system, ("touch pwned",))


def test_a_split_file_that_would_run_code_or_is_truncated_is_refused(mini_root, tmp_path, monkeypatch):
    import pickle

    import numpy as np
    monkeypatch.chdir(tmp_path)
    evil = tmp_path / "cub200_splits.pkl"
    evil.write_bytes(pickle.dumps({1: {"train": [_Evil()], "test": [], "fid": 1.0}}))
    with pytest.raises(ValueError, match=r"cub200_splits.pkl: not a readable ooDML split file .*refusing to load"):
        split_making.read_published_splits(evil, "cub", mini_root)
    assert not (tmp_path / "pwned").exists()
    evil.write_bytes(b"")
    with pytest.raises(ValueError, match=r"cub200_splits.pkl: not a readable ooDML split file .*Ran out of input"):
        split_making.read_published_splits(evil, "cub", mini_root)
    # plain data, numpy values included, still reads (then fails on the unknown class, as above)
    evil.write_bytes(pickle.dumps({1: {"train": ["999.Dodo"], "test": ["998.Moa"], "fid": np.float64(1.0)}}))
    with pytest.raises(KeyError, match="999.Dodo"):
        split_making.read_published_splits(evil, "cub", mini_root)


def test_generated_and_published_splits_compare_by_fid_and_class_overlap():
    a = {"splits": [{"id": 1, "fid": 5.0, "test": [1, 2, 3, 4]}]}
    b = {"splits": [{"id": 1, "fid": 8.0, "test": [3, 4, 5, 6]}]}
    out = split_making.compare_with_published(a, b)
    assert out.iloc[0]["test-class overlap (Jaccard)"] == pytest.approx(2 / 6)
