"""umlkit.losses: every loss of the four papers with pytorch-metric-learning's call convention.

Losses are registered by name (:func:`register_loss`, like timm's ``register_model``) with their implementation,
the source of their defaults and the defaults; :func:`create_loss` builds one by name and :func:`loss_table`
lists them all. Each loss declares the inputs the training engine must pass (``inputs``: ``embeddings``,
``labels``, ``aux``, ``features``, ``views``, ``proxies``, ``model``; :func:`loss_inputs`), and its registry entry
the auxiliary heads the model must build for it (:func:`aux_heads_for`), so the engine calls every term of a
configuration's objective without knowing its class. ``model_regularizer`` is the term that returns the model's
own penalty (``model.extra_loss()``, e.g. PUMA's prompt orthogonality).

``create_loss(name, num_classes=None, embedding_size=None, **overrides)`` returns a module called as
``loss(embeddings, labels, indices_tuple=None, ref_emb=None, ref_labels=None)`` (``ExternalProxyAnchorLoss``
takes the proxies as third argument). The builders below only configure PML's losses or umlkit's own modules;
nothing here is a reimplementation of a library loss.
"""
from __future__ import annotations

import math

import pandas as pd
from pytorch_metric_learning import distances as pml_distances
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning import miners as pml_miners
from torch import nn

from umlkit.losses._registry import (
    INPUTS,
    LOSSES,
    TERMS,
    aux_heads_for,
    loss_entry,
    loss_inputs,
    model_requirements,
    register_loss,
)
from umlkit.losses.curricular_face import CurricularFaceLoss
from umlkit.losses.hyperbolic import HypLoss, poincare_distance_matrix, to_poincare
from umlkit.losses.language_guidance import LG_MODES, LanguageGuidanceLoss
from umlkit.losses.language_variants import (
    LanguageMultiSimilarityLoss,
    LanguageSlotGuidanceLoss,
    LanguageTokenPredictionLoss,
)
from umlkit.losses.multi_head import DiVALoss, S2SDLoss, UniformPriorLoss, similarity_distillation
from umlkit.losses.pml_backed import PMLLoss
from umlkit.losses.proxy_anchor_external import ExternalProxyAnchorLoss
from umlkit.losses.roth_arcface import RothArcFaceLoss
from umlkit.losses.roth_margin import RothMarginLoss
from umlkit.losses.roth_multisimilarity import MultiSimilarityLoss

__all__ = ["INPUTS", "LOSSES", "TERMS", "ModelRegularizer", "aux_heads_for", "create_loss", "loss_entry",
           "loss_inputs", "loss_table", "model_requirements", "register_loss",
           "CurricularFaceLoss", "DiVALoss", "ExternalProxyAnchorLoss", "HypLoss", "LanguageGuidanceLoss", "LG_MODES",
           "LanguageMultiSimilarityLoss", "LanguageSlotGuidanceLoss", "LanguageTokenPredictionLoss",
           "MultiSimilarityLoss", "PMLLoss", "RothArcFaceLoss", "RothMarginLoss", "S2SDLoss", "UniformPriorLoss",
           "poincare_distance_matrix", "similarity_distillation", "to_poincare"]

# Builders take (num_classes, embedding_size, **options). The PML-backed ones name their options and end in
# ``**_unused``: create_loss refuses any other option for them (a misspelt ``margn`` would otherwise train with the
# default margin); the others pass their options to a class that refuses unknown ones itself.

def _need(name: str, num_classes, embedding_size, *what) -> None:
    missing = [w for w, v in (("num_classes", num_classes), ("embedding_size", embedding_size))
               if w in what and v is None]
    if missing:
        raise ValueError(f"loss {name!r} has learnable proxies and needs {' and '.join(missing)}")


def _puma_proxies(proxies) -> None:
    """PUMA's ``losses.py`` initialises every proxy loss's (classes, dim) proxies with ``kaiming_uniform_(mode=
    'fan_out')``: uniform within sqrt(6 / classes) (PML: normal(0, 1) for the face losses' W, kaiming-normal for
    Proxy-Anchor); PML's (dim, classes) W is passed transposed (torch's init draws without gradient)."""
    nn.init.kaiming_uniform_(proxies, mode="fan_out")


