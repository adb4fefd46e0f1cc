"""Decoding any image Pillow reads to 8-bit RGB, the one form every loader hands on.

``Image.convert("RGB")`` clips wider integer modes instead of scaling them: a 16-bit greyscale PNG (``I;16``, or
``I`` in older Pillow) of value 30000 came out pure white. :func:`to_rgb` follows each mode's own range:

- ``RGB``, ``L``, ``1``, ``RGBX``, ``YCbCr``, ``HSV``, ``CMYK``: Pillow's own conversion (8-bit RGB and L unchanged);
- ``I;16``, ``I;16L``, ``I;16B``, ``I;16N``: grey ``round(v * 255 / 65535)``;
- ``I`` (32-bit signed): grey ``round(v * 255 / 65535)`` when read from a PNG or from a TIFF of at most 16 bits per
  sample (``round(v * 255 / (2**b - 1))`` for b bits), else ``round(v * 255 / (2**31 - 1))``; negative values black;
- ``F`` (32-bit float): intensities in [0, 1], grey ``round(v * 255)``, clipped;
- ``P``: its palette colours; a palette with a transparent index is composited like ``PA``;
- ``LA``, ``RGBA``, ``PA``, ``La``, ``RGBa``: composited over a white background (``La`` and ``RGBa`` hold
  premultiplied colour);
- ``LAB``: CIE L*a*b* converted to sRGB (``ImageCms``; Pillow's plain conversion drops a* and b*).

:func:`open_rgb` opens a file and decodes it, naming the file when it cannot.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

__all__ = ["open_rgb", "to_rgb"]

_INT16 = ("I;16", "I;16L", "I;16B", "I;16N")
_ALPHA = ("LA", "RGBA", "PA", "La", "RGBa")


def _integer_range(image: Image.Image) -> int:
    """The full-scale value of an integer image: 65535 for 16-bit data, else the signed 32-bit maximum."""
    if image.mode in _INT16 or image.format == "PNG":    # PNG stores at most 16 bits per sample
        return 65535
    bits = getattr(image, "tag_v2", {}).get(258) if image.format == "TIFF" else None   # TIFF BitsPerSample
    bits = bits[0] if isinstance(bits, tuple) and bits else bits
    if isinstance(bits, int) and 0 < bits <= 16:
        return 2 ** bits - 1
    return 2 ** 31 - 1


def _grey(values: np.ndarray, full_scale: float) -> Image.Image:
    scaled = np.rint(np.clip(values.astype(np.float64), 0, full_scale) * (255.0 / full_scale))
    return Image.fromarray(scaled.astype(np.uint8), mode="L").convert("RGB")


def _over_white(image: Image.Image) -> Image.Image:
    """An image with alpha composited over white: ``c * a + 255 * (1 - a)`` (premultiplied: ``c + 255 * (1 - a)``)."""
    premultiplied = image.mode in ("La", "RGBa")
    if image.mode == "PA":
        image = image.convert("RGBA")
    arr = np.asarray(image, dtype=np.float64)
    colour, alpha = arr[..., :-1], arr[..., -1:] / 255.0
    out = colour + 255.0 * (1.0 - alpha) if premultiplied else colour * alpha + 255.0 * (1.0 - alpha)
    out = np.rint(np.clip(out, 0, 255)).astype(np.uint8)
    if out.shape[-1] == 1:
        return Image.fromarray(out[..., 0], mode="L").convert("RGB")
    return Image.fromarray(out, mode="RGB")


def _lab_to_rgb(image: Image.Image) -> Image.Image:
    from PIL import ImageCms
    transform = ImageCms.buildTransformFromOpenProfiles(ImageCms.createProfile("LAB"),
                                                        ImageCms.createProfile("sRGB"), "LAB", "RGB")
    return ImageCms.applyTransform(image, transform)


def to_rgb(image: Image.Image) -> Image.Image:
    """``image`` as an 8-bit RGB image, each mode read at its own range (the list in the module docstring)."""
    mode = image.mode
    if mode in _INT16 or mode == "I":
        return _grey(np.asarray(image), _integer_range(image))
    if mode == "F":
        return _grey(np.asarray(image), 1.0)
    if mode == "P" and ("transparency" in image.info or image.palette is not None and image.palette.mode == "RGBA"):
        return _over_white(image.convert("RGBA"))
    if mode in _ALPHA:
        return _over_white(image)
    if mode == "LAB":
        return _lab_to_rgb(image)
    try:
        return image.convert("RGB")
    except ValueError as err:
        raise OSError(f"cannot decode image mode {mode!r} to RGB ({err})") from err


def open_rgb(path: str | Path) -> Image.Image:
    """The image file at ``path`` decoded to 8-bit RGB (:func:`to_rgb`); an unreadable file raises ``OSError``
    naming it."""
    try:
        with Image.open(path) as im:
            return to_rgb(im)
    except (OSError, SyntaxError, ValueError) as err:
        raise OSError(f"cannot read image {path}: {err}") from err
