"""Train / eval transforms per paper, chosen by name (torchvision; sizes and normalisation from the backbone).

| name | train | eval | source |
|---|---|---|---|
| ``puma`` | RandomResizedCrop(S, scale (0.2, 1), bicubic) + flip | Resize(S/0.875, bicubic) + CenterCrop(S) | PUMA ``utils.MultiTransforms`` |
| ``hyp`` | as ``puma`` | as ``puma`` | Hyp-ViT |
| ``vptsp`` | RandomResizedCrop(S) (scale 0.08-1, bilinear) + flip | Resize(S/0.875) + CenterCrop(S) | VPTSP ``augmentation: base`` |
| ``roth`` | as ``vptsp`` | as ``vptsp`` | Roth et al. 2020 (ooDML, language guidance) |
| ``mini`` | +-2 px translation (edge padding), **no flip** | identity at S | UML-Mini study round 2 (flips swap E/W disc classes) |

S = the backbone's input size (224 for ViT-S/16, 32 for the tiny ViT); mean/std from its pretrained config
(0.5/0.5 for the AugReg ViTs PUMA and VPTSP use).
"""
from __future__ import annotations

from torchvision import transforms as T

__all__ = ["TRANSFORMS", "build_transforms"]

TRANSFORMS = ("puma", "hyp", "vptsp", "roth", "mini")
_INTERP = {"bicubic": T.InterpolationMode.BICUBIC, "bilinear": T.InterpolationMode.BILINEAR}


def build_transforms(name: str, data_config: dict | None = None, train: bool = True):
    """A torchvision transform mapping a PIL image to a normalised (3, S, S) float tensor."""
    if name not in TRANSFORMS:
        raise ValueError(f"unknown transform {name!r}; choose one of {TRANSFORMS}")
    cfg = data_config or {}
    size = int(cfg.get("input_size", (3, 224, 224))[-1])
    mean, std = cfg.get("mean", (0.5, 0.5, 0.5)), cfg.get("std", (0.5, 0.5, 0.5))
    tail = [T.ToTensor(), T.Normalize(mean, std)]
    resize = int(round(size / 0.875))
    if name in ("puma", "hyp"):
        interp = _INTERP["bicubic"]
        if train:
            return T.Compose([T.RandomResizedCrop(size, scale=(0.2, 1.0), interpolation=interp),
                              T.RandomHorizontalFlip(), *tail])
        return T.Compose([T.Resize(resize, interpolation=interp), T.CenterCrop(size), *tail])
    if name in ("vptsp", "roth"):
        if train:
            return T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(), *tail])
        return T.Compose([T.Resize(resize), T.CenterCrop(size), *tail])
    # mini
    base = [T.Resize((size, size))] if size != 32 else []
    if train:
        return T.Compose([*base, T.RandomCrop(size, padding=2, padding_mode="edge"), *tail])
    return T.Compose([*base, *tail])
