# size: one loader per real dataset layout (ten layouts) behind one DatasetSpec table
"""Loaders for the nine DML datasets, reading each dataset's **original on-disk format**.

``load_dataset(name, root, split)`` returns an :class:`ImageListDataset`. Splits are the class-disjoint DML splits
PUMA's ``dataset.py`` (``All_dataset``) uses (implementation_notes.md §1): the first half of the classes trains,
the second half tests; classification train/test files are ignored (every image of a class goes to its class's
side). Details per dataset:

| name | files read (under ``root``) | classes (train / test) | notes |
|---|---|---|---|
| ``cub`` | ``CUB_200_2011/{images,image_class_labels,classes}.txt`` | 1-100 / 101-200 | ``._*`` files rejected |
| ``cars`` | ``cars196/cars_annos.mat`` | label ids 1-98 / 99-196 | ``split="roth"``: sorted class names |
| ``sop`` | ``Stanford_Online_Products/Ebay_{train,test}.txt`` | official | class_id column |
| ``inshop`` | ``Inshop_Clothes/Eval/list_eval_partition.txt`` (images ``Img/``) | official | train/query/gallery |
| ``nabirds`` | ``nabirds/{images,image_class_labels}.txt`` | 278 / 277 of the sorted leaf ids | |
| ``dogs`` | ``dogs/file_list.mat`` (images ``Images/``) | 1-60 / 61-120 | all 20,580 images |
| ``flowers`` | ``flowers/imagelabels.mat`` (images ``jpg/``) | 1-51 / 52-102 | trn+val+tst merged |
| ``aircraft`` | ``fgvc-aircraft-2013b/data/images_variant_trainvaltest.txt`` | sorted names 1-50 / 51-100 | |
| ``inat`` | ``inaturalist/Inaturalist_{train,test}_set1.txt`` | Smooth-AP's DML split | class = species folder id |

(``aircraft``: ``images_variant_trainvaltest.txt`` is merged from the trainval/test files when absent.)

Every dataset checks its image and class counts (PUMA Table 1; exact numbers from implementation_notes.md §6 and
the datasets' own documentation) and raises :class:`DatasetCountError` naming the dataset, split, expected and
found counts and the usual causes. ``expected=None`` switches the check off (a deliberate subset); a tree written
by :func:`umlkit.data.make_mini` carries its own counts in ``UML_MINI.json``, which the loaders use instead.

Every index is refused, with one ``ValueError`` naming the file, the line (or .mat entry), the id or label and what
was expected, when it lists an image or id twice or gives a label outside the dataset's class list (CUB's and
NABirds' ``classes.txt``, Cars' ``class_names``, Aircraft's ``variants.txt``, Flowers' ``cat_to_name.json``):
:mod:`umlkit.data.index_check`, which ``umlkit data check`` passes through too. Cars' class names come from
``cars_annos.mat`` (else the devkit's ``devkit/cars_meta.mat``). Images decode to 8-bit RGB at each mode's own range
(:func:`umlkit.data.decode.to_rgb`: a 16-bit greyscale PNG is scaled, not clipped to white).
"""
from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from umlkit.data.decode import open_rgb
from umlkit.data.index_check import keyed, known_classes, mat_field, mat_items, mat_scalar

__all__ = ["DATASETS", "DatasetCountError", "DatasetSpec", "ImageListDataset", "load_dataset", "read_annotations",
           "MINI_MANIFEST"]

MINI_MANIFEST = "UML_MINI.json"


class DatasetCountError(RuntimeError):
    """The images or classes found for a split differ from the dataset's documented counts."""


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    title: str
    folder: str
    layout: str
    url: str
    splits: tuple[str, ...] = ("train", "test")
    # split -> (images or None when only the total is documented, classes)
    counts: dict = field(default_factory=dict)
    total_images: int | None = None


