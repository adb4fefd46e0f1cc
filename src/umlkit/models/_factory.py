"""``create_model``: one constructor for every backbone x method the four papers compare, plus parameter counting.

Methods (defaults follow the paper that uses them; every default can be overridden by keyword):

| method | trainable | source |
|---|---|---|
| ``zero_shot`` | nothing; the embedding is the backbone feature | PUMA Table 2 |
| ``full`` | backbone + linear head | PUMA Table 2(a,b) |
| ``linear`` / ``mlp3`` | head only (``mlp3`` hidden 2048) | PUMA Table 2(c) |
| ``vpt`` | 10 shallow prompt tokens + head | VPT (Jia et al.), PUMA Table 2(c) |
| ``vpt_deep`` | ``num_prompts`` tokens per block for ``prompt_depth`` blocks, decreasing by ``prompt_step`` | VPTSP |
| ``prompt_pool`` | PUMA's conditional prompt pool (M=20, L=8) + head | PUMA Table 3 |
| ``adapter`` / ``stochastic_adapter`` | PUMA adapters, keep p = 1 / 0.5 + head | PUMA Table 3 |
| ``puma`` | stochastic adapters + prompt pool + head | PUMA |
| ``lora`` | rank-128 LoRA on q and v + head | PUMA Table 2(c) |
| ``adaptformer`` | bottleneck-256 AdaptMLP + head | PUMA Table 2(c), VPTSP Table 1 (``layers=7``) |
| ``bitfit`` | all backbone biases + head | VPTSP Table 1 |
| ``vptsp`` | VPT-deep + BitFit + class prompts + proxy branch + accumulator + proxy bias | VPTSP |

``vptsp`` options: ``num_classes`` (required), ``num_prompts``/``prompt_depth``/``prompt_step`` (task prompts),
``class_prompts``/``class_prompt_depth``/``class_prompt_step``, ``accumulator``, ``proxy_bias_ratio``,
``proxy_source``, ``class_prompts_device``, ``bitfit_backbone`` (default True, as the official code).

``bitfit=True`` adds BitFit to any ViT method (VPTSP's "(B)" rows).
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import torch
from torch import nn

from umlkit.models.backbones import create_backbone, data_config, resolve_backbone_name
from umlkit.models.embedding import EmbeddingModel, build_head
from umlkit.models.layers import LoRAQKV, PromptPool
from umlkit.models.peft_vit import PEFTViT
from umlkit.models.vptsp import VPTSPModel

__all__ = ["create_model", "count_trainable", "parameter_budget", "METHODS"]

METHODS = ("zero_shot", "full", "linear", "mlp3", "vpt", "vpt_deep", "prompt_pool", "adapter", "stochastic_adapter",
           "puma", "lora", "adaptformer", "bitfit", "vptsp")
_CNN_METHODS = ("zero_shot", "full", "linear", "mlp3", "bitfit")


def _enable_bitfit(backbone: nn.Module) -> None:
    for name, p in backbone.named_parameters():
        if name.endswith("bias"):
            p.requires_grad_(True)


def _pop(kwargs: dict, **defaults):
    return [kwargs.pop(k, v) for k, v in defaults.items()]


def create_model(backbone: str, method: str, embed_dim: int = 128, pretrained: bool = False,
                 weights: str | Path | None = None, **method_kwargs) -> EmbeddingModel:
    """Build an embedding model producing L2-normalised embeddings.

    Args:
        backbone: a short name from :data:`umlkit.models.BACKBONES` or any timm model name.
        method: one of :data:`METHODS`.
        embed_dim: embedding size of the head (ignored by ``zero_shot``).
        pretrained: load timm's pretrained weights from the hub.
        weights: a local checkpoint instead of the hub.
        **method_kwargs: method options, e.g. ``pool_size=1`` (single prompt), ``keep_prob=1.0`` (static
            adapters), ``head="ln_linear"``, ``bitfit=True``, ``num_classes=100`` (``vptsp``),
            ``freeze_bn=True`` (ResNets), ``aux_heads={"s2sd_0": (1024, "mlp2")}`` (extra heads for
            S2SD/DiVA, see :func:`umlkit.losses.aux_heads_for`), ``eval_concat_aux=True`` (DiVA).

    Example:
        >>> m = create_model("vit_tiny_uml", "puma", embed_dim=32)
        >>> m(torch.randn(2, 3, 32, 32)).shape
        torch.Size([2, 32])
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    kw = dict(method_kwargs)
    (freeze_bn,) = _pop(kw, freeze_bn=False)
    net = create_backbone(backbone, pretrained=pretrained, weights=weights, freeze_bn=freeze_bn)
    cfg = data_config(net)
    timm_name = resolve_backbone_name(backbone)
    is_vit = hasattr(net, "blocks") and hasattr(net, "patch_embed")
    if not is_vit and method not in _CNN_METHODS:
        raise ValueError(f"method {method!r} needs a ViT backbone; {timm_name} supports {', '.join(_CNN_METHODS)}")
    feat_dim = net.num_features
    head_kind, bitfit, aux_spec, concat_aux = _pop(kw, head="linear", bitfit=False, aux_heads=None,
                                                   eval_concat_aux=False)
    net.requires_grad_(method == "full")

    if method == "vptsp":
        if aux_spec:
            raise ValueError("aux_heads are not supported with method 'vptsp' (its proxy branch is its extra head)")
        num_prompts, depth, step, num_classes = _pop(kw, num_prompts=10, prompt_depth=12, prompt_step=0, num_classes=None)
        n_blocks = len(net.blocks)
        counts = [max(num_prompts - i * step, 0) for i in range(min(depth, n_blocks))]
        body = PEFTViT(net, deep_prompts=counts)
        if kw.pop("bitfit_backbone", True):  # the official code always trains the biases
            _enable_bitfit(net)
        model = VPTSPModel(body, timm_name, embed_dim, num_classes, data_config=cfg, **kw)
        return model

    if not is_vit:
        body = net
    else:
        options = {}
        if method == "vpt":
            (n,) = _pop(kw, num_prompts=10)
            options["shallow_prompts"] = n
        elif method == "vpt_deep":
            n, depth, step = _pop(kw, num_prompts=10, prompt_depth=12, prompt_step=0)
            options["deep_prompts"] = [max(n - i * step, 0) for i in range(min(depth, len(net.blocks)))]
        if method in ("prompt_pool", "puma"):
            pool_size, length, identical = _pop(kw, pool_size=20, prompt_length=8, identical_init=True)
            if kw.pop("use_prompts", True):
                options["prompt_pool"] = PromptPool(net.embed_dim, pool_size, length, identical_init=identical)
        if method in ("adapter", "stochastic_adapter", "puma"):
            default_keep = 1.0 if method == "adapter" else 0.5
            keep, bottleneck, scale = _pop(kw, keep_prob=default_keep, adapter_dim=128, adapter_scale=0.1)
            if kw.pop("use_adapters", True):
                options.update(adapter_keep_prob=keep, adapter_bottleneck=bottleneck, adapter_scale=scale)
        if method == "adaptformer":
            bottleneck, layers = _pop(kw, adapter_dim=256, layers=None)
            options.update(adaptformer_bottleneck=bottleneck, adaptformer_layers=layers)
        if method == "lora":
            rank, alpha = _pop(kw, rank=128, alpha=None)
            for blk in net.blocks:
                blk.attn.qkv = LoRAQKV(blk.attn.qkv, rank=rank, alpha=alpha)
        body = PEFTViT(net, **options)
    if method == "bitfit" or bitfit:
        _enable_bitfit(net)
    if method == "mlp3":
        head_kind = "mlp3"
    if method == "zero_shot":
        head_kind = "identity"
    if kw:
        raise TypeError(f"unexpected option(s) for method {method!r}: {sorted(kw)}")
    head = build_head(head_kind, feat_dim, embed_dim)
    out_dim = feat_dim if head_kind == "identity" else embed_dim
    aux = {}
    for name, spec in (aux_spec or {}).items():
        dim, kind = (spec, "linear") if isinstance(spec, int) else spec
        aux[name] = build_head(kind, feat_dim, dim)
    model = EmbeddingModel(body, head, method, timm_name, out_dim, data_config=cfg, aux_heads=aux,
                           eval_concat_aux=concat_aux)
    if method == "zero_shot":
        model.requires_grad_(False)
    return model


