"""umlkit.data.language: class-name embeddings as hashed files, the offline stand-ins and controls, PLG pseudolabels."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from umlkit.data import language as lg
from umlkit.data.side_info import load_class_embeddings


@pytest.fixture()
def counting_model():
    """A registered back end that counts its calls (letters of the alphabet as a 26-d bag of characters)."""
    calls = []

    def encode(texts):
        calls.append(list(texts))
        out = np.zeros((len(texts), 26), dtype=np.float32)
        for i, t in enumerate(texts):
            for ch in t.lower():
                if ch.isalpha():
                    out[i, ord(ch) - 97] += 1
        return out
    lg.register_language_model("test-bag", "bag of letters (test)")(encode)
    yield calls
    del lg.LANGUAGE_MODELS["test-bag"]


def test_minilm_is_offline_and_semantic(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    lg._CACHE.clear()                                           # load it again, with the hub switched off
    e = lg.embed_texts(["red bird", "crimson bird", "striped triangle"])
    assert e.shape == (3, 384) and e.dtype == np.float32
    assert np.allclose(np.linalg.norm(e, axis=1), 1, atol=1e-5)
    assert e[0] @ e[1] > e[0] @ e[2] + 0.1                     # a synonym is closer than an unrelated shape
    # the primer is applied: with another template the embedding changes
    assert not np.allclose(lg.embed_texts(["red bird"], template="{}"), e[:1])


def test_minilm_static_is_the_mean_of_the_token_embeddings():
    model = lg._minilm()
    table = model[0].auto_model.embeddings.word_embeddings.weight.detach()
    ids = model.tokenizer("amber bird", add_special_tokens=False)["input_ids"]
    want = table[torch.tensor(ids)].mean(0).numpy()
    got = lg.embed_texts(["amber bird"], "minilm-static")[0]
    assert np.allclose(got, want / np.linalg.norm(want), atol=1e-6)
    assert lg.LANGUAGE_MODELS["minilm-static"].stand_in_for.startswith("FastText")


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="unknown language model 'bert'"):
        lg.embed_texts(["x"], "bert")
    with pytest.raises(ValueError, match="must contain"):
        lg.embed_texts(["x"], template="a photo")


def test_a_hub_model_offline_names_the_weights(monkeypatch, tmp_path):
    import huggingface_hub.constants as hub
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub, "HF_HUB_CACHE", str(tmp_path))   # an empty cache, whatever this machine holds
    with pytest.raises(OSError, match="needs the Hugging Face weights 'bert-base-uncased'"):
        lg.embed_texts(["red bird"], "bert-base")
    assert {m.profile for n, m in lg.LANGUAGE_MODELS.items() if n in ("clip-b32", "bert-base")} == {"full"}


def test_shuffle_is_a_seeded_derangement():
    x = np.arange(20, dtype=np.float32)[:, None]
    a, b = lg.shuffle_rows(x, 3), lg.shuffle_rows(x, 3)
    assert np.array_equal(a, b) and sorted(a[:, 0]) == list(range(20))
    assert (a[:, 0] != np.arange(20)).all()


def test_attribute_vectors_give_the_attribute_overlap():
    v = lg.attribute_vectors([{"shape": "star", "texture": "plain"}, {"shape": "star", "texture": "striped"},
                              {"shape": "disc", "texture": "striped"}, {"hue": 0.02, "disc_hue": 0.5},
                              {"hue": 0.04, "disc_hue": 0.9}, {"aspect": 1.33, "scale": 7.0},
                              {"aspect": 1.33, "scale": 10.0}])
    assert v[0] @ v[1] == pytest.approx(0.5) and v[0] @ v[2] == pytest.approx(0.0)
    assert v[3] @ v[4] == pytest.approx(0.5)                    # hues 0.02 and 0.04 share a bin of 1/12
    assert v[5] @ v[6] == pytest.approx(0.5)                    # scales 7 and 10 are two categories, not one bin


def test_hierarchy_vectors_give_the_path_similarity_of_the_attribute_tree():
    """Cosines equal 1 / (1 + shortest path) between the class leaves of the tree built edge by edge (networkx), as
    WordNet's path similarity is defined; every class is a leaf of its own under its attribute path."""
    import itertools

    import networkx as nx
    rng = np.random.default_rng(3)
    attrs = [{"shape": str(rng.choice(["star", "disc"])), "texture": str(rng.choice(["plain", "striped", "dots"])),
              "hue": float(rng.random())} for _ in range(25)]
    v = lg.hierarchy_vectors(attrs, bins=4)
    tree = nx.Graph()
    for i, a in enumerate(attrs):   # root -> shape -> texture -> hue bin -> the class: one node per path prefix
        path = [("root",), (a["shape"],), (a["shape"], a["texture"]), (a["shape"], a["texture"], int(a["hue"] * 4)),
                (a["shape"], a["texture"], int(a["hue"] * 4), i)]
        nx.add_path(tree, path)
    leaf = [(a["shape"], a["texture"], int(a["hue"] * 4), i) for i, a in enumerate(attrs)]
    for i, j in itertools.combinations(range(len(attrs)), 2):
        want = 1.0 / (1 + nx.shortest_path_length(tree, leaf[i], leaf[j]))
        assert v[i] @ v[j] == pytest.approx(want, abs=1e-6)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0)
    assert v[0] @ v[0] == pytest.approx(1.0)
    twins = lg.hierarchy_vectors([{"shape": "star"}, {"shape": "star"}])       # same attributes, two classes
    assert twins[0] @ twins[1] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="same attributes to form one tree"):
        lg.hierarchy_vectors([{"shape": "star"}, {"shape": "disc", "texture": "plain"}])


