"""umlkit.losses: every loss of the four papers with pytorch-metric-learning's call convention.

Each loss declares the inputs the training engine must pass (``inputs``: ``embeddings``, ``labels``, ``aux``,
``features``, ``views``, ``proxies``, ``model``; :func:`loss_inputs`), so the engine calls every term of a
configuration's objective without knowing its class. ``model_regularizer`` is the term that returns the model's
own penalty (``model.extra_loss()``, e.g. PUMA's prompt orthogonality).

``create_loss(name, num_classes=None, embedding_size=None, **overrides)`` returns a module called as
``loss(embeddings, labels, indices_tuple=None, ref_emb=None, ref_labels=None)`` (``ExternalProxyAnchorLoss``
takes the proxies as third argument). :func:`loss_table` lists every loss, its source and its defaults.
"""
from __future__ import annotations

import pandas as pd
from torch import nn
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning import miners as pml_miners

from umlkit.losses.curricular_face import CurricularFaceLoss
from umlkit.losses.hyperbolic import HypLoss, poincare_distance_matrix, to_poincare
from umlkit.losses.language_guidance import LG_MODES, LanguageGuidanceLoss
from umlkit.losses.multi_head import DiVALoss, S2SDLoss, UniformPriorLoss, aux_heads_for, similarity_distillation
from umlkit.losses.pml_backed import PMLLoss
from umlkit.losses.proxy_anchor_external import ExternalProxyAnchorLoss
from umlkit.losses.rho_distance import RhoDistanceMiner

__all__ = ["LOSSES", "TERMS", "ModelRegularizer", "loss_inputs", "DEFAULT_INPUTS", "DiVALoss", "S2SDLoss", "UniformPriorLoss", "aux_heads_for", "similarity_distillation",
           "CurricularFaceLoss", "ExternalProxyAnchorLoss", "HypLoss", "LanguageGuidanceLoss", "LG_MODES",
           "PMLLoss", "RhoDistanceMiner", "create_loss", "loss_table", "poincare_distance_matrix", "to_poincare"]

# name -> (implementation, source of the defaults, defaults)
LOSSES: dict[str, tuple[str, str, dict]] = {
    "triplet": ("PML TripletMarginLoss + TripletMarginMiner(semihard)",
                "Schroff et al. 2015 (FaceNet) margin 0.2; semi-hard mining as Roth et al. 2020",
                dict(margin=0.2)),
    "margin": ("PML MarginLoss(learn_beta) + DistanceWeightedMiner",
               "Wu et al. 2017: margin 0.2, beta 1.2 learnable per class, distance-weighted sampling (cutoff 0.5, "
               "non-zero-loss cutoff 1.4); ooDML's 'Margin (D)'", dict(margin=0.2, beta=1.2)),
    "r_margin": ("PML MarginLoss(learn_beta) + umlkit RhoDistanceMiner",
                 "Roth et al. 2020 rho-regularisation (rho 0.2) on Margin (D); ooDML's 'R-Margin'",
                 dict(margin=0.2, beta=1.2, rho=0.2)),
    "multisimilarity": ("PML MultiSimilarityLoss + MultiSimilarityMiner",
                        "Wang et al. 2019: alpha 2, beta 50, base 0.5, miner epsilon 0.1 (ooDML, PUMA)",
                        dict(alpha=2.0, beta=50.0, base=0.5, epsilon=0.1)),
    "proxy_anchor": ("PML ProxyAnchorLoss", "Kim et al. 2020: alpha 32, delta 0.1", dict(alpha=32.0, margin=0.1)),
    "softtriple": ("PML SoftTripleLoss", "Qian et al. 2019: 10 centres/class, lambda 20, gamma 0.1, margin 0.01",
                   dict(centers_per_class=10, la=20.0, gamma=0.1, margin=0.01)),
    "cosface": ("PML CosFaceLoss", "Wang et al. 2018: margin 0.35, scale 64", dict(margin=0.35, scale=64.0)),
    "arcface": ("PML ArcFaceLoss", "Deng et al. 2019: margin 0.5 rad (28.6 deg), scale 64",
                dict(margin=28.6, scale=64.0)),
    "curricularface": ("umlkit CurricularFaceLoss", "Huang et al. 2020; PUMA: m 0.3, s 32, per-class t (EMA 0.99)",
                       dict(margin=0.3, scale=32.0, t_mode="per_class")),
    "hyp": ("umlkit HypLoss", "Ermolov et al. 2022 (Hyp-ViT): c 0.1, clip radius 2.3, tau 0.2",
            dict(c=0.1, clip_r=2.3, tau=0.2)),
    "proxy_anchor_external": ("umlkit ExternalProxyAnchorLoss",
                              "VPTSP: alpha 32, delta 0.1, both terms averaged over all classes",
                              dict(alpha=32.0, delta=0.1, normalisation="vptsp")),
    "language_guidance": ("umlkit LanguageGuidanceLoss", "Roth et al. 2022 (ELG/PLG): shift 1, T 1, KL(P_img||P_lang)",
                          dict(mode="kl_rowwise", shift=1.0, temperature=1.0, direction="backward")),
    "uniform_prior": ("umlkit UniformPriorLoss (base: PML)",
                      "Sinha et al. 2020 adversarial uniformity on the sphere; weight 0.1 and MLP 512 are umlkit's [open]",
                      dict(base="margin", weight=0.1, hidden=512)),
    "s2sd": ("umlkit S2SDLoss (base: PML)",
             "Roth et al. 2021: target dims 512/1024/1536/2048, T 1, w 50, feature distillation 50 (recalled) [open]",
             dict(base="margin", target_dims=(512, 1024, 1536, 2048), temperature=1.0, weight=50.0,
                  feature_weight=50.0)),
    "diva": ("umlkit DiVALoss (base: PML)",
             "Milbich et al. 2020: 4 x 128-d heads, aux weights 0.3, decorrelation 1500 [open], triplet margin 0.2",
             dict(base="margin", alpha_shared=0.3, alpha_intra=0.3, alpha_selfsup=0.3, decorrelation=1500.0)),
}

