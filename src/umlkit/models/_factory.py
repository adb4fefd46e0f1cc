"""``create_model``: one constructor for every backbone x method the four papers compare, plus parameter counting.

Methods (defaults follow the paper that uses them; every default can be overridden by keyword):

| method | trainable | source |
|---|---|---|
| ``zero_shot`` | nothing; the embedding is the backbone feature | PUMA Table 2 |
| ``full`` | backbone + linear head | PUMA Table 2(a,b) |
| ``linear`` / ``mlp3`` | head only (``mlp3`` hidden 2048, option ``hidden``) | PUMA Table 2(c) |
| ``vpt`` | 10 shallow prompt tokens + head | VPT (Jia et al.), PUMA Table 2(c) |
| ``vpt_deep`` | ``num_prompts`` tokens per block for ``prompt_depth`` blocks, decreasing by ``prompt_step`` | VPTSP |
| ``prompt_pool`` | PUMA's conditional prompt pool (M=20, L=8) + head | PUMA Table 3 |
| ``adapter`` / ``stochastic_adapter`` | PUMA adapters, keep p = 1 / 0.5 + head | PUMA Table 3 |
| ``puma`` | stochastic adapters + prompt pool + head | PUMA |
| ``lora`` | rank-128 LoRA on q and v + head | PUMA Table 2(c) |
| ``adaptformer`` | bottleneck-256 AdaptMLP + head (``variant``) | PUMA Table 2(c), VPTSP Table 1 (``layers=7``) |
| ``bitfit`` | all backbone biases + head | VPTSP Table 1 |
| ``vptsp`` | VPT-deep + BitFit + class prompts + proxy branch + accumulator + proxy bias | VPTSP |

``vptsp`` options: ``num_classes`` (required), ``num_prompts``/``prompt_depth``/``prompt_step`` (task prompts),
``class_prompts``/``class_prompt_depth``/``class_prompt_step``, ``accumulator``, ``proxy_bias_ratio``,
``proxy_source``, ``class_prompts_device``, ``bitfit_backbone`` (default True, as the official code).

``bitfit=True`` adds BitFit to any ViT method (VPTSP's "(B)" rows). ``adaptformer``'s ``variant``: ``adaptformer``
(AdaptFormer's own), ``puma`` or ``vptsp`` (each paper's official adapter, :data:`ADAPTFORMER_VARIANTS`).

Methods are registered by name (:func:`register_method`, like timm's ``register_model``): each builder takes the
options it reads and creates its modules in a fixed order, so a configuration always gets the same initial
weights. Written by hand because the methods combine umlkit's own PEFT modules (:mod:`umlkit.models.peft_vit`).

The builder API is public, and the built-in methods use it: a builder receives a :class:`MethodBuild`, takes its
options with :func:`pop_options`, makes the body with :func:`build_body` and ends with :func:`finish`
(``configs/examples/plugin_method.py`` is a method of one's own built from these four names only).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from torch import nn

from umlkit._registry import add_entry
from umlkit.models.backbones import create_backbone, data_config, resolve_backbone_name
from umlkit.models.embedding import EmbeddingModel, build_head
from umlkit.models.layers import LoRAQKV, PromptPool
from umlkit.models.peft_vit import PEFTViT
from umlkit.models.vptsp import VPTSPModel

__all__ = ["create_model", "count_trainable", "parameter_budget", "register_method", "method_entry", "METHODS",
           "MethodBuild", "pop_options", "build_body", "finish"]


@dataclass
class MethodBuild:
    """What a method builder (:func:`register_method`) gets: the backbone and the options left after the common
    ones were taken. A builder may change the fields marked (settable) before it calls :func:`finish`.

    Attributes:
        net: the timm backbone, all of it frozen (``requires_grad`` False) except for method ``full``; a builder
            unfreezes what its method trains (``net.blocks[-1].requires_grad_(True)``) or wraps parts of it.
        kw: the method's own options (``model.options`` less the common ones); take them with
            :func:`pop_options`. Whatever is left when :func:`finish` runs is an error naming the option.
        method: the registered name being built (recorded in the model and in error messages).
        timm_name: the backbone's full timm name.
        embed_dim: the embedding size of the head (``model.embed_dim``).
        data_config: timm's input configuration of the backbone (size, mean, std), kept by the model.
        is_vit: whether ``net`` is a ViT (has ``blocks`` and ``patch_embed``); only then does :func:`build_body`
            wrap it in a :class:`~umlkit.models.PEFTViT`. A method registered without ``cnn=True`` always gets one.
        head_kind: (settable) the head :func:`finish` builds, one of :data:`umlkit.models.HEADS` (option ``head``,
            default ``"linear"``; ``"identity"`` embeds the backbone feature itself).
        bitfit: (settable) whether :func:`finish` makes every backbone bias trainable (option ``bitfit``).
        aux_spec: the auxiliary heads the objective needs (S2SD, DiVA): ``{name: dim or (dim, kind)}`` or None.
        concat_aux: evaluate on the concatenation of all heads (option ``eval_concat_aux``, DiVA).
        head_hidden: (settable) the hidden width of an ``mlp3`` head (option ``hidden`` of method ``mlp3``).
    """
    net: nn.Module
    kw: dict
    method: str
    timm_name: str
    embed_dim: int
    data_config: dict
    is_vit: bool
    head_kind: str
    bitfit: bool
    aux_spec: dict | None
    concat_aux: bool
    head_hidden: int = 2048         # mlp3's hidden width (option ``hidden``)


_Build = MethodBuild   # the name before the builder API was public (issue 82)


@dataclass(frozen=True)
class MethodEntry:
    name: str
    build: Callable[[MethodBuild], nn.Module] = field(repr=False)
    cnn: bool = False               # also available on CNN backbones (no ViT internals needed)
    needs_num_classes: bool = False  # create_model needs num_classes= (the training classes), e.g. VPTSP


_METHODS: dict[str, MethodEntry] = {}


def register_method(name: str, build: Callable | None = None, *, cnn: bool = False, needs_num_classes: bool = False,
                    override: bool = False):
    """Register ``build(b) -> model`` for ``create_model(..., method=name)`` (decorator or plain call).

    ``b`` is a :class:`MethodBuild`: the backbone (``b.net``, with ``requires_grad`` already set: trainable for
    ``full`` only), the method's remaining options (``b.kw``; take what the method reads with :func:`pop_options`,
    leftovers are an error in :func:`finish`) and the common options. A builder sets what its method trains, makes
    the body with :func:`build_body` and ends with ``finish(b, body)``, which adds the head::

        from umlkit.models import build_body, finish, pop_options, register_method

        @register_method("last_blocks")
        def last_blocks(b):
            (k,) = pop_options(b.kw, blocks=2)     # model.options.blocks, default 2
            for block in b.net.blocks[-k:]:
                block.requires_grad_(True)
            return finish(b, build_body(b))

    Create modules in a fixed order (options taken in that order too), so that a configuration always gets the
    same initial weights. ``cnn=True``: the method also runs on CNN backbones (it needs no ViT internals);
    ``needs_num_classes=True``: ``create_model`` must be given ``num_classes=`` (the training engine passes the
    training classes). In a file of one's own, the method trains from YAML with ``umlkit train CONFIG --plugin
    FILE`` (``configs/examples/plugin_method.py``). A name registered twice by different builders is an error (the
    same builder again, as when a module is imported twice, replaces it), unless ``override=True`` (recorded in the
    run's ``config.json``: :func:`umlkit._registry.overrides`).
    """
    def add(fn: Callable) -> Callable:
        add_entry(_METHODS, "method", name, MethodEntry(name, fn, cnn, needs_num_classes), override)
        return fn

    return add(build) if build is not None else add


def method_entry(name: str) -> MethodEntry:
    if name not in _METHODS:
        raise ValueError(f"unknown method {name!r}; choose one of {', '.join(_METHODS)}")
    return _METHODS[name]


def _enable_bitfit(backbone: nn.Module) -> None:
    for name, p in backbone.named_parameters():
        if name.endswith("bias"):
            p.requires_grad_(True)


def pop_options(kwargs: dict, **defaults) -> list:
    """The method options named by ``defaults`` (given or default), taken out of ``kwargs``, in the order of
    ``defaults``: ``rank, alpha = pop_options(b.kw, rank=128, alpha=None)``. An option whose default is a positive
    whole number (a pool size, a rank, a width, a count of prompts) must be one: 0 would build empty modules that
    train nothing (a ValueError naming ``model.options.<name>``)."""
    out = []
    for k, v in defaults.items():
        value = kwargs.pop(k, v)
        if (isinstance(v, int) and not isinstance(v, bool) and v > 0
                and (isinstance(value, bool) or not isinstance(value, int) or value < 1)):
            raise ValueError(f"model option {k} = {value!r}: expected a whole number >= 1 (model.options.{k})")
        out.append(value)
    return out


def build_body(b: MethodBuild, **peft_options) -> nn.Module:
    """The model's body: the backbone itself (CNN) or a :class:`~umlkit.models.PEFTViT` around it with
    ``peft_options`` (its keyword arguments: ``shallow_prompts``, ``deep_prompts``, ``prompt_pool``, adapters,
    AdaptFormer; none for a ViT whose own parameters are what the method trains)."""
    return PEFTViT(b.net, **peft_options) if b.is_vit else b.net


_pop, _body = pop_options, build_body   # the names before the builder API was public (issue 82)


# every method option some builder (or create_model itself) reads: what a misspelt option is compared with
OPTION_NAMES = ("freeze_bn", "head", "bitfit", "aux_heads", "eval_concat_aux", "checkpoint_blocks", "hidden",
                "num_prompts", "prompt_depth", "prompt_step", "pool_size", "prompt_length", "identical_init",
                "use_prompts", "keep_prob", "adapter_dim", "adapter_scale", "skip_dropped", "use_adapters", "rank",
                "alpha", "layers", "bitfit_backbone", "num_classes", "variant")


def _option_hint(b: MethodBuild) -> str:
    """" (did you mean 'adapter_dim'?)": the closest option the methods take, or "" (``model.options`` is checked
    only here, when the model is built)."""
    from umlkit._yaml import nearest
    return nearest(sorted(b.kw)[0], OPTION_NAMES)


def finish(b: MethodBuild, body: nn.Module) -> EmbeddingModel:
    """The :class:`~umlkit.models.EmbeddingModel` of ``body``, in this order: BitFit when ``b.bitfit``, the check
    that every option in ``b.kw`` was taken (TypeError naming the rest, and the nearest option name), the head of
    kind ``b.head_kind`` on the backbone's features and the auxiliary heads of ``b.aux_spec``. The head is created
    last, so its initial weights follow those of the modules the builder made."""
    if b.bitfit:
        _enable_bitfit(b.net)
    if b.kw:
        raise TypeError(f"unexpected option(s) for method {b.method!r}: {sorted(b.kw)}{_option_hint(b)}")
    feat_dim = b.net.num_features
    head = build_head(b.head_kind, feat_dim, b.embed_dim, hidden=b.head_hidden)
    out_dim = feat_dim if b.head_kind == "identity" else b.embed_dim
    aux = {}
    for name, spec in (b.aux_spec or {}).items():
        dim, kind = (spec, "linear") if isinstance(spec, int) else spec
        aux[name] = build_head(kind, feat_dim, dim)
    return EmbeddingModel(body, head, b.method, b.timm_name, out_dim, data_config=b.data_config, aux_heads=aux,
                          eval_concat_aux=b.concat_aux)


_finish = finish   # the name before the builder API was public (issue 82)


def create_model(backbone: str, method: str, embed_dim: int = 128, pretrained: bool = False,
                 weights: str | Path | None = None, **method_kwargs) -> EmbeddingModel:
    """Build an embedding model producing L2-normalised embeddings.

    Args:
        backbone: a short name from :data:`umlkit.models.BACKBONES` or any timm model name.
        method: one of :data:`METHODS` (or a method added with :func:`register_method`).
        embed_dim: embedding size of the head (ignored by ``zero_shot``).
        pretrained: load timm's pretrained weights from the hub.
        weights: a local checkpoint instead of the hub.
        **method_kwargs: method options, e.g. ``pool_size=1`` (single prompt), ``keep_prob=1.0`` (static
            adapters), ``head="ln_linear"``, ``bitfit=True``, ``num_classes=100`` (``vptsp``),
            ``freeze_bn=True`` (ResNets), ``aux_heads={"s2sd_0": (1024, "mlp2")}`` (extra heads for
            S2SD/DiVA, see :func:`umlkit.losses.aux_heads_for`), ``eval_concat_aux=True`` (DiVA),
            ``checkpoint_blocks=True`` (memory-light: ViT blocks recomputed in the backward pass; an int k
            recomputes the first k blocks only, parameter-efficient methods), ``skip_dropped=True`` (PUMA: each
            stochastic adapter runs on its kept samples only; same draws, float-rounding-level differences).

    Example:
        >>> m = create_model("vit_tiny_uml", "puma", embed_dim=32)
        >>> m(torch.randn(2, 3, 32, 32)).shape
        torch.Size([2, 32])
    """
    entry = method_entry(method)
    if embed_dim is not None and (isinstance(embed_dim, bool) or not isinstance(embed_dim, int) or embed_dim < 1):
        raise ValueError(f"embed_dim must be an integer >= 1, got {embed_dim!r}")
    if not isinstance(pretrained, bool):   # "no" would be true and go to the hub
        raise ValueError(f"pretrained must be True or False, got {pretrained!r}")
    kw = dict(method_kwargs)
    (freeze_bn,) = pop_options(kw, freeze_bn=False)
    net = create_backbone(backbone, pretrained=pretrained, weights=weights, freeze_bn=freeze_bn)
    cfg = data_config(net)
    timm_name = resolve_backbone_name(backbone)
    is_vit = hasattr(net, "blocks") and hasattr(net, "patch_embed")
    if not is_vit and not entry.cnn:
        cnn = [n for n, e in _METHODS.items() if e.cnn]
        raise ValueError(f"method {method!r} needs a ViT backbone; {timm_name} supports {', '.join(cnn)}")
    head_kind, bitfit, aux_spec, concat_aux, light = pop_options(kw, head="linear", bitfit=False, aux_heads=None,
                                                                 eval_concat_aux=False, checkpoint_blocks=False)
    net.requires_grad_(method == "full")
    model = entry.build(MethodBuild(net, kw, method, timm_name, embed_dim, cfg, is_vit, head_kind, bitfit, aux_spec,
                                    concat_aux))
    if light is not False:
        _memory_light(model, method, light)
    return model


def _memory_light(model: EmbeddingModel, method: str, light: bool | int) -> None:
    """``checkpoint_blocks``: recompute transformer blocks in the backward pass instead of storing their activations
    (all with ``True``, the first k with an int k; PEFTViT's own loop, or timm's ``set_grad_checkpointing`` for a
    plain ViT, which checkpoints all blocks)."""
    body = model.backbone
    if isinstance(body, PEFTViT):
        depth = len(body.vit.blocks)
    elif hasattr(body, "set_grad_checkpointing") and hasattr(body, "blocks"):
        depth = len(body.blocks)
    else:
        raise ValueError(f"checkpoint_blocks needs a ViT backbone (method {method!r} on {type(body).__name__})")
    count = depth if light is True else light
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= depth:
        raise ValueError(f"checkpoint_blocks={light!r}: expected true, false or a block count in [0, {depth}]")
    if isinstance(body, PEFTViT):
        body.checkpoint_blocks = count
    elif count in (0, depth):
        body.set_grad_checkpointing(count == depth)
    else:
        raise ValueError(f"checkpoint_blocks={light}: method {method!r} checkpoints all {depth} blocks or none "
                         "(timm's set_grad_checkpointing); a block count needs a parameter-efficient ViT method")


# ------------------------------------------------------------------------------------------------ the methods
# Registered in the order of METHODS. Each pops its options in the order the modules are created, so the random
# initialisation is the same for every configuration.

@register_method("zero_shot", cnn=True)
def _zero_shot(b: MethodBuild) -> nn.Module:
    b.head_kind = "identity"
    model = finish(b, build_body(b))
    model.requires_grad_(False)
    return model


def _plain(b: MethodBuild) -> nn.Module:
    return finish(b, build_body(b))


register_method("full", _plain, cnn=True)
register_method("linear", _plain, cnn=True)


@register_method("mlp3", cnn=True)
def _mlp3(b: MethodBuild) -> nn.Module:
    (b.head_hidden,) = pop_options(b.kw, hidden=2048)
    body = build_body(b)
    b.head_kind = "mlp3"
    return finish(b, body)


@register_method("vpt")
def _vpt(b: MethodBuild) -> nn.Module:
    (n,) = pop_options(b.kw, num_prompts=10)
    return finish(b, build_body(b, shallow_prompts=n))


@register_method("vpt_deep")
def _vpt_deep(b: MethodBuild) -> nn.Module:
    n, depth, step = pop_options(b.kw, num_prompts=10, prompt_depth=12, prompt_step=0)
    return finish(b, build_body(b, deep_prompts=[max(n - i * step, 0)
                                                 for i in range(min(depth, len(b.net.blocks)))]))


def _prompt_pool_options(b: MethodBuild) -> dict:
    pool_size, length, identical = pop_options(b.kw, pool_size=20, prompt_length=8, identical_init=True)
    if b.kw.pop("use_prompts", True):
        return {"prompt_pool": PromptPool(b.net.embed_dim, pool_size, length, identical_init=identical)}
    return {}


def _adapter_options(b: MethodBuild, default_keep: float) -> dict:
    keep, bottleneck, scale, skip = pop_options(b.kw, keep_prob=default_keep, adapter_dim=128, adapter_scale=0.1,
                                                skip_dropped=False)
    if b.kw.pop("use_adapters", True):
        return dict(adapter_keep_prob=keep, adapter_bottleneck=bottleneck, adapter_scale=scale,
                    adapter_skip_dropped=skip)
    return {}


@register_method("prompt_pool")
def _prompt_pool(b: MethodBuild) -> nn.Module:
    return finish(b, build_body(b, **_prompt_pool_options(b)))


@register_method("adapter")
def _adapter(b: MethodBuild) -> nn.Module:
    return finish(b, build_body(b, **_adapter_options(b, 1.0)))


@register_method("stochastic_adapter")
def _stochastic_adapter(b: MethodBuild) -> nn.Module:
    return finish(b, build_body(b, **_adapter_options(b, 0.5)))


@register_method("puma")
def _puma(b: MethodBuild) -> nn.Module:
    options = _prompt_pool_options(b)  # the pool is created before the adapters (initialisation order)
    options.update(_adapter_options(b, 0.5))
    return finish(b, build_body(b, **options))


@register_method("lora")
def _lora(b: MethodBuild) -> nn.Module:
    rank, alpha = pop_options(b.kw, rank=128, alpha=None)
    for blk in b.net.blocks:
        blk.attn.qkv = LoRAQKV(blk.attn.qkv, rank=rank, alpha=alpha)
    return finish(b, build_body(b))


# whose AdaptFormer: the adapter's input, placement, scale and LayerNorm (models/layers/adapter.py)
ADAPTFORMER_VARIANTS = {
    "adaptformer": dict(adaptformer_input="stream", adaptformer_last=False, adaptformer_scale=0.1),
    "puma": dict(adaptformer_input="norm", adaptformer_last=False, adaptformer_scale=0.1),
    "vptsp": dict(adaptformer_input="stream", adaptformer_last=True, adaptformer_scale=1.0, adaptformer_ln="post"),
}


@register_method("adaptformer")
def _adaptformer(b: MethodBuild) -> nn.Module:
    bottleneck, layers, variant = pop_options(b.kw, adapter_dim=256, layers=None, variant="adaptformer")
    if variant not in ADAPTFORMER_VARIANTS:
        raise ValueError(f"model option variant = {variant!r}: the adaptformer variants are "
                         f"{sorted(ADAPTFORMER_VARIANTS)} (model.options.variant)")
    return finish(b, build_body(b, adaptformer_bottleneck=bottleneck, adaptformer_layers=layers,
                                **ADAPTFORMER_VARIANTS[variant]))


@register_method("bitfit", cnn=True)
def _bitfit(b: MethodBuild) -> nn.Module:
    b.bitfit = True
    return finish(b, build_body(b))


@register_method("vptsp", needs_num_classes=True)
def _vptsp(b: MethodBuild) -> nn.Module:
    if b.aux_spec:
        raise ValueError("aux_heads are not supported with method 'vptsp' (its proxy branch is its extra head)")
    num_prompts, depth, step, num_classes = pop_options(b.kw, num_prompts=10, prompt_depth=12, prompt_step=0,
                                                        num_classes=None)
    counts = [max(num_prompts - i * step, 0) for i in range(min(depth, len(b.net.blocks)))]
    body = PEFTViT(b.net, deep_prompts=counts)
    if b.kw.pop("bitfit_backbone", True):  # the official code always trains the biases
        _enable_bitfit(b.net)
    return VPTSPModel(body, b.timm_name, b.embed_dim, num_classes, data_config=b.data_config, **b.kw)


@register_method("layernorm", cnn=False)
def _layernorm(b: MethodBuild) -> nn.Module:
    """LayerNorm tuning (Basu et al., "Strong baselines for parameter-efficient few-shot fine-tuning", AAAI 2024):
    the backbone frozen except the scale and shift of every LayerNorm (the final norm included), and the head."""
    for module in b.net.modules():
        if isinstance(module, nn.LayerNorm):
            module.requires_grad_(True)
    return finish(b, build_body(b))


METHODS = tuple(_METHODS)  # the built-in methods, in this order


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
