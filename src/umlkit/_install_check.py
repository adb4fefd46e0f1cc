"""The installation checks itself (issue 62, item 5): after ``make install``, torch and torchvision must import and
agree. A CPU torch taken from one index beside a CUDA torchvision from another (or versions of two different
releases) imports, then fails at the first ``torchvision.ops`` call deep inside a run; this stops the install
instead, naming both versions and the fix.

The pairing rule is torchvision's release table: torch 2.N goes with torchvision 0.(N+15) (2.0/0.15 ... 2.14/0.29),
and the local build tags (``+cpu``, ``+cu130``) must name the same build. Written by hand: neither package exposes
the table, and pip's resolver does not see two indexes' local tags.

    python -m umlkit._install_check     (exit 0, or 1 with the message)
"""
from __future__ import annotations

import re
import sys

__all__ = ["mismatch", "main"]


def _parts(version: str) -> tuple[int, int, str]:
    m = re.match(r"^(\d+)\.(\d+)(?:\.\d+)?(?:[a-z0-9.]*)?(?:\+(.+))?$", version)
    if m is None:
        raise ValueError(f"not a version: {version!r}")
    return int(m.group(1)), int(m.group(2)), m.group(3) or ""


def mismatch(torch_version: str, torchvision_version: str, has_nms: bool = True) -> str | None:
    """Why this torch and torchvision do not belong together, or None when they do."""
    tmaj, tmin, tbuild = _parts(torch_version)
    vmaj, vmin, vbuild = _parts(torchvision_version)
    fix = _FIX
    if tmaj == 2 and (vmaj, vmin) != (0, tmin + 15):
        return (f"torch {torch_version} goes with torchvision 0.{tmin + 15}, but torchvision {torchvision_version} "
                f"is installed; {fix}")
    if tbuild != vbuild and (tbuild or vbuild):
        return (f"torch {torch_version} and torchvision {torchvision_version} are different builds "
                f"({tbuild or 'PyPI default'} against {vbuild or 'PyPI default'}); {fix}")
    if not has_nms:
        return (f"torchvision {torchvision_version} imports but has no compiled operators (torchvision.ops.nms); "
                f"{fix}")
    return None


_FIX = ("reinstall both from one index, e.g. `.venv/bin/pip install --force-reinstall torch torchvision "
        "--index-url https://download.pytorch.org/whl/cpu` (CPU) or without --index-url (PyPI's CUDA build)")


def _installed(name: str) -> str:
    """The installed distribution's version from its metadata (readable where importing it fails)."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def _import_failure(name: str, err: BaseException) -> str:
    """A few lines for a package that fails to import (any exception: a CPU torch beside a CUDA torchvision fails
    with ``RuntimeError: operator torchvision::nms does not exist``, not ImportError)."""
    first = (str(err).strip().splitlines() or [""])[0][:300]
    return (f"import {name} failed: {type(err).__name__}: {first}\n"
            f"  installed: torch {_installed('torch')}, torchvision {_installed('torchvision')}, "
            f"timm {_installed('timm')}\n  fix: {_FIX}")


def main() -> int:
    for name in ("torch", "torchvision", "timm"):
        try:
            __import__(name)
        except Exception as err:   # every failure is named, none as a raw traceback
            print(f"umlkit install check: {_import_failure(name, err)}", file=sys.stderr)
            return 1
    import torch
    import torchvision
    try:
        from torchvision.ops import nms
        boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0]])
        has_nms = nms(boxes, torch.tensor([1.0]), 0.5).tolist() == [0]
    except Exception:   # a compiled-operator failure is what the check exists to name
        has_nms = False
    why = mismatch(torch.__version__, torchvision.__version__, has_nms)
    if why:
        print(f"umlkit install check: {why}", file=sys.stderr)
        return 1
    print(f"umlkit install check: torch {torch.__version__} and torchvision {torchvision.__version__} agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
