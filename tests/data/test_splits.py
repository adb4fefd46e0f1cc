"""Explicit class splits: ``load_dataset(classes=...)`` and ``data.splits`` in ``build_data`` (lists of annotation
class ids, or a JSON file by path and sha256)."""
from __future__ import annotations

import numpy as np
import pytest

from umlkit.data import load_dataset
from umlkit.data.side_info import SideInfoError, write_split_file
from umlkit.train.config import resolve_config
from umlkit.train.engine import build_data

DATA_CONFIG = {"input_size": (3, 32, 32), "mean": (0.5,) * 3, "std": (0.5,) * 3}


def _same(a, b) -> bool:
    return (a.paths == b.paths and np.array_equal(a.labels, b.labels) and a.class_names == b.class_names
            and a.class_keys == b.class_keys and a.name == b.name and a.split == b.split)


@pytest.mark.parametrize("name", ["cub", "sop", "nabirds", "aircraft"])
def test_listing_the_default_classes_gives_the_default_split(mini_root, name):
    train, test = load_dataset(name, mini_root, "train"), load_dataset(name, mini_root, "test")
    assert _same(load_dataset(name, mini_root, "train", classes=train.class_keys), train)
    assert _same(load_dataset(name, mini_root, "test", classes=test.class_keys), test)
    # keys as strings (YAML quotes) select the same classes
    assert _same(load_dataset(name, mini_root, "train", classes=[str(k) for k in train.class_keys]), train)


def test_a_swapped_class_moves_with_all_its_images(mini_root):
    train, test = load_dataset("cub", mini_root, "train"), load_dataset("cub", mini_root, "test")
    moved = test.class_keys[0]
    ds = load_dataset("cub", mini_root, "train", classes=[*train.class_keys[1:], moved])
    assert ds.class_keys == sorted([*train.class_keys[1:], moved]) and ds.num_classes == train.num_classes
    label = ds.class_keys.index(moved)
    assert ds.class_names[label] == test.class_names[0]
    assert sorted(p for p, y in zip(ds.paths, ds.labels) if y == label) == \
        sorted(p for p, y in zip(test.paths, test.labels) if y == 0)
    assert not any(train.class_names[0] == n for n in ds.class_names)


def test_unknown_repeated_and_unsupported_class_lists_are_refused(mini_root):
    with pytest.raises(ValueError, match=r"cub/train: 3 class key\(s\) not in the cub annotations under .*: "
                                         r"\[999, 'Black_footed', 0\]; keys are the annotation's class ids "
                                         r"\(e.g. \[1, 2, 3\]\)"):
        load_dataset("cub", mini_root, "train", classes=[1, 999, "Black_footed", 0])
    with pytest.raises(ValueError, match=r"listed twice: \['2'\]"):
        load_dataset("cub", mini_root, "train", classes=[1, 2, "2"])
    with pytest.raises(ValueError, match="inshop: explicit class splits are not supported"):
        load_dataset("inshop", mini_root, "train", classes=[1])
    with pytest.raises(ValueError, match="must be a list of class keys"):
        load_dataset("cub", mini_root, "train", classes="1,2")


def _cfg(mini_root, **data):
    return resolve_config({"data": {"root": str(mini_root), "datasets": ["cub", "flowers"], **data}})


def _keys(root, name):
    return load_dataset(name, root, "train").class_keys, load_dataset(name, root, "test").class_keys


def _same_unified(a, b) -> bool:
    return (len(a.datasets) == len(b.datasets) and all(_same(x, y) for x, y in zip(a.datasets, b.datasets))
            and np.array_equal(a.labels, b.labels) and a.class_names() == b.class_names())


@pytest.mark.parametrize("data", [{}, {"few_shot": 3}, {"val_fraction": 0.2}, {"val_fraction": 0.2, "few_shot": 2}])
def test_an_explicit_split_equal_to_the_default_gives_the_same_datasets(mini_root, data):
    cub_train, cub_test = _keys(mini_root, "cub")
    fl_train, fl_test = _keys(mini_root, "flowers")
    default = build_data(_cfg(mini_root, **data), DATA_CONFIG)
    splits = {"cub": {"train": cub_train, "test": cub_test}, "flowers": {"train": fl_train, "test": fl_test}}
    explicit = build_data(_cfg(mini_root, splits=splits, **data), DATA_CONFIG)
    for a, b in zip(default, explicit):
        assert (a is None and b is None) or _same_unified(a, b)
    assert (default[2] is not None) == bool(data.get("val_fraction"))


