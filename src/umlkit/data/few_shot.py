"""PUMA's few-shot training subsets: k images per training class, drawn here or read from the official files.

The official PUMA repository (``dataset.py``, README "Run Few-shot training") trains on k in {1, 2, 4, 8, 16}
images per training class. It draws them with ``random.sample`` (``random.choices`` when a class has fewer than k
images), caches each draw as ``few_shot/dataset_{DS}_shot_{k}.pkl`` and publishes those files. Each is a dict
``{ys, I, im_paths, ds_ID}`` whose ``im_paths`` are absolute on the authors' machine
(``/home/tjddus9597/Data/DML/...``).

``data.few_shot`` (:mod:`umlkit.train.config`) takes either form:

* an integer ``k``: the subset is drawn by :func:`umlkit.data.samplers.few_shot_indices` (deterministic in seed and
  k; UML-Mini and any dataset without published files);
* ``"published:k"``: the subset is read from ``<data root>/few_shot/dataset_{DS}_shot_{k}.pkl`` (copy the official
  ``few_shot/`` folder there). :func:`published_indices` maps each stored path onto the local dataset by the
  longest tail of folder and file names it shares with exactly one local image, so the authors' prefix never has
  to be known or typed; an image that matches nothing, or more than one image, is an error that names the file.

Two official-code details kept in mind: images drawn with replacement repeat, and the repeats are kept (the
official loader trains on them as drawn); the official Aircraft branch loads its pickle but never appends the data,
so the official Aircraft "few-shot" runs trained on the full set. Here every source uses its file.

Written by hand because no library reads these files. They are pickles: :func:`read_published` unpickles with a
restricted unpickler that builds only plain containers, strings, numbers and numpy arrays (the spirit of
``torch.load(weights_only=True)``), so a tampered file cannot run code.
"""
from __future__ import annotations

import io
import pickle
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = ["PUBLISHED_NAMES", "SHOTS", "parse_few_shot", "published_file", "read_published", "published_indices"]

# umlkit source name -> the DS of the official file names (the README's dataset_list)
PUBLISHED_NAMES = {"cub": "CUB", "cars": "Cars", "sop": "SOP", "inshop": "Inshop", "nabirds": "NAbird",
                   "dogs": "Dogs", "flowers": "Flowers", "aircraft": "Aircraft"}
SHOTS = (1, 2, 4, 8, 16)   # the shots the official files and README use
_PREFIX = "published:"
_TAIL = (4, 3, 2, 1)        # tail lengths tried, longest first


def parse_few_shot(value) -> tuple[int, bool] | None:
    """``data.few_shot`` as ``(k, published)``: None, an integer k >= 1, or the string ``"published:k"``."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value, False
    if isinstance(value, str) and value.startswith(_PREFIX):
        k = value[len(_PREFIX):]
        if k.isdigit() and int(k) >= 1:
            return int(k), True
    raise ValueError(f"config key data.few_shot = {value!r}: expected null, an integer >= 1 (k images per training "
                     "class, drawn), or 'published:K' (the official few_shot/dataset_{DS}_shot_{K}.pkl files under "
                     "the data root)")


def published_file(root: str | Path, source: str, shots: int) -> Path:
    """``<root>/few_shot/dataset_{DS}_shot_{k}.pkl`` of one source, checked to exist."""
    if source not in PUBLISHED_NAMES:
        raise ValueError(f"no published few-shot files for source {source!r}; they exist for {sorted(PUBLISHED_NAMES)}")
    path = Path(root) / "few_shot" / f"dataset_{PUBLISHED_NAMES[source]}_shot_{shots}.pkl"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: copy the official PUMA repository's few_shot/ folder (files "
                                f"dataset_{{DS}}_shot_{{k}}.pkl, k in {SHOTS}) into {Path(root)}, or set "
                                f"data.few_shot={shots} to draw the subsets instead")
    return path


class _PlainUnpickler(pickle.Unpickler):
    """Builds containers, strings, numbers and numpy arrays; refuses every other global (a crafted pickle cannot run
    code). Used for the official few-shot files and ooDML's split files."""
    _ALLOWED = {("builtins", n) for n in ("dict", "list", "tuple", "set", "str", "int", "float", "bool", "bytes")}
    _ALLOWED |= {("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "_reconstruct"),
                 ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
                 ("numpy._core.multiarray", "scalar"), ("_codecs", "encode")}

    def find_class(self, module, name):
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}: only containers, strings, numbers and "
                                         "numpy arrays are read from this file")
        return super().find_class(module, name)


def load_plain_pickle(path: Path, what: str):
    """The contents of a pickle of plain data (:class:`_PlainUnpickler`); an unreadable or foreign file raises a
    ValueError naming it and ``what`` it should be."""
    try:
        return _PlainUnpickler(io.BytesIO(Path(path).read_bytes())).load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError) as err:
        raise ValueError(f"{path}: not a readable {what} ({err or type(err).__name__})") from err


def read_published(path: str | Path) -> dict:
    """One official few-shot file as ``{"paths": [str], "labels": np.ndarray}`` (``im_paths`` and ``ys``)."""
    path = Path(path)
    data = load_plain_pickle(path, "PUMA few-shot file")
    if not isinstance(data, dict) or "im_paths" not in data or "ys" not in data:
        keys = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"{path}: expected a dict with im_paths and ys (the official {{ys, I, im_paths, ds_ID}}), "
                         f"got {keys}")
    paths = [str(p) for p in data["im_paths"]]
    labels = np.asarray(data["ys"], dtype=np.int64)
    if len(paths) != len(labels):
        raise ValueError(f"{path}: {len(paths)} im_paths but {len(labels)} ys")
    return {"paths": paths, "labels": labels}


def _parts(path: str) -> tuple[str, ...]:
    return tuple(p for p in str(path).replace("\\", "/").split("/") if p)


def published_indices(local_paths: Sequence[str | Path], file: str | Path,
                      held_out: Sequence[str | Path] = ()) -> np.ndarray:
    """Indices into ``local_paths`` (a dataset's training images) of the images the official file lists, in its
    order, repeats kept. Each stored path is matched by the longest tail (up to 4 folder/file names) that exactly
    one local image shares. ``held_out``: training images of classes set aside for validation; a stored path that
    matches one of them is dropped (the official files draw from every training class)."""
    every = [*local_paths, *held_out]
    table: dict[tuple[str, ...], list[int]] = {}
    for i, p in enumerate(every):
        parts = _parts(Path(p).as_posix())
        for n in _TAIL:
            if len(parts) >= n:
                table.setdefault(parts[-n:], []).append(i)
    out = []
    stored = read_published(file)["paths"]
    for p in stored:
        parts, hit = _parts(p), None
        for n in _TAIL:
            found = table.get(parts[-n:]) if len(parts) >= n else None
            if found and len(found) == 1:
                hit = found[0]
                break
            if found and n == 1:
                raise ValueError(f"{file}: {p!r} matches {len(found)} local training images by its tail "
                                 f"(e.g. {every[found[0]]}); the files cannot be told apart")
        if hit is None:
            raise ValueError(f"{file}: {p!r} matches no local training image (looked for its last folder and file "
                             f"names among {len(every)} images, e.g. {every[0] if every else '-'}); "
                             "is the data root the full dataset the file was drawn from?")
        if hit < len(local_paths):
            out.append(hit)
    return np.asarray(out, dtype=np.int64)
