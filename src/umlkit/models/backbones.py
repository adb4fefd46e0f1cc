"""Backbones: timm models by name (never re-implemented), pretrained weights from the hub or a local file.

Short names map to the exact timm tags the papers use:

| name | timm model | used by |
|---|---|---|
| ``vit_s16_in21k_ft_in1k`` | ``vit_small_patch16_224.augreg_in21k_ft_in1k`` | PUMA (all tables) |
| ``vit_s16_in21k`` | ``vit_small_patch16_224.augreg_in21k`` | VPTSP (ViT-S/16, IN-21k only) |
| ``deit_s16`` | ``deit_small_patch16_224.fb_in1k`` | PUMA Table 5, VPTSP Table 8 |
| ``dino_s16`` | ``vit_small_patch16_224.dino`` | PUMA Table 5, VPTSP Table 8 |
| ``clip_b32_laion2b`` | ``vit_base_patch32_clip_224.laion2b`` | PUMA Table 5 |
| ``vit_b16_in21k`` | ``vit_base_patch16_224.augreg_in21k`` | VPTSP (ViT-B/16) |
| ``mae_b16`` | ``vit_base_patch16_224.mae`` | VPTSP Table 8 |
| ``clip_l14`` | ``vit_large_patch14_clip_224.openai`` | language guidance (CLIP-L image tower) |
| ``resnet18/50/101`` | ``resnet{18,50,101}.tv_in1k`` | ooDML, language guidance (frozen-BN option) |
| ``vit_tiny_uml`` | ``vit_tiny_uml_patch8_32`` (registered here) | quick profile |

Any other timm model name is accepted as is. Weights: ``pretrained=True`` downloads from timm's hub;
``weights=PATH`` loads a local file (``.safetensors``, or ``.pth``/``.bin``/``.npz`` through timm's own checkpoint
filters) without network. Input size and normalisation come from the pretrained config (``data_config``).

Offline is this project's normal case, so before timm is asked to download, :func:`hub_unreachable` sends one HTTP
request to the hub (``HF_ENDPOINT``, default huggingface.co) with a short timeout (``UMLKIT_HUB_TIMEOUT``, 5 s):
weights already in the Hugging Face cache are used without it, and without an answer the error comes in seconds
and names the file to pass as ``weights=PATH`` instead of waiting on timm's retries.
"""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import timm
import torch
from timm.layers import freeze_batch_norm_2d
from timm.models import generate_default_cfgs, register_model
from timm.models.vision_transformer import VisionTransformer, _create_vision_transformer

from umlkit._hub import hub_unreachable
from umlkit.models.recipes import RECIPES, WEIGHTS_DIR, weight_files

__all__ = ["BACKBONES", "backbone_data_config", "create_backbone", "check_listed_weights", "resolve_backbone_name",
           "data_config", "hub_unreachable"]

BACKBONES = {
    "vit_s16_in21k_ft_in1k": "vit_small_patch16_224.augreg_in21k_ft_in1k",
    "vit_s16_in21k": "vit_small_patch16_224.augreg_in21k",
    "deit_s16": "deit_small_patch16_224.fb_in1k",
    "dino_s16": "vit_small_patch16_224.dino",
    "clip_b32_laion2b": "vit_base_patch32_clip_224.laion2b",
    "vit_b16_in21k": "vit_base_patch16_224.augreg_in21k",
    "mae_b16": "vit_base_patch16_224.mae",
    "clip_l14": "vit_large_patch14_clip_224.openai",
    "resnet18": "resnet18.tv_in1k",
    "resnet50": "resnet50.tv_in1k",
    "resnet101": "resnet101.tv_in1k",
    "vit_tiny_uml": "vit_tiny_uml_patch8_32",
    "vit_tiny_uml_v2": "vit_tiny_uml_patch8_32.uml_mini_v2",
    # the regime map's second edition: pretrained on narrower and broader worlds, and wider (configs/regime)
    "vit_tiny_uml_narrow": "vit_tiny_uml_patch8_32.uml_mini_narrow",
    "vit_tiny_uml_broad": "vit_tiny_uml_patch8_32.uml_mini_broad",
    "vit_wide_uml_broad": "vit_wide_uml_patch8_32.uml_mini_broad",
}

TINY_WEIGHTS = WEIGHTS_DIR / "vit_tiny_uml_patch8_32.safetensors"
# UML-Mini v2's pretraining (recipe v2 of umlkit.models.pretrain: longer, masked unobservable targets)
TINY_WEIGHTS_V2 = WEIGHTS_DIR / "vit_tiny_uml_patch8_32.uml_mini_v2.safetensors"
_TINY_CFG = dict(mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), input_size=(3, 32, 32), crop_pct=1.0, num_classes=0,
                 interpolation="bilinear", license="MIT")