def test_name_attributes_word_the_attributes_as_the_names_do():
    from umlkit.data import names
    bird = lg.name_attributes("cub", {"hue": 0.99, "disc_hue": 0.56})
    assert bird == {"hue": "red", "disc_hue": "azure"}          # 0.99 rounds and wraps to red, as hue_name does
    assert names.class_name("cub", {"hue": 0.99, "disc_hue": 0.56}).startswith("red bird with an azure")
    assert lg.name_attributes("sop", {"shape": "star", "texture": "plain", "aspect": 1.0, "disc_pos": "N",
                                      "scale": 7.0}) == {"shape": "star"}   # SOP's language name: the super-class
    car = lg.name_attributes("cars", {"shape": "disc", "texture": "checkered", "aspect": 1.33, "scale": 10.0})
    assert car == {"shape": "disc", "texture": "checkered", "aspect": "wide", "scale": "large"}


def test_pseudolabels_by_hand_and_against_a_loop():
    names = ["cat", "dog", "car"]
    logits = np.array([[3.0, 1.0, 0.0], [0.0, 5.0, 1.0], [0.0, 0.0, 2.0], [1.0, 0.0, 3.0]])
    labels = [0, 0, 1, 1]
    # class 0: mean (1.5, 3.0, 0.5) -> dog, cat; class 1: mean (0.5, 0.0, 2.5) -> car, cat
    assert lg.pseudolabels(logits, labels, names, k=2) == {0: ["dog", "cat"], 1: ["car", "cat"]}
    assert lg.pseudolabels(logits, labels, names, k=1, per="sample") == {0: ["cat"], 1: ["dog"], 2: ["car"], 3: ["car"]}
    rng = np.random.default_rng(0)
    big, lab = rng.normal(size=(60, 7)), rng.integers(0, 5, 60)
    got = lg.pseudolabels(big, lab, list("abcdefg"), k=3)
    for c in range(5):
        mean = [sum(big[i, j] for i in range(60) if lab[i] == c) / (lab == c).sum() for j in range(7)]
        assert got[c] == [list("abcdefg")[j] for j in sorted(range(7), key=lambda j: -mean[j])[:3]]
    with pytest.raises(ValueError, match="k must be in 1..3"):
        lg.pseudolabels(logits, labels, names, k=4)


