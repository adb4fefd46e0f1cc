"""Few-shot adaptation of a trained embedding model: ooDML Sec. 4.4 (Milbich, Roth et al., NeurIPS 2021).

The protocol of the official ``fewshot_ood_main.py`` / ``utilities/finetune_utils.py`` (``--finetune_only_last``):

* an **episode** draws ``shots`` support images from every test class; the query set is the rest of the test set
  (:func:`few_shot_episodes`; the published full-profile episodes are lists of support file names, which
  :func:`episodes_from_support_lists` turns into the same index arrays; the book's runs draw their own episodes);
* per episode the trained model is copied and **only its last layer** is fine-tuned on the support set: the head
  that produces the evaluation embedding (and, for a model that evaluates the concatenation of several heads, such
  as DiVA, every one of those heads); the backbone is frozen, so its features are computed once per test set and
  every episode trains on them;
* the objective is Roth's Margin criterion with distance sampling (``utilities/finetune_utils.py`` selects
  ``criteria/margin.py`` with ``batchminer/distance.py``; :class:`umlkit.losses.roth_margin.RothMarginLoss`), margin
  0.2 and beta the run's ``--loss_margin_beta`` (1.2; the official S2SD runs pass 0.6); beta stays **fixed**, since
  the official optimiser holds only the last linear layer's parameters; NumPy's global stream is seeded at the
  start as ``misc.set_seed`` does, so the sampled triplets are reproducible;
* Adam at 10x the base learning rate for ``iterations`` optimiser steps (``OOD-Study_FewShot.sh``: 1,000 at 2 shots,
  1,500 at 5; the official double loop counts batches and stops at the total), batches from the class sampler
  (``datasampler/class_random_sampler.py``: ``batch_size / m`` classes drawn with replacement, ``m`` images of each
  drawn with replacement); plain shuffled batches when ``m`` = 1;
* zero-shot (the copied model before fine-tuning) and adapted metrics are measured on the same query set, which
  searches itself (self-match excluded), and reported per episode and as mean and standard deviation.

Written here because no library provides ooDML's episode protocol; the loss is umlkit's port of Roth's criterion
(parity with the official code in ``tests/losses/test_parity.py``) and the retrieval metrics
:func:`umlkit.metrics.evaluate_retrieval`.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torch import nn

__all__ = ["few_shot_episodes", "episodes_from_support_lists", "adaptable_head", "adapt_head", "few_shot_adaptation"]


def few_shot_episodes(labels, shots: int, episodes: int = 10, seed: int = 0) -> list[np.ndarray]:
    """``episodes`` support index arrays: ``shots`` items of every class in ``labels``, drawn without replacement
    (episode e uses the generator seeded with ``(seed, shots, e)``, so the 2-shot and the 5-shot episodes are drawn
    independently and each is reproducible alone). Every class needs more than ``shots`` items, so that it keeps a
    query."""
    labels = np.asarray(labels)
    if shots < 1 or episodes < 1:
        raise ValueError(f"shots and episodes must be >= 1, got shots={shots}, episodes={episodes}")
    classes, counts = np.unique(labels, return_counts=True)
    short = classes[counts <= shots]
    if len(short):
        raise ValueError(f"{shots}-shot episodes need more than {shots} items per class; class(es) {short[:5].tolist()}"
                         f" have {counts[counts <= shots][:5].tolist()}")
    members = [np.flatnonzero(labels == c) for c in classes]
    out = []
    for e in range(episodes):
        rng = np.random.default_rng([seed, shots, e])
        out.append(np.sort(np.concatenate([rng.choice(m, shots, replace=False) for m in members])))
    return out


def episodes_from_support_lists(paths: Sequence[str],
                                support: Sequence[Mapping[str, Sequence[str]]]) -> list[np.ndarray]:
    """The published episodes (``test_episodes[shots][e]``: {class name: [support file names]}) as index arrays
    into ``paths`` (the test set's image paths), matched by file name; a missing file is an error naming it."""
    by_name: dict[str, int] = {}
    for i, p in enumerate(paths):
        by_name.setdefault(str(p).replace("\\", "/").rsplit("/", 1)[-1], i)
    out = []
    for e, episode in enumerate(support):
        idx = []
        for cls, files in episode.items():
            for f in files:
                name = str(f).replace("\\", "/").rsplit("/", 1)[-1]
                if name not in by_name:
                    raise KeyError(f"episode {e}, class {cls!r}: support image {f!r} is not in the test set")
                idx.append(by_name[name])
        out.append(np.sort(np.asarray(idx)))
    return out


class _Heads(nn.Module):
    """The evaluation embedding of an :class:`~umlkit.models.embedding.EmbeddingModel` as a function of its backbone
    feature: the head, or the re-normalised concatenation of the head and the auxiliary heads."""

    def __init__(self, model):
        super().__init__()
        self.head = copy.deepcopy(model.head)
        concat = bool(getattr(model, "eval_concat_aux", False)) and len(getattr(model, "aux_heads", {}))
        self.aux = nn.ModuleDict(copy.deepcopy(dict(model.aux_heads)) if concat else {})

    def forward(self, feat: torch.Tensor) -> torch.Tensor:
        emb = nn.functional.normalize(self.head(feat), dim=-1)
        if len(self.aux):
            parts = [emb] + [nn.functional.normalize(h(feat), dim=-1) for h in self.aux.values()]
            emb = nn.functional.normalize(torch.cat(parts, dim=-1), dim=-1)
        return emb


def adaptable_head(model) -> nn.Module:
    """A copy of the part of ``model`` that few-shot adaptation trains, as a module of the backbone feature."""
    if not hasattr(model, "head") or not hasattr(model, "features"):
        raise TypeError(f"few-shot adaptation needs an EmbeddingModel (head + features), got {type(model).__name__}")
    return _Heads(model)


def _last_linear(module: nn.Module) -> list[nn.Parameter]:
    """The parameters of the last nn.Linear of a head (the whole head when it is one Linear)."""
    linears = [m for m in module.modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise ValueError(f"head {module!r} has no linear layer to adapt")
    return list(linears[-1].parameters())


def _class_batches(y: torch.Tensor, n_classes: int, batch_size: int, m: int, gen: torch.Generator):
    """One batch of the official class sampler: ``batch_size // m`` classes with replacement, ``m`` items of each
    with replacement (shuffled items when ``m`` = 1)."""
    if m <= 1:
        return torch.randperm(len(y), generator=gen)[:batch_size]
    per_class = [torch.nonzero(y == c).flatten() for c in range(n_classes)]
    chosen = torch.randint(n_classes, (max(1, batch_size // m),), generator=gen)
    return torch.cat([per_class[c][torch.randint(len(per_class[c]), (m,), generator=gen)] for c in chosen.tolist()])


def adapt_head(heads: nn.Module, features: torch.Tensor, labels, *, lr: float, iterations: int = 1000,
               batch_size: int = 112, m: int = 2, seed: int = 0, beta: float = 1.2) -> nn.Module:
    """Fine-tune the last linear layer of each head in ``heads`` (from :func:`adaptable_head`) on ``features`` with
    Roth's Margin criterion (distance sampling, fixed ``beta``) for ``iterations`` steps; returns ``heads`` (changed
    in place), in eval mode."""
    from umlkit.losses.roth_margin import RothMarginLoss
    labels = torch.as_tensor(np.asarray(labels))
    classes, y = torch.unique(labels, return_inverse=True)
    loss = RothMarginLoss(num_classes=None, margin=0.2, beta=float(beta), sampling="distance", learn_beta=False)
    params = [p for h in [heads.head, *heads.aux.values()] for p in _last_linear(h)]
    for p in heads.parameters():
        p.requires_grad_(False)
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.Adam(params, lr=lr)
    gen = torch.Generator().manual_seed(int(seed))
    np.random.seed(int(seed) % 2**32)   # Roth's samplers draw from NumPy's global stream (misc.set_seed)
    heads.train()
    for _ in range(int(iterations)):
        batch = _class_batches(y, len(classes), batch_size, m, gen)
        out = loss(heads(features[batch]), y[batch])
        opt.zero_grad(set_to_none=True)
        out.backward()
        opt.step()
    heads.eval()
    return heads


def _metrics(heads, features, labels, metrics) -> dict[str, float]:
    from umlkit.metrics import evaluate_retrieval
    with torch.no_grad():
        emb = heads(features)
    res = evaluate_retrieval(emb, np.asarray(labels), metrics=list(metrics))
    return {k: 100.0 * float(res[k]) for k in metrics}


def few_shot_adaptation(model, features: torch.Tensor, labels, *, shots: Sequence[int] = (2, 5), episodes: int = 10,
                        lr: float, iterations: int | Mapping[int, int] = 1000, batch_size: int = 112, m: int = 2,
                        metrics: Sequence[str] = ("R@1", "mAP@1000"), seed: int = 0, beta: float = 1.2,
                        supports: Mapping[int, Sequence[np.ndarray]] | None = None) -> dict:
    """ooDML's few-shot protocol on a test set's backbone ``features`` (``model.features`` of every test image) and
    ``labels``: for each shot count, ``episodes`` episodes of zero-shot and adapted query metrics (percent).

    Returns ``{str(shots): {"zero": {metric: [per episode]}, "few": {...}, "zero_mean", "few_mean", "few_std",
    ...}}`` with ``lr`` the adaptation learning rate (ooDML: 10x the training learning rate), ``iterations`` one
    count or one per shot count, ``beta`` the Margin criterion's fixed beta. ``supports``: the
    support index arrays per shot count to use instead of drawn ones (the published episodes,
    :func:`episodes_from_support_lists`); a shot count it lacks is an error."""
    features = torch.as_tensor(features).float()
    labels = np.asarray(labels)
    if len(features) != len(labels):
        raise ValueError(f"{len(features)} feature rows but {len(labels)} labels")
    out = {}
    for k in shots:
        zero = {mt: [] for mt in metrics}
        few = {mt: [] for mt in metrics}
        if supports is not None and k not in supports:
            raise KeyError(f"the published episodes hold {sorted(supports)} shots, not {k}")
        drawn = supports[k] if supports is not None else few_shot_episodes(labels, k, episodes, seed)
        steps = int(iterations[k]) if isinstance(iterations, Mapping) else int(iterations)
        for e, support in enumerate(drawn):
            query = np.setdiff1d(np.arange(len(labels)), support)
            heads = adaptable_head(model).eval()
            for mt, v in _metrics(heads, features[query], labels[query], metrics).items():
                zero[mt].append(v)
            torch.manual_seed(int(seed) * 1000 + e)
            adapt_head(heads, features[support], labels[support], lr=lr, iterations=steps,
                       batch_size=batch_size, m=m, seed=int(seed) * 1000 + e, beta=beta)
            for mt, v in _metrics(heads, features[query], labels[query], metrics).items():
                few[mt].append(v)
        block = {"zero": zero, "few": few}
        for name, vals in (("zero", zero), ("few", few)):
            block[f"{name}_mean"] = {mt: float(np.mean(v)) for mt, v in vals.items()}
            block[f"{name}_std"] = {mt: float(np.std(v)) for mt, v in vals.items()}
        out[str(k)] = block
    return out
