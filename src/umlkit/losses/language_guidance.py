"""Language guidance (Roth, Vinyals, Akata, CVPR 2022): ELG and PLG distillation of language similarities.

``LanguageGuidanceLoss(language_embeddings)`` holds per-class language embeddings, either (n_classes, d) (ELG:
the class names through a language model) or (n_classes, k, d) (PLG: the k pseudolabel names of each class); with
``per_sample=True`` one row per training image instead (Table 5's captions, Table S3's per-sample pseudolabels),
looked up by the images' training-set indices.
Called as ``loss(embeddings, labels)`` like any PML loss. The default ``mode="kl_rowwise"`` is Eq. 2 as the
official ``LanguageGuide.regularize`` computes it (implementation_notes.md §4):

* S_lang = cosine similarity of the samples' language embeddings, averaged over the k pseudolabel slots (one
  slot for ELG), **shifted** by gamma (``shift=1``: range [0, 2]); S_img = dot product of the L2-normalised image
  embeddings, not shifted;
* same-class entries of both (diagonal included) are overwritten with 1 + gamma;
* row-wise softmax with temperature T, loss = sum_i KL(.) * T^2 / B;
* ``direction="backward"`` (official default) = KL(P_img || P_lang): ``F.kl_div(log P_lang, P_img)`` with the
  gradient flowing through the image side; ``"forward"`` = KL(P_lang || P_img);
* language embeddings are a buffer (stop-gradient); ``stop_grad=False`` makes them a trainable parameter (the
  "No stop grad." row of Table 4, where the language side is updated too).

Table 4 alternatives: ``"row_l2"`` (mean squared L2 distance between matching rows), ``"full_kl"`` (one softmax
over the whole matrix), ``"clip"`` (symmetric InfoNCE between image embeddings and their class's language
embedding through a learned linear projection, temperature 0.07) and ``"devise"`` (an MLP predicts the language
embedding; loss 1 - cosine). Mixed into training as L_DML + omega * L_lang (omega per run, e.g. 7.5 for CUB).
"""
from __future__ import annotations

import torch
from torch import nn

from umlkit.losses._checks import check_inputs

__all__ = ["LanguageGuidanceLoss", "LG_MODES"]

LG_MODES = ("kl_rowwise", "row_l2", "full_kl", "clip", "devise")