def test_a_swapped_split_trains_on_the_named_classes(mini_root):
    cub_train, cub_test = _keys(mini_root, "cub")
    swap = {"train": [*cub_train[:-5], *cub_test[:5]], "test": [*cub_test[5:], *cub_train[-5:]]}
    train, test, val = build_data(_cfg(mini_root, splits={"cub": swap}), DATA_CONFIG)
    cub_tr, cub_te = train.datasets[0], test.datasets[0]
    assert cub_tr.class_keys == sorted(swap["train"]) and cub_te.class_keys == sorted(swap["test"])
    assert set(cub_test[:5]) <= set(cub_tr.class_keys) and not set(cub_train[-5:]) & set(cub_tr.class_keys)
    assert any(n.startswith("cub:026.") for n in train.class_names())
    assert any(n.startswith("cub:021.") for n in test.class_names())
    # the source without an entry keeps the default split
    assert _same(train.datasets[1], load_dataset("flowers", mini_root, "train")) and val is None


def test_an_explicit_val_list_replaces_val_fraction_for_its_source(mini_root):
    cub_train, cub_test = _keys(mini_root, "cub")
    spec = {"train": cub_train[:20], "val": cub_train[20:], "test": cub_test}
    train, _, val = build_data(_cfg(mini_root, splits={"cub": spec}, val_fraction=0.5), DATA_CONFIG)
    assert train.datasets[0].class_keys == cub_train[:20] and val.datasets[0].class_keys == cub_train[20:]
    assert val.datasets[0].split == "val"
    fl_train = load_dataset("flowers", mini_root, "train")  # flowers: the last half of its classes by val_fraction
    assert train.datasets[1].num_classes == fl_train.num_classes // 2 == val.datasets[1].num_classes


def test_a_split_file_is_read_by_path_and_hash(mini_root, tmp_path):
    cub_train, cub_test = _keys(mini_root, "cub")
    spec = {"train": cub_test, "test": cub_train}
    ref = {"file": str(tmp_path / "cub.json"), "sha256": write_split_file(tmp_path / "cub.json", spec)}
    train, test, _ = build_data(_cfg(mini_root, splits={"cub": ref}), DATA_CONFIG)
    assert train.datasets[0].class_keys == cub_test and test.datasets[0].class_keys == cub_train
    with pytest.raises(SideInfoError, match="data.splits.cub: .*cub.json has sha256"):
        build_data(_cfg(mini_root, splits={"cub": {**ref, "sha256": "0" * 64}}), DATA_CONFIG)


def test_bad_split_specifications_name_source_and_keys(mini_root):
    cub_train, cub_test = _keys(mini_root, "cub")
    with pytest.raises(ValueError, match=r"data.splits.cub.train: cub/train: 2 class key\(s\) not in the cub "
                                         r"annotations under .*: \[500, 501\]"):
        build_data(_cfg(mini_root, splits={"cub": {"train": [1, 500, 501], "test": cub_test}}), DATA_CONFIG)
    with pytest.raises(ValueError, match="data.splits.cub: class 3 is in both train and test"):
        build_data(_cfg(mini_root, splits={"cub": {"train": [1, 3], "test": [3, 4]}}), DATA_CONFIG)
    with pytest.raises(ValueError, match=r"data.splits.cub must give non-empty 'train' and 'test' .* got keys "
                                         r"\['tarin', 'test'\]"):
        build_data(_cfg(mini_root, splits={"cub": {"tarin": [1], "test": [2]}}), DATA_CONFIG)
    with pytest.raises(ValueError, match=r"data.splits names source\(s\) \['cars'\] that are not in data.datasets"):
        build_data(_cfg(mini_root, splits={"cars": {"train": [1], "test": [2]}}), DATA_CONFIG)
