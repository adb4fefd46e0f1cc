"""Class-level side information by file and sha256: class-embedding files (write once, verify, rows in the
training set's class order), split files, relative paths in YAML files, and the engine's resolution of a
language-guidance term's reference."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch
import yaml

from umlkit.data.side_info import (
    SideInfoError,
    load_class_embeddings,
    read_split_file,
    save_class_embeddings,
    write_split_file,
)
from umlkit.train.config import load_config, resolve_config
from umlkit.train.engine import build_data, build_objective

DATA_CONFIG = {"input_size": (3, 32, 32), "mean": (0.5,) * 3, "std": (0.5,) * 3}


def test_save_returns_the_files_sha256_and_is_deterministic(tmp_path):
    names, emb = ["cub:a", "cub:b"], np.arange(6, dtype=np.float32).reshape(2, 3)
    sha = save_class_embeddings(tmp_path / "e.npz", names, emb)
    assert sha == hashlib.sha256((tmp_path / "e.npz").read_bytes()).hexdigest()
    # the same content again: same bytes, same hash, no error (fixed zip timestamps)
    assert save_class_embeddings(tmp_path / "e.npz", names, torch.from_numpy(emb)) == sha
    assert save_class_embeddings(tmp_path / "copy.npz", names, emb) == sha
    with np.load(tmp_path / "e.npz") as data:
        assert data["class_names"].tolist() == names and np.array_equal(data["embeddings"], emb)


def test_an_existing_different_file_is_replaced_only_with_overwrite(tmp_path):
    path = tmp_path / "e.npz"
    sha = save_class_embeddings(path, ["a"], np.ones((1, 2)))
    with pytest.raises(FileExistsError, match=f"{path} exists with different content; pass overwrite=True"):
        save_class_embeddings(path, ["a"], np.zeros((1, 2)))
    assert hashlib.sha256(path.read_bytes()).hexdigest() == sha  # untouched
    new = save_class_embeddings(path, ["a"], np.zeros((1, 2)), overwrite=True)
    assert new != sha and hashlib.sha256(path.read_bytes()).hexdigest() == new
    assert [p.name for p in tmp_path.iterdir()] == ["e.npz"]  # no temporary files left


def test_save_checks_shapes_names_and_suffix(tmp_path):
    with pytest.raises(ValueError, match=r"\(n, d\) or \(n, k, d\) with n = 2 class names, got \(3, 4\)"):
        save_class_embeddings(tmp_path / "e.npz", ["a", "b"], np.ones((3, 4)))
    with pytest.raises(ValueError, match=r"class names must be unique; repeated: \['a'\]"):
        save_class_embeddings(tmp_path / "e.npz", ["a", "a"], np.ones((2, 4)))
    with pytest.raises(ValueError, match="class-embedding files are .npz"):
        save_class_embeddings(tmp_path / "e.safetensors", ["a"], np.ones((1, 4)))


def test_load_returns_rows_in_the_requested_class_order(tmp_path):
    names = ["cub:001.A", "cub:002.B", "flowers:7"]
    emb = np.arange(3 * 2 * 4, dtype=np.float32).reshape(3, 2, 4)  # PLG: k = 2 embeddings per class
    ref = {"file": str(tmp_path / "e.npz"), "sha256": save_class_embeddings(tmp_path / "e.npz", names, emb)}
    got = load_class_embeddings(ref, ["flowers:7", "cub:001.A", "cub:002.B"])
    assert got.dtype == torch.float32 and torch.equal(got, torch.from_numpy(emb[[2, 0, 1]]))
    # a file written with bare names matches the training set's "source:name" when unambiguous
    sha = save_class_embeddings(tmp_path / "b.npz", ["x", "y"], emb[:2, 0])
    bare = {"file": str(tmp_path / "b.npz"), "sha256": sha}
    assert torch.equal(load_class_embeddings(bare, ["cars:y", "cub:x"]), torch.from_numpy(emb[[1, 0], 0]))


def test_load_errors_name_the_file_the_hashes_and_the_missing_classes(tmp_path):
    path = tmp_path / "e.npz"
    sha = save_class_embeddings(path, ["cub:a", "cub:b"], np.eye(2))
    with pytest.raises(SideInfoError, match=f"objective.1.options.language_embeddings: {path} has sha256 {sha}, but "
                                            f"the configuration expects {'0' * 64}"):
        load_class_embeddings({"file": str(path), "sha256": "0" * 64}, ["cub:a"],
                              where="objective.1.options.language_embeddings")
    missing = [f"cars:{i}" for i in range(12)]
    with pytest.raises(SideInfoError, match=r"has no row for 12 training class\(es\): \['cars:0', .*'cars:9'\] and "
                                            r"2 more"):
        load_class_embeddings({"file": str(path), "sha256": sha}, ["cub:a", *missing])
    with pytest.raises(SideInfoError, match=f"file {tmp_path / 'nope.npz'} does not exist"):
        load_class_embeddings({"file": str(tmp_path / "nope.npz"), "sha256": sha}, ["cub:a"])
    with pytest.raises(SideInfoError, match=r"must be \{file: PATH, sha256: HEX\}"):
        load_class_embeddings({"file": str(path)}, ["cub:a"])


def test_split_files_round_trip_and_are_verified(tmp_path):
    split = {"train": [1, 2], "test": [3], "val": [4]}
    sha = write_split_file(tmp_path / "s.json", split)
    assert write_split_file(tmp_path / "s.json", split) == sha
    with pytest.raises(FileExistsError):
        write_split_file(tmp_path / "s.json", {"train": [2], "test": [1]})
    assert read_split_file({"file": str(tmp_path / "s.json"), "sha256": sha}) == split
    (tmp_path / "s.json").write_text('{"train": [1]}')
    with pytest.raises(SideInfoError, match="data.splits.cub: .*s.json has sha256"):
        read_split_file({"file": str(tmp_path / "s.json"), "sha256": sha}, where="data.splits.cub")


def test_relative_paths_in_a_yaml_file_are_resolved_against_its_folder(tmp_path, monkeypatch):
    folder = tmp_path / "cfgs"
    folder.mkdir()
    emb_ref = {"file": "side/names.npz", "sha256": "a" * 64}
    split_ref = {"file": "../splits/cub.json", "sha256": "b" * 64}
    (folder / "run.yaml").write_text(yaml.safe_dump({
        "objective": [{"name": "multisimilarity"},
                      {"name": "language_guidance", "weight": 10.0, "options": {"language_embeddings": emb_ref}}],
        "data": {"datasets": ["cub"], "splits": {"cub": split_ref}},
        "profiles": {"full": {"objective": [{"name": "language_guidance",
                                             "options": {"language_embeddings": emb_ref}}]}}}))
    monkeypatch.chdir(tmp_path)
    cfg = load_config(folder / "run.yaml")
    assert cfg["objective"][1]["options"]["language_embeddings"] == {"file": str(folder / "side" / "names.npz"),
                                                                      "sha256": "a" * 64}
    assert cfg["data"]["splits"]["cub"]["file"] == str(tmp_path / "splits" / "cub.json")
    full = load_config(folder / "run.yaml", profile="full")
    assert full["objective"][0]["options"]["language_embeddings"]["file"] == str(folder / "side" / "names.npz")
    # overrides and dict configs keep their paths (resolved against the current directory when opened)
    cfg = load_config(folder / "run.yaml", overrides=["objective.1.options.language_embeddings={file: x.npz, "
                                                      "sha256: cc}"])
    assert cfg["objective"][1]["options"]["language_embeddings"]["file"] == "x.npz"
    assert resolve_config({"data": {"splits": {"cub": split_ref}}})["data"]["splits"]["cub"] == split_ref


def test_a_repository_relative_path_is_found_from_any_working_directory(tmp_path, monkeypatch):
    """Record keys hold repository-relative paths (results/quick/language/...), so that a key is the same on every
    checkout; a chapter runs from book/, a worker from the root: both must find the file."""
    import umlkit._paths
    repo = tmp_path / "checkout"
    (repo / "results").mkdir(parents=True)
    sha = save_class_embeddings(repo / "results" / "names.npz", ["a", "b"], np.eye(2))
    elsewhere = tmp_path / "book"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    ref = {"file": "results/names.npz", "sha256": sha}
    monkeypatch.setattr(umlkit._paths, "repo_root", lambda: None)
    with pytest.raises(SideInfoError, match="or the repository root"):
        load_class_embeddings(ref, ["b", "a"])
    monkeypatch.setattr(umlkit._paths, "repo_root", lambda: repo)
    assert torch.equal(load_class_embeddings(ref, ["b", "a"]), torch.tensor([[0.0, 1.0], [1.0, 0.0]]))


def test_a_results_path_is_found_under_the_results_folder(tmp_path, monkeypatch):
    """A key's "results/<profile>/..." path means the results folder wherever UMLKIT_RESULTS puts it."""
    import umlkit._paths
    (tmp_path / "r" / "quick" / "language").mkdir(parents=True)
    sha = save_class_embeddings(tmp_path / "r" / "quick" / "language" / "x.npz", ["a"], np.ones((1, 2)))
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path / "r"))
    monkeypatch.setattr(umlkit._paths, "repo_root", lambda: None)
    monkeypatch.chdir(tmp_path)
    got = load_class_embeddings({"file": "results/quick/language/x.npz", "sha256": sha}, ["a"])
    assert torch.equal(got, torch.ones(1, 2))


