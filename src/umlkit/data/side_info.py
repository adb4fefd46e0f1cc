"""Class-level side information a configuration refers to by file and sha256: class-name embeddings for language
guidance (Roth et al., CVPR'22: a DML loss + omega x the distillation of language-model similarities between the
classes of a batch), and class-split files.

A class-embedding file is an ``.npz`` holding ``class_names`` (n,) and ``embeddings`` (n, d) or (n, k, d) float32
(k pseudo-label embeddings per class for PLG). A configuration names it as ``{file: PATH, sha256: HEX}``
(``objective.N.options.language_embeddings``); the engine verifies the hash and takes the rows of the training
classes in their label order, matched by name: a training class ``"cub:001.Black_footed_Albatross"``
(:meth:`umlkit.data.UnifiedDataset.class_names`: the sources' class names, concatenated in the order of
``data.datasets``, which is the global label order) matches a row named exactly so, or, when unambiguous, its
name without the source. A split file is a JSON mapping ``{train: [class keys], test: [...], val: [...]}`` for
one source (``data.splits.<source>: {file, sha256}``). Relative paths in a YAML configuration are resolved
against the YAML file's folder (:func:`umlkit.train.config.load_config`), otherwise against the current directory,
then, for a path ``results/...``, against the results folder (``UMLKIT_RESULTS``), then against the repository
root (record keys hold such paths, e.g. ``results/quick/language/...``, so that a key is the same on every
machine; the sha256 is the file's identity).

Files are written atomically (temporary file + rename) and never replace an existing file with different content
unless ``overwrite=True``; the ``.npz`` is written with fixed zip timestamps, so the same names and embeddings
always give the same bytes and the same sha256. Written by hand: it is a file format of this project.
"""
from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from umlkit.results import atomic_write, file_sha256

__all__ = ["save_class_embeddings", "load_class_embeddings", "save_sample_embeddings", "load_sample_embeddings",
           "write_split_file", "read_split_file", "SideInfoError",
           "file_sha256"]


class SideInfoError(ValueError):
    """A side-information file is missing, altered or does not cover the training classes."""


def _write_once(path: Path, data: bytes, overwrite: bool) -> str:
    """Write ``data`` to ``path`` atomically; an existing file with other content needs ``overwrite``."""
    if path.exists() and not overwrite:
        if path.read_bytes() == data:
            return hashlib.sha256(data).hexdigest()
        raise FileExistsError(f"{path} exists with different content; pass overwrite=True to replace it (it is "
                              "not replaced silently: configurations refer to it by its sha256)")
    atomic_write(path, data)
    return hashlib.sha256(data).hexdigest()


def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """An ``.npz`` (readable by ``np.load``) with fixed member timestamps: equal arrays give equal bytes."""
    import io
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, arr in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            with zf.open(info, "w") as fh:
                np.lib.format.write_array(fh, np.ascontiguousarray(arr), allow_pickle=False)
    return buf.getvalue()


def save_class_embeddings(path: str | Path, class_names: Sequence[str], embeddings, overwrite: bool = False) -> str:
    """Write ``class_names`` and their ``embeddings`` ((n, d) or (n, k, d)) to ``path`` (.npz, atomically);
    returns the file's sha256 (the value a configuration's ``{file, sha256}`` reference holds)."""
    path = Path(path)
    if path.suffix != ".npz":
        raise ValueError(f"class-embedding files are .npz, got {path}")
    emb = np.asarray(embeddings.detach().cpu() if isinstance(embeddings, torch.Tensor) else embeddings, np.float32)
    names = np.asarray([str(n) for n in class_names], dtype=str)
    if emb.ndim not in (2, 3) or emb.shape[0] != len(names):
        raise ValueError(f"embeddings must be (n, d) or (n, k, d) with n = {len(names)} class names, got {emb.shape}")
    if len(set(names.tolist())) != len(names):
        dup = sorted({n for n in names.tolist() if names.tolist().count(n) > 1})
        raise ValueError(f"class names must be unique; repeated: {dup[:5]}")
    return _write_once(path, _npz_bytes({"class_names": names, "embeddings": emb}), overwrite)