DATASETS: dict[str, DatasetSpec] = {s.name: s for s in [
    DatasetSpec("cub", "CUB-200-2011", "CUB_200_2011",
                "CUB_200_2011/{images.txt, image_class_labels.txt, classes.txt, images/NNN.Name/*.jpg}",
                "https://www.vision.caltech.edu/datasets/cub_200_2011/ (CUB_200_2011.tgz, not the older CUB-200)",
                counts={"train": (5864, 100), "test": (5924, 100)}, total_images=11788),
    DatasetSpec("cars", "Cars196", "cars196", "cars196/{cars_annos.mat, car_ims/*.jpg}",
                "Stanford Cars (the original ai.stanford.edu links are dead; mirrors on Kaggle/HF carry car_ims.tgz "
                "+ cars_annos.mat)", counts={"train": (8054, 98), "test": (8131, 98)}, total_images=16185),
    DatasetSpec("sop", "Stanford Online Products", "Stanford_Online_Products",
                "Stanford_Online_Products/{Ebay_train.txt, Ebay_test.txt, <super>_final/*.JPG}",
                "https://cvgl.stanford.edu/projects/lifted_struct/ (Stanford_Online_Products.zip)",
                counts={"train": (59551, 11318), "test": (60502, 11316)}, total_images=120053),
    DatasetSpec("inshop", "In-shop Clothes Retrieval", "Inshop_Clothes",
                "Inshop_Clothes/{Eval/list_eval_partition.txt, Img/img/<gender>/<category>/id_*/...jpg}",
                "DeepFashion In-shop benchmark (Google Drive: img.zip + Eval/list_eval_partition.txt)",
                splits=("train", "query", "gallery"),
                counts={"train": (25882, 3997), "query": (14218, 3985), "gallery": (12612, 3985)}, total_images=52712),
    DatasetSpec("nabirds", "NABirds", "nabirds",
                "nabirds/{images.txt, image_class_labels.txt, images/<class>/*.jpg}",
                "https://dl.allaboutbirds.org/nabirds (nabirds.tar.gz)",
                counts={"train": (None, 278), "test": (None, 277)}, total_images=48562),
    DatasetSpec("dogs", "Stanford Dogs", "dogs", "dogs/{file_list.mat, Images/nXXXXXXXX-Breed/*.jpg}",
                "http://vision.stanford.edu/aditya86/ImageNetDogs/ (images.tar + lists.tar)",
                counts={"train": (None, 60), "test": (None, 60)}, total_images=20580),
    DatasetSpec("flowers", "Oxford Flowers-102", "flowers", "flowers/{imagelabels.mat, setid.mat, jpg/image_NNNNN.jpg}",
                "https://www.robots.ox.ac.uk/~vgg/data/flowers/102/ (102flowers.tgz, imagelabels.mat, setid.mat)",
                counts={"train": (None, 51), "test": (None, 51)}, total_images=8189),
    DatasetSpec("aircraft", "FGVC-Aircraft", "fgvc-aircraft-2013b",
                "fgvc-aircraft-2013b/data/{images_variant_trainvaltest.txt (or images_variant_{trainval,test}.txt), "
                "images/NNNNNNN.jpg}",
                "https://www.robots.ox.ac.uk/~vgg/data/fgvc-aircraft/ (fgvc-aircraft-2013b.tar.gz)",
                counts={"train": (5000, 50), "test": (5000, 50)}, total_images=10000),
    DatasetSpec("inat", "iNaturalist 2018 (DML split)", "inaturalist",
                "inaturalist/{Inaturalist_train_set1.txt, Inaturalist_test_set1.txt, "
                "train_val2018/<kingdom>/<id>/*.jpg}",
                "iNaturalist 2018 images + the Smooth-AP split files (github.com/Andrew-Brown1/Smooth_AP)",
                counts={"train": (325846, 5690), "test": (136093, 2452)}, total_images=461939),
]}