# ``variant`` names whose official code a loss follows where the papers differ (umlkit's Fidelity page lists each
# with its file); a paper's methods.yaml chooses its variant, the defaults below are the library's ("pml").

def _variant(name: str, variant: str, known: tuple[str, ...]) -> None:
    if variant not in known:
        raise ValueError(f"loss {name!r}: variant must be one of {known}, got {variant!r}")


@register_loss("triplet", implementation="PML TripletMarginLoss + TripletMarginMiner(semihard) | BatchHardMiner",
               source="Schroff et al. 2015 (FaceNet) margin 0.2, L2, semi-hard mining as Roth et al. 2020; "
                      "variant 'puma': PUMA's losses.TripletLoss (cosine distance, PML's margin 0.05, batch-hard)",
               defaults=dict(margin=0.2, variant="pml"))
def _triplet(num_classes, embedding_size, margin, variant, **_unused):
    _variant("triplet", variant, ("pml", "puma"))
    if variant == "puma":
        cosine = pml_distances.CosineSimilarity()
        return PMLLoss("triplet", pml_losses.TripletMarginLoss(margin=margin, distance=cosine),
                       pml_miners.BatchHardMiner())
    miner = pml_miners.TripletMarginMiner(margin=margin, type_of_triplets="semihard")
    return PMLLoss("triplet", pml_losses.TripletMarginLoss(margin=margin), miner)


def _margin_loss(name: str):
    def build(num_classes, embedding_size, margin, beta, variant, cp=None, per_class_beta=None, **_unused):
        per_class = num_classes is not None if per_class_beta is None else per_class_beta
        if name == "r_margin" or variant == "roth":
            _variant(name, variant, ("roth",) if name == "r_margin" else ("pml", "roth", "puma"))
            return RothMarginLoss(num_classes if per_class else None, margin=margin, beta=beta, learn_beta=per_class,
                                  sampling="rho_distance" if name == "r_margin" else "distance",
                                  cp=0.0 if cp is None else cp)
        _variant(name, variant, ("pml", "roth", "puma"))
        if variant == "puma":   # PUMA's losses.MarginLoss: a fixed beta, multi-similarity mining
            return PMLLoss(name, pml_losses.MarginLoss(margin=margin, beta=beta, nu=0.0),
                           pml_miners.MultiSimilarityMiner(epsilon=0.1))
        loss = pml_losses.MarginLoss(margin=margin, beta=beta, learn_beta=True,
                                     num_classes=num_classes if per_class else None)
        miner = pml_miners.DistanceWeightedMiner(cutoff=0.5, nonzero_loss_cutoff=1.4)
        return PMLLoss(name, loss, miner, num_classes if per_class else None)
    return build


register_loss("margin", _margin_loss("margin"),
              implementation="PML MarginLoss(learn_beta) + DistanceWeightedMiner | umlkit RothMarginLoss",
              source="Wu et al. 2017: margin 0.2, beta 1.2 learnable per class, distance-weighted sampling (cutoff "
                     "0.5, non-zero-loss cutoff 1.4); variant 'roth': ooDML's and language guidance's official "
                     "margin.py + distance.py; 'puma': PUMA's losses.MarginLoss",
              defaults=dict(margin=0.2, beta=1.2, variant="pml"))
register_loss("r_margin", _margin_loss("r_margin"), implementation="umlkit RothMarginLoss(rho_distance)",
              source="Roth et al. 2020 rho-regularisation as ooDML's official rho_distance.py (push-triplet "
                     "probability cp 0.2 by default; ooDML's script sets cp and beta per dataset)",
              defaults=dict(margin=0.2, beta=1.2, cp=0.2, variant="roth"))


@register_loss("multisimilarity", implementation="PML MultiSimilarityLoss + miner | umlkit MultiSimilarityLoss",
               source="Wang et al. 2019: alpha 2, beta 50, base 0.5, miner epsilon 0.1; variant 'roth': ooDML's "
                      "official multisimilarity.py (means over anchors with mined pairs), 'lg_code': language "
                      "guidance's (softplus of the batch mean), 'puma': PUMA's losses.MSLoss (distance-weighted "
                      "miner)", defaults=dict(alpha=2.0, beta=50.0, base=0.5, epsilon=0.1, variant="pml"))