def _verified(ref, where: str) -> Path:
    if not isinstance(ref, dict) or "file" not in ref or "sha256" not in ref or set(ref) - {"file", "sha256"}:
        raise SideInfoError(f"{where} must be {{file: PATH, sha256: HEX}}, got {ref!r}")
    path = Path(str(ref["file"])).expanduser()
    if not path.is_absolute() and not path.is_file():
        from umlkit._paths import repo_root, results_root
        candidates = [results_root() / Path(*path.parts[1:])] if path.parts and path.parts[0] == "results" else []
        root = repo_root()
        if root is not None:
            candidates.append(root / path)
        # a record key's path "results/<profile>/..." means the results folder (UMLKIT_RESULTS), then the checkout's
        path = next((c for c in candidates if c.is_file()), path)
    if not path.is_file():
        raise SideInfoError(f"{where}: file {path} does not exist" + ("" if path.is_absolute() else
                            f" (relative to the current directory {Path.cwd()}, the results folder or the "
                            f"repository root)"))
    actual = file_sha256(path)
    if actual != str(ref["sha256"]).lower():
        raise SideInfoError(f"{where}: {path} has sha256 {actual}, but the configuration expects {ref['sha256']}; "
                            "the file changed since the configuration was written (regenerate it or update the hash)")
    return path


def load_class_embeddings(ref: dict, class_names: Sequence[str], where: str = "language_embeddings",
                          class_keys: Sequence[str] | None = None) -> torch.Tensor:
    """The verified file's rows for ``class_names`` (in that order) as a float32 tensor (n, d) or (n, k, d). With
    ``class_keys`` (``"<source>#<key>"``, :meth:`umlkit.data.UnifiedDataset.class_keys`), a row named by a class's
    key is used first: files for sources whose class names repeat (SOP's super-categories) name rows by key."""
    path = _verified(ref, where)
    try:
        with np.load(path, allow_pickle=False) as data:
            names, emb = [str(n) for n in data["class_names"]], torch.from_numpy(np.array(data["embeddings"]))
    except (KeyError, ValueError, OSError, zipfile.BadZipFile) as err:
        raise SideInfoError(f"{where}: {path} is not a class-embedding file (.npz with class_names and embeddings):"
                            f" {err}") from err
    index = {n: i for i, n in enumerate(names)}
    bare: dict[str, list[int]] = {}
    for i, n in enumerate(names):
        bare.setdefault(n.split(":", 1)[-1], []).append(i)
    rows, missing = [], []
    keys = list(class_keys) if class_keys is not None else [None] * len(class_names)
    if len(keys) != len(class_names):
        raise ValueError(f"{where}: {len(class_keys)} class keys for {len(class_names)} class names")
    for c, key in zip(class_names, keys):
        if key is not None and key in index:
            rows.append(index[key])
        elif c in index:
            rows.append(index[c])
        elif len(bare.get(c.split(":", 1)[-1], [])) == 1:
            rows.append(bare[c.split(":", 1)[-1]][0])
        else:
            missing.append(c)
    if missing:
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise SideInfoError(f"{where}: {path} has no row for {len(missing)} training class(es): {missing[:10]}{more};"
                            f" its names look like {names[:3]}")
    return _finite(emb[rows].float(), path, where, list(class_names))