def test_the_training_sets_class_order_is_the_concatenation_of_the_sources(mini_root):
    cfg = resolve_config({"data": {"root": str(mini_root), "datasets": ["flowers", "cub"]}})
    train, _, _ = build_data(cfg, DATA_CONFIG)
    names = train.class_names()
    assert names == [f"flowers:{c}" for c in train.datasets[0].class_names] + \
        [f"cub:{c}" for c in train.datasets[1].class_names]
    for k in range(0, len(train), 97):  # the global label of an item names its class
        source, local = train._index[k]
        ds = train.datasets[source]
        assert names[int(train.labels[k])] == f"{ds.name}:{ds.class_names[int(ds.labels[local])]}"


def test_the_engine_resolves_a_language_embedding_reference_into_the_training_classes_rows(mini_root, tmp_path):
    cfg = resolve_config({"data": {"root": str(mini_root), "datasets": ["cub", "flowers"]}})
    train, _, _ = build_data(cfg, DATA_CONFIG)
    names = train.class_names()
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(len(names), 6)).astype(np.float32)
    order = rng.permutation(len(names))  # the file lists the classes in another order
    sha = save_class_embeddings(tmp_path / "names.npz", [names[i] for i in order], emb[order])
    cfg["objective"] = [{"name": "multisimilarity", "weight": 1.0, "options": {}},
                        {"name": "language_guidance", "weight": 10.0,
                         "options": {"language_embeddings": {"file": str(tmp_path / "names.npz"), "sha256": sha}}}]
    terms = build_objective(cfg, train, embed_dim=8)
    want = torch.nn.functional.normalize(torch.from_numpy(emb), dim=-1)[:, None, :]
    assert torch.equal(terms[1].language, want)
    cfg["objective"][1]["options"]["language_embeddings"]["sha256"] = "f" * 64
    with pytest.raises(SideInfoError, match=r"objective.1.options.language_embeddings: .*names.npz has sha256"):
        build_objective(cfg, train, embed_dim=8)


