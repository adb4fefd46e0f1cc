"""Images of every mode Pillow reads decode to the right 8-bit RGB pixels, in the loaders and in
``umlkit data check --verify-images``; hand-made pixels written with numpy and PIL."""
import numpy as np
import pytest
from PIL import Image

from tests.data.test_loaders import make_cub
from umlkit.data import check_datasets, load_dataset, to_rgb, verify_images
from umlkit.data.decode import open_rgb


def _png(tmp_path, image, name="x.png", **kw):
    path = tmp_path / name
    image.save(path, **kw)
    return path


def _rgb(path):
    out = np.asarray(open_rgb(path))
    assert out.dtype == np.uint8 and out.shape[-1] == 3
    return out


def test_a_16_bit_greyscale_png_is_scaled_not_white(tmp_path):
    values = np.array([[0, 257, 30000], [32768, 65280, 65535]], dtype=np.uint16)
    path = _png(tmp_path, Image.fromarray(values))
    with Image.open(path) as im:
        assert im.mode in ("I;16", "I") and np.asarray(im.convert("RGB"))[0, 2, 0] == 255   # Pillow clips
    expected = np.rint(values * 255.0 / 65535).astype(np.uint8)            # 30000 -> 117
    assert expected[0, 2] == 117
    out = _rgb(path)
    assert (out == expected[..., None]).all()


@pytest.mark.parametrize("mode, dtype", [("I;16B", ">u2"), ("I;16L", "<u2"), ("I;16", "<u2")])
def test_the_16_bit_byte_orders(mode, dtype):
    values = np.array([[0, 1000, 30000, 65535]], dtype=np.uint16)
    im = Image.frombytes(mode, (4, 1), values.astype(dtype).tobytes())
    assert np.asarray(to_rgb(im))[0, :, 0].tolist() == [0, 4, 117, 255]


def test_32_bit_integer_and_float_modes():
    big = Image.fromarray(np.array([[-5, 0, 2 ** 30, 2 ** 31 - 1]], dtype=np.int32))
    assert big.mode == "I" and np.asarray(to_rgb(big))[0, :, 1].tolist() == [0, 0, 128, 255]
    floats = Image.fromarray(np.array([[-0.5, 0.0, 0.5, 1.0, 2.0]], dtype=np.float32))
    assert floats.mode == "F" and np.asarray(to_rgb(floats))[0, :, 2].tolist() == [0, 0, 128, 255, 255]


def test_a_32_bit_image_read_from_a_png_as_I_is_taken_at_16_bits(tmp_path):
    """Older Pillow reads a 16-bit greyscale PNG as mode I: its range is still 16 bits."""
    path = _png(tmp_path, Image.fromarray(np.full((2, 2), 30000, np.uint16)))
    with Image.open(path) as im:
        as_i = im.convert("I")
        as_i.format = "PNG"
        assert np.asarray(to_rgb(as_i))[0, 0].tolist() == [117, 117, 117]


def test_a_16_bit_tiff_read_as_I(tmp_path):
    path = _png(tmp_path, Image.fromarray(np.full((2, 2), 30000, np.uint16)), "x.tif")
    assert _rgb(path)[0, 0].tolist() == [117, 117, 117]


def test_palette_and_palette_with_transparency(tmp_path):
    pal = Image.new("P", (2, 1))
    pal.putpalette([10, 20, 30, 200, 100, 0] + [0] * 762)
    pal.putdata([0, 1])
    assert _rgb(_png(tmp_path, pal, "p.png"))[0].tolist() == [[10, 20, 30], [200, 100, 0]]
    assert _rgb(_png(tmp_path, pal, "t.png", transparency=1))[0].tolist() == [[10, 20, 30], [255, 255, 255]]


