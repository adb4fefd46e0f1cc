"""PUMA's unified evaluation: per-source scores, the Unified row and the Harmonic row.

Follows PUMA (Kim, Kim, Kwak, WACV 2025), Sec. 3 and Table 2, and its official ``helpers.py``
(``evaluate_all`` / ``get_accuracy``; implementation_notes.md §1):

* **per source** (the paper's per-dataset columns): query and gallery restricted to that source;
* **Unified**: every query of every source searched against the *union* of all galleries, averaged over all
  queries (so SOP- and In-shop-sized sources weigh most, as in the paper);
* **Harmonic**: n_sources / sum_s 1/score_s over the per-source scores (0 if any score is 0).

Self-exclusion is by global item index, as the official code does: a query never retrieves itself; an
In-shop query is a different item from every gallery image, so nothing is excluded there.

:func:`cross_source_rate` measures what the paper calls the bias of a unified metric across distributions (Sec. 1,
Sec. 4.2: "bias towards dominant distributions"): how often a query's nearest neighbour in the union of the
galleries comes from *another* source. The paper names the failure but prints no such number; the book adds it.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from umlkit.metrics.retrieval import check_embeddings, check_labels, evaluate_indices, parse_metrics

__all__ = ["unified_evaluation", "harmonic_mean", "cross_source_rate"]


def _source_name(source_names: Sequence[str] | dict | None, s) -> str:
    """A source id's display name: ``source_names`` is a list indexed by integer id, a dict id -> name, or None."""
    if source_names is None:
        return str(s)
    try:
        return str(source_names[s]) if isinstance(source_names, dict) else str(source_names[int(s)])
    except (KeyError, IndexError, TypeError, ValueError):
        what = (f"a dict with keys {sorted(map(str, source_names))[:8]}" if isinstance(source_names, dict) else
                f"a list of {len(source_names)} names indexed by integer source id")
        raise ValueError(f"source_names has no name for source {_plain(s)!r} (source_names is {what})") from None


def _plain(s):
    """A numpy scalar source id as the Python value it stands for (for messages)."""
    return s.item() if isinstance(s, np.generic) else s


def _source_names(source_names: Sequence[str] | dict | None, ids) -> dict:
    """``{source id: display name}`` for ``ids``; two sources under one name would overwrite each other's row, and
    a source named like a summary row would be replaced by it."""
    names = {s: _source_name(source_names, s) for s in ids}
    taken: dict[str, object] = {}
    for s, name in names.items():
        if name in taken:
            raise ValueError(f"sources {_plain(taken[name])!r} and {_plain(s)!r} have the same name {name!r}; give "
                             f"each its own")
        if name in ("Unified", "Harmonic"):
            raise ValueError(f"source {_plain(s)!r} is named {name!r}, a summary row's name; call it something else")
        taken[name] = s
    return names


def harmonic_mean(values: Sequence[float]) -> float:
    """Harmonic mean as PUMA's Harmonic column: n / sum(1/v); 0 when any value is 0, NaN when empty."""
    vals = np.asarray(list(values), dtype=np.float64)
    if vals.size == 0 or np.isnan(vals).any():
        return float("nan")
    if (vals < 0).any():
        raise ValueError(f"harmonic mean needs non-negative scores, got {vals.tolist()}")
    if (vals == 0).any():
        return 0.0
    return float(vals.size / np.sum(1.0 / vals))


def _mask(x, n: int, name: str) -> torch.Tensor:
    if x is None:
        return torch.ones(n, dtype=torch.bool)
    t = torch.as_tensor(np.asarray(x)) if not isinstance(x, torch.Tensor) else x
    if t.dtype != torch.bool:
        raise TypeError(f"{name} must be a boolean mask, got dtype {t.dtype}")
    if t.ndim != 1 or t.shape[0] != n:
        raise ValueError(f"{name} must be a 1-D mask with {n} entries, got shape {tuple(t.shape)}")
    return t.cpu()


