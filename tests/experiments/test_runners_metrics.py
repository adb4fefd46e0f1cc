"""umlkit.experiments.runs.runners: a run whose ``train.metrics`` lists more than R@1 keeps the others under
``test_metrics`` (and ``val_metrics``, and in every curve point), equal to what umlkit.metrics computes on the trained
model's embeddings; a run of R@1 alone gives exactly the result it always gave (no new key)."""
import math

import pytest

from umlkit.experiments.runs import runners
from umlkit.metrics import unified_evaluation
from umlkit.train import resolve_config
from umlkit.train.evaluate import extract_embeddings

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::UserWarning")]


@pytest.fixture(scope="module")
def small_root(tmp_path_factory):
    from umlkit.data import make_mini
    return make_mini(tmp_path_factory.mktemp("mini_small"), seed=0, sources=["flowers", "aircraft"])


def tiny_cfg(root, metrics, datasets=("flowers", "aircraft"), **data):
    return resolve_config({
        "name": "tiny", "data": {"root": str(root), "datasets": list(datasets), "batch_size": 32, **data},
        "model": {"method": "puma", "pretrained": False, "embed_dim": 16,
                  "options": {"adapter_dim": 4, "pool_size": 3, "prompt_length": 1}},
        "loss": {"name": "cosface"}, "optimizer": {"lr": 1e-3},
        "train": {"epochs": 2, "eval_every": 1, "progress": False, "metrics": list(metrics)}})


def test_the_train_runner_keeps_every_metric_of_train_metrics_and_r1_runs_are_unchanged(small_root):
    cfg = tiny_cfg(small_root, ["R@1", "MAP@R"], val_fraction=0.3)
    out, model = runners._trained(cfg)
    names = {"Flowers", "Aircraft", "Unified", "Harmonic"}
    assert set(out["test_metrics"]) == set(out["test"]) == names
    for name, scores in out["test_metrics"].items():
        assert list(scores) == ["MAP@R"] and math.isfinite(scores["MAP@R"]) and 0 <= scores["MAP@R"] <= 100
    assert [p["epoch"] for p in out["curves"]] == [1, 2]
    for point in out["curves"]:
        assert set(point["test_metrics"]) == names and set(point["val_metrics"]) == set(point["val"])
    assert out["curves"][-1]["test_metrics"] == out["test_metrics"]          # the last evaluation, as `test`
    assert out["curves"][-1]["val_metrics"] == out["val_metrics"]
    # the same numbers as umlkit.metrics on the trained model's embeddings of the test set
    test = runners.test_set(cfg)   # the run's two sources only (this root holds no other)
    assert [d.name for d in test.datasets] == ["flowers", "aircraft"]
    emb, labels = extract_embeddings(model.eval(), test, batch_size=512)
    frame = unified_evaluation(emb, labels, test.sources, is_query=test.is_query, is_gallery=test.is_gallery,
                               metrics=["R@1", "MAP@R"], source_names=test.source_names)
    expect = runners._scores(frame, "MAP@R")
    assert {k: v["MAP@R"] for k, v in out["test_metrics"].items()} == pytest.approx(expect, abs=2e-3)
    assert out["test"] == pytest.approx(runners._scores(frame), abs=2e-3)

    plain = runners.train_run(tiny_cfg(small_root, ["R@1"], val_fraction=0.3))   # same seed, R@1 only
    assert not any(k.endswith("_metrics") for k in plain)
    assert not any(k.endswith("_metrics") for p in plain["curves"] for k in p)
    drop = {"test_metrics", "val_metrics", "train_seconds"}
    assert {k: v for k, v in plain.items() if k not in drop} == {
        k: (v if k != "curves" else [{s: x for s, x in p.items() if not s.endswith("_metrics")} for p in v])
        for k, v in out.items() if k not in drop}   # evaluating more moves no training number


def test_the_train_analysis_curve_keeps_the_metrics_beyond_r1(small_root):
    cfg = tiny_cfg(small_root, ["R@1", "MAP@R"], datasets=["flowers"])
    out = runners.run("train_analysis", {"config": cfg, "analysis": {"metrics": ["R@1", "MAP@R"]}})
    last = out["curves"][-1]
    assert set(last["test_metrics"]) == set(last["test"]) and "Flowers" in last["test_metrics"]
    assert last["test_metrics"]["Flowers"]["MAP@R"] == pytest.approx(out["test"]["MAP@R"]["Flowers"], abs=2e-3)
    plain = runners.run("train_analysis", {"config": tiny_cfg(small_root, ["R@1"], datasets=["flowers"]),
                                           "analysis": {"metrics": ["R@1", "MAP@R"]}})
    assert not any(k.endswith("_metrics") for p in plain["curves"] for k in p)
    assert [p["test"] for p in plain["curves"]] == [p["test"] for p in out["curves"]]