def _multisimilarity(num_classes, embedding_size, alpha, beta, base, epsilon, variant, **_unused):
    _variant("multisimilarity", variant, ("pml", "roth", "lg_code", "puma"))
    if variant in ("roth", "lg_code"):
        reduction = "mined_anchors" if variant == "roth" else "softplus_of_mean"
        return MultiSimilarityLoss(alpha=alpha, beta=beta, base=base, epsilon=epsilon, reduction=reduction)
    mined = (pml_miners.MultiSimilarityMiner(epsilon=epsilon) if variant == "pml" else
             pml_miners.DistanceWeightedMiner(cutoff=0.5, nonzero_loss_cutoff=1.4))
    return PMLLoss("multisimilarity", pml_losses.MultiSimilarityLoss(alpha=alpha, beta=beta, base=base), mined)


@register_loss("proxy_anchor", implementation="PML ProxyAnchorLoss", source="Kim et al. 2020: alpha 32, delta 0.1; "
               "variant 'puma': PUMA's PALoss proxies (kaiming-uniform, fan out)",
               defaults=dict(alpha=32.0, margin=0.1, variant="pml"))
def _proxy_anchor(num_classes, embedding_size, alpha, margin, variant="pml", **_unused):
    _need("proxy_anchor", num_classes, embedding_size, "num_classes", "embedding_size")
    _variant("proxy_anchor", variant, ("pml", "puma"))
    loss = pml_losses.ProxyAnchorLoss(num_classes, embedding_size, margin=margin, alpha=alpha)
    if variant == "puma":
        _puma_proxies(loss.proxies)
    return PMLLoss("proxy_anchor", loss, None, num_classes, embedding_size)


@register_loss("softtriple", implementation="PML SoftTripleLoss",
               source="Qian et al. 2019: 10 centres/class, lambda 20, gamma 0.1, margin 0.01",
               defaults=dict(centers_per_class=10, la=20.0, gamma=0.1, margin=0.01))
def _softtriple(num_classes, embedding_size, **options):
    _need("softtriple", num_classes, embedding_size, "num_classes", "embedding_size")
    return PMLLoss("softtriple", pml_losses.SoftTripleLoss(num_classes, embedding_size, **options), None, num_classes,
                   embedding_size)


def _face_loss(name: str, cls):
    def build(num_classes, embedding_size, margin, scale, variant="pml", **_unused):
        _need(name, num_classes, embedding_size, "num_classes", "embedding_size")
        _variant(name, variant, ("pml", "puma", "roth") if name == "arcface" else ("pml", "puma"))
        if variant == "roth":   # margin in degrees as PML's, the official code's radians inside
            return RothArcFaceLoss(num_classes, embedding_size, margin=math.radians(margin), scale=scale)
        loss = cls(num_classes, embedding_size, margin=margin, scale=scale)
        if variant == "puma":
            _puma_proxies(loss.W.T)
        return PMLLoss(name, loss, None, num_classes, embedding_size)
    return build


register_loss("cosface", _face_loss("cosface", pml_losses.CosFaceLoss), implementation="PML CosFaceLoss",
              source="Wang et al. 2018: margin 0.35, scale 64; variant 'puma': PUMA's proxies (kaiming-uniform, "
                     "fan out)",
              defaults=dict(margin=0.35, scale=64.0, variant="pml"))
register_loss("arcface", _face_loss("arcface", pml_losses.ArcFaceLoss),
              implementation="PML ArcFaceLoss | umlkit RothArcFaceLoss",
              source="Deng et al. 2019: margin 0.5 rad (PML takes degrees: 28.648), scale 64 (PUMA's losses.ArcFaceLoss"
                     "); variant 'puma': its proxies (kaiming-uniform, fan out); variant 'roth': ooDML's official "
                     "arcface.py (cosines clamped at 1e-10, scale 16)",
              defaults=dict(margin=28.64788975654116, scale=64.0, variant="pml"))


