"""Checkpoints: atomic writes (temporary file + ``os.replace``), ``weights_only=True`` loading, rotation.

``latest.pt`` is rotated to ``previous.pt`` before a new one replaces it, so a checkpoint truncated by a crash
(or a full disk) never costs more than one epoch: loading it raises :class:`CheckpointError` naming the intact
previous file. Contents are plain tensors, numbers, strings, lists and dicts only (loadable with
``torch.load(..., weights_only=True)``).
"""
from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import numpy as np
import torch

__all__ = ["CheckpointError", "save_checkpoint", "load_checkpoint", "rng_state", "set_rng_state"]


class CheckpointError(RuntimeError):
    """A checkpoint file is missing, truncated or not a umlkit checkpoint."""


def save_checkpoint(state: dict, path: str | Path, keep_previous: bool = True) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        torch.save(state, tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
    except (OSError, RuntimeError) as err:   # a full disk or a file size limit: torch reports "enforce fail ..."
        tmp.unlink(missing_ok=True)
        kept = f"; {path} is still the last complete checkpoint" if path.exists() else ""
        reason = " ".join(str(err).split())[:160]
        raise CheckpointError(f"could not write the checkpoint {path} ({type(err).__name__}: {reason}); is the disk "
                              f"full or the folder not writable? The partial file was removed{kept}.") from err
    if keep_previous and path.exists():
        # hard-link the current file under a temporary name, then rename it: no copy of the bytes, and at every
        # moment both the old latest and (once renamed) previous exist
        prev = path.with_name("previous.pt") if path.name == "latest.pt" else path.with_suffix(".prev.pt")
        link = prev.with_name(f".{prev.name}.tmp")
        link.unlink(missing_ok=True)
        try:
            os.link(path, link)
        except OSError:  # file systems without hard links
            shutil.copy2(path, link)
        os.replace(link, prev)
    os.replace(tmp, path)
    return path


def load_checkpoint(path: str | Path, map_location="cpu") -> dict:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # truncated zip, wrong format, unsafe pickle ...
        prev = path.with_name("previous.pt")
        hint = (f"; the previous checkpoint {prev} is intact, resume from it with resume='{prev}' (CLI: "
                f"umlkit train ... --resume {prev})" if prev.is_file() and prev != path else "")
        lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
        if lines and lines[0].startswith("Weights only load failed"):   # torch then suggests weights_only=False
            raise CheckpointError(f"checkpoint {path} holds Python objects other than tensors and plain data, which "
                                  f"umlkit does not unpickle (it loads checkpoints with weights_only=True); it was not "
                                  f"written by umlkit's training{hint}") from None
        detail = lines[0][:300] if lines else ""
        raise CheckpointError(f"checkpoint {path} is truncated or corrupt ({type(err).__name__}: {detail}){hint}") \
            from None
    if not isinstance(state, dict) or "model" not in state:
        raise CheckpointError(f"{path} is not a umlkit checkpoint (no 'model' entry)")
    return state


def rng_state() -> dict:
    py = random.getstate()
    np_state = np.random.get_state()
    state = {"torch": torch.get_rng_state(), "python": [py[0], list(py[1]), py[2]],
             "numpy": [np_state[0], torch.from_numpy(np_state[1].astype(np.int64)), int(np_state[2]),
                       int(np_state[3]), float(np_state[4])]}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    n = state["numpy"]
    np.random.set_state((n[0], n[1].numpy().astype(np.uint32), n[2], n[3], n[4]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