def test_alpha_modes_are_composited_over_white(tmp_path):
    rgba = np.array([[[200, 100, 0, 255], [200, 100, 0, 0], [200, 100, 0, 128]]], dtype=np.uint8)
    over = [[200, 100, 0], [255, 255, 255], [227, 177, 127]]   # c * a + 255 * (1 - a), a = 128 / 255
    assert _rgb(_png(tmp_path, Image.fromarray(rgba, "RGBA"), "rgba.png"))[0].tolist() == over
    la = np.array([[[60, 255], [60, 0], [60, 128]]], dtype=np.uint8)
    assert _rgb(_png(tmp_path, Image.fromarray(la, "LA"), "la.png"))[0, :, 0].tolist() == [60, 255, 157]
    pa = Image.fromarray(np.array([[0, 1]], dtype=np.uint8), "P").convert("PA")
    pa.putpalette([10, 20, 30, 200, 100, 0] + [0] * 762)
    pa.putalpha(Image.fromarray(np.array([[255, 0]], dtype=np.uint8), "L"))
    assert pa.mode == "PA" and np.asarray(to_rgb(pa))[0].tolist() == [[10, 20, 30], [255, 255, 255]]
    premultiplied = Image.fromarray(rgba, "RGBA").convert("RGBa")
    assert np.abs(np.asarray(to_rgb(premultiplied)).astype(int) - np.array(over)).max() <= 1


def test_cmyk_and_lab(tmp_path):
    cmyk = Image.frombytes("CMYK", (3, 1), bytes([255, 0, 0, 0, 0, 0, 0, 255, 0, 0, 0, 0]))
    path = _png(tmp_path, cmyk, "c.jpg", quality=100)
    out = _rgb(path)
    assert np.abs(out.astype(int) - [[0, 255, 255], [0, 0, 0], [255, 255, 255]]).max() <= 8   # JPEG, lossy
    assert np.asarray(to_rgb(cmyk))[0].tolist() == [[0, 255, 255], [0, 0, 0], [255, 255, 255]]
    white, black = Image.new("LAB", (1, 1), (255, 128, 128)), Image.new("LAB", (1, 1), (0, 128, 128))
    assert np.asarray(to_rgb(white)).min() >= 250 and np.asarray(to_rgb(black)).max() <= 5


def test_8_bit_rgb_grey_and_bilevel_are_unchanged(tmp_path):
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (5, 4, 3), dtype=np.uint8)
    grey = rng.integers(0, 256, (5, 4), dtype=np.uint8)
    assert (_rgb(_png(tmp_path, Image.fromarray(rgb), "rgb.png")) == rgb).all()
    assert (_rgb(_png(tmp_path, Image.fromarray(grey), "l.png")) == grey[..., None]).all()
    with Image.open(_png(tmp_path, Image.fromarray(rgb), "rgb.jpg", quality=90)) as im:
        assert (np.asarray(to_rgb(im)) == np.asarray(im.convert("RGB"))).all()
    bilevel = Image.fromarray(grey > 127)
    assert (np.asarray(to_rgb(bilevel))[..., 0] == np.where(grey > 127, 255, 0)).all()


def test_the_loaders_and_data_check_decode_a_16_bit_png(tmp_path):
    make_cub(tmp_path)
    base = tmp_path / "CUB_200_2011"
    target = base / "images" / "003.Bird_3" / "Bird_3_0.jpg"   # a PNG under a .jpg name, as Pillow sniffs it
    Image.fromarray(np.full((6, 6), 30000, np.uint16)).save(target, format="PNG")
    for cache in (False, True):
        test = load_dataset("cub", tmp_path, "test", expected=None, cache=cache)
        assert np.asarray(test.image(0))[0, 0].tolist() == [117, 117, 117]
        assert np.asarray(test.image(2))[0, 0].tolist() == [4, 4, 4]   # 8-bit RGB unchanged
    assert verify_images(test) == []
    assert check_datasets(tmp_path, ["cub"], verify=True, counts=False).loc["cub", "status"] == "found"


def test_an_unreadable_image_is_named():
    with pytest.raises(OSError, match=r"cannot read image /nonexistent/x.png"):
        open_rgb("/nonexistent/x.png")
