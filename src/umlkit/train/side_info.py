"""Class-level side information a configuration refers to by file and sha256: class-name embeddings for language
guidance (Roth et al., CVPR'22: a DML loss + omega x the distillation of language-model similarities between the
classes of a batch), and class-split files.

A class-embedding file is an ``.npz`` holding ``class_names`` (n,) and ``embeddings`` (n, d) or (n, k, d) (k
pseudo-label embeddings per class for PLG). A configuration names it as ``{file: PATH, sha256: HEX}``; the engine
verifies the hash and takes the rows of the training classes in their label order, matched by name: a training
class ``"cub:001.Black_footed_Albatross"`` (``UnifiedDataset.class_names``) matches a row named exactly so, or,
when unambiguous, its name without the source. Written by hand: it is a file format of this project.
"""
from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from umlkit.results import file_sha256

__all__ = ["save_class_embeddings", "load_class_embeddings", "write_split_file", "read_split_file", "SideInfoError"]


class SideInfoError(ValueError):
    """A side-information file is missing, altered or does not cover the training classes."""


def _atomic_bytes(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _check_free(path: Path, overwrite: bool) -> None:
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists; pass overwrite=True to replace it (it is not replaced silently)")


def save_class_embeddings(path: str | Path, class_names: Sequence[str], embeddings, overwrite: bool = False) -> str:
    """Write ``class_names`` and their ``embeddings`` to ``path`` (.npz, atomically); returns the file's sha256."""
    path = Path(path)
    if path.suffix != ".npz":
        raise ValueError(f"class-embedding files are .npz, got {path}")
    emb = np.asarray(embeddings.detach().cpu() if isinstance(embeddings, torch.Tensor) else embeddings, np.float32)
    names = np.asarray(list(class_names), dtype=str)
    if emb.ndim not in (2, 3) or emb.shape[0] != len(names):
        raise ValueError(f"embeddings must be (n, d) or (n, k, d) with n = {len(names)} class names, got {emb.shape}")
    if len(set(names.tolist())) != len(names):
        raise ValueError("class names must be unique")
    _check_free(path, overwrite)
    _atomic_bytes(path, lambda tmp: np.savez(tmp, class_names=names, embeddings=emb))
    return file_sha256(path)


def _verified(ref: dict, where: str, base: Path | None = None) -> Path:
    if not isinstance(ref, dict) or "file" not in ref or "sha256" not in ref:
        raise SideInfoError(f"{where} must be {{file: PATH, sha256: HEX}}, got {ref!r}")
    path = Path(ref["file"]).expanduser()
    if not path.is_absolute() and base is not None:
        path = base / path
    if not path.is_file():
        raise SideInfoError(f"{where}: file {path} does not exist")
    actual = file_sha256(path)
    if actual != ref["sha256"]:
        raise SideInfoError(f"{where}: {path} has sha256 {actual}, but the configuration expects {ref['sha256']}; "
                            "the file changed since the configuration was written (regenerate it or update the hash)")
    return path


def load_class_embeddings(ref: dict, class_names: Sequence[str], where: str = "language_embeddings") -> torch.Tensor:
    """The verified file's rows for ``class_names`` (in that order) as a float tensor."""
    path = _verified(ref, where)
    with np.load(path) as data:
        names, emb = [str(n) for n in data["class_names"]], torch.from_numpy(np.array(data["embeddings"]))
    index = {n: i for i, n in enumerate(names)}
    bare: dict[str, list[int]] = {}
    for i, n in enumerate(names):
        bare.setdefault(n.split(":", 1)[-1], []).append(i)
    rows, missing = [], []
    for c in class_names:
        if c in index:
            rows.append(index[c])
        elif len(bare.get(c.split(":", 1)[-1], [])) == 1:
            rows.append(bare[c.split(":", 1)[-1]][0])
        else:
            missing.append(c)
    if missing:
        raise SideInfoError(f"{where}: {path} has no row for {len(missing)} training class(es), e.g. {missing[:3]}; "
                            f"its names look like {names[:3]}")
    return emb[rows].float()


def write_split_file(path: str | Path, splits: dict, overwrite: bool = False) -> str:
    """Write ``{train: [...], test: [...], val: [...]}`` class names as JSON (atomically); returns its sha256."""
    path = Path(path)
    _check_free(path, overwrite)
    _atomic_bytes(path, lambda tmp: Path(tmp).write_text(json.dumps(splits, indent=1, sort_keys=True)))
    return file_sha256(path)


def read_split_file(ref: dict, where: str = "data.splits") -> dict:
    path = _verified(ref, where)
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise SideInfoError(f"{where}: {path} is not valid JSON ({err})") from err