@register_loss("curricularface", implementation="umlkit CurricularFaceLoss",
               source="Huang et al. 2020; PUMA: m 0.3, s 32, per-class t (EMA 0.99)",
               defaults=dict(margin=0.3, scale=32.0, t_mode="per_class"))
def _curricularface(num_classes, embedding_size, **options):
    _need("curricularface", num_classes, embedding_size, "num_classes", "embedding_size")
    return CurricularFaceLoss(num_classes, embedding_size, **options)


@register_loss("hyp", implementation="umlkit HypLoss", source="Ermolov et al. 2022 (Hyp-ViT): c 0.1, clip radius 2.3, "
               "tau 0.2, mean over the k(k-1) ordered view pairs; PUMA's SupCon: tau 0.1, divisor k^2",
               defaults=dict(c=0.1, clip_r=2.3, tau=0.2, divisor="ordered_pairs"))
def _hyp(num_classes, embedding_size, **options):
    return HypLoss(**options)


@register_loss("proxy_anchor_external", implementation="umlkit ExternalProxyAnchorLoss",
               source="VPTSP: alpha 32, delta 0.1, both terms averaged over all classes",
               defaults=dict(alpha=32.0, delta=0.1, normalisation="vptsp"))
def _proxy_anchor_external(num_classes, embedding_size, **options):
    return ExternalProxyAnchorLoss(**options)


@register_loss("language_guidance", implementation="umlkit LanguageGuidanceLoss",
               source="Roth et al. 2022 (ELG/PLG): shift 1, T 1, KL(P_img||P_lang)",
               defaults=dict(mode="kl_rowwise", shift=1.0, temperature=1.0, direction="backward"))
def _language_guidance(num_classes, embedding_size, **options):
    if options.get("language_embeddings") is None:
        raise ValueError("language_guidance needs language_embeddings=(n_classes, [k,] d) class-name embeddings")
    if options.get("per_sample"):
        options["num_classes"] = num_classes
    return LanguageGuidanceLoss(embedding_size=embedding_size, **options)


@register_loss("language_guidance_slots", implementation="umlkit LanguageSlotGuidanceLoss",
               source="Roth et al. 2022, Table S3 'Multi': one row-wise KL per pseudolabel slot, averaged",
               defaults=dict(shift=1.0, temperature=1.0, direction="backward"))
def _language_guidance_slots(num_classes, embedding_size, **options):
    if options.get("language_embeddings") is None:
        raise ValueError("language_guidance_slots needs language_embeddings=(n_classes, k, d) pseudolabel embeddings")
    if options.get("per_sample"):
        options["num_classes"] = num_classes
    return LanguageSlotGuidanceLoss(embedding_size=embedding_size, **options)


@register_loss("language_multisimilarity", implementation="umlkit LanguageMultiSimilarityLoss",
               source="Roth et al. 2022, Table 4 (b) and Eqs. S1-S3: language similarity in MS mining or scales",
               defaults=dict(use="mining"))
def _language_multisimilarity(num_classes, embedding_size, **options):
    if options.get("language_embeddings") is None:
        raise ValueError("language_multisimilarity needs language_embeddings=(n_classes, [k,] d)")
    return LanguageMultiSimilarityLoss(**options)


@register_loss("language_token_prediction", implementation="umlkit LanguageTokenPredictionLoss",
               source="Roth et al. 2022, Table 4 (a) 'ViT Prediction' and Eq. S4: a transformer over the feature map",
               defaults=dict(heads=4, depth=1))
def _language_token_prediction(num_classes, embedding_size, **options):
    if options.get("language_embeddings") is None or options.get("feature_width") is None:
        raise ValueError("language_token_prediction needs language_embeddings and feature_width (the backbone's "
                         "channels)")
    return LanguageTokenPredictionLoss(**options)


def _wrapper(name: str, build_wrapped):
    """A loss around a base single-embedding loss (``base``, ``base_kwargs``) built at one or several sizes."""
    def build(num_classes, embedding_size, base, base_kwargs=None, **options):
        if base in _WRAPPERS or base not in LOSSES:
            raise ValueError(f"{name}: base must be a single-embedding loss from LOSSES, got {base!r}")
        if embedding_size is None:
            raise ValueError(f"loss {name!r} needs embedding_size (it builds heads/discriminators of that size)")

        def factory(dim: int):
            return create_loss(base, num_classes, dim, **(base_kwargs or {}))

        return build_wrapped(factory, embedding_size, **options)
    return build