# ------------------------------------------------------------------------------------------------ per-image rows
def test_sample_embeddings_round_trip_in_the_requested_image_order(tmp_path):
    from umlkit.data.side_info import load_sample_embeddings, save_sample_embeddings
    rng = np.random.default_rng(1)
    vocab = rng.normal(size=(5, 3)).astype(np.float32)
    slots = rng.integers(0, 5, size=(7, 2))
    keys = [f"cub#c{i}/img{i}.jpg" for i in range(7)]
    sha = save_sample_embeddings(tmp_path / "s.npz", keys, vocab, slots)
    want = [6, 0, 3]
    got = load_sample_embeddings({"file": str(tmp_path / "s.npz"), "sha256": sha}, [keys[i] for i in want])
    assert got.shape == (3, 2, 3)
    for row, i in enumerate(want):
        for slot in range(2):
            assert torch.equal(got[row, slot], torch.from_numpy(vocab[slots[i, slot]]))
    with pytest.raises(SideInfoError, match=r"no row for 1 training image\(s\), e.g. \['cub#x/y.jpg'\]"):
        load_sample_embeddings({"file": str(tmp_path / "s.npz"), "sha256": sha}, ["cub#x/y.jpg"])
    with pytest.raises(ValueError, match="slots must index the 5 vocabulary rows"):
        save_sample_embeddings(tmp_path / "t.npz", keys, vocab, slots + 5)


def test_sample_keys_name_every_training_image_once(mini_root):
    cfg = resolve_config({"data": {"root": str(mini_root), "datasets": ["cub", "flowers"]}})
    train, _, _ = build_data(cfg, DATA_CONFIG)
    keys = train.sample_keys()
    assert len(keys) == len(train) == len(set(keys))
    source, local = train._index[5]
    path = train.datasets[source].paths[local]
    assert keys[5] == f"{train.datasets[source].name}#{path.parent.name}/{path.name}"


