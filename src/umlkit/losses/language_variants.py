"""Language guidance's ablation terms (Roth, Vinyals, Akata, CVPR 2022; Table 4 and Table S3, supplementary B.2-B.3).

Three ways of using the language side that the paper's ablations compare against its row-wise KL distillation
(:class:`~umlkit.losses.language_guidance.LanguageGuidanceLoss`), each mixed into training as
L_DML + omega * term like every guided row, so that omega is tuned by the same sweep:

* :class:`LanguageSlotGuidanceLoss` (Table S3's matching methods, supp. B.3): "Multi" distils each pseudolabel
  slot's similarity matrix in a row-wise KL of its own, averaged, instead of one KL on their average; "Dense" uses
  the similarity of every slot pairing, disregarding the order (k^2 = 25 matrices for the top 5, footnote 7),
  averaged into one target; "Dense + Multi" one KL per pairing. With the official direction (the gradient
  through the image side only) the mean of per-matrix KLs has the same gradient as one KL on the averaged
  similarity - the log-softmaxes differ by a constant per row - so Multi trains as PLG and Dense + Multi as Dense;
  only the loss values differ.
* :class:`LanguageMultiSimilarityLoss` (Table 4 (b), "Mining mask" and "Weight scaling"): the Multi-Similarity loss
  (Wang et al. 2019; the official settings alpha 2, beta 40, lambda 0.5, epsilon 0.1) with the language similarity
  either in its mining rule (Eq. S1 with the linear interpolation f = (1 - nu1) S_lang + nu1 S_img of Eq. S2, which
  the supplement found best) or as a per-pair scale of its exponents (Eq. S3, nu3 = nu4 = 0.75, alpha 1.5 and beta
  45 as the supplement re-tuned them). Two details the paper leaves open, chosen here and stated: Eq. S1's
  negative condition is read with the ordinary Multi-Similarity direction (a negative is kept when its score
  exceeds the hardest positive's minus epsilon; the printed "<" would keep the easy ones), and Eq. S3's ratio
  S_lang / S_img is taken on similarities mapped to [0, 1] (cosines can be negative, where a fractional power of
  the ratio is undefined), clipped to [1e-3, 1e3] and held constant in the backward pass.
* :class:`LanguageTokenPredictionLoss` (Table 4 (a), "ViT Prediction"): a one-layer transformer over the backbone's
  last feature map (a ViT's token sequence, a CNN's flattened positions) with a learned query token predicts the
  class's language embedding; loss 1 - cosine (Eq. S4). The feature map is read by a forward hook on the backbone's
  last stage (a ViT's final norm, else timm's ``feature_info``), attached when the training step is built
  (``attach_model``).

Written by hand: pytorch-metric-learning's ``MultiSimilarityLoss`` and ``MultiSimilarityMiner`` take no external
pair similarity for their mining or weights.
"""
from __future__ import annotations

import torch
from torch import nn

from umlkit.losses._checks import check_inputs
from umlkit.losses.language_guidance import LanguageGuidanceLoss

__all__ = ["LanguageSlotGuidanceLoss", "LanguageMultiSimilarityLoss", "LanguageTokenPredictionLoss", "MS_USES"]

MS_USES = ("mining", "scaling")


def _unit_language(language_embeddings) -> torch.Tensor:
    """(n_classes, k, d) unit rows from (n_classes, d) or (n_classes, k, d)."""
    lang = torch.as_tensor(language_embeddings, dtype=torch.float32)
    lang = lang[:, None, :] if lang.ndim == 2 else lang
    if lang.ndim != 3:
        raise ValueError(f"language_embeddings must be (n_classes, d) or (n_classes, k, d), got {tuple(lang.shape)}")
    return nn.functional.normalize(lang, dim=-1)