class ImageListDataset(torch.utils.data.Dataset):
    """Images listed by path with integer labels (0..n_classes-1, contiguous per split).

    ``cache=True`` decodes every image once and keeps it in memory as RGB uint8 (UML-Mini-sized data).
    Items are ``(image, label)``; ``image`` is the transform's output (a PIL image when ``transform`` is None).
    """

    def __init__(self, paths: Sequence[Path], labels: Sequence[int], class_names: Sequence[str], name: str,
                 split: str, transform: Callable | None = None, cache: bool = False,
                 class_keys: Sequence | None = None, captions: Sequence[str] | None = None):
        if len(paths) != len(labels):
            raise ValueError(f"{name}/{split}: {len(paths)} paths but {len(labels)} labels")
        self.paths = [Path(p) for p in paths]
        self.labels = np.asarray(labels, dtype=np.int64)
        self.class_names = list(class_names)
        # the annotation's class id of each label (what data.splits lists); None when built from bare lists
        self.class_keys = list(class_keys) if class_keys is not None else None
        self.name, self.split, self.transform = name, split, transform
        # one caption per image where the dataset has them (UML-Mini's uml_mini_text.tsv), else None
        self.captions = list(captions) if captions is not None else None
        if self.captions is not None and len(self.captions) != len(self.paths):
            raise ValueError(f"{name}/{split}: {len(self.captions)} captions for {len(self.paths)} images")
        self._keys = [_file_key(p) for p in self.paths] if cache else None
        self._cache = [_decoded(k, p) for k, p in zip(self._keys, self.paths)] if cache else None

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def language_names(self) -> list[str]:
        """The class names as language guidance feeds them to a language model
        (:func:`umlkit.data.names.clean_class_name`: "001.Black_footed_Albatross" -> "Black footed Albatross")."""
        from umlkit.data.names import clean_class_name
        return [clean_class_name(self.name, n) for n in self.class_names]

    @property
    def sample_keys(self) -> list[str]:
        """``"<source>#<folder>/<file>"`` of every image: how per-image side information (captions, per-sample
        pseudolabels) names its rows, independent of the data root."""
        return [f"{self.name}#{p.parent.name}/{p.name}" for p in self.paths]

    @staticmethod
    def _read(path: Path) -> Image.Image:
        return open_rgb(path)   # every mode at its own range (data.decode.to_rgb), 8-bit RGB and L unchanged

    def __len__(self) -> int:
        return len(self.paths)

    def image(self, i: int) -> Image.Image:
        """Item ``i`` as an RGB PIL image, before any transform."""
        return self._cache[i] if self._cache is not None else self._read(self.paths[i])

    def __getitem__(self, i: int):
        return self.transformed(i, self.transform), int(self.labels[i])

    def transformed(self, i: int, transform: Callable | None):
        """Item ``i`` through ``transform``; a cached dataset keeps the result of a deterministic transform (one
        with ``deterministic = True``, as :func:`umlkit.data.build_transforms` marks its evaluation pipelines) in
        the process-wide memo and returns a copy."""
        img = self.image(i)
        if transform is None:
            return img
        if self._keys is None or not getattr(transform, "deterministic", False):
            return transform(img)
        return _transformed(self._keys[i], transform, img)

    def subset(self, indices, relabel: bool = True) -> "ImageListDataset":
        """The items at ``indices`` (cache shared); ``relabel`` renumbers the kept classes 0..k-1."""
        idx = np.asarray(indices)
        labels, names, keys = self.labels[idx], self.class_names, self.class_keys
        if relabel:
            keep, labels = np.unique(labels, return_inverse=True)
            names = [self.class_names[c] for c in keep]
            keys = [self.class_keys[c] for c in keep] if self.class_keys is not None else None
        out = ImageListDataset([self.paths[i] for i in idx], labels, names, self.name, self.split, self.transform,
                               class_keys=keys,
                               captions=[self.captions[i] for i in idx] if self.captions is not None else None)
        if self._cache is not None:
            out._cache = [self._cache[i] for i in idx]
            out._keys = [self._keys[i] for i in idx]
        return out

    def __repr__(self) -> str:
        return f"ImageListDataset({self.name}/{self.split}: {len(self)} images, {self.num_classes} classes)"


# ------------------------------------------------------------------------------------- decoded-image memo
# Training one record after another in one process (``umlkit records train``) loads the same UML-Mini files many
# times: every run, and its analysis, builds its datasets anew. Cached datasets (``cache=True``) therefore share one
# process-wide memo of decoded images, and of their deterministic evaluation transforms, keyed by the file's
# absolute path, modification time and size (a rewritten file is decoded again). The values are the ones decoding
# gives; least recently used entries leave once the memo holds MEMO_BYTES.
MEMO_BYTES = 1 << 30
_MEMO: OrderedDict = OrderedDict()
_MEMO_SIZE = [0]


def _file_key(path: Path) -> tuple:
    try:
        st = os.stat(path)
    except OSError as err:
        raise OSError(f"cannot read image {path}: {err}") from err
    return os.path.abspath(path), st.st_mtime_ns, st.st_size


def _remember(key: tuple, value, nbytes: int):
    _MEMO[key] = value
    _MEMO_SIZE[0] += nbytes
    while _MEMO_SIZE[0] > MEMO_BYTES and len(_MEMO) > 1:
        _, (_, size) = _MEMO.popitem(last=False)
        _MEMO_SIZE[0] -= size
    return value


def _decoded(key: tuple, path: Path) -> Image.Image:
    hit = _MEMO.get(key)
    if hit is not None:
        _MEMO.move_to_end(key)
        return hit[0]
    img = ImageListDataset._read(path)
    size = img.width * img.height * len(img.getbands())
    return _remember(key, (img, size), size)[0]


def _transformed(key: tuple, transform, img: Image.Image) -> torch.Tensor:
    sig = getattr(transform, "_umlkit_signature", None)
    if sig is None:
        sig = repr(transform)
        transform._umlkit_signature = sig
    tkey = (key, sig)
    hit = _MEMO.get(tkey)
    if hit is not None:
        _MEMO.move_to_end(tkey)
        return hit[0].clone()
    out = transform(img)
    if not torch.is_tensor(out):
        return out
    size = out.numel() * out.element_size()
    return _remember(tkey, (out, size), size)[0].clone()


# --------------------------------------------------------------------------------------------- format readers
# Each returns {split: (paths, class_keys)} with class keys that sort into the split's class order.

