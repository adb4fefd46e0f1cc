"""Loaders on tiny hand-written fixture trees in each dataset's real on-disk format."""
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from scipy.io import savemat

from umlkit.data import DatasetCountError, check_datasets, load_dataset, load_unified, verify_images
from umlkit.data.unified import UnifiedDataset


def _img(path: Path, value: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((6, 6, 3), value, np.uint8)).save(path)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def make_cub(root, n_classes=4, per=2):
    base = root / "CUB_200_2011"
    imgs, labs, i = [], [], 0
    for c in range(1, n_classes + 1):
        for k in range(per):
            i += 1
            rel = f"{c:03d}.Bird_{c}/Bird_{c}_{k}.jpg"
            _img(base / "images" / rel, c)
            imgs.append(f"{i} {rel}")
            labs.append(f"{i} {c}")
    _write(base / "images.txt", "\n".join(imgs))
    _write(base / "image_class_labels.txt", "\n".join(labs))
    _write(base / "classes.txt", "\n".join(f"{c} {c:03d}.Bird_{c}" for c in range(1, n_classes + 1)))


def make_cars(root):
    base = root / "cars196"
    rows = []
    classes = [3, 1, 4, 2, 2, 1, 3, 4]  # label ids are 1-based; names sort differently from ids
    for i, c in enumerate(classes):
        rel = f"car_ims/{i + 1:06d}.jpg"
        _img(base / rel, c)
        rows.append((rel, 0, 0, 5, 5, c, i % 2))
    ann = np.array(rows, dtype=[("relative_im_path", "O"), ("bbox_x1", "O"), ("bbox_y1", "O"), ("bbox_x2", "O"),
                                ("bbox_y2", "O"), ("class", "O"), ("test", "O")])
    names = np.array(["Zeta 2012", "Alpha 2010", "Beta 2011", "Mu 2009"], dtype=object)
    savemat(str(base / "cars_annos.mat"), {"annotations": ann[None, :], "class_names": names[None, :]})


def make_sop(root):
    base = root / "Stanford_Online_Products"
    i = 0
    for fname, classes in (("Ebay_train.txt", [1, 1, 2, 2, 2]), ("Ebay_test.txt", [3, 3, 4, 4])):
        lines = ["image_id class_id super_class_id path"]
        for c in classes:
            i += 1
            rel = f"bicycle_final/{c}_{i}.JPG"
            _img(base / rel)
            lines.append(f"{i} {c} 1 {rel}")
        _write(base / fname, "\n".join(lines))


def make_inshop(root):
    base = root / "Inshop_Clothes"
    rows = [("img/WOMEN/Dresses/id_00000001/01_1_front.jpg", "id_00000001", "train"),
            ("img/WOMEN/Dresses/id_00000001/01_2_side.jpg", "id_00000001", "train"),
            ("img/MEN/Denim/id_00000007/01_1_front.jpg", "id_00000007", "query"),
            ("img/MEN/Denim/id_00000007/02_1_front.jpg", "id_00000007", "gallery"),
            ("img/MEN/Denim/id_00000009/01_1_front.jpg", "id_00000009", "gallery"),
            ("img/MEN/Denim/id_00000008/01_1_front.jpg", "id_00000008", "query")]
    for rel, _, _ in rows:
        _img(base / "Img" / rel)
    _write(base / "Eval" / "list_eval_partition.txt",
           f"{len(rows)}\nimage_name item_id evaluation_status\n" + "\n".join(" ".join(r) for r in rows))


def make_nabirds(root):
    base = root / "nabirds"
    leaves = [295, 296, 314, 400, 401]  # 5 leaf classes -> 3 train (ceil half), 2 test
    imgs, labs = [], []
    for j, c in enumerate(leaves):
        for k in range(2):
            uid = f"{j:04d}{k:04d}-aaaa"
            rel = f"{c:04d}/{uid}.jpg"
            _img(base / "images" / rel)
            imgs.append(f"{uid} {rel}")
            labs.append(f"{uid} {c}")
    _write(base / "images.txt", "\n".join(imgs))
    _write(base / "image_class_labels.txt", "\n".join(labs))


