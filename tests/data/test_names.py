"""UML-Mini v2 names and captions, Flowers' names file, and language-guidance name cleaning."""
import hashlib
import json
import re

import numpy as np
import pytest

from umlkit.data import SOURCES, load_dataset, mini
from umlkit.data.names import HUES16, caption, class_name, clean_class_name, dedupe, flowers102_names, hue_name

# sha256 (first 16 hex digits) of every source's generated pixels and class indices, train then test, at seed 0:
# measured with generator version 1. Version 2 only names what version 1 drew, so the images must not change (a
# change here makes every quick record's data stale: bump GENERATOR_VERSION and retrain).
V1_PIXELS = {"cub": "5e4c3ca7cdd4fa6a", "cars": "16a1687fe64699a0", "sop": "2020236815178733",
             "inshop": "a8edec7c0f1a26d5", "nabirds": "ceb9d5eb0326ce15", "dogs": "b249e8809a2e3e06",
             "flowers": "4ba8c1a8ae8d7b36", "aircraft": "08de22d320ab18d5"}


def _generated(name):
    return mini._generate_source(name, np.random.default_rng([0, list(SOURCES).index(name), 7]))


@pytest.mark.parametrize("name", list(SOURCES))
def test_default_images_are_those_of_version_1(name):
    data = _generated(name)
    h = hashlib.sha256()
    for split in ("train", "test"):
        h.update(data[split][0].tobytes())
        h.update(np.asarray(data[split][1], np.int64).tobytes())
    assert h.hexdigest()[:16] == V1_PIXELS[name]


def test_hue_names_wrap_around_the_circle():
    assert [hue_name(h) for h in (0.0, 0.5, 0.97, 1.0, 1 / 6, 0.25)] == ["red", "cyan", "red", "red", "yellow",
                                                                          "chartreuse"]
    assert len(set(HUES16)) == 16


def test_class_names_follow_the_class_defining_attributes():
    assert class_name("cub", {"hue": 0.125, "disc_hue": 0.5}) == "amber bird with a cyan head"
    assert class_name("cars", {"shape": "star", "texture": "checkered", "aspect": 1.33}) == "wide checkered star"
    assert class_name("dogs", {"texture": "vertically striped", "period": 6, "shape": "cross"}) == \
        "coarse vertically striped cross"
    assert class_name("aircraft", {"shape": "ring", "aspect": 1.0, "scale": 10.0, "disc_pos": "N"}) == \
        "large ring with a nose light"
    assert class_name("sop", {"shape": "disc", "texture": "plain", "aspect": 0.75, "disc_pos": "W"}) == \
        "tall plain disc with a grey dot on the left"
    with pytest.raises(ValueError, match="no naming rule"):
        class_name("mnist", {})


def test_caption_names_nuisance_attributes_with_articles():
    a = dict(shape="triangle", texture="horizontally striped", period=4, aspect=1.33, scale=7.0, hue=0.125,
             sat=0.9, val=0.9, disc_pos="E", disc_hue=0.625, disc_sat=0.85, disc_val=0.9,
             bg_top=(0.0, 0.0, 0.4), bg_bottom=(0.03, 0.0, 0.5))
    assert caption("cars", a) == ("a small wide amber triangle with fine horizontal stripes and a cobalt dot on "
                                  "the right, on a grey background")
    assert caption("cars", {**a, "texture": "plain", "disc_pos": "none", "hue": 0.0}) == \
        "a small wide red triangle, on a grey background"


def test_dedupe_numbers_repeats_in_order():
    assert dedupe(["a", "b", "a", "a"]) == ["a", "b", "a II", "a III"]


