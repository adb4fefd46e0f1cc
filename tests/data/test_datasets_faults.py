"""Faulty annotations: a class without images must not move the class-disjoint split boundary; an index listing an
id twice or a label outside the class list is refused; Cars196's devkit cars_annos.mat."""
import numpy as np
import pytest
from scipy.io import loadmat, savemat

from tests.data.test_loaders import (
    make_aircraft,
    make_cars,
    make_cub,
    make_dogs,
    make_flowers,
    make_inat,
    make_inshop,
    make_nabirds,
    make_sop,
)
from umlkit.data import check_datasets, load_dataset, make_mini
from umlkit.data.index_check import mat_field, mat_items, mat_scalar


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


# ------------------------------------------------------------------- an index's ids and labels
def _append(path, line):
    path.write_text(path.read_text().rstrip("\n") + "\n" + line + "\n")


def _replace_line(path, no, line):
    lines = path.read_text().splitlines()
    lines[no - 1] = line
    path.write_text("\n".join(lines) + "\n")


def _cub_id_twice(root):
    # id 3 (class 2's first image) listed again with class 4's image: one id, two images, two classes
    _append(root / "CUB_200_2011" / "images.txt", "3 004.Bird_4/Bird_4_0.jpg")


def _cub_path_twice(root):
    # one image under a second id, labelled with another class: the image would load under two classes
    _append(root / "CUB_200_2011" / "images.txt", "9 001.Bird_1/Bird_1_0.jpg")
    _append(root / "CUB_200_2011" / "image_class_labels.txt", "9 3")


def _cub_label_twice(root):
    _append(root / "CUB_200_2011" / "image_class_labels.txt", "2 3")


def _cub_unknown_class(root):
    _replace_line(root / "CUB_200_2011" / "image_class_labels.txt", 5, "5 7")


def _sop_path_twice(root):
    _append(root / "Stanford_Online_Products" / "Ebay_train.txt", "6 2 1 bicycle_final/1_1.JPG")


def _sop_id_twice(root):
    _append(root / "Stanford_Online_Products" / "Ebay_test.txt", "6 4 1 bicycle_final/4_9.JPG")


def _inshop_image_twice(root):
    _append(root / "Inshop_Clothes" / "Eval" / "list_eval_partition.txt",
            "img/MEN/Denim/id_00000007/01_1_front.jpg id_00000009 gallery")


def _nabirds_id_twice(root):
    _append(root / "nabirds" / "images.txt", "00010000-aaaa 0401/00040001-aaaa.jpg")


def _nabirds_unknown_class(root):
    (root / "nabirds" / "classes.txt").write_text("295 a\n296 b\n314 c\n400 d\n")


def _dogs_file_twice(root):
    path = root / "dogs" / "file_list.mat"
    files = [f"n0208{c}-Breed_{c}/n0208{c}_{k}.jpg" for c in range(1, 5) for k in range(3)]
    files[7] = files[1]
    savemat(str(path), {"file_list": np.array(files, dtype=object)[:, None],
                        "labels": np.repeat(np.arange(1.0, 5.0), 3)[:, None]})


def _flowers_unknown_class(root):
    (root / "flowers" / "cat_to_name.json").write_text('{"1": "pink primrose", "2": "hard-leaved pocket orchid", '
                                                       '"3": "canterbury bells"}')


def _aircraft_id_twice(root):
    _append(root / "fgvc-aircraft-2013b" / "data" / "images_variant_test.txt", "0000002 DC-3")


def _aircraft_unknown_variant(root):
    (root / "fgvc-aircraft-2013b" / "data" / "variants.txt").write_text("A320\nBoeing 737-200\nCessna 172\n")


def _inat_path_twice(root):
    _append(root / "inaturalist" / "Inaturalist_test_set1.txt", "train_val2018/Insecta/999/d.jpg")