def test_language_file_is_cached_by_content_and_loads_by_class_name(tmp_path, counting_model):
    rows = ["cub:001.Red_bird", "cub:002.Blue_bird"]
    ref = lg.language_file(rows, ["red bird", "blue bird"], "test-bag", out_dir=tmp_path, tag="cub")
    again = lg.language_file(rows, ["red bird", "blue bird"], "test-bag", out_dir=tmp_path, tag="cub")
    assert ref == again and len(counting_model) == 1             # the second call reads the stored file
    assert counting_model[0] == ["a photo of a red bird", "a photo of a blue bird"]
    emb = load_class_embeddings(ref, ["cub:002.Blue_bird", "cub:001.Red_bird"])
    bag = lg.LANGUAGE_MODELS["test-bag"].encode(["a photo of a blue bird"])[0]
    assert torch.allclose(emb[0], torch.from_numpy(bag / np.linalg.norm(bag)), atol=1e-5)   # stored to 5 decimals
    # another template, or the shuffled control, is another file
    other = lg.language_file(rows, ["red bird", "blue bird"], "test-bag", "{}", out_dir=tmp_path)
    assert other["file"] != ref["file"] and counting_model[-1] == ["red bird", "blue bird"]
    shuffled = lg.language_file(rows, ["red bird", "blue bird"], "test-bag", out_dir=tmp_path, shuffle_seed=0)
    assert shuffled["sha256"] != ref["sha256"] and "shuffled0" in shuffled["file"]
    s = load_class_embeddings(shuffled, rows)
    assert torch.allclose(s[0], emb[0]) and torch.allclose(s[1], emb[1])     # two classes: the rows swap
    # PLG: k names per class -> (n, k, d)
    plg = lg.language_file(rows, [["red", "bird"], ["blue", "bird"]], "test-bag", out_dir=tmp_path)
    assert load_class_embeddings(plg, rows).shape == (2, 2, 26) and "-plg-" in plg["file"]
    with pytest.raises(ValueError, match="same number of pseudolabels"):
        lg.language_file(rows, [["red"], ["blue", "bird"]], "test-bag", out_dir=tmp_path)


@pytest.mark.parametrize("source", ["cub", "cars", "dogs", "flowers", "aircraft"])
def test_mini_class_attributes_follow_the_loaders_class_order(mini_root, source):
    """class_attributes(source)[i] is the i-th class of the train split then the test split: its English name,
    built from those attributes, is the loader's language name (articles aside)."""
    from umlkit.data import load_dataset, mini
    from umlkit.data.names import class_name

    def norm(text):   # articles and the " II" of a de-duplicated name aside
        return [w for w in text.lower().replace("_", " ").split() if w not in ("a", "an", "the", "ii")]
    attrs = mini.class_attributes(source)
    loaded = [n for split in ("train", "test") for n in load_dataset(source, mini_root, split).language_names]
    assert len(attrs) == len(loaded)
    assert [norm(class_name(source, a)) for a in attrs] == [norm(n) for n in loaded]


def test_class_texts_name_rows_by_key_where_names_repeat(mini_root):
    """SOP's classes are named by their super-category: rows by class key stay unique, and the engine finds them."""
    from umlkit.data import load_dataset, load_unified
    ds = load_dataset("sop", mini_root, "train")
    rows, texts = lg.class_texts(ds)
    assert len(set(rows)) == len(rows) == ds.num_classes and len(set(texts)) < len(texts)
    emb = np.random.default_rng(0).normal(size=(len(rows), 4)).astype(np.float32)
    ref = lg.embeddings_file(rows, emb, mini_root.parent / "sop_rows.npz")
    unified = load_unified(mini_root, "train", ["sop"])
    got = load_class_embeddings(ref, unified.class_names(), class_keys=unified.class_keys())
    assert torch.allclose(got, torch.from_numpy(emb))