def make_dogs(root):
    base = root / "dogs"
    files, labels = [], []
    for c in range(1, 5):
        for k in range(3):
            rel = f"n0208{c}-Breed_{c}/n0208{c}_{k}.jpg"
            _img(base / "Images" / rel)
            files.append(rel)
            labels.append(c)
    savemat(str(base / "file_list.mat"), {"file_list": np.array(files, dtype=object)[:, None],
                                          "labels": np.array(labels, float)[:, None]})


def make_flowers(root):
    base = root / "flowers"
    labels = [2, 1, 1, 4, 3, 2, 4, 3, 1]
    for i in range(len(labels)):
        _img(base / "jpg" / f"image_{i + 1:05d}.jpg")
    savemat(str(base / "imagelabels.mat"), {"labels": np.array(labels, float)[None, :]})


def make_aircraft(root, merged=False):
    data = root / "fgvc-aircraft-2013b" / "data"
    trainval = ["0000001 Boeing 737-200", "0000002 A320", "0000003 Cessna 172"]
    test = ["0000004 Boeing 737-200", "0000005 DC-3", "0000006 A320"]
    for ln in trainval + test:
        _img(data / "images" / f"{ln.split()[0]}.jpg")
    if merged:
        _write(data / "images_variant_trainvaltest.txt", "\n".join(trainval + test))
    else:
        _write(data / "images_variant_trainval.txt", "\n".join(trainval))
        _write(data / "images_variant_test.txt", "\n".join(test))


def make_inat(root):
    base = root / "inaturalist"
    train = ["train_val2018/Plantae/7207/a.jpg", "train_val2018/Plantae/7207/b.jpg", "train_val2018/Aves/12/c.jpg"]
    test = ["train_val2018/Insecta/999/d.jpg", "train_val2018/Insecta/999/e.jpg"]
    for r in train + test:
        _img(base / r)
    _write(base / "Inaturalist_train_set1.txt", "\n".join(train))
    _write(base / "Inaturalist_test_set1.txt", "\n".join(test))


def test_cub(tmp_path):
    make_cub(tmp_path)
    tr = load_dataset("cub", tmp_path, "train", expected={"train": (4, 2)})
    te = load_dataset("cub", tmp_path, "test", expected={"test": (4, 2)})
    assert tr.labels.tolist() == [0, 0, 1, 1] and te.labels.tolist() == [0, 0, 1, 1]
    assert te.class_names == ["003.Bird_3", "004.Bird_4"]
    assert np.asarray(te[0][0])[0, 0, 0] == 3  # the first test image belongs to class 3
    sub = te.subset([1, 2])
    assert sub.labels.tolist() == [0, 1] and sub.class_names == ["003.Bird_3", "004.Bird_4"]
    one = te.subset([2, 3])
    assert one.labels.tolist() == [0, 0] and one.class_names == ["004.Bird_4"]
    assert te.subset([2, 3], relabel=False).labels.tolist() == [1, 1]


def test_cub_count_mismatch_names_dataset_split_and_numbers(tmp_path):
    make_cub(tmp_path)
    with pytest.raises(DatasetCountError, match=r"cub/train: found 4 images \(expected 5864\), 2 classes"):
        load_dataset("cub", tmp_path, "train")
    assert len(load_dataset("cub", tmp_path, "train", expected=None)) == 4  # explicit override


def test_cub_rejects_resource_fork_files(tmp_path):
    make_cub(tmp_path)
    base = tmp_path / "CUB_200_2011"
    with open(base / "images.txt", "a") as f:
        f.write("\n99 001.Bird_1/._Bird_1_0.jpg")
    with open(base / "image_class_labels.txt", "a") as f:
        f.write("\n99 1")
    with pytest.raises(DatasetCountError, match=r"\._"):
        load_dataset("cub", tmp_path, "train", expected=None)


def test_cars_label_id_and_roth_splits(tmp_path):
    make_cars(tmp_path)
    tr = load_dataset("cars", tmp_path, "train", expected=None)
    assert sorted(set(tr.class_names)) == ["Alpha 2010", "Zeta 2012"]  # ids 1, 2
    roth = load_dataset("cars", tmp_path, "train", expected=None, cars_split="roth")
    assert roth.class_names == ["Alpha 2010", "Beta 2011"]  # first half of the names sorted
    assert len(tr) == 4 and len(roth) == 4