def _numbered(path: Path) -> list[tuple[int, str]]:
    """(line number, stripped text) of the non-blank lines of an annotation file."""
    if not path.is_file():
        raise FileNotFoundError(path)
    try:
        text = path.read_text()
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not a text annotation file ({err.reason} at byte {err.start}); expected the "
                         f"dataset's original file") from None
    return [(no, ln.strip()) for no, ln in enumerate(text.splitlines(), start=1) if ln.strip()]


def _lines(path: Path) -> list[str]:
    return [ln for _, ln in _numbered(path)]


def _rows(path: Path, layout: str, skip: int = 0, ints: tuple[int, ...] = ()) -> list[tuple]:
    """``(file, line number, fields)`` of the rows of a whitespace-separated annotation file after ``skip`` header
    lines, split into the fields ``layout`` names (its last field takes the rest of the line, e.g. a name with
    spaces); the fields at ``ints`` as integers. A line that does not fit is named with its file and number."""
    fields = layout.split()
    rows = []
    for no, ln in _numbered(path)[skip:]:
        parts = ln.split(None, len(fields) - 1)
        try:
            if len(parts) != len(fields):
                raise ValueError
            rows.append((path, no, [int(v) if i in ints else v for i, v in enumerate(parts)]))
        except ValueError:
            raise ValueError(f"{path}, line {no}: expected '{layout}'"
                             f"{' (' + ', '.join(fields[i] for i in ints) + ' integer)' if ints else ''}, got "
                             f"{ln[:80]!r}") from None
    return rows


def _index(rows: list[tuple], what: str, key: int = 0, value: int = 1) -> dict:
    """``{fields[key]: fields[value]}`` of :func:`_rows`' rows; a key listed twice is refused (:func:`keyed`)."""
    return keyed(((p, no, r[key], r[value]) for p, no, r in rows), what)


def _labels_of(ids: dict, labels: dict, path: Path) -> list[int]:
    """The class of each image id in ``ids`` (sorted) from ``labels``; an image without one is named."""
    missing = [i for i in ids if i not in labels]
    if missing:
        raise ValueError(f"{path} gives no class for {len(missing)} image(s) of images.txt (first: id {missing[0]})")
    return [labels[i] for i in ids]


def _reject_dot_underscore(paths: list[str], where: Path) -> None:
    bad = [p for p in paths if Path(p).name.startswith("._")]
    if bad:
        raise DatasetCountError(f"{where} lists {len(bad)} macOS resource-fork files ('._*', e.g. {bad[0]}): the "
                                "archive was re-packed on a Mac; delete those entries/files")