def _cars_path_twice(root, cls=4, rel="car_ims/000002.jpg"):
    base = root / "cars196"
    mat = loadmat(str(base / "cars_annos.mat"), squeeze_me=True, struct_as_record=False)
    rows = [(a.relative_im_path, 0, 0, 5, 5, int(a.__dict__["class"]), int(a.test)) for a in mat["annotations"]]
    rows[5] = (rel, 0, 0, 5, 5, cls, 1)
    ann = np.array(rows, dtype=[("relative_im_path", "O"), ("bbox_x1", "O"), ("bbox_y1", "O"), ("bbox_x2", "O"),
                                ("bbox_y2", "O"), ("class", "O"), ("test", "O")])
    savemat(str(base / "cars_annos.mat"), {"annotations": ann[None, :],
                                           "class_names": np.array(list(mat["class_names"]), dtype=object)[None, :]})


def _cars_unknown_class(root):
    _cars_path_twice(root, cls=9, rel="car_ims/000006.jpg")


# (dataset, fixture, damage, the one-line error: file, line or entry, id or label, what was expected)
FAULTS = [
    ("cub", make_cub, _cub_id_twice,
     r"images.txt, line 9: image id 3 listed twice \(first on line 3\); expected each image id once$"),
    ("cub", make_cub, _cub_path_twice,
     r"images.txt, line 9: image path '001.Bird_1/Bird_1_0.jpg' listed twice \(first on line 1\); expected each "
     r"image path once$"),
    ("cub", make_cub, _cub_label_twice,
     r"image_class_labels.txt, line 9: image id 2 listed twice \(first on line 2\)"),
    ("cub", make_cub, _cub_unknown_class,
     r"image_class_labels.txt, line 5: class 7 of 5 is not in classes.txt; expected one of its 4 classes \(1..4\)$"),
    ("sop", make_sop, _sop_path_twice,
     r"Ebay_train.txt, line 7: image path 'bicycle_final/1_1.JPG' listed twice \(first on line 2\)"),
    ("sop", make_sop, _sop_id_twice, r"Ebay_test.txt, line 6: image id '6' listed twice \(first on line 2\)"),
    ("inshop", make_inshop, _inshop_image_twice,
     r"list_eval_partition.txt, line 9: image 'img/MEN/Denim/id_00000007/01_1_front.jpg' listed twice \(first on "
     r"line 5\)"),
    ("nabirds", make_nabirds, _nabirds_id_twice,
     r"nabirds/images.txt, line 11: image id '00010000-aaaa' listed twice \(first on line 3\)"),
    ("nabirds", make_nabirds, _nabirds_unknown_class,
     r"image_class_labels.txt, line 9: class 401 of '00040000-aaaa' is not in classes.txt; expected one of its 4 "
     r"classes \(295, 296, 314, 400\)$"),
    ("dogs", make_dogs, _dogs_file_twice,
     r"file_list.mat, entry 8: image 'n02081-Breed_1/n02081_1.jpg' listed twice \(first on entry 2\)"),
    ("flowers", make_flowers, _flowers_unknown_class,
     r"imagelabels.mat, entry 4: class 4 of 'image_00004.jpg' is not in cat_to_name.json; expected one of its 3 "
     r"classes \(1..3\)$"),
    ("aircraft", make_aircraft, _aircraft_id_twice,
     r"images_variant_test.txt, line 4: image id '0000002' listed twice \(first on line 2 of \S+"
     r"images_variant_trainval.txt\)"),
    ("aircraft", make_aircraft, _aircraft_unknown_variant,
     r"images_variant_test.txt, line 2: class 'DC-3' of '0000005' is not in variants.txt; expected one of its 3 "
     r"classes \('A320', 'Boeing 737-200', 'Cessna 172'\)$"),
    ("inat", make_inat, _inat_path_twice,
     r"Inaturalist_test_set1.txt, line 3: image path 'train_val2018/Insecta/999/d.jpg' listed twice \(first on "
     r"line 1\)"),
    ("cars", make_cars, _cars_path_twice,
     r"cars_annos.mat, annotation 6: image 'car_ims/000002.jpg' listed twice \(first on annotation 2\)"),
    ("cars", make_cars, _cars_unknown_class,
     r"cars_annos.mat, annotation 6: class 9 of 'car_ims/000006.jpg' is not in cars_annos.mat's class_names; "
     r"expected one of its 4 classes \(1..4\)$"),
]