def unified_evaluation(
    embeddings,
    labels,
    sources,
    *,
    is_query=None,
    is_gallery=None,
    metrics: Sequence[str] = ("R@1",),
    source_names: Sequence[str] | dict | None = None,
    map_at_r_convention: str = "musgrave",
    search_dtype: torch.dtype | None = None,
) -> pd.DataFrame:
    """Per-source, Unified and Harmonic retrieval scores for a multi-dataset test set.

    Args:
        embeddings: (n, d) embeddings of every test item of every source.
        labels: (n,) class labels; classes of different sources must not share a label (use global labels).
        sources: (n,) source ids (ints or strings) — which dataset each item comes from.
        is_query: (n,) bool, items used as queries (default: all). In-shop: its query split.
        is_gallery: (n,) bool, items searched (default: all). In-shop: its gallery split.
        metrics: metric names as in :func:`umlkit.metrics.evaluate_retrieval` (default R@1 only, as PUMA).
        source_names: display names, a list indexed by integer source id or a dict id -> name.
        map_at_r_convention: see :func:`umlkit.metrics.evaluate_retrieval`.
        search_dtype: see :func:`umlkit.metrics.evaluate_retrieval`.

    Returns:
        DataFrame indexed by source name, then ``"Unified"`` and ``"Harmonic"``; one column per metric,
        values in percent (as the papers print them). ``df.attrs["counts"]`` holds query/gallery counts.
    """
    emb = check_embeddings(embeddings)
    n = emb.shape[0]
    lab = check_labels(labels, n)
    src = np.asarray(sources)
    if src.ndim != 1 or src.shape[0] != n:
        raise ValueError(f"sources must be 1-D with {n} entries (one per embedding), got shape {src.shape}")
    q_mask, g_mask = _mask(is_query, n, "is_query"), _mask(is_gallery, n, "is_gallery")
    recall_ks, others = parse_metrics(list(metrics), ())
    if "NMI" in others:
        raise ValueError("NMI is not defined for unified retrieval here; "
                         "evaluate it per source with evaluate_retrieval")
    columns = [f"R@{k}" for k in recall_ks] + others
    emb = torch.nn.functional.normalize(emb, dim=1)

    # labels must not collide across sources: a shared label would count a cross-dataset match as a hit
    frame = pd.DataFrame({"label": lab.numpy(), "source": src})
    shared = frame.groupby("label")["source"].nunique()
    if (shared > 1).any():
        example = int(shared[shared > 1].index[0])
        raise ValueError(f"label {example} occurs in more than one source; give each source disjoint global labels")

    def run(sel_q: torch.Tensor, sel_g: torch.Tensor) -> dict[str, float]:
        return evaluate_indices(
            emb, lab, torch.nonzero(sel_q).flatten(), torch.nonzero(sel_g).flatten(), recall_ks=recall_ks,
            others=others, map_at_r_convention=map_at_r_convention, search_dtype=search_dtype,
        )

    rows, counts = {}, {}
    for s, name in _source_names(source_names, pd.unique(src)).items():
        in_s = torch.from_numpy(src == s)
        try:
            res = run(q_mask & in_s, g_mask & in_s)
        except ValueError as err:
            raise ValueError(f"source {name!r}: {err}") from err
        rows[name] = [100.0 * res[c] for c in columns]
        counts[name] = (int(res["n_queries"]), int(res["n_gallery"]))
    res = run(q_mask, g_mask)
    per_source = pd.DataFrame.from_dict(rows, orient="index", columns=columns)
    rows["Unified"] = [100.0 * res[c] for c in columns]
    counts["Unified"] = (int(res["n_queries"]), int(res["n_gallery"]))
    rows["Harmonic"] = [harmonic_mean(per_source[c]) for c in columns]
    out = pd.DataFrame.from_dict(rows, orient="index", columns=columns)
    out.index.name = "source"
    out.attrs["counts"] = counts
    return out


def cross_source_rate(embeddings, sources, *, is_query=None, is_gallery=None,
                      source_names: Sequence[str] | dict | None = None,
                      search_dtype: torch.dtype | None = None) -> pd.Series:
    """Per source and over all queries ("Unified"): the percentage of queries whose nearest neighbour in the union
    of all galleries (the Unified search of :func:`unified_evaluation`, self excluded) comes from another source.
    A query whose top-1 crosses sources is a Unified miss that no per-source column can show."""
    from umlkit.metrics.knn import knn_search
    emb = torch.nn.functional.normalize(check_embeddings(embeddings), dim=1)
    n = emb.shape[0]
    src = np.asarray(sources)
    if src.ndim != 1 or src.shape[0] != n:
        raise ValueError(f"sources must be 1-D with {n} entries (one per embedding), got shape {src.shape}")
    q_mask, g_mask = _mask(is_query, n, "is_query"), _mask(is_gallery, n, "is_gallery")
    qi, gi = torch.nonzero(q_mask).flatten(), torch.nonzero(g_mask).flatten()
    if len(qi) == 0 or len(gi) < 2:
        raise ValueError(f"need at least one query and two gallery items, got {len(qi)} and {len(gi)}")
    pos = torch.full((n,), -1, dtype=torch.long)
    pos[gi] = torch.arange(len(gi))
    _, idx = knn_search(emb[qi], emb[gi], 1, self_index=pos[qi], search_dtype=search_dtype)
    crossed = src[gi[idx[:, 0]].numpy()] != src[qi.numpy()]
    q_src = src[qi.numpy()]

    out = {name: 100.0 * float(crossed[q_src == s].mean())
           for s, name in _source_names(source_names, pd.unique(q_src)).items()}
    out["Unified"] = 100.0 * float(crossed.mean())
    return pd.Series(out, name="cross-source top-1 (%)")
