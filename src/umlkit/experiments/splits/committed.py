"""The committed class splits of the single-source benchmarks (CUB, Cars, SOP): which classes train and which test.

ooDML (Milbich, Roth et al., NeurIPS 2021) publishes, per source, a progression of train/test class splits of
increasing distribution shift (official ``datasplits/*.pkl``, numbered as its Table S1). The book stores them as
``configs/oodml/splits_<profile>.json``: the quick profile's are computed on UML-Mini (``umlkit.experiments.papers.
oodml.write_splits``), the full profile's imported from the published files (``import_published_splits``). Every
chapter that trains on one source reads its classes here - ooDML on every split, language guidance and VPTSP on the
default split - so that all of them train and test on exactly the same classes.

This module only reads; it takes every input as an argument and names no paper's tables.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

__all__ = ["SPLIT_SOURCES", "EPISODE_SOURCES", "splits_path", "episodes_path", "load_splits", "source_splits",
           "split_of", "default_split_id", "split_ids", "hold_out", "validation_classes", "default_classes",
           "check_split_ids", "published_supports"]


SPLIT_SOURCES = ("cub", "cars", "sop")   # the sources ooDML publishes splits of
EPISODE_SOURCES = ("cub", "cars")        # the sources of its few-shot tables (S7, S8), whose support sets it publishes


def splits_path(profile: str) -> Path:
    """The quick profile's committed ``configs/oodml/splits_quick.json``; the full profile's splits are the user's
    (imported from the published files of their data) and live beside that data: ``<UMLKIT_DATA>/oodml/
    splits_full.json``, never inside the installed source tree."""
    if profile == "full":
        from umlkit._paths import data_root
        return data_root() / "oodml" / "splits_full.json"
    from umlkit._paths import repo_folder
    return repo_folder("configs", "oodml", what="the ooDML class splits") / f"splits_{profile}.json"


def episodes_path() -> Path:
    """The full profile's published few-shot support sets, imported beside its splits:
    ``<UMLKIT_DATA>/oodml/episodes_full.json``."""
    from umlkit._paths import data_root
    return data_root() / "oodml" / "episodes_full.json"


def published_supports(source: str, split_id: int) -> dict[int, list[dict]] | None:
    """``{shots: [episode: {class name: [support file names]}]}`` that ooDML publishes for a split of ``source``
    (imported by ``umlkit oodml import-splits``), or None when none were imported."""
    path = episodes_path()
    if not path.is_file():
        return None
    found = json.loads(path.read_text()).get(source, {}).get(str(int(split_id)))
    return {int(k): v for k, v in found.items()} if found else None


@lru_cache(maxsize=2)
def load_splits(profile: str = "quick") -> dict:
    """The whole split file of ``profile`` (``{"sources": {source: {"splits": [...], ...}}, ...}``), read once."""
    path = splits_path(profile)
    if not path.is_file():
        hint = ("`make test-all` (it recomputes them) or "
                "umlkit.experiments.papers.oodml.split_making.write_splits('quick')"
                if profile == "quick" else "`umlkit oodml import-splits DATASPLITS_DIR` (the "
                "official datasplits/*.pkl)")
        raise FileNotFoundError(f"no ooDML splits at {path}; create them with {hint}")
    data = json.loads(path.read_text())
    check_split_ids(data, str(path))
    return data


def check_split_ids(splits: dict, where: str) -> None:
    """Each source's splits are numbered uniquely (a split id names one class list); ``where`` opens the error."""
    for source, entry in splits.get("sources", {}).items():
        ids = [s["id"] for s in entry.get("splits", [])]
        if len(set(ids)) != len(ids):
            raise ValueError(f"{where}: source {source!r} numbers two splits alike (ids {ids}); each id must be unique")


def source_splits(source: str, profile: str = "quick") -> dict:
    """One source's entry of the split file; an unknown source is an error naming the known ones."""
    sources = load_splits(profile)["sources"]
    if source not in sources:
        raise KeyError(f"no ooDML splits for source {source!r} in the {profile} profile; sources: {sorted(sources)} "
                       "(umlkit's source names, e.g. 'cub', not the paper's 'CUB')")
    return sources[source]


def split_of(source: str, split_id: int, profile: str = "quick") -> dict:
    """One split (``{id, kind, iteration, fid, default, train, test}``) of a source, numbered as Table S1."""
    splits = source_splits(source, profile)["splits"]
    found = [s for s in splits if s["id"] == int(split_id)]
    if not found:
        raise KeyError(f"{source} has splits {[s['id'] for s in splits]}, not {split_id}")
    return found[0]


def split_ids(source: str, profile: str = "quick") -> list[int]:
    return [s["id"] for s in source_splits(source, profile)["splits"]]


def default_split_id(source: str, profile: str = "quick") -> int:
    """The id of the source's default split (the dataset's conventional one); exactly one must be flagged."""
    found = [s["id"] for s in source_splits(source, profile)["splits"] if s["default"]]
    if len(found) != 1:
        raise ValueError(f"the {profile} splits of {source!r} flag {len(found)} default splits, expected exactly 1")
    return found[0]


def hold_out(train: list, val_fraction: float) -> tuple[list, list]:
    """The tuning protocol's split of a training class list: the first (1 - val_fraction) classes train, the last
    ``max(2, round(n x val_fraction))`` are the validation classes (no test class is ever seen)."""
    n_val = max(2, int(round(len(train) * float(val_fraction))))
    return list(train[:-n_val]), list(train[-n_val:])


def validation_classes(split: dict, val_fraction: float) -> tuple[list, list]:
    """(training, validation) classes of a split for the tuning protocol: the published class-level split
    (``split_train`` / ``split_val`` of the official files, imported as ``val_train`` / ``val``) where the split
    has one, as the official code trains and selects on it; else :func:`hold_out` with ``val_fraction``."""
    if split.get("val"):
        val = list(split["val"])
        fit = list(split.get("val_train") or [c for c in split["train"] if c not in set(val)])
        return fit, val
    return hold_out(list(split["train"]), val_fraction)


def default_classes(source: str, profile: str = "quick", val_fraction: float | None = None) -> dict:
    """``{"train": [...], "test": [...]}`` of the source's default split; with ``val_fraction``, the validation
    split of its training classes instead (:func:`validation_classes`: the published one where there is one)."""
    s = split_of(source, default_split_id(source, profile), profile)
    train, test = list(s["train"]), list(s["test"])
    if val_fraction is not None:
        train, test = validation_classes(s, val_fraction)
    return {"train": train, "test": test}