@pytest.mark.parametrize("name, make, damage, message", FAULTS,
                         ids=[f"{f[0]}-{f[2].__name__.strip('_')}" for f in FAULTS])
def test_an_index_listing_an_id_twice_or_an_unknown_label_is_refused_by_loader_and_data_check(
        tmp_path, name, make, damage, message):
    """A doubled id (CUB's images.txt: one image loaded under two classes) or a label outside the class
    list passed ``umlkit data check``; the loaders and the check now refuse it in one line naming file, line, id."""
    make(tmp_path)
    for split in ("train", "test") if name != "inshop" else ("train", "query", "gallery"):
        load_dataset(name, tmp_path, split, expected=None)   # intact: loads
    damage(tmp_path)
    with pytest.raises(ValueError, match=message) as caught:
        load_dataset(name, tmp_path, "train", expected=None)
    assert "\n" not in str(caught.value)
    row = check_datasets(tmp_path, [name], counts=False).loc[name]
    assert row["status"] == "unreadable annotations" and str(caught.value) == row["detail"]


def test_data_check_on_the_command_line_names_the_doubled_id(tmp_path, capsys):
    from umlkit import cli
    make_cub(tmp_path)
    _cub_id_twice(tmp_path)
    assert cli.main(["data", "check", "--root", str(tmp_path), "--datasets", "cub", "--no-count-check"]) == 1
    out = capsys.readouterr().out
    assert "[cub] unreadable annotations: " in out and "images.txt, line 9: image id 3 listed twice" in out


# ------------------------------------------------------------------- Cars196 in the devkit's cars_annos.mat
def _cell(value):
    """A MATLAB 1x1 cell around a 1x1 array, as the devkit's struct fields are nested."""
    out = np.empty((1, 1), dtype=object)
    out[0, 0] = np.array([[value]])
    return out


def _devkit_cars(root, names=("Zeta 2012", "Alpha 2010", "Beta 2011", "Mu 2009"), with_names=True):
    """A tiny cars_annos.mat as the devkit writes it: ``annotations`` a 1 x N struct array of relative_im_path,
    bbox_x1..bbox_y2, class, test (each field a nested cell), ``class_names`` a 1 x 196 (here 1 x 4) cell."""
    from tests.data.test_loaders import _img
    base = root / "cars196"
    dtype = [("relative_im_path", "O"), ("bbox_x1", "O"), ("bbox_y1", "O"), ("bbox_x2", "O"), ("bbox_y2", "O"),
             ("class", "O"), ("test", "O")]
    classes = [3, 1, 4, 2, 2, 1, 3, 4]
    ann = np.empty((1, len(classes)), dtype=dtype)
    for i, c in enumerate(classes):
        rel = f"car_ims/{i + 1:06d}.jpg"
        _img(base / rel, 10 * c)
        ann[0, i] = (_cell(rel), _cell(np.uint8(1)), _cell(np.uint8(1)), _cell(np.uint8(5)), _cell(np.uint8(5)),
                     _cell(np.uint8(c)), _cell(np.uint8(i % 2)))
    cells = np.empty((1, len(names)), dtype=object)
    for i, n in enumerate(names):
        cells[0, i] = np.array([n])
    content = {"annotations": ann, **({"class_names": cells} if with_names else {})}
    savemat(str(base / "cars_annos.mat"), content)
    return base