# timm's registry picks this up: ``pretrained=True`` loads the shipped UML-Mini weights, no network needed.
default_cfgs = generate_default_cfgs({
    "vit_tiny_uml_patch8_32.uml_mini": dict(file=str(TINY_WEIGHTS), **_TINY_CFG),
    "vit_tiny_uml_patch8_32.uml_mini_v2": dict(file=str(TINY_WEIGHTS_V2), **_TINY_CFG),
    "vit_tiny_uml_patch8_32.uml_mini_narrow": dict(
        file=str(WEIGHTS_DIR / "vit_tiny_uml_patch8_32.uml_mini_narrow.safetensors"), **_TINY_CFG),
    "vit_tiny_uml_patch8_32.uml_mini_broad": dict(
        file=str(WEIGHTS_DIR / "vit_tiny_uml_patch8_32.uml_mini_broad.safetensors"), **_TINY_CFG),
    "vit_wide_uml_patch8_32.uml_mini_broad": dict(
        file=str(WEIGHTS_DIR / "vit_wide_uml_patch8_32.uml_mini_broad.safetensors"), **_TINY_CFG),
    "vit_tiny_uml_patch4_32.untrained": dict(_TINY_CFG),
})


@register_model
def vit_tiny_uml_patch4_32(pretrained: bool = False, **kwargs) -> VisionTransformer:
    """Tiny ViT of the quick profile: 32 px input, 4 px patches (64 tokens), width 128, depth 6, 4 heads."""
    model_args = dict(img_size=32, patch_size=4, embed_dim=128, depth=6, num_heads=4, mlp_ratio=4.0)
    return _create_vision_transformer("vit_tiny_uml_patch4_32", pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def vit_tiny_uml_patch8_32(pretrained: bool = False, **kwargs) -> VisionTransformer:
    """Quick-profile ViT: 32 px input, 8 px patches (16 tokens), width 96, depth 6, 3 heads (UML-Mini study:
    3.5x faster than patch 4 at equal width). ``pretrained=True`` loads the shipped UML-Mini pretraining
    (``umlkit data pretrain-mini`` regenerates it)."""
    model_args = dict(img_size=32, patch_size=8, embed_dim=96, depth=6, num_heads=3, mlp_ratio=4.0)
    return _create_vision_transformer("vit_tiny_uml_patch8_32", pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def vit_wide_uml_patch8_32(pretrained: bool = False, **kwargs) -> VisionTransformer:
    """The quick-profile ViT at twice the width (192, 3 heads of 64, depth 6, 8 px patches): the regime map's
    capacity axis."""
    model_args = dict(img_size=32, patch_size=8, embed_dim=192, depth=6, num_heads=3, mlp_ratio=4.0)
    return _create_vision_transformer("vit_wide_uml_patch8_32", pretrained=pretrained, **dict(model_args, **kwargs))


def hub_source(cfg) -> str:
    """Where timm would download a pretrained config's weights from, for error messages."""
    if cfg is None:
        return "the model's weights"
    if cfg.hf_hub_id:
        return f"'{cfg.hf_hub_filename or 'model.safetensors'}' of https://huggingface.co/{cfg.hf_hub_id}"
    return cfg.url or "the model's weights"


def in_hf_cache(cfg) -> bool:
    """Whether the Hugging Face cache already holds this config's weights (no network used)."""
    if not cfg.hf_hub_id:
        return False
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - timm depends on huggingface_hub
        return False
    names = [cfg.hf_hub_filename] if cfg.hf_hub_filename else ["model.safetensors", "pytorch_model.bin"]
    return any(isinstance(try_to_load_from_cache(cfg.hf_hub_id, n), str) for n in names)


def resolve_backbone_name(name: str) -> str:
    return BACKBONES.get(name, name)


def state_dict_mismatch(err: Exception, limit: int = 400) -> str:
    """The part of a loading error a reader needs: for torch's "Error(s) in loading state_dict" the missing and
    unexpected keys and size mismatches it lists on its further lines (its first line names only the class), else
    the first line; at most ``limit`` characters."""
    lines = [ln.strip() for ln in str(err).strip().splitlines() if ln.strip()]
    if not lines:
        return type(err).__name__
    text = " ".join(lines[1:]) if lines[0].startswith("Error(s) in loading state_dict") and len(lines) > 1 else lines[0]
    return text if len(text) <= limit else text[:limit - 3] + "..."


def check_listed_weights(path: str | Path) -> None:
    """Refuse a weights file whose folder's ``SHA256SUMS`` lists another sha256 (a shipped tiny ViT cut short or
    edited: :mod:`umlkit._shipped`), before timm reads it; a file no ``SHA256SUMS`` lists is not hashed."""
    from umlkit._shipped import check_sha, expected_sha
    path = Path(path)
    if expected_sha(path) is None:
        return
    st = path.stat()
    check_sha(path, _sha256_of(str(path.resolve()), st.st_mtime_ns, st.st_size),
              f"`git checkout -- {path.name}` in {path.parent} where it is committed, else "
              f"`umlkit data pretrain-mini` for its recipe")


@functools.lru_cache(maxsize=32)
def _sha256_of(path: str, mtime_ns: int, size: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def create_backbone(name: str, pretrained: bool = False, weights: str | Path | None = None,
                    freeze_bn: bool = False, **kwargs) -> torch.nn.Module:
    """A timm model with its classifier removed (``num_classes=0``)."""
    timm_name = resolve_backbone_name(name)
    base = timm_name.split(".")[0]
    if not timm.is_model(base):
        raise ValueError(f"unknown backbone {name!r}: not a umlkit short name ({', '.join(BACKBONES)}) "
                         f"nor a timm model")
    if weights is not None:
        path = Path(weights).expanduser()
        if not path.is_file():
            what = "is a folder" if path.is_dir() else "does not exist"
            raise FileNotFoundError(f"weights file {path} {what} (expected a .safetensors/.pth/.npz checkpoint "
                                    f"of {timm_name})")
        check_listed_weights(path)
        try:
            model = timm.create_model(timm_name, pretrained=True, num_classes=0,
                                      pretrained_cfg_overlay=dict(file=str(path), hf_hub_id=None, url=None), **kwargs)
        except Exception as err:  # unreadable file, another architecture's weights, ...
            first = state_dict_mismatch(err)
            raise ValueError(f"weights file {path} cannot be loaded into {timm_name} ({type(err).__name__}: {first}). "
                             f"Expected a .safetensors/.pth/.bin/.npz checkpoint of {timm_name}; check that the file "
                             f"is complete and belongs to this backbone (model.backbone).") from err
    elif pretrained:
        shipped = timm.models.get_pretrained_cfg(timm_name)
        if shipped is not None and shipped.file and not Path(shipped.file).is_file():
            recipe = next((r for r in RECIPES if weight_files(r)["weights"].name == Path(shipped.file).name), "v1")
            raise FileNotFoundError(f"the UML-Mini pretrained weights {shipped.file} are missing; run "
                                    f"`umlkit data pretrain-mini --recipe {recipe}` to regenerate them")
        if shipped is not None and shipped.file:
            check_listed_weights(shipped.file)
        source = hub_source(shipped)
        if shipped is not None and not shipped.file and not in_hf_cache(shipped):
            reason = hub_unreachable()
            if reason is not None:
                raise ConnectionError(
                    f"pretrained weights for {timm_name} are not in the Hugging Face cache and the hub is unreachable "
                    f"({reason}). Download {source} on a machine with network and pass weights='/path/to/that file' "
                    f"(model.weights=PATH in a config), or connect and retry.")
        try:
            model = timm.create_model(timm_name, pretrained=True, num_classes=0, **kwargs)
        except Exception as err:  # hub error, offline mode, missing cache, ...
            raise RuntimeError(
                f"could not fetch pretrained weights for {timm_name} from the hub ({type(err).__name__}: {err}). "
                f"Either connect to the internet (timm downloads them once into the Hugging Face cache), or download "
                f"{source} and pass weights='/path/to/that file' to load it locally."
            ) from err
    else:
        model = timm.create_model(timm_name, pretrained=False, num_classes=0, **kwargs)
    if freeze_bn:
        model = freeze_batch_norm_2d(model)
    return model


def backbone_data_config(name: str) -> dict:
    """The same as :func:`data_config` for a backbone name, read from timm's registry without building it."""
    timm_name = resolve_backbone_name(name)
    cfg = timm.models.get_pretrained_cfg(timm_name)
    if cfg is None:
        return data_config(create_backbone(name))
    return timm.data.resolve_data_config(pretrained_cfg=cfg.to_dict())


def data_config(model: torch.nn.Module) -> dict:
    """Input size, interpolation, mean/std and crop_pct from the model's pretrained config."""
    return timm.data.resolve_model_data_config(model)
