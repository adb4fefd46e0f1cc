"""The shortcut mark (umlkit.data.shortcut): painted on the training images only, by class, before the transform;
the configuration key is optional, so no earlier configuration changes its hash."""
import colorsys

import numpy as np
import pytest
from PIL import Image

from umlkit.data.shortcut import ShortcutDataset, check_shortcut, mark_colour, paint_mark
from umlkit.train.config import DEFAULTS, config_hash, resolve_config


def test_mark_colour_is_the_golden_ratio_hue_with_alternating_value():
    for label in (0, 1, 7, 500):
        h = (label * 0.6180339887498949) % 1.0
        rgb = colorsys.hsv_to_rgb(h, 1.0, 0.95 if label % 2 == 0 else 0.55)
        assert mark_colour(label) == tuple(int(round(c * 255)) for c in rgb)
    assert len({mark_colour(k) for k in range(300)}) == 300     # every class of a source its own colour


def test_paint_mark_changes_only_the_corner_square():
    img = Image.fromarray(np.full((32, 32, 3), 40, np.uint8))
    out = np.array(paint_mark(img, 3, 4))
    assert (out[:4, :4] == mark_colour(3)).all()
    rest = out.copy()
    rest[:4, :4] = 40
    assert (rest == 40).all() and (np.array(img) == 40).all()   # the source image is untouched


@pytest.mark.parametrize("spec, word", [({"size": 0}, "size"), ({"size": 2.5}, "size"), ({"p": 0}, "p"),
                                        ({"p": 1.5}, "p"), ({"colour": 1}, "expected"), ("yes", "expected")])
def test_bad_shortcut_settings_are_named(spec, word):
    with pytest.raises(ValueError, match=word):
        check_shortcut(spec)
    if isinstance(spec, dict):
        with pytest.raises(ValueError, match="data.shortcut"):
            resolve_config({"data": {"shortcut": spec}})


def test_the_optional_key_leaves_every_other_configuration_as_it_was():
    assert "shortcut" not in DEFAULTS["data"]
    plain = resolve_config({})
    assert "shortcut" not in plain["data"] and config_hash(plain) == config_hash(resolve_config({}))
    marked = resolve_config(overrides=["data.shortcut={size: 3, p: 0.5}"])
    assert marked["data"]["shortcut"] == {"size": 3, "p": 0.5}


def test_build_data_marks_the_training_images_only_by_their_label(mini_root):
    from umlkit.train.engine import build_data
    dc = {"input_size": (3, 32, 32), "mean": (0.0,) * 3, "std": (1.0,) * 3, "interpolation": "bilinear",
          "crop_pct": 1.0}
    base = {"root": str(mini_root), "datasets": ["cub", "flowers"], "augment": False, "val_fraction": 0.25}
    plain_tr, plain_te, plain_va = build_data(resolve_config({"data": base}), dc)
    tr, te, va = build_data(resolve_config({"data": {**base, "shortcut": {"size": 4, "p": 1.0}}}), dc)
    assert (isinstance(tr, ShortcutDataset) and not isinstance(te, ShortcutDataset)
            and not isinstance(va, ShortcutDataset))
    assert (tr.labels == plain_tr.labels).all() and (tr.sources == plain_tr.sources).all()
    for k in (0, len(tr) // 2, len(tr) - 1):
        x, y = tr[k]
        x0, y0 = plain_tr[k]
        assert y == y0
        want = np.array(mark_colour(y)) / 255.0
        assert np.allclose(x[:, :4, :4].permute(1, 2, 0).numpy(), want, atol=1 / 255)
        assert np.allclose(x[:, 4:, :].numpy(), x0[:, 4:, :].numpy())        # the rest of the image is the same
    assert np.allclose(te[0][0].numpy(), plain_te[0][0].numpy())          # test images carry no mark


def test_a_fraction_of_the_images_is_marked_once_per_seed(mini_root):
    from umlkit.data import load_unified
    base = load_unified(mini_root, "train", names=["cub"])
    a, b, c = (ShortcutDataset(base, size=2, p=0.3, seed=s) for s in (0, 0, 1))
    assert (a.marked == b.marked).all() and (a.marked != c.marked).any()
    assert abs(a.marked.mean() - 0.3) < 0.1