@pytest.mark.slow
def test_per_image_rows_equal_to_the_class_rows_give_the_class_level_loss(mini_root, tmp_path):
    """With lr 0, a per-image file whose every image carries its class's row must reproduce the class-level run's
    losses exactly: the engine hands the loss each image's own training-set index."""
    from umlkit.data.side_info import save_sample_embeddings
    from umlkit.train import fit
    base = {"data": {"root": str(mini_root), "datasets": ["cub"], "batch_size": 32, "few_shot": 4,
                     "augment": False, "sampler": "m_per_class"},
            "model": {"method": "linear", "pretrained": False, "embed_dim": 16},
            "optimizer": {"name": "sgd", "lr": 0.0, "momentum": 0.0}, "train": {"epochs": 1, "progress": False}}
    cfg = resolve_config(base)
    train, _, _ = build_data(cfg, DATA_CONFIG)
    emb = np.random.default_rng(2).normal(size=(train.num_classes, 6)).astype(np.float32)
    cls = {"file": str(tmp_path / "c.npz"),
           "sha256": save_class_embeddings(tmp_path / "c.npz", train.class_names(), emb)}
    per = {"file": str(tmp_path / "s.npz"),
           "sha256": save_sample_embeddings(tmp_path / "s.npz", train.sample_keys(), emb, train.labels)}
    losses = {}
    for name, ref, extra in (("class", cls, {}), ("image", per, {"per_sample": True})):
        c = resolve_config(base)
        c["objective"] = [{"name": "multisimilarity", "weight": 1.0, "options": {}},
                          {"name": "language_guidance", "weight": 10.0,
                           "options": {"language_embeddings": ref, **extra}}]
        losses[name] = fit(c, run_dir=tmp_path / name).history[0]["loss"]
    assert losses["image"] == losses["class"]
    # rows of the wrong images (shifted by one) change the loss: the indices matter
    shifted = np.roll(np.asarray(train.labels), 1)
    bad = {"file": str(tmp_path / "b.npz"),
           "sha256": save_sample_embeddings(tmp_path / "b.npz", train.sample_keys(), emb, shifted)}
    c = resolve_config(base)
    c["objective"] = [{"name": "multisimilarity", "weight": 1.0, "options": {}},
                      {"name": "language_guidance", "weight": 10.0,
                       "options": {"language_embeddings": bad, "per_sample": True}}]
    assert fit(c, run_dir=tmp_path / "bad").history[0]["loss"] != losses["class"]


def test_a_language_file_with_a_nan_row_or_no_width_is_refused_by_name(tmp_path):
    """A NaN row once failed epochs later as "the loss became nan" after a run folder was started; a zero-width file
    was accepted. Both are refused when the file is read, naming the file and the rows."""
    from umlkit.data.side_info import (
        SideInfoError,
        load_class_embeddings,
        load_sample_embeddings,
        save_class_embeddings,
        save_sample_embeddings,
    )
    names = ["cub:001.Red_bird", "cub:002.Blue_bird", "cub:003.Green_bird"]
    emb = np.ones((3, 4), dtype=np.float32)
    emb[1, 2] = np.nan
    path = tmp_path / "nan.npz"
    ref = {"file": str(path), "sha256": save_class_embeddings(path, names, emb)}
    assert load_class_embeddings(ref, [names[0], names[2]]).shape == (2, 4)   # rows it does not serve are not read
    with pytest.raises(SideInfoError, match=rf"{path} has NaN or infinite values in the rows of 1 of the 3 names it "
                                            r"serves, e\.g\. \['cub:002\.Blue_bird'\]; recompute the file"):
        load_class_embeddings(ref, names)
    flat = tmp_path / "flat.npz"
    ref = {"file": str(flat), "sha256": save_class_embeddings(flat, names, np.ones((3, 0), dtype=np.float32))}
    with pytest.raises(SideInfoError, match=rf"{flat} holds embeddings of shape \(3, 0\), with no width"):
        load_class_embeddings(ref, names)
    vocab = np.array([[1.0, 0.0], [np.inf, 1.0]], dtype=np.float32)
    sample = tmp_path / "s.npz"
    ref = {"file": str(sample), "sha256": save_sample_embeddings(sample, ["a", "b"], vocab, np.array([[0], [1]]))}
    with pytest.raises(SideInfoError, match=r"in the rows of 1 of the 2 names it serves, e\.g\. \['b'\]"):
        load_sample_embeddings(ref, ["a", "b"])