def test_sop(tmp_path):
    make_sop(tmp_path)
    tr = load_dataset("sop", tmp_path, "train", expected={"train": (5, 2)})
    assert tr.labels.tolist() == [0, 0, 1, 1, 1]
    assert load_dataset("sop", tmp_path, "test", expected=None).num_classes == 2


def test_inshop_query_gallery_share_labels(tmp_path):
    make_inshop(tmp_path)
    q = load_dataset("inshop", tmp_path, "query", expected=None)
    g = load_dataset("inshop", tmp_path, "gallery", expected=None)
    test = load_dataset("inshop", tmp_path, "test", expected=None)
    # joint label space over ids 7, 8, 9
    assert q.labels.tolist() == [0, 1] and g.labels.tolist() == [0, 2]
    assert test.is_query.tolist() == [True, True, False, False] and test.labels.tolist() == [0, 1, 0, 2]
    assert len(load_dataset("inshop", tmp_path, "train", expected=None)) == 2
    with pytest.raises(DatasetCountError, match="inshop/query"):
        load_dataset("inshop", tmp_path, "query", expected={"query": (3, None)})


def test_nabirds_splits_sorted_leaf_ids(tmp_path):
    make_nabirds(tmp_path)
    tr = load_dataset("nabirds", tmp_path, "train", expected=None)
    te = load_dataset("nabirds", tmp_path, "test", expected=None)
    assert tr.class_names == ["295", "296", "314"] and te.class_names == ["400", "401"]


def test_dogs_flowers_aircraft_inat(tmp_path):
    make_dogs(tmp_path)
    make_flowers(tmp_path)
    make_aircraft(tmp_path)
    make_inat(tmp_path)
    dogs = load_dataset("dogs", tmp_path, "train", expected=None)
    assert dogs.class_names == ["Breed_1", "Breed_2"] and len(dogs) == 6
    flowers = load_dataset("flowers", tmp_path, "test", expected=None)
    assert [p.name for p in flowers.paths] == ["image_00004.jpg", "image_00005.jpg", "image_00007.jpg",
                                               "image_00008.jpg"]
    air = load_dataset("aircraft", tmp_path, "train", expected=None)  # merged from trainval + test
    assert air.class_names == ["A320", "Boeing 737-200"] and len(air) == 4
    inat = load_dataset("inat", tmp_path, "train", expected=None)
    assert inat.labels.tolist() == [1, 1, 0]


def test_missing_dataset_error_names_layout_and_source(tmp_path):
    with pytest.raises(FileNotFoundError, match="Expected layout: Stanford_Online_Products"):
        load_dataset("sop", tmp_path, "train")
    make_sop(tmp_path)
    (tmp_path / "Stanford_Online_Products" / "bicycle_final" / "1_1.JPG").unlink()
    with pytest.raises(FileNotFoundError, match="1 of 5 annotated images are missing"):
        load_dataset("sop", tmp_path, "train", expected=None)


def test_check_table_and_corrupt_images(tmp_path):
    make_cub(tmp_path)
    make_sop(tmp_path)
    table = check_datasets(tmp_path, ["cub", "sop", "dogs"])
    assert table.loc["cub", "status"] == "count mismatch" and table.loc["dogs", "status"] == "missing"
    assert "vision.stanford.edu" in table.loc["dogs", "detail"]
    ds = load_dataset("sop", tmp_path, "train", expected=None)
    ds.paths[1].write_bytes(b"not a jpeg")
    bad = verify_images(ds)
    assert [p for p, _ in bad] == [ds.paths[1]]
    with pytest.raises(OSError, match="unreadable"):
        verify_images(ds, on_error="fail")
    verify_images(ds, on_error="skip")
    assert len(ds) == 4 and ds.labels.tolist() == [0, 1, 1, 1]


def test_unified_offsets_sources_and_inshop_roles(tmp_path):
    make_sop(tmp_path)
    make_inshop(tmp_path)
    u = UnifiedDataset([load_dataset("sop", tmp_path, "test", expected=None),
                        load_dataset("inshop", tmp_path, "test", expected=None)])
    assert u.num_classes == 5
    assert u.labels.tolist() == [0, 0, 1, 1, 2, 3, 2, 4]
    assert u.sources.tolist() == [0] * 4 + [1] * 4
    assert u.is_query.tolist() == [True] * 6 + [False] * 2
    assert u.is_gallery.tolist() == [True] * 4 + [False] * 2 + [True] * 2
    with pytest.raises(ValueError, match="split"):
        load_unified(tmp_path, "query", names=["sop"])