def test_cars_reads_the_devkit_cars_annos_mat(tmp_path):
    _devkit_cars(tmp_path)
    train = load_dataset("cars", tmp_path, "train", expected={"train": (4, 2)})
    test = load_dataset("cars", tmp_path, "test", expected={"test": (4, 2)})
    assert [p.name for p in train.paths] == ["000002.jpg", "000004.jpg", "000005.jpg", "000006.jpg"]
    assert train.class_names == ["Zeta 2012", "Alpha 2010"] and train.labels.tolist() == [0, 1, 1, 0]
    assert test.class_names == ["Beta 2011", "Mu 2009"] and test.labels.tolist() == [0, 1, 0, 1]
    assert np.asarray(test.image(0))[0, 0].tolist() == [30, 30, 30]
    roth = load_dataset("cars", tmp_path, "train", expected=None, cars_split="roth")
    assert roth.class_names == ["Alpha 2010", "Beta 2011"]
    assert check_datasets(tmp_path, ["cars"], counts=False).loc["cars", "status"] == "found"


def test_cars_without_class_names_names_the_file_and_the_field(tmp_path):
    """The full-profile tree failed with ``umlkit: error: class_names`` (a bare KeyError)."""
    base = _devkit_cars(tmp_path, with_names=False)
    with pytest.raises(ValueError, match=r"cars196/cars_annos.mat: no field 'class_names' \(it has annotations\); "
                                         r"expected the class names as a cell array") as caught:
        load_dataset("cars", tmp_path, "train", expected=None)
    assert check_datasets(tmp_path, ["cars"], counts=False).loc["cars", "detail"] == str(caught.value)
    # the devkit's own cars_meta.mat beside it gives them
    (base / "devkit").mkdir()
    savemat(str(base / "devkit" / "cars_meta.mat"),
            {"class_names": np.array(["Zeta 2012", "Alpha 2010", "Beta 2011", "Mu 2009"], dtype=object)[None, :]})
    assert load_dataset("cars", tmp_path, "test", expected=None).class_names == ["Beta 2011", "Mu 2009"]
    savemat(str(base / "devkit" / "cars_meta.mat"), {"names": np.zeros(3)})
    with pytest.raises(ValueError, match=r"devkit/cars_meta.mat: no field 'class_names' \(it has names\)"):
        load_dataset("cars", tmp_path, "test", expected=None)


def test_cars_annotation_without_its_class_field_is_named(tmp_path):
    base = tmp_path / "cars196"
    base.mkdir()
    ann = np.array([("car_ims/000001.jpg", 0)], dtype=[("relative_im_path", "O"), ("test", "O")])
    savemat(str(base / "cars_annos.mat"), {"annotations": ann[None, :], "class_names": np.array(["A"], dtype=object)})
    with pytest.raises(ValueError, match=r"cars_annos.mat, annotation 1: no field 'class' \(it has relative_im_path, "
                                         r"test\)"):
        load_dataset("cars", tmp_path, "train", expected=None)


@pytest.mark.parametrize("as_record", [True, False])
def test_mat_field_reads_nested_object_arrays(tmp_path, as_record):
    """Without squeeze_me every devkit field is a cell within an array within a struct: the accessor unwraps it."""
    base = _devkit_cars(tmp_path)
    mat = loadmat(str(base / "cars_annos.mat"), squeeze_me=False, struct_as_record=as_record)
    path = base / "cars_annos.mat"
    ann = mat_items(mat_field(mat, "annotations", path))
    assert len(ann) == 8
    assert [mat_scalar(mat_field(a, "relative_im_path", path)) for a in ann[:2]] == ["car_ims/000001.jpg",
                                                                                     "car_ims/000002.jpg"]
    assert [mat_scalar(mat_field(a, "class", path)) for a in ann] == [3, 1, 4, 2, 2, 1, 3, 4]
    assert [mat_scalar(n) for n in mat_items(mat_field(mat, "class_names", path))][:2] == ["Zeta 2012", "Alpha 2010"]
    with pytest.raises(ValueError, match=r"cars_annos.mat, annotation 1: no field 'fname' \(it has relative_im_path, "
                                         r"bbox_x1, bbox_y1, bbox_x2, bbox_y2, class, test\)"):
        mat_field(ann[0], "fname", path, "annotation 1")