class LanguageSlotGuidanceLoss(LanguageGuidanceLoss):
    """Row-wise KL (Eq. 2, the official shift, overwrite and direction) on the pseudolabel similarity matrices of
    several slot pairings: ``pairing="aligned"`` pairs slot i of one image's class with slot i of the other's (k
    matrices), ``"all"`` pairs every slot with every slot, disregarding their order (k^2 matrices: supp. B.3,
    footnote 7, "Dense"). ``one_kl=False`` distils each matrix in a KL of its own and averages the KLs ("Multi",
    "Dense + Multi"); ``one_kl=True`` averages the matrices into one target first ("Dense"; aligned + one KL is PLG
    itself, :class:`LanguageGuidanceLoss`)."""

    def __init__(self, language_embeddings, pairing: str = "aligned", one_kl: bool = False, **options):
        if options.get("mode", "kl_rowwise") != "kl_rowwise":
            raise ValueError(f"LanguageSlotGuidanceLoss distils row-wise KL per slot pairing; "
                             f"mode={options['mode']!r} is not supported")
        if pairing not in ("aligned", "all"):
            raise ValueError(f"pairing must be 'aligned' or 'all', got {pairing!r}")
        super().__init__(language_embeddings, **options)
        self.pairing, self.one_kl = pairing, bool(one_kl)

    def _matrices(self, lang: torch.Tensor) -> list[torch.Tensor]:
        """The (B, B) language similarities of each slot pairing (before the shift)."""
        k = lang.shape[1]
        pairs = ([(i, i) for i in range(k)] if self.pairing == "aligned" else
                 [(i, j) for i in range(k) for j in range(k)])
        return [lang[:, i] @ lang[:, j].T for i, j in pairs]

    def _kl(self, log_p_img: torch.Tensor, s_lang: torch.Tensor, fill: torch.Tensor, same: torch.Tensor):
        t = self.temperature
        log_p_lang = torch.log_softmax(torch.where(same, fill, s_lang + self.shift) / t, dim=1)
        if self.direction == "backward":
            kl = nn.functional.kl_div(log_p_lang, log_p_img, log_target=True, reduction="sum")
        else:
            kl = nn.functional.kl_div(log_p_img, log_p_lang, log_target=True, reduction="sum")
        return kl * t * t / log_p_img.shape[0]

    def forward(self, embeddings, labels, indices=None, indices_tuple=None, ref_emb=None,
                ref_labels=None) -> torch.Tensor:
        check_inputs("LanguageSlotGuidanceLoss", embeddings, labels, self.num_classes)
        x = embeddings if embeddings.dtype == torch.float64 else embeddings.float()
        xn = nn.functional.normalize(x, dim=1)
        s_img = xn @ xn.T
        lang = nn.functional.normalize(self.language, dim=-1).to(x.dtype)[self._rows(labels, indices)]  # (B, k, d)
        same = labels[:, None] == labels[None, :]
        fill = torch.full_like(s_img, 1.0 + self.shift)
        log_p_img = torch.log_softmax(torch.where(same, fill, s_img) / self.temperature, dim=1)
        matrices = self._matrices(lang)
        if self.one_kl:
            return self._kl(log_p_img, torch.stack(matrices).mean(dim=0), fill, same)
        return torch.stack([self._kl(log_p_img, m, fill, same) for m in matrices]).mean()


