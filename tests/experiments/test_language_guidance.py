"""Language guidance as data: its runs are ooDML's base configurations plus one language term; its language files
are found again by what decides them; its pseudolabels name what defines a UML-Mini class."""
from __future__ import annotations

import copy

import numpy as np
import pytest

from umlkit.data import language
from umlkit.experiments import language_guidance as lg
from umlkit.experiments import oodml
from umlkit.paper import paper_table


def test_a_guided_row_is_its_base_configuration_plus_one_language_term():
    ref = {"file": "results/quick/language/x.npz", "sha256": "0" * 64}
    for base, ood in (("Margin", "Margin (D)"), ("Multisimilarity", "Multisimilarity")):
        plain = lg.run_config(method=base, source="cars", seed=1)
        guided = lg.run_config(method=f"{base} + ELG", source="cars", seed=1, omega=3.0, language=ref)
        want = oodml.run_config(method=ood, source="cars", seed=1)
        assert plain["objective"] == want["objective"] and plain["optimizer"] == want["optimizer"]
        assert guided["objective"][:1] == plain["objective"] and guided["data"] == plain["data"]
        term = guided["objective"][1]
        assert term["name"] == "language_guidance" and term["weight"] == 3.0
        assert term["options"]["language_embeddings"] == ref and term["options"]["direction"] == "backward"
    s2sd = lg.run_config(method="Multisimilarity + S2SD", source="sop")
    assert s2sd["objective"][0]["name"] == "s2sd" and s2sd["objective"][0]["options"]["base"] == "multisimilarity"
    with pytest.raises(KeyError, match="unknown language-guidance method 'Triplet'"):
        lg.run_config(method="Triplet + ELG")


def test_omega_comes_from_the_config_per_row_and_source(monkeypatch):
    cfg = copy.deepcopy(lg.lg_config())
    cfg["omega"]["quick"] = {}
    monkeypatch.setattr(lg, "lg_config", lambda: cfg)
    with pytest.raises(KeyError, match=r"no quick omega for 'Margin \+ ELG' \(run the omega sweep\)"):
        lg.chosen_omega("Margin", "ELG", "cub", "quick")
    cfg["omega"]["quick"] = {"Margin + ELG": 3.0}
    assert lg.chosen_omega("Margin", "ELG", "sop", "quick") == 3.0
    assert lg.chosen_omega("Multisimilarity + S2SD", "ELG", "cars", "full") == 2.0     # the official 512-d value


def test_the_validation_run_never_sees_a_test_class():
    ref = {"file": "x.npz", "sha256": "0" * 64}
    cfg = lg.run_config(method="Margin + ELG", source="cub", omega=1.0, language=ref, validation=True)
    split = cfg["data"]["splits"]["cub"]
    default = oodml.split_of("cub", oodml.default_split_id("cub"))
    assert split["train"] and split["test"] and not set(split["train"]) & set(split["test"])
    assert set(split["train"]) | set(split["test"]) <= set(default["train"])


def test_table2_rows_and_claims_join_the_paper():
    spec = lg.table("Table 2")
    paper = paper_table("language_guidance", "Table 2").fillna({"section": "", "setting": ""})
    have = {(r["method"], r["setting"]) for _, r in paper.iterrows()}
    assert {(r.method, r.setting) for r in spec.rows} == have and len(spec.rows) == 27
    value = {(r["method"], r["setting"], r["dataset"]): r["value"] for _, r in paper.iterrows()}
    for c in spec.claims:   # every claim is one the paper's own numbers make
        a = value[(c.a["method"], c.a["setting"], c.a["dataset"])]
        b = value[(c.b["method"], c.b["setting"], c.b["dataset"])]
        assert a > b, c.text
    assert not any(c.text.startswith("Multisimilarity + ELG") and c.a["dataset"] == "SOP" for c in spec.claims)
    s1 = paper_table("language_guidance", "Table S1")
    assert set(s1["metric"]) == {"R@1", "NMI", "mAP@1000"} <= set(lg.lg_config()["metrics"])


@pytest.mark.slow
def test_language_files_are_found_again_without_the_language_model(tmp_path, monkeypatch):
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path))
    lg._REFS.clear()
    calls = []
    real = language.LANGUAGE_MODELS["minilm"]

    def fake(texts):
        calls.append(len(texts))
        return np.random.default_rng(len(texts)).normal(size=(len(texts), 8)).astype(np.float32)
    monkeypatch.setitem(language.LANGUAGE_MODELS, "minilm", real.__class__(**{**real.__dict__, "encode": fake}))
    ref = lg.language_ref("cars", "ELG")
    assert calls == [196] and ref["file"].startswith("results/quick/language/cars-minilm-elg-")
    assert (tmp_path / "quick" / "language" / ref["file"].rsplit("/", 1)[1]).is_file()   # under UMLKIT_RESULTS
    lg._REFS.clear()

    def refuse(*a, **k):
        raise AssertionError("the index must find the stored file without reading the classes")
    monkeypatch.setattr(lg, "_source_classes", refuse)
    assert lg.language_ref("cars", "ELG") == ref and calls == [196]      # the index finds it; no model call
    index = (tmp_path / "quick" / "language" / "index.json").read_text()
    assert ref["file"].rsplit("/", 1)[1] in index
    lg._REFS.clear()


@pytest.mark.slow
def test_quick_pseudolabels_name_the_attributes_that_define_a_cars_like_class():
    """Cars-like classes are shape x texture x aspect x scale; the tiny ViT's named classifier knows colour,
    texture and shape, so a class's top-5 pseudolabels should carry its texture and shape (colour is a nuisance)."""
    from umlkit.data import load_dataset
    rows, texts = lg._pseudolabel_texts("cars", "quick", 5)
    assert len(rows) == len(texts) == 196 and all(len(t) == 5 for t in texts)
    root = lg._source_root("cars", "quick")
    names = {f"cars#{k}": n.lower() for split in ("train", "test")
             for k, n in zip(load_dataset("cars", root, split).class_keys, load_dataset("cars", root, split).class_names)}
    hits = 0
    for row, labels in zip(rows, texts):
        words = names[row].split()
        shape = words[-1]
        texture = " ".join(w for w in words[:-1] if w not in ("large", "small", "tall", "wide"))
        hits += all(label.endswith(shape) and (texture in label or texture == "plain") for label in labels)
    assert hits >= 0.8 * len(rows), hits


def test_the_configured_quick_omegas_are_the_sweeps_interior_choice():
    """configs/language_guidance/language_guidance.yaml holds, for every guided row, the omega with the best
    validation MAP@R in the stored sweep, and that value is interior to the row's grid."""
    sweep = lg.omega_table("quick")
    chosen = sweep[sweep["chosen"]].set_index("row")
    assert set(chosen.index) == {r for r in lg.guided_rows() if " + ELG" in r or " + PLG" in r}
    for row, r in chosen.iterrows():
        base, guidance = lg._split_row(row)
        assert lg.chosen_omega(base, guidance, "cub", "quick") == r["omega"], row
        assert bool(r["interior"]), row
