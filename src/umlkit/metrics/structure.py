"""Structural embedding-space metrics of Roth et al., "Revisiting Training Strategies and Generalization
Performance in Deep Metric Learning" (ICML 2020), Sec. 5, used by ooDML Sec. 4.3 / Table S7.

* pi_intra: mean distance between embeddings of the same class (distinct pairs), averaged over classes;
* pi_inter: mean distance between class centres (distinct pairs of class means);
* pi_ratio = pi_intra / pi_inter ("embedding space density");
* spectral decay rho: KL(U || S), the divergence of the normalised singular-value spectrum S of the embedding
  matrix from the uniform distribution U, as Roth's ``metrics/rho_spectrum.py`` (``rho_spectrum@1``):
  ``skip_top`` drops the largest singular values for a more robust estimate (``rho_spectrum@(skip_top+1)``)
  and ``reverse=True`` gives KL(S || U). Larger rho = fewer significant directions of variance.

Distances are Euclidean on the embeddings as given (L2-normalise first for the papers' setting).
Written here because neither PML nor timm provides them; classes with a single item contribute no pair to
pi_intra and are skipped there.
"""
from __future__ import annotations

import numpy as np
import torch
from scipy.stats import entropy

__all__ = ["embedding_structure", "spectral_decay"]


def _tensor(x) -> torch.Tensor:
    t = torch.as_tensor(np.asarray(x)) if not isinstance(x, torch.Tensor) else x
    t = t.detach().cpu().double()
    if t.ndim != 2:
        raise ValueError(f"embeddings must be 2-D, got shape {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise ValueError("embeddings contain NaN or inf values")
    return t


def _mean_pairwise(x: torch.Tensor) -> float | None:
    n = x.shape[0]
    if n < 2:
        return None
    d = torch.cdist(x, x)
    return float(d.sum() / (n * (n - 1)))


def embedding_structure(embeddings, labels) -> dict[str, float]:
    """``{"pi_intra", "pi_inter", "pi_ratio"}`` of an embedding set with class labels."""
    x = _tensor(embeddings)
    y = torch.as_tensor(np.asarray(labels)).long()
    if y.shape != (x.shape[0],):
        raise ValueError(f"labels must have shape ({x.shape[0]},), got {tuple(y.shape)}")
    classes = torch.unique(y)
    if classes.numel() < 2:
        raise ValueError("pi_inter needs at least two classes")
    intra, centres = [], []
    for c in classes:
        members = x[y == c]
        centres.append(members.mean(dim=0))
        value = _mean_pairwise(members)
        if value is not None:
            intra.append(value)
    if not intra:
        raise ValueError("every class has a single item; pi_intra is undefined")
    pi_intra = float(np.mean(intra))
    pi_inter = _mean_pairwise(torch.stack(centres))
    return {"pi_intra": pi_intra, "pi_inter": pi_inter, "pi_ratio": pi_intra / pi_inter}


def spectral_decay(embeddings, skip_top: int = 0, reverse: bool = False) -> float:
    """Roth's rho: KL between the uniform distribution and the normalised singular values."""
    x = _tensor(embeddings)
    s = torch.linalg.svdvals(x).numpy()
    if skip_top < 0 or skip_top >= s.size:
        raise ValueError(f"skip_top must be in [0, {s.size - 1}], got {skip_top}")
    s = s[skip_top:]
    s = s / s.sum()
    uniform = np.full(s.size, 1.0 / s.size)
    return float(entropy(s, uniform) if reverse else entropy(uniform, s))