class LanguageMultiSimilarityLoss(nn.Module):
    """Multi-Similarity with the language similarity in its mining rule (``use="mining"``) or its pair scales
    (``use="scaling"``); see the module docstring for the equations and settings."""
    inputs = ("embeddings", "labels")

    def __init__(self, language_embeddings, use: str = "mining", alpha: float | None = None,
                 beta: float | None = None, base: float = 0.5, epsilon: float = 0.1, nu1: float = 0.5,
                 nu3: float = 0.75, nu4: float = 0.75):
        super().__init__()
        if use not in MS_USES:
            raise ValueError(f"use must be one of {MS_USES}, got {use!r}")
        self.register_buffer("language", _unit_language(language_embeddings))
        self.use, self.base, self.epsilon, self.nu1, self.nu3, self.nu4 = use, base, epsilon, nu1, nu3, nu4
        # the official Multi-Similarity settings; Eq. S3's re-tuned ones for the scaled loss
        self.alpha = float(alpha if alpha is not None else (2.0 if use == "mining" else 1.5))
        self.beta = float(beta if beta is not None else (40.0 if use == "mining" else 45.0))

    def _language_similarity(self, labels: torch.Tensor, dtype) -> torch.Tensor:
        lang = self.language.to(dtype)[labels]                    # (B, k, d)
        return torch.einsum("ikd,jkd->ijk", lang, lang).mean(dim=-1)

    def forward(self, embeddings, labels, indices_tuple=None, ref_emb=None, ref_labels=None) -> torch.Tensor:
        check_inputs("LanguageMultiSimilarityLoss", embeddings, labels, self.language.shape[0])
        x = nn.functional.normalize(embeddings if embeddings.dtype == torch.float64 else embeddings.float(), dim=1)
        s = x @ x.T
        s_lang = self._language_similarity(labels, s.dtype)
        same = labels[:, None] == labels[None, :]
        pos = same & ~torch.eye(len(labels), dtype=torch.bool, device=s.device)
        neg = ~same
        big = torch.finfo(s.dtype).max
        hardest_neg = torch.where(neg, s, torch.full_like(s, -big)).amax(dim=1, keepdim=True).detach()
        hardest_pos = torch.where(pos, s, torch.full_like(s, big)).amin(dim=1, keepdim=True).detach()
        score = s
        if self.use == "mining":   # Eq. S1 with f of Eq. S2 (linear: nu2 = 1)
            score = ((1 - self.nu1) * s_lang + self.nu1 * s).detach()
        keep_pos = pos & (score - self.epsilon < hardest_neg)
        keep_neg = neg & (score + self.epsilon > hardest_pos)
        scale_pos = scale_neg = torch.ones_like(s)
        if self.use == "scaling":   # Eq. S3
            ratio = (((1 + s_lang) / 2) / ((1 + s.detach()) / 2).clamp_min(1e-6)).clamp(1e-3, 1e3)
            scale_pos, scale_neg = ratio ** self.nu3, ratio ** self.nu4
        pos_term = self._log_sum(-self.alpha * scale_pos * (s - self.base), keep_pos) / self.alpha
        neg_term = self._log_sum(self.beta * scale_neg * (s - self.base), keep_neg) / self.beta
        return (pos_term + neg_term).mean()

    @staticmethod
    def _log_sum(z: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """log(1 + sum over the kept entries of exp(z)) per row, stably (0 for a row with none kept)."""
        zeros = torch.zeros(z.shape[0], 1, dtype=z.dtype, device=z.device)
        masked = torch.where(keep, z, torch.full_like(z, float("-inf")))
        return torch.logsumexp(torch.cat([zeros, masked], dim=1), dim=1)


def _last_stage(model: nn.Module) -> nn.Module:
    """The backbone module whose output is the last feature map: a ViT's final norm (its token sequence; umlkit's
    PEFT wrapper runs the blocks itself but calls the norm as a module), else timm's ``feature_info``."""
    backbone = getattr(model, "backbone", model)
    backbone = getattr(backbone, "vit", backbone)
    if hasattr(backbone, "blocks") and isinstance(getattr(backbone, "norm", None), nn.Module):
        return backbone.norm
    info = getattr(backbone, "feature_info", None)
    if not info:
        raise ValueError(f"LanguageTokenPredictionLoss reads the backbone's last feature map through timm's "
                         f"feature_info, which {type(backbone).__name__} does not have")
    return backbone.get_submodule(info[-1]["module"])


class LanguageTokenPredictionLoss(nn.Module):
    """A small transformer over the last feature map predicts each image's class language embedding (Eq. S4)."""
    inputs = ("embeddings", "labels")

    def __init__(self, language_embeddings, feature_width: int, heads: int = 4, depth: int = 1):
        super().__init__()
        if feature_width % heads:
            raise ValueError(f"feature_width ({feature_width}) must be a multiple of heads ({heads})")
        lang = _unit_language(language_embeddings)
        self.register_buffer("language", lang)
        self.query = nn.Parameter(torch.zeros(1, 1, feature_width))
        layer = nn.TransformerEncoderLayer(feature_width, heads, dim_feedforward=2 * feature_width, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.out = nn.Linear(feature_width, lang.shape[-1])
        self.feature_width = int(feature_width)
        self._maps: list[torch.Tensor] = []
        self._hook = None

    def attach_model(self, model: nn.Module) -> None:
        """Read the model's last feature map on every forward (called once when the training step is built)."""
        if self._hook is not None:
            self._hook.remove()
        self._hook = _last_stage(model).register_forward_hook(lambda _m, _i, out: self._keep(out))

    def _keep(self, out) -> None:
        self._maps[:] = [out[0] if isinstance(out, tuple) else out]

    def _sequence(self, batch: int) -> torch.Tensor:
        if not self._maps:
            raise RuntimeError("LanguageTokenPredictionLoss has no feature map: attach_model(model) was not called "
                               "or the model has not run a forward pass")
        fmap = self._maps[0]
        seq = fmap.flatten(2).transpose(1, 2) if fmap.ndim == 4 else fmap      # (B, positions, C)
        if seq.shape[0] != batch or seq.shape[-1] != self.feature_width:
            raise ValueError(f"LanguageTokenPredictionLoss: the feature map is {tuple(fmap.shape)}, expected "
                             f"{batch} images with {self.feature_width} channels")
        return seq.float()

    def forward(self, embeddings, labels, indices_tuple=None, ref_emb=None, ref_labels=None) -> torch.Tensor:
        check_inputs("LanguageTokenPredictionLoss", embeddings, labels, self.language.shape[0])
        seq = self._sequence(embeddings.shape[0])
        tokens = torch.cat([self.query.expand(seq.shape[0], -1, -1).to(seq.dtype), seq], dim=1)
        pred = nn.functional.normalize(self.out(self.encoder(tokens)[:, 0]), dim=1)
        target = nn.functional.normalize(self.language[labels].mean(dim=1), dim=1)
        return (1 - (pred * target).sum(dim=1)).mean()
