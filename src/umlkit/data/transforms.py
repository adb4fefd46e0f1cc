"""Train / eval transforms per paper, chosen by name (torchvision; sizes and normalisation from the backbone).

| name | train | eval | source |
|---|---|---|---|
| ``puma`` | RandomResizedCrop(S, scale (0.2, 1), bicubic) + flip | Resize(S/0.875, bicubic) + CenterCrop(S) | PUMA |
| ``hyp`` | as ``puma`` | as ``puma`` | Hyp-ViT |
| ``vptsp`` | RandomResizedCrop(S) (scale 0.08-1, bilinear) + flip | Resize(S/0.875) + CenterCrop(S) | VPTSP |
| ``roth`` | as ``vptsp`` | as ``vptsp`` | Roth et al. 2020 (ooDML, language guidance) |
| ``mini`` | +-2 px translation (edge padding), **no flip** | identity at S | UML-Mini study round 2 |

Sources in detail: PUMA ``utils.MultiTransforms``, VPTSP ``augmentation: base``; ``mini`` has no flip because flips
swap the E/W disc classes.

S = the backbone's input size (224 for ViT-S/16, 32 for the tiny ViT); mean/std from its pretrained config
(0.5/0.5 for the AugReg ViTs PUMA and VPTSP use).
"""
from __future__ import annotations

import torch
from torchvision import transforms as T
from torchvision.transforms import functional as F

__all__ = ["TRANSFORMS", "build_transforms", "EdgeShift"]

TRANSFORMS = ("puma", "hyp", "vptsp", "roth", "mini")
_INTERP = {"bicubic": T.InterpolationMode.BICUBIC, "bilinear": T.InterpolationMode.BILINEAR}


def build_transforms(name: str, data_config: dict | None = None, train: bool = True):
    """A torchvision transform mapping a PIL image to a normalised (3, S, S) float tensor. Evaluation transforms
    (``train=False``) draw nothing at random and say so (``deterministic = True``): cached datasets keep their
    output (:meth:`umlkit.data.ImageListDataset.transformed`)."""
    tf = _build(name, data_config, train)
    tf.deterministic = not train
    return tf


def _build(name: str, data_config: dict | None, train: bool):
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
        return T.Compose([*base, T.ToTensor(), EdgeShift(size, 2), T.Normalize(mean, std)])
    return T.Compose([*base, *tail])


class EdgeShift(torch.nn.Module):
    """``RandomCrop(size, padding=p, padding_mode="edge")`` on the tensor after ``ToTensor`` rather than on the PIL
    image: the same random draws (torchvision's ``RandomCrop.get_params`` on the padded image) and the same pixels
    (padding and cropping copy values; ``ToTensor`` maps each byte alone), without PIL's pad round trip through
    numpy, which cost a third of the ``mini`` transform's time."""

    def __init__(self, size: int, padding: int):
        super().__init__()
        self.size, self.padding = int(size), int(padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        padded = F.pad(x, [self.padding], padding_mode="edge")
        i, j, h, w = T.RandomCrop.get_params(padded, (self.size, self.size))
        return padded[..., i:i + h, j:j + w]

    def __repr__(self) -> str:
        return f"EdgeShift(size={self.size}, padding={self.padding})"
