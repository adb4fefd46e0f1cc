"""``umlkit data check``: which datasets are present under a root, with counts, and how to get the missing ones.

It reads each dataset through :func:`umlkit.data.load_dataset`, so its indexes pass the same checks as a training
run's (``data.index_check``: an id listed twice, a label outside the class list) and ``--verify`` decodes images as
the loaders do (``data.decode.to_rgb``)."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from PIL import Image

from umlkit.data.datasets import DATASETS, MINI_MANIFEST, DatasetCountError, ImageListDataset, load_dataset
from umlkit.data.decode import to_rgb

__all__ = ["check_datasets", "verify_images", "CorruptImagesError"]


class CorruptImagesError(OSError):
    """Some images of a dataset cannot be decoded (the message lists them)."""


def verify_images(dataset: ImageListDataset, on_error: str = "report") -> list[tuple[Path, str]]:
    """Decode every image of ``dataset``; return ``[(path, error)]`` for the unreadable ones.

    ``on_error="fail"`` raises :class:`CorruptImagesError` listing them; ``"skip"`` also removes them from the
    dataset (and reports them); ``"report"`` only reports. Nothing is ever dropped silently.
    """
    if on_error not in ("report", "skip", "fail"):
        raise ValueError(f"on_error must be 'report', 'skip' or 'fail', got {on_error!r}")
    bad = []
    for p in dataset.paths:
        try:
            with Image.open(p) as im:
                to_rgb(im).load()   # the decoding the loaders use (data.decode), every mode at its own range
        except Exception as err:  # PIL raises many types for truncated/corrupt files
            bad.append((p, f"{type(err).__name__}: {err}"))
    if bad and on_error == "fail":
        listing = "\n".join(f"  {p}: {e}" for p, e in bad[:20])
        raise CorruptImagesError(f"{dataset.name}/{dataset.split}: {len(bad)} unreadable image(s):\n{listing}")
    if bad and on_error == "skip":
        unreadable = {p for p, _ in bad}
        keep = [i for i, p in enumerate(dataset.paths) if p not in unreadable]
        dataset.paths = [dataset.paths[i] for i in keep]
        dataset.labels = dataset.labels[keep]
    return bad


def _mini_manifest(root: Path) -> dict | None:
    """The UML-Mini manifest of ``root`` when it holds a readable one."""
    try:
        manifest = json.loads((root / MINI_MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


def check_datasets(root: str | Path, names=None, verify: bool = False, on_error: str = "report",
                   counts: bool = True) -> pd.DataFrame:
    """One row per dataset: status (found / missing / count mismatch / files missing / unreadable images),
    images and classes per split, and for problems where to obtain the data and the layout expected. ``counts=False``
    accepts a deliberate subset: its counts are not compared with the real dataset's (``--no-count-check``)."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"data root {root} does not exist or is not a folder; pass --root DIR (the folder "
                                f"that holds cub200/, cars196/, ...) or set UMLKIT_DATA")
    names = [n.strip() for n in names] if names else None
    unknown = [n for n in (names or []) if n not in DATASETS]
    if unknown:
        raise ValueError(f"unknown dataset(s) {unknown}; expected some of {list(DATASETS)}")
    manifest = _mini_manifest(root)
    if names is None and manifest is not None:   # a UML-Mini tree: its own sources (it has no iNat, for one)
        names = [n for n in DATASETS if n in manifest.get("datasets", {})] or None
    rows = []
    for name in names or DATASETS:
        spec = DATASETS[name]
        row = {"dataset": name, "title": spec.title, "status": "found", "images": "", "classes": "", "detail": ""}
        try:
            parts = {s: load_dataset(name, root, s, **({} if counts else {"expected": None})) for s in spec.splits}
            row["images"] = " / ".join(f"{s} {len(d)}" for s, d in parts.items())
            row["classes"] = " / ".join(f"{s} {d.num_classes}" for s, d in parts.items())
            if verify:
                bad = [b for d in parts.values() for b in verify_images(d, on_error)]
                if bad:
                    row["status"] = "unreadable images"
                    row["detail"] = "; ".join(f"{p}: {e}" for p, e in bad[:5]) + (" ..." if len(bad) > 5 else "")
        except FileNotFoundError as err:
            missing_folder = not (root / spec.folder).exists()
            row["status"] = "missing" if missing_folder else "files missing"
            row["detail"] = (f"get it from {spec.url}; expected layout {spec.layout}" if missing_folder else str(err))
        except DatasetCountError as err:
            row["status"] = "count mismatch"
            row["detail"] = str(err)
            if manifest is not None and not manifest.get("complete", True):
                row["detail"] = (f"{root} is a UML-Mini tree whose generation did not finish ({MINI_MANIFEST} says "
                                 f"complete: false); run `umlkit data make-mini --root {root}` again")
        except ValueError as err:   # a damaged annotation file (named in the message): that dataset only
            row["status"] = "unreadable annotations"
            row["detail"] = str(err)
        except Exception as err:   # anything else a loader raises on a malformed tree: this dataset's row, not all
            row["status"] = "unreadable annotations"
            row["detail"] = (f"{type(err).__name__}: {err} while reading {root / spec.folder}; expected layout "
                             f"{spec.layout}")
        rows.append(row)
    return pd.DataFrame(rows).set_index("dataset")