def count_trainable(model: nn.Module, extra: Iterable[nn.Parameter] | nn.Module | None = None) -> int:
    """Trainable parameters of ``model`` (+ ``extra``: e.g. a loss with learnable proxies), each counted once."""
    params = {id(p): p for p in model.parameters() if p.requires_grad}
    if hasattr(model, "sparse_parameters"):
        params.update({id(p): p for p in model.sparse_parameters() if p.requires_grad})
    if extra is not None:
        items = extra.parameters() if isinstance(extra, nn.Module) else extra
        params.update({id(p): p for p in items if p.requires_grad})
    return sum(p.numel() for p in params.values())


def parameter_budget(specs: dict[str, dict], backbone: str = "vit_s16_in21k_ft_in1k", embed_dim: int = 128,
                     num_proxies: int = 0, paper: dict[str, float] | None = None) -> pd.DataFrame:
    """Trainable parameters of several configurations, in millions, beside the paper's numbers.

    Args:
        specs: row name -> ``create_model`` keyword arguments (at least ``method``).
        backbone, embed_dim: defaults for every row.
        num_proxies: learnable class proxies of the loss (``num_proxies * embed_dim`` parameters) added to each
            row, as VPTSP Table 1 counts the Proxy-Anchor proxies.
        paper: row name -> the paper's number (M).
    """
    rows = []
    for name, spec in specs.items():
        spec = dict(spec)
        method = spec.pop("method")
        emb = spec.pop("embed_dim", embed_dim)
        model = create_model(spec.pop("backbone", backbone), method, embed_dim=emb, **spec)
        n_model = count_trainable(model)
        n_proxy = num_proxies * emb if method != "zero_shot" else 0
        total = n_model + n_proxy
        row = {"configuration": name, "trainable (model)": n_model, "proxies": n_proxy, "total": total,
               "measured (M)": round(total / 1e6, 2)}
        if paper is not None:
            row["paper (M)"] = paper.get(name, float("nan"))
        rows.append(row)
        del model
    return pd.DataFrame(rows).set_index("configuration")