def save_sample_embeddings(path: str | Path, sample_keys: Sequence[str], vocabulary, slots,
                           overwrite: bool = False) -> str:
    """Per-image language rows, factored: ``vocabulary`` (V, d) embeddings of distinct texts (captions, classifier
    class names) and ``slots`` (n, k) indices into it, one row per image named by ``sample_keys``
    (:meth:`umlkit.data.UnifiedDataset.sample_keys`). Image i's rows are ``vocabulary[slots[i]]``; stored this way
    because many images share a text. Writes ``path`` (.npz, atomically); returns its sha256."""
    path = Path(path)
    if path.suffix != ".npz":
        raise ValueError(f"sample-embedding files are .npz, got {path}")
    vocab = np.asarray(vocabulary, np.float32)
    slots = np.asarray(slots)
    keys = np.asarray([str(k) for k in sample_keys], dtype=str)
    if slots.ndim == 1:
        slots = slots[:, None]
    if vocab.ndim != 2 or slots.ndim != 2 or slots.shape[0] != len(keys):
        raise ValueError(f"need vocabulary (V, d) and slots (n, k) with n = {len(keys)} keys; got {vocab.shape} and "
                         f"{slots.shape}")
    if slots.size and (slots.min() < 0 or slots.max() >= len(vocab)):
        raise ValueError(f"slots must index the {len(vocab)} vocabulary rows, got values {slots.min()}..{slots.max()}")
    if len(set(keys.tolist())) != len(keys):
        raise ValueError("sample keys must be unique")
    return _write_once(path, _npz_bytes({"sample_keys": keys, "vocabulary": vocab,
                                         "slots": slots.astype(np.int32)}), overwrite)


def load_sample_embeddings(ref: dict, sample_keys: Sequence[str], where: str = "language_embeddings") -> torch.Tensor:
    """The verified per-image file's rows for ``sample_keys`` (in that order) as a float32 tensor (n, k, d)."""
    path = _verified(ref, where)
    try:
        with np.load(path, allow_pickle=False) as data:
            keys, vocab, slots = ([str(k) for k in data["sample_keys"]], np.array(data["vocabulary"]),
                                  np.array(data["slots"]))
    except (KeyError, ValueError, OSError, zipfile.BadZipFile) as err:
        raise SideInfoError(f"{where}: {path} is not a per-image embedding file (.npz with sample_keys, vocabulary "
                            f"and slots): {err}") from err
    index = {k: i for i, k in enumerate(keys)}
    missing = [k for k in sample_keys if k not in index]
    if missing:
        raise SideInfoError(f"{where}: {path} has no row for {len(missing)} training image(s), e.g. {missing[:3]}; "
                            f"its keys look like {keys[:3]}")
    rows = slots[[index[k] for k in sample_keys]]
    return _finite(torch.from_numpy(vocab[rows]).float(), path, where, list(sample_keys))


def _finite(emb: torch.Tensor, path: Path, where: str, names: list[str]) -> torch.Tensor:
    """``emb`` (one row per name), refused before any training when it has no width or a NaN/inf in a row it serves
    (such a file once failed epochs later as "the loss became nan", naming no file)."""
    if emb.numel() == 0 or emb.shape[-1] == 0:
        raise SideInfoError(f"{where}: {path} holds embeddings of shape {tuple(emb.shape)}, with no width; "
                            f"recompute the file")
    bad = [n for n, ok in zip(names, torch.isfinite(emb.reshape(len(emb), -1)).all(1).tolist()) if not ok]
    if bad:
        raise SideInfoError(f"{where}: {path} has NaN or infinite values in the rows of {len(bad)} of the "
                            f"{len(names)} names it serves, e.g. {bad[:3]}; recompute the file")
    return emb


def write_split_file(path: str | Path, splits: dict, overwrite: bool = False) -> str:
    """Write one source's ``{train: [class keys], test: [...], val: [...]}`` as JSON (atomically); returns its
    sha256."""
    data = (json.dumps(splits, indent=1, sort_keys=True) + "\n").encode()
    return _write_once(Path(path), data, overwrite)


def read_split_file(ref: dict, where: str = "data.splits") -> dict:
    path = _verified(ref, where)
    try:
        out = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise SideInfoError(f"{where}: {path} is not valid JSON ({err})") from err
    if not isinstance(out, dict):
        raise SideInfoError(f"{where}: {path} must hold a mapping {{train: [...], test: [...], val: [...]}}")
    return out
