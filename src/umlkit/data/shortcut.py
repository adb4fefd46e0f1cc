"""A shortcut in the training images: a mark that predicts the class in training and is absent at test time.

The regime map's second edition (``configs/regime/edition2.yaml``, axis ``shortcut``) asks whether full
fine-tuning, free to move every weight, learns a feature that does not define the class when it predicts the class
in the training images, and whether a frozen backbone with small modules (PUMA), a linear probe or LP-FT (Kumar et
al., ICLR 2022, "Fine-Tuning can Distort Pretrained Features and Underperform Out-of-Distribution") has less room
to. The mark follows the shortcut-learning setups of Geirhos et al. (Nature Machine Intelligence 2020): a small
square in a fixed corner whose colour is a function of the class label, painted on the training images only;
validation and test images are left as they are, so a model that relies on the mark loses it at test time.

Written by hand: painting a label-dependent patch before augmentation is a few lines over PIL, and the wrapper must
keep :class:`umlkit.data.unified.UnifiedDataset`'s labels, sources and query/gallery masks, which the samplers and
the engine read.
"""
from __future__ import annotations

import colorsys

import numpy as np
from PIL import Image

from umlkit.data.unified import UnifiedDataset

__all__ = ["mark_colour", "paint_mark", "ShortcutDataset", "check_shortcut"]

_GOLDEN = 0.6180339887498949


def mark_colour(label: int) -> tuple[int, int, int]:
    """The mark's RGB colour of class ``label``: hue = label x the golden ratio (mod 1), full saturation, value
    0.95 for even labels and 0.55 for odd ones, so that neighbouring labels differ in hue and brightness."""
    h = (int(label) * _GOLDEN) % 1.0
    r, g, b = colorsys.hsv_to_rgb(h, 1.0, 0.95 if int(label) % 2 == 0 else 0.55)
    return int(round(r * 255)), int(round(g * 255)), int(round(b * 255))


def paint_mark(image: Image.Image, label: int, size: int) -> Image.Image:
    """A copy of ``image`` with a ``size`` x ``size`` square of :func:`mark_colour` in its top-left corner."""
    out = np.array(image.convert("RGB"))
    out[:size, :size] = mark_colour(label)
    return Image.fromarray(out)


def check_shortcut(spec) -> dict:
    """``data.shortcut`` as ``{"size": int >= 1, "p": fraction in (0, 1]}``; a clear error otherwise."""
    if not isinstance(spec, dict) or set(spec) - {"size", "p"}:
        raise ValueError(f"data.shortcut = {spec!r}: expected {{size: pixels, p: fraction of the training images}}")
    size, p = spec.get("size", 4), spec.get("p", 1.0)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"data.shortcut.size = {size!r}: expected a whole number of pixels >= 1")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1:
        raise ValueError(f"data.shortcut.p = {p!r}: expected a fraction in (0, 1]")
    return {"size": size, "p": float(p)}


class ShortcutDataset(UnifiedDataset):
    """``base`` with :func:`paint_mark` applied to a fraction ``p`` of its images (drawn once with ``seed``), by
    their unified class label, before the transform. Every attribute the samplers and the engine read (labels,
    sources, query and gallery masks, class keys) is ``base``'s."""

    def __init__(self, base: UnifiedDataset, size: int = 4, p: float = 1.0, seed: int = 0):
        self.__dict__.update(base.__dict__)
        spec = check_shortcut({"size": size, "p": p})
        self.mark_size = spec["size"]
        self.marked = (np.ones(len(base), bool) if spec["p"] == 1.0
                       else np.random.default_rng(seed).random(len(base)) < spec["p"])

    def __getitem__(self, k: int):
        i, j = self._index[k]
        d = self.datasets[i]
        tf = self.transform if self.transform is not None else d.transform
        img = d.image(j)
        if self.marked[k]:
            img = paint_mark(img, int(self.labels[k]), self.mark_size)
        return (tf(img) if tf is not None else img), int(self.labels[k])

    def __repr__(self) -> str:
        return f"Shortcut{super().__repr__()} (mark {self.mark_size} px on {int(self.marked.sum())} images)"
