"""Pretraining worlds (umlkit.data.mini.PRETRAIN_WORLDS) and the regime map's recipes (umlkit.models.pretrain):
the default world draws what UML-Mini v2 was pretrained on, the narrow one only its first values, the broad one
more; recipes write their own files and keep each other's checksums."""
import hashlib

import numpy as np
import pytest
import torch

from umlkit.data.mini import PRETRAIN_HEADS, PRETRAIN_WORLDS, SHAPES, pretraining_set
from umlkit.models.pretrain import RECIPES, load_heads, pretrain_tiny_vit, weight_files


def _digest(images, targets) -> str:
    return hashlib.sha256(images.tobytes() + b"".join(targets[k].tobytes() for k in sorted(targets))).hexdigest()[:16]


def test_the_default_world_draws_the_images_v2_was_pretrained_on():
    # the digest of pretraining_set(300, seed=7) from the code before worlds existed (commit 112db972d)
    assert _digest(*pretraining_set(300, seed=7)[:2]) == "3b8d3daa35a854b4"
    assert PRETRAIN_WORLDS["v2"].heads == PRETRAIN_HEADS


def test_narrow_shows_only_the_first_values_and_broad_shows_more():
    _, t, _ = pretraining_set(600, seed=3, world="narrow")
    assert t["shape"].max() == 3 and t["hue"].max() == 3 and t["disc_hue"].max() == 3
    assert set(np.unique(t["texture"])) == set(range(5))           # the other attributes as in v2
    imgs, t, _ = pretraining_set(600, seed=3, world="broad")
    heads = PRETRAIN_WORLDS["broad"].heads
    assert heads["shape"] == len(SHAPES) + 2 and heads["sat"] == 4 and heads["bg_hue"] == 8
    for k, n in heads.items():
        assert set(np.unique(t[k])) == set(range(n)), k             # every value of every head is drawn
    assert (t["class"][t["shape"] >= 8] == -100).all() and (t["class"][t["shape"] < 8] >= 0).all()
    with pytest.raises(ValueError, match="unknown pretraining world 'wild'"):
        pretraining_set(4, world="wild")


def test_new_shapes_render_and_differ_from_the_old_ones():
    from umlkit.data.mini import _XX, _YY, _shape_mask
    u, v = (_XX - 16) / 10, (_YY - 16) / 10
    masks = {s: _shape_mask(s, u, v) for s in (*SHAPES, "hexagon", "semicircle")}
    for s in ("hexagon", "semicircle"):
        assert 40 < masks[s].sum() < 400
        assert all((masks[s] != masks[o]).sum() > 10 for o in SHAPES)


def test_recipes_write_their_world_heads_and_keep_each_others_checksums(tmp_path):
    torch.set_num_threads(1)
    for recipe in ("narrow", "broad"):
        rep = pretrain_tiny_vit(tmp_path, epochs=1, n_images=256, recipe=recipe, progress=False, log=lambda *a: None)
        assert rep["world"] == recipe and set(rep["val_accuracy"]) >= set(PRETRAIN_WORLDS[recipe].heads)
        heads = load_heads(weight_files(recipe, tmp_path)["heads"])
        assert {k: h.out_features for k, h in heads.items()} == PRETRAIN_WORLDS[recipe].heads
    sums = (tmp_path / "SHA256SUMS").read_text()
    for recipe in ("narrow", "broad"):
        files = weight_files(recipe, tmp_path)
        assert f"{hashlib.sha256(files['weights'].read_bytes()).hexdigest()}  {files['weights'].name}" in sums
    assert "class (320 named)" not in rep["val_accuracy"]          # broad's shape head is not the named classes'
    assert RECIPES["wide"]["backbone"] == "vit_wide_uml_patch8_32"
    assert weight_files("wide", tmp_path)["weights"].name == "vit_wide_uml_patch8_32.uml_mini_broad.safetensors"


def test_the_wide_backbone_is_twice_as_wide_and_as_deep():
    from umlkit.models.backbones import create_backbone
    tiny, wide = create_backbone("vit_tiny_uml_patch8_32"), create_backbone("vit_wide_uml_patch8_32")
    assert (tiny.num_features, wide.num_features) == (96, 192) and len(tiny.blocks) == len(wide.blocks) == 6


def test_missing_shipped_weights_name_the_recipe_that_makes_them(monkeypatch, tmp_path):
    import dataclasses

    import timm

    from umlkit.models.backbones import create_backbone
    real = timm.models.get_pretrained_cfg
    gone = str(tmp_path / weight_files("wide")["weights"].name)   # the shipped file's name, in a folder without it

    def without_the_file(name, *args, **kw):
        cfg = real(name, *args, **kw)
        return dataclasses.replace(cfg, file=gone) if name == "vit_wide_uml_patch8_32.uml_mini_broad" else cfg
    monkeypatch.setattr(timm.models, "get_pretrained_cfg", without_the_file)
    with pytest.raises(FileNotFoundError, match="pretrain-mini --recipe wide"):
        create_backbone("vit_wide_uml_broad", pretrained=True)
