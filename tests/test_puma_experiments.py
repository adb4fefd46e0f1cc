"""umlkit.experiments.puma and umlkit.experiments.records: configurations, the specialists' ensemble, the comparison
with the paper, the claims check, run records, and one end-to-end table on two UML-Mini sources."""
from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from umlkit.experiments import puma
from umlkit.experiments.records import RecordError, cached_record, load_record, record_path, records_summary
from umlkit.metrics import harmonic_mean


# ------------------------------------------------------------------------------------------------ configs
def test_run_config_per_loss_and_method():
    cf = puma.run_config("quick", method="full")
    assert cf["model"]["method"] == "full" and cf["loss"]["options"] == {"margin": 0.3, "scale": 32.0}
    assert cf["data"]["sampler"] == "random" and cf["train"]["eval_every"] == cf["train"]["epochs"]
    ms = puma.run_config("quick", method="full", loss="multisimilarity")
    assert (ms["data"]["sampler"], ms["data"]["samples_per_class"]) == ("m_per_class", 4)
    assert ms["loss"]["options"] == {}
    vp = puma.run_config("quick", method="vptsp", loss="proxy_anchor_external")
    assert vp["data"]["sampler"] == "class_random"
    assert vp["model"]["options"]["accumulator"] == "gru_relu"
    p = puma.run_config("quick", method="puma", options={"pool_size": 1})
    assert p["model"]["options"] == {"adapter_dim": 16, "pool_size": 1, "prompt_length": 2}
    full = puma.run_config("full", method="puma")
    assert full["model"]["options"] == {} and full["model"]["backbone"] == "vit_s16_in21k_ft_in1k"
    assert full["precision"] == "fp16" and full["optimizer"]["lr_mult"]["loss"] == 10000.0  # PUMA's proxy lr x1e4
    from umlkit.models import BACKBONES
    assert set(puma.BACKBONES_FULL.values()) <= set(BACKBONES)
    paper_rows = set(puma.paper_table("puma", "Table 5")["setting"].str.split(";").str[0])
    assert set(puma.BACKBONES_FULL) == paper_rows


def test_run_config_shrinks_class_grouped_batches_for_small_sources():
    # UML-Mini's CUB-like source has 25 training classes: 4 per class cannot fill a batch of 128
    cfg = puma.run_config("quick", method="full", loss="triplet", datasets=["cub"])
    assert cfg["data"]["batch_size"] == 100
    assert puma.run_config("quick", method="full", loss="triplet", datasets=["sop"])["data"]["batch_size"] == 128
    assert puma.run_config("quick", method="full", datasets=["cub"])["data"]["batch_size"] == 128  # random batches


def test_ablation_rows_map_to_distinct_models():
    counts = {}
    for setting, spec in puma.ABLATION_ROWS.items():
        counts[setting] = puma.trainable_breakdown("quick", spec["method"], spec.get("options")).loc["total", "trainable parameters"]
    # single prompt < conditional pool (keys + attention vectors); adapters carry the same weights static or not
    assert counts["prompt=Sing.;adapter=none"] < counts["prompt=Cond.;adapter=none"]
    assert counts["prompt=none;adapter=Stat."] == counts["prompt=none;adapter=Stoc."]


# ------------------------------------------------------------------------------------------------ ensemble
def test_ensemble_is_the_mean_of_normalised_embeddings():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(6, 4, generator=g) * 3, torch.randn(6, 4, generator=g)
    ens = puma.ensemble_embeddings([a, b])
    na, nb = a / a.norm(dim=1, keepdim=True), b / b.norm(dim=1, keepdim=True)
    for i in range(6):  # brute force, row by row
        assert torch.allclose(ens[i], (na[i] + nb[i]) / 2, atol=1e-6)
    assert torch.allclose(puma.ensemble_embeddings([a]), na)
    with pytest.raises(ValueError, match="same size"):
        puma.ensemble_embeddings([a, b[:5]])
    with pytest.raises(ValueError, match="at least one"):
        puma.ensemble_embeddings([])


# ------------------------------------------------------------------------------------------------ comparison
def _measured(values: dict, table="Table 2", section=puma.SECTIONS["b"], method="CurricularFace", setting=""):
    rows = []
    for seed, per in values.items():
        rows += [{"table": table, "section": section, "method": method, "setting": setting, "seed": seed,
                  "dataset": d, "metric": "R@1", "value": v} for d, v in per.items()]
    return pd.DataFrame(rows)