@pytest.mark.parametrize("content", [b"", b"not a mat file at all"])
def test_an_unreadable_annotation_mat_file_is_named(tmp_path, content):
    from umlkit.data.datasets import _loadmat
    f = tmp_path / "cars_annos.mat"
    f.write_bytes(content)
    with pytest.raises(ValueError, match=r"cars_annos.mat: not a readable MATLAB annotation file .*original .mat"):
        _loadmat(f)


def test_check_a_uml_mini_tree_and_a_damaged_dataset(tmp_path):
    """A UML-Mini tree is checked for its own sources (it has no iNat: a fresh tree exited 1); a damaged annotation
    file marks that dataset only (it stopped the whole table); an unfinished generation says to run make-mini."""
    import json

    from umlkit.data import make_mini
    root = make_mini(tmp_path / "m", sources=["cub", "sop"])
    table = check_datasets(root)
    assert list(table.index) == ["cub", "sop"] and (table["status"] == "found").all()
    with open(root / "CUB_200_2011" / "images.txt", "a") as fh:
        fh.write("garbage_line_without_id\n")
    table = check_datasets(root, [" cub", "sop"])
    assert table.loc["cub", "status"] == "unreadable annotations" and table.loc["sop", "status"] == "found"
    assert "images.txt, line" in table.loc["cub", "detail"]
    info = json.loads((root / "UML_MINI.json").read_text())
    (root / "UML_MINI.json").write_text(json.dumps({**info, "complete": False}))
    (root / "Stanford_Online_Products" / "Ebay_test.txt").write_text(
        "\n".join((root / "Stanford_Online_Products" / "Ebay_test.txt").read_text().splitlines()[:-5]) + "\n")
    table = check_datasets(root, ["sop"])
    assert table.loc["sop", "status"] == "count mismatch"
    assert ("generation did not finish" in table.loc["sop", "detail"]
            and "make-mini --root" in table.loc["sop", "detail"])


def test_a_loader_error_of_any_kind_marks_its_dataset_only(tmp_path, monkeypatch):
    """A malformed tree that makes a loader raise something other than the expected errors (a KeyError for a
    missing field of an annotation file, e.g. Stanford Cars' devkit under another name) is that dataset's row: the
    others are still checked and shown, and the row names the folder and the expected layout."""
    from umlkit.data import check as check_module
    from umlkit.data import make_mini
    root = make_mini(tmp_path / "m", sources=["cub", "sop"])
    real = check_module.load_dataset

    def broken(name, *args, **kwargs):
        if name == "cub":
            raise KeyError("class_names")
        return real(name, *args, **kwargs)
    monkeypatch.setattr(check_module, "load_dataset", broken)
    table = check_datasets(root)
    assert list(table.index) == ["cub", "sop"] and table.loc["sop", "status"] == "found"
    assert table.loc["cub", "status"] == "unreadable annotations"
    detail = table.loc["cub", "detail"]
    assert detail.startswith("KeyError: 'class_names' while reading") and "CUB_200_2011" in detail
    assert "expected layout" in detail


def test_a_deliberate_subset_is_accepted_by_data_check_and_the_cli_says_how_to_train_on_it(tmp_path, capsys):
    """Issue 82 item 4: the count check's hint in command-line terms, and data check's switch for a subset."""
    from umlkit import cli
    make_cub(tmp_path)
    assert check_datasets(tmp_path, ["cub"]).loc["cub", "status"] == "count mismatch"
    assert check_datasets(tmp_path, ["cub"], counts=False).loc["cub", "status"] == "found"
    assert cli.main(["data", "check", "--root", str(tmp_path), "--datasets", "cub"]) == 1
    assert cli.main(["data", "check", "--root", str(tmp_path), "--datasets", "cub", "--no-count-check"]) == 0
    capsys.readouterr()
    with pytest.raises(DatasetCountError) as err:
        load_dataset("cub", tmp_path, "train")
    said = cli._in_cli_terms(" ".join(str(err.value).split()))
    assert "--set data.expected=null" in said and "expected=None" not in said, said