def _first_half(keys) -> set:
    """PUMA's rule: the first half of the sorted class ids trains (200 -> 100, 196 -> 98, 555 -> 278)."""
    ordered = sorted(set(keys))
    return set(ordered[:(len(ordered) + 1) // 2])


def _halves(paths: list[Path], keys: list, train_keys: set | None = None, declared=None) -> dict:
    """Images split by class: ``train_keys``, else the first half of the ``declared`` class ids (the classes the
    annotation files list, so a class without images cannot move the boundary), else of the ids that have images."""
    if train_keys is None:
        train_keys = _first_half(declared if declared else keys)
    out = {"train": ([], []), "test": ([], [])}
    for p, k in zip(paths, keys):
        side = out["train" if k in train_keys else "test"]
        side[0].append(p)
        side[1].append(k)
    return out


def _read_cub(root: Path, **_):
    base = root / "CUB_200_2011"
    images = _rows(base / "images.txt", "IMAGE_ID PATH", ints=(0,))
    ids = dict(sorted(_index(images, "image id").items()))
    _index(images, "image path", key=1, value=0)
    label_rows = _rows(base / "image_class_labels.txt", "IMAGE_ID CLASS_ID", ints=(0, 1))
    labels = _index(label_rows, "image id")
    _reject_dot_underscore(list(ids.values()), base / "images.txt")
    names = _index(_rows(base / "classes.txt", "CLASS_ID NAME", ints=(0,)), "class id")
    known_classes(((p, no, i, c) for p, no, (i, c) in label_rows), names, "classes.txt")
    keys = _labels_of(ids, labels, base / "image_class_labels.txt")
    paths = [base / "images" / path for path in ids.values()]
    return _halves(paths, keys, declared=list(names)), names


def _loadmat(path: Path):
    from scipy.io import loadmat
    if not path.is_file():
        raise FileNotFoundError(path)
    try:
        return loadmat(str(path), squeeze_me=True, struct_as_record=False)
    except Exception as err:   # scipy's MatReadError, or a ValueError / TypeError from a file of another kind
        raise ValueError(f"{path}: not a readable MATLAB annotation file ({err or type(err).__name__}); expected the "
                         f"dataset's original .mat file") from err


def _cars_class_names(base: Path, mat: dict) -> tuple[list[str], Path]:
    """Cars' class names and the file they come from: ``class_names`` of ``cars_annos.mat``, else of the devkit's
    ``devkit/cars_meta.mat``."""
    path, meta = base / "cars_annos.mat", base / "devkit" / "cars_meta.mat"
    if "class_names" not in mat and meta.is_file():
        path, mat = meta, _loadmat(meta)
    field = mat_field(mat, "class_names", path, expected="the class names as a cell array (1 x 196 in "
                      "cars_annos.mat, or in devkit/cars_meta.mat beside it)")
    return [str(mat_scalar(c)).strip() for c in mat_items(field)], path


def _read_cars(root: Path, cars_split: str = "label_id", **_):
    base = root / "cars196"
    path = base / "cars_annos.mat"
    mat = _loadmat(path)
    ann = mat_items(mat_field(mat, "annotations", path, expected="the annotation struct array (relative_im_path, "
                                                               "bbox_x1..bbox_y2, class, test)"))
    entries = []
    for no, a in enumerate(ann, start=1):
        rel = mat_scalar(mat_field(a, "relative_im_path", path, f"annotation {no}"))
        cls = mat_scalar(mat_field(a, "class", path, f"annotation {no}"))
        try:
            entries.append((path, no, str(rel), int(cls)))
        except (TypeError, ValueError):
            raise ValueError(f"{path}, annotation {no}: class {cls!r} of {rel!r}: expected an integer label id") \
                from None
    rels = keyed(((p, no, rel, cls) for p, no, rel, cls in entries), "image", unit="annotation")
    class_names, source = _cars_class_names(base, mat)
    names = {i + 1: n for i, n in enumerate(class_names)}
    known_classes(entries, names, f"{source.name}'s class_names", unit="annotation")
    paths = [base / rel for rel in rels]
    keys = list(rels.values())
    _reject_dot_underscore([str(p) for p in paths], path)
    if cars_split == "label_id":
        train = _first_half(list(names) or keys)  # the declared class_names, not only the ids with images
    elif cars_split == "roth":  # Roth et al.: first half of the class folders sorted by name
        by_name = sorted(set(keys), key=lambda k: names[k])
        train = set(by_name[:(len(by_name) + 1) // 2])
    else:
        raise ValueError(f"cars_split must be 'label_id' (PUMA, PA) or 'roth', got {cars_split!r}")
    return _halves(paths, keys, train), names


def _read_sop(root: Path, **_):
    base = root / "Stanford_Online_Products"
    out, names = {}, {}
    for split, fname in (("train", "Ebay_train.txt"), ("test", "Ebay_test.txt")):
        rows = _rows(base / fname, "IMAGE_ID CLASS_ID SUPER_CLASS_ID PATH", skip=1, ints=(1,))
        _index(rows, "image id")
        rows = list(_index(rows, "image path", key=3, value=1).items())
        out[split] = ([base / rel for rel, _ in rows], [c for _, c in rows])
        names.update({int(c): rel.split("/")[0].replace("_final", "") for rel, c in rows})
    return out, names


def _read_inshop(root: Path, **_):
    base = root / "Inshop_Clothes"
    path = base / "Eval" / "list_eval_partition.txt"
    rows = _rows(path, "IMAGE_NAME ITEM_ID EVALUATION_STATUS", skip=2)
    _index(rows, "image")
    out = {s: ([], []) for s in ("train", "query", "gallery")}
    for _, no, (img, item, status) in rows:
        if status not in out:
            raise ValueError(f"{path}, line {no}: unknown evaluation_status {status!r} of {img!r}; expected train, "
                             f"query or gallery")
        out[status][0].append(base / "Img" / img)
        out[status][1].append(item)
    # items have ids, not names (their gender/category folders are img/<gender>/<category>/<item>/<file>)
    return out, {k: k for s in out.values() for k in s[1]}


def _read_nabirds(root: Path, **_):
    base = root / "nabirds"
    images = _rows(base / "images.txt", "IMAGE_UUID PATH")
    ids = dict(sorted(_index(images, "image id").items()))
    _index(images, "image path", key=1, value=0)
    label_rows = _rows(base / "image_class_labels.txt", "IMAGE_UUID CLASS_ID", ints=(1,))
    labels = _index(label_rows, "image id")
    names = {}
    if (base / "classes.txt").is_file():
        names = _index(_rows(base / "classes.txt", "CLASS_ID NAME", ints=(0,)), "class id")
        known_classes(((p, no, i, c) for p, no, (i, c) in label_rows), names, "classes.txt")
    keys = _labels_of(ids, labels, base / "image_class_labels.txt")
    return _halves([base / "images" / path for path in ids.values()], keys), names


def _mat_labels(path: Path, values, field: str = "labels") -> list[int]:
    """The integer class label of each entry of a .mat file's ``field``; a non-integer one is named."""
    out = []
    for no, v in enumerate(mat_items(values), start=1):
        v = mat_scalar(v)
        try:
            if float(v) != int(float(v)):
                raise ValueError
            out.append(int(float(v)))
        except (TypeError, ValueError):
            raise ValueError(f"{path}, entry {no}: {field} {v!r}: expected an integer class label") from None
    return out


def _read_dogs(root: Path, **_):
    base = root / "dogs"
    path = base / "file_list.mat"
    mat = _loadmat(path)
    files = [str(mat_scalar(f)) for f in mat_items(mat_field(mat, "file_list", path))]
    keys = _mat_labels(path, mat_field(mat, "labels", path))
    if len(files) != len(keys):
        raise ValueError(f"{path}: {len(files)} entries in file_list but {len(keys)} labels; expected one label per "
                         f"image")
    keyed(((path, no, f, k) for no, (f, k) in enumerate(zip(files, keys), start=1)), "image", unit="entry")
    names = {k: f.split("/")[0].split("-", 1)[-1] for f, k in zip(files, keys)}
    return _halves([base / "Images" / f for f in files], keys), names


def _read_flowers(root: Path, **_):
    base = root / "flowers"
    path = base / "imagelabels.mat"
    keys = _mat_labels(path, mat_field(_loadmat(path), "labels", path))
    paths = [base / "jpg" / f"image_{i + 1:05d}.jpg" for i in range(len(keys))]
    names = _flowers_names(base, keys)
    if (base / "cat_to_name.json").is_file():
        known_classes(((path, no, p.name, k) for no, (p, k) in enumerate(zip(paths, keys), start=1)), names,
                      "cat_to_name.json", unit="entry")
    return _halves(paths, keys), names


def _flowers_names(base: Path, keys: list[int]) -> dict:
    """Flowers-102 has no names on disk: a ``cat_to_name.json`` beside the annotations (the commonly distributed
    file; UML-Mini writes its own), else umlkit's copy of the 102 common names when the labels are 1..102."""
    path = base / "cat_to_name.json"
    if path.is_file():
        try:
            data = json.loads(path.read_text())
            return {int(k): str(v) for k, v in data.items()}
        except (ValueError, AttributeError) as err:
            raise ValueError(f"{path}: expected a JSON object {{\"1\": \"pink primrose\", ...}} ({err})") from err
    if set(keys) <= set(range(1, 103)) and len(set(keys)) == 102:
        from umlkit.data.names import flowers102_names
        return {i + 1: n for i, n in enumerate(flowers102_names())}
    return {}


def _read_aircraft(root: Path, **_):
    data = root / "fgvc-aircraft-2013b" / "data"
    merged = data / "images_variant_trainvaltest.txt"
    parts = [merged]
    if not merged.is_file():  # PUMA merges the two official files (its auto-merge uses relative paths; absolute here)
        parts = [data / "images_variant_trainval.txt", data / "images_variant_test.txt"]
        if not all(p.is_file() for p in parts):
            raise FileNotFoundError(merged)
    rows = [r for p in parts for r in _rows(p, "IMAGE_ID VARIANT")]
    variant_of = _index(rows, "image id")
    declared = set(_lines(data / "variants.txt")) if (data / "variants.txt").is_file() else set()
    if declared:
        known_classes(((p, no, i, v) for p, no, (i, v) in rows), declared, "variants.txt")
    variants = sorted(declared | set(variant_of.values()))  # variants.txt declares the classes, images or not
    index = {v: i + 1 for i, v in enumerate(variants)}
    keys = [index[v] for v in variant_of.values()]
    paths = [data / "images" / f"{i}.jpg" for i in variant_of]
    return _halves(paths, keys, declared=list(index.values())), {index[v]: v for v in variants}


def _read_inat(root: Path, **_):
    base = root / "inaturalist"
    out = {}
    for split in ("train", "test"):
        path = base / f"Inaturalist_{split}_set1.txt"
        lines = _numbered(path)
        keyed(((path, no, r, r) for no, r in lines), "image path")
        keys = []
        for no, r in lines:
            try:
                keys.append(int(Path(r).parts[-2]))
            except (IndexError, ValueError):
                raise ValueError(f"{path}, line {no}: {r!r}: expected train_val2018/<kingdom>/<species id>/<file>"
                                 f".jpg") from None
        out[split] = ([base / r for _, r in lines], keys)
    return out, {}


_READERS = {"cub": _read_cub, "cars": _read_cars, "sop": _read_sop, "inshop": _read_inshop,
            "nabirds": _read_nabirds, "dogs": _read_dogs, "flowers": _read_flowers, "aircraft": _read_aircraft,
            "inat": _read_inat}


def read_annotations(name: str, root: str | Path, cars_split: str = "label_id"):
    """``({split: (paths, class_keys)}, {class_key: name})`` from the dataset's own annotation files."""
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)}")
    root = Path(root).expanduser()
    try:
        return _READERS[name](root, cars_split=cars_split)
    except FileNotFoundError as err:
        spec = DATASETS[name]
        raise FileNotFoundError(f"{spec.title} ({name}) not found under {root}: "
                                f"missing {err.args[0] if err.args else err}."
                                f" Expected layout: {spec.layout}. Obtain it from: {spec.url}") from None


def _expected_counts(name: str, root: Path, expected):
    if expected is None:
        return None, None
    if isinstance(expected, dict):
        return expected, None
    manifest = root / MINI_MANIFEST
    if manifest.is_file():
        info = json.loads(manifest.read_text())["datasets"].get(name)
        if info is not None:
            return {s: tuple(v) for s, v in info["counts"].items()}, info["total_images"]
    spec = DATASETS[name]
    return spec.counts, spec.total_images


def check_counts(name: str, split: str, found_images: int, found_classes: int, expected: dict | None,
                 total_expected: int | None = None, total_found: int | None = None) -> None:
    if expected is None:
        return
    problems = []
    if split in expected:
        exp_img, exp_cls = expected[split]
        if exp_img is not None and exp_img != found_images:
            problems.append(f"{found_images} images (expected {exp_img})")
        if exp_cls is not None and exp_cls != found_classes:
            problems.append(f"{found_classes} classes (expected {exp_cls})")
    if total_expected is not None and total_found is not None and total_expected != total_found:
        problems.append(f"{total_found} images in all splits (expected {total_expected})")
    if problems:
        raise DatasetCountError(
            f"{name}/{split}: found {', '.join(problems)}. Likely causes: a different archive or version (e.g. "
            "CUB-200 instead of CUB-200-2011), an incomplete extraction, stray '._*' files, or a modified annotation "
            "file. Pass expected=None to load a deliberate subset.")


def load_dataset(name: str, root: str | Path, split: str, transform: Callable | None = None, *,
                 expected="auto", cars_split: str = "label_id", cache: bool = False,
                 check_files: bool = True, classes: Sequence | None = None) -> ImageListDataset:
    """One split of a dataset, labels 0..C-1 in the sorted order of the split's class keys.

    Args:
        name: one of :data:`DATASETS` (``cub``, ``cars``, ``sop``, ``inshop``, ``nabirds``, ``dogs``, ``flowers``,
            ``aircraft``, ``inat``).
        root: the data root holding the dataset folder (e.g. ``ROOT/CUB_200_2011``).
        split: ``train`` / ``test`` (In-shop: ``train`` / ``query`` / ``gallery``; ``test`` = query + gallery).
        expected: ``"auto"`` (documented counts, or the UML-Mini manifest), ``None`` (no check) or
            ``{split: (images or None, classes)}``.
        cars_split: ``"label_id"`` (PUMA/PA) or ``"roth"`` (sorted folder names).
        cache: decode all images once and keep them in memory.
        check_files: raise when an annotated image file does not exist (lists the first few).
        classes: an explicit class split (``data.splits``): the class keys to take, from every annotated split of
            the dataset, instead of the standard split; ``split`` (``train``, ``test`` or ``val``) then only names
            the result, and the count check is off. Keys are the **annotation's class ids** (``class_keys`` of a
            loaded split; ``read_annotations``): CUB/Cars/NABirds/Dogs/Flowers/SOP/iNat integer class ids,
            Aircraft the 1-based position of the variant in sorted order, as ints or their decimal strings.
            Class names are not used because they are not unique in every dataset (SOP names super-categories).
            Unknown keys raise ``ValueError`` naming the dataset and the first few of them. Not available for
            In-shop, whose test protocol divides each class into query and gallery images.
    """
    root = Path(root).expanduser()
    spec = DATASETS.get(name)
    if spec is None:
        raise ValueError(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)}")
    if classes is not None:
        return _load_classes(name, root, split, classes, transform, cars_split, cache, check_files)
    allowed = spec.splits + (("test",) if name == "inshop" else ())
    if split not in allowed:
        raise ValueError(f"{name}: split must be one of {allowed}, got {split!r}")
    parts, names = read_annotations(name, root, cars_split)
    exp, total = _expected_counts(name, root, expected)
    total_found = sum(len(p) for p, _ in parts.values())
    if name == "inshop" and split == "test":
        paths = parts["query"][0] + parts["gallery"][0]
        keys = parts["query"][1] + parts["gallery"][1]
        for s in ("query", "gallery"):
            check_counts(name, s, len(parts[s][0]), len(set(parts[s][1])), exp)
    else:
        paths, keys = parts[split]
        check_counts(name, split, len(paths), len(set(keys)), exp, total, total_found)
    if check_files:
        missing = [p for p in paths if not p.is_file()]
        if missing:
            raise FileNotFoundError(f"{name}/{split}: {len(missing)} of {len(paths)} annotated images are missing, "
                                    f"e.g. {', '.join(str(m) for m in missing[:3])}. Expected layout: {spec.layout}")
    if name == "inshop":  # query and gallery share one label space (implementation_notes.md §6)
        split_keys = (sorted(set(parts["query"][1]) | set(parts["gallery"][1])) if split != "train"
                      else sorted(set(keys)))
    else:
        split_keys = sorted(set(keys))
    index = {k: i for i, k in enumerate(split_keys)}
    labels = [index[k] for k in keys]
    class_names = [str(names.get(k, k)) for k in split_keys]
    ds = ImageListDataset(paths, labels, class_names, name, split, transform, cache=cache, class_keys=split_keys,
                          captions=_captions(name, root, paths))
    if name == "inshop" and split == "test":
        ds.is_query = np.array([True] * len(parts["query"][0]) + [False] * len(parts["gallery"][0]))
    return ds


def _load_classes(name: str, root: Path, split: str, classes: Sequence, transform, cars_split: str, cache: bool,
                  check_files: bool) -> ImageListDataset:
    """The images of the listed classes (annotation class ids) from every split, in annotation order."""
    if name == "inshop":
        raise ValueError("inshop: explicit class splits are not supported (its test protocol divides each class "
                         "into query and gallery images); leave inshop out of data.splits")
    if split not in ("train", "test", "val"):
        raise ValueError(f"{name}: with classes=, split must be 'train', 'test' or 'val' (a name for the result), "
                         f"got {split!r}")
    if isinstance(classes, (str, bytes, dict)) or not hasattr(classes, "__iter__"):
        raise ValueError(f"{name}/{split}: classes must be a list of class keys, got {classes!r}")
    classes = list(classes)
    parts, names = read_annotations(name, root, cars_split)
    spec = DATASETS[name]
    known = {str(k): k for s in spec.splits for k in parts[s][1]}
    wanted = [str(c) for c in classes]
    unknown = [c for c in classes if str(c) not in known]
    if unknown:
        sample = sorted(known.values())[:3]
        raise ValueError(f"{name}/{split}: {len(unknown)} class key(s) not in the {name} annotations under {root}: "
                         f"{unknown[:5]}{' ...' if len(unknown) > 5 else ''}; keys are the annotation's class ids "
                         f"(e.g. {sample})")
    repeated = sorted({c for c in wanted if wanted.count(c) > 1})
    if repeated:
        raise ValueError(f"{name}/{split}: class key(s) listed twice: {repeated[:5]}")
    chosen = {known[c] for c in wanted}
    paths, keys = [], []
    for s in spec.splits:
        for p, k in zip(*parts[s]):
            if k in chosen:
                paths.append(p)
                keys.append(k)
    if check_files:
        missing = [p for p in paths if not p.is_file()]
        if missing:
            raise FileNotFoundError(f"{name}/{split}: {len(missing)} of {len(paths)} annotated images are missing, "
                                    f"e.g. {', '.join(str(m) for m in missing[:3])}. Expected layout: {spec.layout}")
    split_keys = sorted(chosen)
    index = {k: i for i, k in enumerate(split_keys)}
    return ImageListDataset(paths, [index[k] for k in keys], [str(names.get(k, k)) for k in split_keys], name, split,
                            transform, cache=cache, class_keys=split_keys, captions=_captions(name, root, paths))


def _captions(name: str, root: Path, paths: list[Path]) -> list[str] | None:
    """The caption of every image from the dataset folder's ``uml_mini_text.tsv`` (UML-Mini), else None."""
    base = root / DATASETS[name].folder
    path = base / "uml_mini_text.tsv"
    if not path.is_file():
        return None
    rows = [ln.split("\t") for ln in path.read_text().splitlines()[1:] if ln]
    by_path = {str(base / r[0]): r[3] for r in rows if len(r) == 4}
    missing = [p for p in paths if str(p) not in by_path]
    if missing:
        raise ValueError(f"{path} has no caption for {len(missing)} image(s), e.g. {missing[0]}; regenerate UML-Mini")
    return [by_path[str(p)] for p in paths]