def test_compare_mean_spread_and_paper_delta():
    m = _measured({0: {"CUB": 70.0, "Harmonic": 50.0}, 1: {"CUB": 74.0, "Harmonic": 52.0}})
    cmp = puma.compare(m).set_index("dataset")
    assert cmp.loc["CUB", "measured"] == 72.0 and cmp.loc["CUB", "spread"] == 2.0 and cmp.loc["CUB", "seeds"] == 2
    assert cmp.loc["CUB", "paper"] == 78.3                       # Table 2 (b) CurricularFace CUB as printed
    assert cmp.loc["CUB", "delta"] == pytest.approx(72.0 - 78.3)
    assert cmp.loc["Harmonic", "paper"] == 79.5
    sbs = puma.side_by_side(puma.compare(m), by=["section", "method"])
    assert sbs.index[0] == ("(b) / CurricularFace", "measured")
    block = sbs.xs("measured", level=1)
    assert block.iloc[0]["CUB"] == "72.0 ±2.0" and list(sbs.columns) == ["CUB", "Harmonic"]


def test_compare_matches_settings_for_ablation_tables():
    m = _measured({0: {"Harmonic": 40.0}}, table="Table 3", section="", method="",
                  setting="prompt=none;adapter=Stat.")
    cmp = puma.compare(m)
    assert cmp["paper"].tolist() == [80.8]


def test_paper_harmonic_check_flags_the_known_inconsistencies():
    chk = puma.paper_harmonic_check("Table 2").set_index(["section", "method"])
    bad = chk[~chk["consistent (|diff| <= 0.1)"]]
    assert set(bad.index.get_level_values("section")) == {puma.SECTIONS["b"]}
    assert len(bad) == 8                                        # every (b) row except CurricularFace
    tri = chk.loc[(puma.SECTIONS["b"], "Triplet")]
    assert tri["printed Harmonic"] == 57.7 and tri["harmonic mean of the row"] == 62.5
    cf = chk.loc[(puma.SECTIONS["a"], "CurricularFace")]
    assert cf["harmonic mean of the row"] == round(harmonic_mean([79.7, 81.3, 83.2, 88.2, 75.3, 81.2, 99.1, 63.9]), 1)


def test_check_claims_verdicts():
    m = pd.concat([
        _measured({0: {"Harmonic": 50.0}, 1: {"Harmonic": 52.0}}, section=puma.SECTIONS["c"], method="Ours"),
        _measured({0: {"Harmonic": 40.0}, 1: {"Harmonic": 41.0}}, section=puma.SECTIONS["c"], method="VPT"),
        _measured({0: {"Harmonic": 50.5}, 1: {"Harmonic": 51.0}}, section=puma.SECTIONS["c"], method="LoRA"),
        _measured({0: {"Harmonic": 60.0}, 1: {"Harmonic": 60.0}}, section=puma.SECTIONS["c"], method="AdaptFormer"),
        _measured({0: {"Harmonic": 51.5}, 1: {"Harmonic": 51.5}}, section=puma.SECTIONS["c"], method="VPTSP-G"),
    ])
    cmp = puma.compare(m)
    claims = [(f"Ours > {x}", puma._cell("c", "Ours"), puma._cell("c", x))
              for x in ("VPT", "LoRA", "AdaptFormer", "VPTSP-G")]
    out = puma.check_claims(cmp, claims).set_index("claim")
    assert out.loc["Ours > VPT", "verdict"] == "supported"          # gap 10.5 > spread 1
    assert out.loc["Ours > LoRA", "verdict"] == "within noise"      # gap 0.25 <= spread 1
    assert out.loc["Ours > AdaptFormer", "verdict"] == "not reproduced"   # gap -9 beyond the spread
    assert out.loc["Ours > VPTSP-G", "verdict"] == "within noise"         # gap -0.5, spread 1
    assert bool(out.loc["Ours > VPT", "holds in paper"]) is True    # paper: 84.1 vs 70.4 (Table 2 c)
    one = puma.compare(pd.concat([
        _measured({0: {"Harmonic": 50.0}}, section=puma.SECTIONS["c"], method="Ours"),
        _measured({0: {"Harmonic": 49.0}}, section=puma.SECTIONS["c"], method="VPT")]))
    single = puma.check_claims(one, claims[:1]).iloc[0]
    assert single["verdict"] == "holds, 1 seed" and single["seeds"] == 1
    assert puma.check_claims(one, [("r", claims[0][2], claims[0][1])]).iloc[0]["verdict"] == "not reproduced, 1 seed"
    with pytest.raises(KeyError, match="matches 0 rows"):
        puma.check_claims(cmp, [("x", puma._cell("c", "MLP-3 Embedding"), puma._cell("c", "VPT"))])