class LanguageGuidanceLoss(nn.Module):
    inputs = ("embeddings", "labels")  # what the training engine passes (as keywords)

    def __init__(self, language_embeddings: torch.Tensor, mode: str = "kl_rowwise", shift: float = 1.0,
                 temperature: float = 1.0, direction: str = "backward", stop_grad: bool = True,
                 embedding_size: int | None = None, clip_temperature: float = 0.07, per_sample: bool = False,
                 num_classes: int | None = None):
        super().__init__()
        if per_sample and num_classes is None:
            raise ValueError("per_sample=True needs num_classes (the language rows are images, not classes)")
        if mode not in LG_MODES:
            raise ValueError(f"mode must be one of {LG_MODES}, got {mode!r}")
        if direction not in ("backward", "forward"):
            raise ValueError(f"direction must be 'backward' or 'forward', got {direction!r}")
        lang = torch.as_tensor(language_embeddings, dtype=torch.float32)
        if lang.ndim == 2:
            lang = lang[:, None, :]
        if lang.ndim != 3:
            raise ValueError(f"language_embeddings must be (n_classes, d) or (n_classes, k, d), "
                             f"got {tuple(lang.shape)}")
        lang = nn.functional.normalize(lang, dim=-1)
        if stop_grad:
            self.register_buffer("language", lang)
        else:
            self.language = nn.Parameter(lang)
        # per_sample: one row per training image (captions, per-sample pseudolabels), looked up by the images'
        # training-set indices, which the engine passes when a loss declares the input ``indices``
        self.per_sample = bool(per_sample)
        self.inputs = ("embeddings", "labels", "indices") if self.per_sample else ("embeddings", "labels")
        self.num_classes = int(num_classes) if self.per_sample else lang.shape[0]
        self.mode, self.shift, self.temperature, self.direction = mode, shift, temperature, direction
        self.clip_temperature = clip_temperature
        self.projection = None
        if mode in ("clip", "devise"):
            if embedding_size is None:
                raise ValueError(f"mode={mode!r} needs embedding_size to build its projection")
            d_lang = lang.shape[-1]
            self.projection = (nn.Linear(embedding_size, d_lang, bias=False) if mode == "clip" else
                               nn.Sequential(nn.Linear(embedding_size, 2 * d_lang), nn.ReLU(),
                                             nn.Linear(2 * d_lang, d_lang)))

    def _rows(self, labels: torch.Tensor, indices: torch.Tensor | None) -> torch.Tensor:
        """Which language rows the batch uses: the images' indices (per_sample) or their labels."""
        if not self.per_sample:
            return labels
        if indices is None:
            raise ValueError("LanguageGuidanceLoss(per_sample=True) needs indices (each image's training-set index)")
        if indices.shape != labels.shape or int(indices.min()) < 0 or int(indices.max()) >= self.language.shape[0]:
            raise ValueError(f"indices must be ({labels.shape[0]},) values in 0..{self.language.shape[0] - 1}, got "
                             f"shape {tuple(indices.shape)}, range {int(indices.min())}..{int(indices.max())}")
        return indices

    def similarities(self, embeddings: torch.Tensor, labels: torch.Tensor,
                     indices: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(S_img, S_lang) after the shift and the same-class overwrite."""
        x = nn.functional.normalize(embeddings, dim=1)
        s_img = x @ x.T
        lang = nn.functional.normalize(self.language, dim=-1).to(x.dtype)[self._rows(labels, indices)]  # (B, k, d)
        s_lang = torch.einsum("ikd,jkd->ijk", lang, lang).mean(dim=-1) + self.shift
        same = labels[:, None] == labels[None, :]
        fill = torch.full_like(s_img, 1.0 + self.shift)
        return torch.where(same, fill, s_img), torch.where(same, fill, s_lang)

    def forward(self, embeddings, labels, indices=None, indices_tuple=None, ref_emb=None,
                ref_labels=None) -> torch.Tensor:
        check_inputs("LanguageGuidanceLoss", embeddings, labels, self.num_classes)
        x = embeddings if embeddings.dtype == torch.float64 else embeddings.float()
        b = x.shape[0]
        if self.mode in ("clip", "devise"):
            lang = nn.functional.normalize(self.language, dim=-1).to(x.dtype)[self._rows(labels, indices)].mean(dim=1)
            pred = nn.functional.normalize(self.projection(x), dim=1)
            if self.mode == "devise":
                return (1 - (pred * nn.functional.normalize(lang, dim=1)).sum(dim=1)).mean()
            logits = pred @ nn.functional.normalize(lang, dim=1).T / self.clip_temperature
            same = (labels[:, None] == labels[None, :]).to(x.dtype)
            target = same / same.sum(dim=1, keepdim=True)  # several samples may share a class
            return 0.5 * (nn.functional.cross_entropy(logits, target) + nn.functional.cross_entropy(logits.T, target))
        s_img, s_lang = self.similarities(x, labels, indices)
        if self.mode == "row_l2":
            return ((s_img - s_lang) ** 2).sum(dim=1).mean()
        t = self.temperature
        if self.mode == "full_kl":
            s_img, s_lang = s_img.reshape(1, -1), s_lang.reshape(1, -1)
        log_p_img = torch.log_softmax(s_img / t, dim=1)
        log_p_lang = torch.log_softmax(s_lang / t, dim=1)
        if self.direction == "backward":  # KL(P_img || P_lang), official default
            kl = nn.functional.kl_div(log_p_lang, log_p_img, log_target=True, reduction="sum")
        else:
            kl = nn.functional.kl_div(log_p_img, log_p_lang, log_target=True, reduction="sum")
        return kl * t * t / b
