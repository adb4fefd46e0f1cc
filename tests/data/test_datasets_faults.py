"""Faulty annotations: a class without images must not move the class-disjoint split boundary."""
import numpy as np
import pytest

from umlkit.data import load_dataset, make_mini


def _drop_class(path, class_id, id_of_line):
    lines = path.read_text().splitlines()
    path.write_text("\n".join(ln for ln in lines if id_of_line(ln) != class_id) + "\n")


def test_an_empty_class_keeps_the_declared_split(tmp_path):
    root = make_mini(tmp_path / "m", sources=["cub", "aircraft"])
    before = load_dataset("cub", root, "test", expected=None).class_keys
    cub = root / "CUB_200_2011"
    gone = {ln.split()[0] for ln in (cub / "image_class_labels.txt").read_text().splitlines() if ln.split()[1] == "3"}
    _drop_class(cub / "image_class_labels.txt", "3", lambda ln: ln.split()[1])
    lines = (cub / "images.txt").read_text().splitlines()
    (cub / "images.txt").write_text("\n".join(ln for ln in lines if ln.split()[0] not in gone) + "\n")
    train = load_dataset("cub", root, "train", expected=None)
    test = load_dataset("cub", root, "test", expected=None)
    assert 3 not in train.class_keys and test.class_keys == before     # no test class moved into training
    assert not set(train.class_keys) & set(test.class_keys)
    # Aircraft: variants.txt declares the classes, so a variant without images keeps its place in the order
    data = root / "fgvc-aircraft-2013b" / "data"
    first = sorted(data.joinpath("variants.txt").read_text().split("\n"))[1]
    for name in ("images_variant_trainvaltest.txt",):
        lines = (data / name).read_text().splitlines()
        (data / name).write_text("\n".join(ln for ln in lines if ln.split(" ", 1)[1] != first) + "\n")
    air_test = load_dataset("aircraft", root, "test", expected=None)
    assert air_test.num_classes == 25 and np.all(np.bincount(air_test.labels) > 0)


def test_malformed_annotation_lines_are_named_with_file_and_line(tmp_path):
    """A damaged annotation file gave "dictionary update sequence element #48 has length 1", KeyError('1') or a
    UnicodeDecodeError, naming neither the file nor the line."""
    root = make_mini(tmp_path / "m", sources=["cub", "aircraft"])
    cub = root / "CUB_200_2011"
    good = {name: (cub / name).read_bytes() for name in ("images.txt", "image_class_labels.txt", "classes.txt")}
    assert load_dataset("cub", root, "train", expected=None).class_keys   # intact: loads
    cases = [("images.txt", lambda t: t.replace("\n", "\nbroken\n", 1),
              r"images.txt, line 2: expected 'IMAGE_ID PATH' \(IMAGE_ID integer\), got 'broken'"),
             ("image_class_labels.txt", lambda t: t.replace(" 1\n", " one\n", 1),
              r"image_class_labels.txt, line \d+: expected 'IMAGE_ID CLASS_ID' \(IMAGE_ID, CLASS_ID integer\), got "
              r"'\d+ one'"),
             ("image_class_labels.txt", lambda t: t.split("\n", 1)[1],
              r"image_class_labels.txt gives no class for 1 image\(s\) of images.txt \(first: id 1\)"),
             ("classes.txt", lambda t: "x " + t, r"classes.txt, line 1: expected 'CLASS_ID NAME'")]
    for name, damage, message in cases:
        (cub / name).write_text(damage(good[name].decode()))
        with pytest.raises(ValueError, match=message):
            load_dataset("cub", root, "train", expected=None)
        (cub / name).write_bytes(good[name])
    (cub / "classes.txt").write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(ValueError, match=r"classes.txt: not a text annotation file"):
        load_dataset("cub", root, "train", expected=None)