# ------------------------------------------------------------------------------------------------ records
def test_cached_record_computes_once_and_detects_edits(tmp_path, monkeypatch):
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path))
    calls = []

    def compute():
        calls.append(1)
        return {"score": 1.5}

    key = {"a": 1, "b": [1, 2]}
    first = cached_record("kind", "row 1", key, compute, "quick", log=None)
    second = cached_record("kind", "row 1", key, compute, "quick", log=None)
    assert len(calls) == 1 and not first["cached"] and second["cached"] and second["result"] == {"score": 1.5}
    cached_record("kind", "row 1", key, compute, "quick", rerun=True, log=None)
    assert len(calls) == 2
    cached_record("kind", "row 1", {"a": 2, "b": [1, 2]}, compute, "quick", log=None)  # another config
    assert len(calls) == 3
    elsewhere = cached_record("other", "row 9", key, compute, "quick", log=None)  # same config, another table
    assert len(calls) == 3 and elsewhere["cached"] and elsewhere["label"] == "row 1"
    summary = records_summary("quick")
    assert summary.loc["kind", "records"] == 2 and summary.loc["total", "records"] == 2
    path = record_path("kind", "row 1", key, "quick")
    assert path.name.startswith("row_1-")
    rec = json.loads(path.read_text())
    rec["key"]["a"] = 99
    path.write_text(json.dumps(rec))
    with pytest.raises(RecordError, match="edited"):
        load_record(path)
    path.write_text("{not json")
    with pytest.raises(RecordError, match="cannot be read"):
        cached_record("kind", "row 1", key, compute, "quick", log=None)


# ------------------------------------------------------------------------------------------------ end to end
@pytest.fixture()
def two_source_overrides(tmp_path, monkeypatch):
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path))
    return ["train.epochs=1", "data.datasets=[cub,flowers]", "data.batch_size=64"]


def test_table2_trains_once_then_reads_records(two_source_overrides, monkeypatch):
    kw = dict(sections=["b", "c"], losses=["CurricularFace"], peft=["Linear Embedding"], progress=False, log=None,
              overrides=two_source_overrides)
    first = puma.table2("quick", **kw)
    cells = first[first["metric"] == "R@1"].set_index(["method", "dataset"])["value"]
    assert set(cells.index.get_level_values("dataset")) == {"CUB", "Flowers", "Unified", "Harmonic"}
    assert cells[("CurricularFace", "Harmonic")] == pytest.approx(
        harmonic_mean([cells[("CurricularFace", "CUB")], cells[("CurricularFace", "Flowers")]]), abs=1e-3)
    params = first[first["metric"] == "TrainableParams(M)"].set_index("method")["value"]
    assert params["Linear Embedding"] * 1e6 == pytest.approx(96 * 128 + 128)   # the linear head alone
    assert params["CurricularFace"] * 1e6 > 690_000                            # the whole tiny ViT + head

    import umlkit.train
    monkeypatch.setattr(umlkit.train, "fit", lambda *a, **k: (_ for _ in ()).throw(AssertionError("retrained")))
    again = puma.table2("quick", **kw)
    pd.testing.assert_frame_equal(first, again)


def test_stored_quick_record_reproduces():
    """A committed quick-profile record is retrained from its stored configuration: the numbers must come back
    (identical on the machine that wrote it; a tolerance covers other CPUs' float summation order)."""
    from umlkit._paths import repo_root
    paths = sorted((repo_root() / "results" / "quick" / "records" / "table2c").glob("Linear_Embedding-seed0-*.json"))
    if not paths:
        pytest.skip("no stored Linear Embedding record in results/quick/records/table2c")
    rec = load_record(paths[0])
    threads = torch.get_num_threads()
    torch.set_num_threads(int(rec["software"]["threads"]))  # the same float summation order as the record
    try:
        again = puma.train_run(rec["key"])
    finally:
        torch.set_num_threads(threads)
    for d, v in rec["result"]["test"].items():
        assert again["test"][d] == pytest.approx(v, abs=0.5), d
    assert again["trainable_model"] == rec["result"]["trainable_model"]