_WRAPPERS = ("uniform_prior", "s2sd", "diva")
# objective terms that are not losses over embeddings (create_loss builds them too; not in LOSSES)
TERMS = {"model_regularizer": ("umlkit ModelRegularizer", "the model's own penalty, model.extra_loss() (PUMA: "
                               "prompt-pool orthogonality; 0 for models without one)", {})}
DEFAULT_INPUTS = ("embeddings", "labels")


class ModelRegularizer(nn.Module):
    """An objective term with the model's own penalty: ``model.extra_loss()``, or 0.0 when it has none."""
    inputs = ("model",)

    def forward(self, model: nn.Module):
        return model.extra_loss() if hasattr(model, "extra_loss") else 0.0


def loss_inputs(loss: nn.Module) -> tuple[str, ...]:
    """What ``loss`` must be called with: ``embeddings`` and ``labels`` positionally, the rest as keywords."""
    return tuple(getattr(loss, "inputs", DEFAULT_INPUTS))


def create_loss(name: str, num_classes: int | None = None, embedding_size: int | None = None, **overrides):
    """A loss with the papers' defaults (see :data:`LOSSES`), any of them overridable by keyword.

    Example:
        >>> import torch
        >>> loss = create_loss("curricularface", num_classes=10, embedding_size=8)
        >>> float(loss(torch.randn(4, 8), torch.tensor([0, 1, 2, 3]))) > 0
        True
    """
    if name not in LOSSES and name not in TERMS:
        raise ValueError(f"unknown loss {name!r}; choose one of {', '.join([*LOSSES, *TERMS])}")
    cfg = dict({**LOSSES, **TERMS}[name][2], **overrides)
    if name == "model_regularizer":
        if cfg:
            raise TypeError(f"model_regularizer takes no options, got {sorted(cfg)}")
        return ModelRegularizer()
    if name in _WRAPPERS:
        base_name = cfg.pop("base")
        base_kwargs = cfg.pop("base_kwargs", {})
        if base_name in _WRAPPERS or base_name not in LOSSES:
            raise ValueError(f"{name}: base must be a single-embedding loss from LOSSES, got {base_name!r}")
        if embedding_size is None:
            raise ValueError(f"loss {name!r} needs embedding_size (it builds heads/discriminators of that size)")

        def factory(dim: int):
            return create_loss(base_name, num_classes, dim, **base_kwargs)

        if name == "uniform_prior":
            return UniformPriorLoss(factory(embedding_size), embedding_size, **cfg)
        if name == "s2sd":
            return S2SDLoss(factory, embedding_size, **cfg)
        return DiVALoss(factory(embedding_size), embedding_size, **cfg)

    def need(*what):
        missing = [w for w, v in (("num_classes", num_classes), ("embedding_size", embedding_size)) if w in what and v is None]
        if missing:
            raise ValueError(f"loss {name!r} has learnable proxies and needs {' and '.join(missing)}")

    if name == "triplet":
        miner = pml_miners.TripletMarginMiner(margin=cfg["margin"], type_of_triplets="semihard")
        return PMLLoss(name, pml_losses.TripletMarginLoss(margin=cfg["margin"]), miner)
    if name in ("margin", "r_margin"):
        per_class = cfg.pop("per_class_beta", num_classes is not None)
        loss = pml_losses.MarginLoss(margin=cfg["margin"], beta=cfg["beta"], learn_beta=True,
                                     num_classes=num_classes if per_class else None)
        miner = (RhoDistanceMiner(rho=cfg["rho"]) if name == "r_margin" else
                 pml_miners.DistanceWeightedMiner(cutoff=0.5, nonzero_loss_cutoff=1.4))
        return PMLLoss(name, loss, miner, num_classes if per_class else None)
    if name == "multisimilarity":
        miner_kind = cfg.pop("miner", "multisimilarity")
        miner = (pml_miners.MultiSimilarityMiner(epsilon=cfg["epsilon"]) if miner_kind == "multisimilarity" else
                 pml_miners.DistanceWeightedMiner(cutoff=0.5, nonzero_loss_cutoff=1.4))
        return PMLLoss(name, pml_losses.MultiSimilarityLoss(alpha=cfg["alpha"], beta=cfg["beta"], base=cfg["base"]), miner)
    if name == "proxy_anchor":
        need("num_classes", "embedding_size")
        return PMLLoss(name, pml_losses.ProxyAnchorLoss(num_classes, embedding_size, margin=cfg["margin"],
                                                        alpha=cfg["alpha"]), None, num_classes, embedding_size)
    if name == "softtriple":
        need("num_classes", "embedding_size")
        return PMLLoss(name, pml_losses.SoftTripleLoss(num_classes, embedding_size, **cfg), None, num_classes,
                       embedding_size)
    if name in ("cosface", "arcface"):
        need("num_classes", "embedding_size")
        cls = pml_losses.CosFaceLoss if name == "cosface" else pml_losses.ArcFaceLoss
        return PMLLoss(name, cls(num_classes, embedding_size, margin=cfg["margin"], scale=cfg["scale"]), None,
                       num_classes, embedding_size)
    if name == "curricularface":
        need("num_classes", "embedding_size")
        return CurricularFaceLoss(num_classes, embedding_size, **cfg)
    if name == "hyp":
        return HypLoss(**cfg)
    if name == "proxy_anchor_external":
        return ExternalProxyAnchorLoss(**cfg)
    if name == "language_guidance":
        if "language_embeddings" not in cfg:
            raise ValueError("language_guidance needs language_embeddings=(n_classes, [k,] d) class-name embeddings")
        return LanguageGuidanceLoss(embedding_size=embedding_size, **cfg)
    raise AssertionError(name)  # pragma: no cover


def loss_table() -> pd.DataFrame:
    """Every loss: implementation (PML or umlkit), source of the defaults, and the defaults."""
    rows = [{"loss": k, "implementation": impl, "source": src, "defaults": ", ".join(f"{a}={b}" for a, b in d.items())}
            for k, (impl, src, d) in {**LOSSES, **TERMS}.items()]
    return pd.DataFrame(rows).set_index("loss")