def test_every_source_names_its_classes_uniquely_and_in_its_own_format(mini_root):
    for name in SOURCES:
        data = _generated(name)
        names = [class_name(name, c) for c in data["classes"]]
        assert len(set(names)) == len(names), name       # unique without the II/III fallback
    cub = load_dataset("cub", mini_root, "train")
    assert all(re.fullmatch(r"\d{3}\.[A-Z][a-z_]+", n) for n in cub.class_names)
    assert cub.language_names[0] == cub.class_names[0][4:].replace("_", " ")
    air = load_dataset("aircraft", mini_root, "train")
    assert [int(n[2:5]) for n in air.class_names] == air.class_keys   # sorted variants = class order
    assert not any(n[:2] == "UM" for n in air.language_names)
    sop = load_dataset("sop", mini_root, "test")
    assert set(sop.class_names) <= set(mini.SHAPES)                    # super-categories are shapes
    dogs = load_dataset("dogs", mini_root, "train")
    assert all(" " not in n and n[0].isupper() for n in dogs.class_names)
    inshop = load_dataset("inshop", mini_root, "train")
    assert all(n.startswith("id_") for n in inshop.class_names)        # items have ids, as in In-shop
    assert all(p.parts[-4] in ("MEN", "WOMEN") for p in inshop.paths)  # img/<gender>/<category>/<item>/<file>
    flowers = load_dataset("flowers", mini_root, "train")
    assert all(n.endswith(" flower") for n in flowers.class_names)


def test_loaders_give_captions_that_describe_the_class(mini_root):
    for name in SOURCES:
        ds = load_dataset(name, mini_root, "train")
        assert ds.captions is not None and len(ds.captions) == len(ds)
        sub = ds.subset(np.arange(0, len(ds), 7))
        assert sub.captions == ds.captions[::7]
    cars = load_dataset("cars", mini_root, "test")
    for i in range(0, len(cars), 97):   # the class-defining shape and texture are in every caption
        name = cars.class_names[cars.labels[i]].lower()
        shape = name.split()[-1]
        assert shape in cars.captions[i]


def test_flowers_names_from_file_or_the_shipped_list(tmp_path):
    from umlkit.data.datasets import _flowers_names
    names = flowers102_names()
    assert len(names) == 102 and names[0] == "pink primrose" and names[-1] == "blackberry lily"
    assert _flowers_names(tmp_path, list(range(1, 103)))[50] == names[49]
    assert _flowers_names(tmp_path, [1, 2, 3]) == {}
    (tmp_path / "cat_to_name.json").write_text(json.dumps({"1": "x", "2": "y"}))
    assert _flowers_names(tmp_path, [1, 2]) == {1: "x", 2: "y"}
    (tmp_path / "cat_to_name.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="cat_to_name.json"):
        _flowers_names(tmp_path, [1, 2])


@pytest.mark.parametrize("dataset, raw, clean", [
    ("cub", "001.Black_footed_Albatross", "Black footed Albatross"),
    ("dogs", "n02085620-Chihuahua", "Chihuahua"),
    ("dogs", "Japanese_spaniel", "Japanese spaniel"),
    ("sop", "bicycle_final", "bicycle"),
    ("aircraft", "A340-500", "A340-500"),
    ("aircraft", "UM007 large star", "large star"),
    ("inshop", "MEN Tees_Tanks", "MEN Tees Tanks"),
    ("cars", "AM General Hummer SUV 2000", "AM General Hummer SUV 2000"),
])
def test_clean_class_name_as_language_guidance_does(dataset, raw, clean):
    assert clean_class_name(dataset, raw) == clean


def test_caption_insertion_replaces_the_object_word_once():
    from umlkit.data.names import insert_class_name
    cap = "a small tall amber diamond with a cobalt dot on the left, on a pale chartreuse background"
    assert insert_class_name(cap, "amber bird with a cobalt head") == \
        ("a small tall amber amber bird with a cobalt head with a cobalt dot on the left, "
         "on a pale chartreuse background")
    assert insert_class_name("a star and a ring", "X") == "a X and a ring"
    with pytest.raises(ValueError, match="names no shape"):
        insert_class_name("a blue bird on a branch", "X")