_WRAPPERS = ("uniform_prior", "s2sd", "diva")
register_loss("uniform_prior", _wrapper("uniform_prior", lambda f, dim, **o: UniformPriorLoss(f(dim), dim, **o)),
              implementation="umlkit UniformPriorLoss (base: PML)",
              source="Sinha et al. 2020 adversarial uniformity on the sphere; weight 0.1 and MLP 512 are umlkit's "
                     "[open]", defaults=dict(base="margin", weight=0.1, hidden=512))
register_loss("s2sd", _wrapper("s2sd", S2SDLoss), implementation="umlkit S2SDLoss (base: PML)",
              source="Roth et al. 2021: target dims 512/1024/1536/2048, T 1, w 50, feature distillation 50 (recalled) "
                     "[open]", defaults=dict(base="margin", target_dims=(512, 1024, 1536, 2048), temperature=1.0,
                                             weight=50.0, feature_weight=50.0), aux_heads=S2SDLoss.aux_heads)
register_loss("diva", _wrapper("diva", lambda f, dim, **o: DiVALoss(f(dim), dim, **o)),
              implementation="umlkit DiVALoss (base: PML)",
              source="Milbich et al. 2020: 4 x 128-d heads, aux weights 0.3, decorrelation 1500 [open], triplet margin "
                     "0.2", defaults=dict(base="margin", alpha_shared=0.3, alpha_intra=0.3, alpha_selfsup=0.3,
                                          decorrelation=1500.0), aux_heads=DiVALoss.aux_heads, eval_concat_aux=True)


class ModelRegularizer(nn.Module):
    """An objective term with the model's own penalty: ``model.extra_loss()``, or 0.0 when it has none."""
    inputs = ("model",)

    def forward(self, model: nn.Module):
        return model.extra_loss() if hasattr(model, "extra_loss") else 0.0


@register_loss("model_regularizer", implementation="umlkit ModelRegularizer",
               source="the model's own penalty, model.extra_loss() (PUMA: prompt-pool orthogonality; 0 for models "
                      "without one)", term=True)
def _model_regularizer(num_classes, embedding_size, **options):
    if options:
        raise TypeError(f"model_regularizer takes no options, got {sorted(options)}")
    return ModelRegularizer()


def create_loss(name: str, num_classes: int | None = None, embedding_size: int | None = None, **overrides):
    """A loss with the papers' defaults (see :data:`LOSSES`), any of them overridable by keyword.

    Example:
        >>> import torch
        >>> loss = create_loss("curricularface", num_classes=10, embedding_size=8)
        >>> float(loss(torch.randn(4, 8), torch.tensor([0, 1, 2, 3]))) > 0
        True
    """
    entry = loss_entry(name)
    known = _named_options(entry.build)
    unknown = sorted(set(overrides) - known) if known is not None else []
    if unknown:
        raise TypeError(f"loss {name!r}: unknown option(s) {unknown}; it takes {', '.join(sorted(known)) or 'none'}")
    return entry.build(num_classes, embedding_size, **{**entry.defaults, **overrides})


def _named_options(build) -> set[str] | None:
    """The options a builder that ignores the rest (``**_unused``) names; None for builders that pass them on."""
    import inspect
    params = inspect.signature(build).parameters.values()
    if not any(p.kind is p.VAR_KEYWORD and p.name == "_unused" for p in params):
        return None
    return {p.name for p in params if p.kind is not p.VAR_KEYWORD} - {"num_classes", "embedding_size"}


def loss_table() -> pd.DataFrame:
    """Every loss: implementation (PML or umlkit), source of the defaults, and the defaults."""
    rows = [{"loss": k, "implementation": impl, "source": src, "defaults": ", ".join(f"{a}={b}" for a, b in d.items())}
            for k, (impl, src, d) in {**LOSSES, **TERMS}.items()]
    return pd.DataFrame(rows).set_index("loss")
