"""The retrieval evaluation engine every chapter uses: Recall@k, MAP@R, R-precision, mAP@1000 and NMI.

Definitions (see the book's *Evaluation* chapter and implementation_notes.md §6):

* **Recall@k** (DML "hit@k", as in PUMA, Proxy-Anchor, Roth et al. 2020): 1 if any of the k most similar
  gallery items shares the query's label, averaged over *all* queries. Similarity is cosine on
  L2-normalised embeddings (PUMA ``helpers.py``; Roth's L2 faiss search on normalised vectors gives the
  same ranking).
* **MAP@R** and **R-precision** (Musgrave et al., "A Metric Learning Reality Check", ECCV 2020; PML's
  ``AccuracyCalculator``): R = number of gallery items with the query's label *other than the query
  itself*. RP = (relevant among the top R) / R; MAP@R = (1/R) sum_{i<=R} P@i * rel_i. Queries with R = 0
  (a class with one item) have no positives: they are excluded from both and counted in
  ``n_without_positives``.
  ``map_at_r_convention="roth"`` gives Roth's ``mAP_c`` / VPTSP's ``mAP_R`` instead: the neighbour list
  still excludes the query, but R is the full class count *including* the query (a slight under-estimate
  compared with Musgrave's). PUMA's optional MAP@R call shares Roth's mismatch.
* **mAP@1000** (Roth's ``metrics/mAP_1000.py``): sum of P@i at relevant ranks i <= 1000 (self excluded),
  divided by the class count *including* the query: a truncated AP.
* **NMI** (Roth; PML): k-means (faiss, 20 iterations, fixed seed) on the query embeddings with K = the
  number of distinct query labels, each item assigned its nearest centroid, then scikit-learn's
  ``normalized_mutual_info_score`` (arithmetic normalisation). Above 2,048 classes the default
  (``nmi_method="auto"``) runs 5 iterations, the third to fifth assignments choosing among each item's 32 nearest
  centroids of the second (:mod:`umlkit.metrics.kmeans`; at PUMA's unified scale 5-8x faster than 20 exact
  iterations, within their spread over seeds, ``benchmarks/bench_nmi.py``); ``"exact"`` keeps 20 at any size, and
  ``"hierarchical"`` offers a two-level k-means, written by hand because neither faiss nor scikit-learn offers a
  k-means whose cost does not grow with n x K (an approximation: 0.056 low there).

The search runs in query blocks, so memory stays bounded at any depth. When mAP@1000 is asked of a gallery of
32,000 items or more, every metric is read instead from one streamed, threshold-filtered pass that ranks only each
query's relevant items (:mod:`umlkit.metrics.deep_ap`): the same values, bit for bit, without a top-1000 of every row.

``gallery=None`` searches the query set against itself and excludes the self-match (CUB, Cars, SOP
protocol); a separate gallery excludes nothing (In-shop protocol). The search is
:func:`umlkit.metrics.knn.knn_search`, exact (fp32-equal) with a bf16 or int8 candidate pass.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import torch

from umlkit.metrics.deep_ap import STREAM_MAX_CLASS, STREAM_MAX_GALLERY, STREAM_MIN_GALLERY, streamed_matches, streams
from umlkit.metrics.knn import knn_search, knn_search_checked
from umlkit.metrics.threads import limited_threads

__all__ = [
    "evaluate_retrieval",
    "evaluate_indices",
    "recall_at_k",
    "map_at_r",
    "r_precision",
    "map_at_1000",
    "nmi",
    "NMI_EXACT_MAX_K",
    "neighbour_class_counts",
    "check_embeddings",
    "check_labels",
    "DEFAULT_KS",
    "KNOWN_METRICS",
]

DEFAULT_KS = (1, 2, 4, 8)
_RECALL = re.compile(r"^R@(\d+)$")          # R@k: a recall at k
KNOWN_METRICS = ("MAP@R", "RP", "mAP@1000", "NMI")   # the other metrics the engine computes


# --------------------------------------------------------------------------------------------------
# input checks
# --------------------------------------------------------------------------------------------------
def check_embeddings(x, name: str = "embeddings") -> torch.Tensor:
    """(n, d) finite, non-zero rows -> float32 CPU tensor; a clear error otherwise."""
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(x if x.flags.writeable else x.copy())  # torch warns on read-only arrays
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or numpy array, got {type(x).__name__}")
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_items, dim), got shape {tuple(x.shape)}")
    if not (x.is_floating_point()):
        raise TypeError(f"{name} must hold floating-point values, got dtype {x.dtype}")
    x = x.detach().to("cpu", torch.float32).contiguous()
    finite = torch.isfinite(x).all(dim=1)
    if not bool(finite.all()):
        bad = torch.nonzero(~finite).flatten()
        raise ValueError(
            f"{name} has {bad.numel()} row(s) with NaN or inf values (first rows: {bad[:5].tolist()}); "
            "check the model's output (fp16 overflow, a diverged run)"
        )
    norms = x.norm(dim=1)
    zero = norms == 0
    if bool(zero.any()):
        bad = torch.nonzero(zero).flatten()
        raise ValueError(
            f"{name} has {bad.numel()} all-zero row(s) (first rows: {bad[:5].tolist()}); cosine similarity is "
            "undefined for a zero vector"
        )
    return x


def check_labels(y, n: int, name: str = "labels", emb_name: str = "embeddings") -> torch.Tensor:
    """1-D integer labels of length n -> int64 CPU tensor."""
    if isinstance(y, np.ndarray):
        y = torch.from_numpy(y if y.flags.writeable else y.copy())
    elif isinstance(y, (list, tuple)):
        y = torch.as_tensor(y)
    if not isinstance(y, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, numpy array or list, got {type(y).__name__}")
    if y.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(y.shape)}")
    if y.is_floating_point() or y.is_complex() or y.dtype == torch.bool:
        raise TypeError(f"{name} must hold integers, got dtype {y.dtype}")
    if y.shape[0] != n:
        raise ValueError(f"{name} has {y.shape[0]} entries but {emb_name} has {n} rows; they must match")
    return y.to("cpu", torch.long)


def parse_metrics(metrics: Sequence[str] | None, ks: Sequence[int]) -> tuple[list[int], list[str]]:
    """Split requested metric names into recall ks and the other metrics, validating names."""
    if isinstance(metrics, str):
        raise ValueError(f"metrics must be a list of names, got the string {metrics!r} (write [{metrics!r}])")
    if metrics is None:
        bad = [k for k in ks if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1]
        if bad:
            raise ValueError(f"ks must be integers >= 1 (the k of R@k), got {list(ks)}")
        return sorted({int(k) for k in ks}), list(KNOWN_METRICS)
    recall, other = set(), []
    for name in metrics:
        match = _RECALL.match(name)
        if match:
            recall.add(int(match.group(1)))
        elif name in KNOWN_METRICS:
            if name not in other:
                other.append(name)
        else:
            raise ValueError(f"unknown metric {name!r}; expected 'R@<k>' or one of {KNOWN_METRICS}")
    if any(k < 1 for k in recall):
        raise ValueError("R@k needs k >= 1")
    return sorted(recall), other


# --------------------------------------------------------------------------------------------------
# pure metric functions on sorted neighbour labels
# --------------------------------------------------------------------------------------------------
def recall_at_k(match: torch.Tensor, k: int) -> float:
    """Fraction of queries with a relevant item among the first k columns of ``match`` (n, >=k) bool."""
    if match.shape[0] == 0:
        return float("nan")
    return match[:, :k].any(dim=1).double().mean().item()


def _precision_sums(match: torch.Tensor, depth: torch.Tensor, rows_per_block: int = 8192
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row: (sum of P@i * rel_i for i <= depth, relevant count within depth), in row blocks to bound memory."""
    n, width = match.shape
    positions = torch.arange(1, width + 1, dtype=torch.float64)
    ap_sum = torch.empty(n, dtype=torch.float64)
    rel_sum = torch.empty(n, dtype=torch.float64)
    for start in range(0, n, rows_per_block):
        stop = min(start + rows_per_block, n)
        within = positions[None, :] <= depth[start:stop, None].double()
        rel = match[start:stop].double() * within
        hits = rel.cumsum(dim=1)
        ap_sum[start:stop] = (hits / positions[None, :] * rel).sum(dim=1)
        rel_sum[start:stop] = rel.sum(dim=1)
    return ap_sum, rel_sum


def map_at_r(match: torch.Tensor, r: torch.Tensor, denominator: torch.Tensor | None = None) -> torch.Tensor:
    """Per-query MAP@R: sum_{i<=R} P@i rel_i / R (``denominator`` replaces R for Roth's convention)."""
    ap_sum, _ = _precision_sums(match, r)
    return ap_sum / (r if denominator is None else denominator).double()


def r_precision(match: torch.Tensor, r: torch.Tensor, denominator: torch.Tensor | None = None) -> torch.Tensor:
    """Per-query R-precision: relevant items among the top R, divided by R."""
    _, rel = _precision_sums(match, r)
    return rel / (r if denominator is None else denominator).double()


def map_at_1000(match: torch.Tensor, class_count: torch.Tensor, limit: int = 1000) -> torch.Tensor:
    """Per-query truncated AP as Roth's mAP@1000: sum_{i<=limit} P@i rel_i / class_count."""
    depth = torch.full((match.shape[0],), limit, dtype=torch.long)
    ap_sum, _ = _precision_sums(match, depth)
    return ap_sum / class_count.double()


NMI_EXACT_MAX_K = 2048   # method="auto": Roth's 20 k-means iterations up to this many clusters, 5 restricted above
NMI_LARGE_K_NITER = 5    # iterations of method="auto" above NMI_EXACT_MAX_K clusters (the candidate k-means)


def _kmeans_assign(x: np.ndarray, k: int, seed: int, niter: int, nredo: int, quiet: bool = False,
                   verbose: bool = False) -> np.ndarray:
    """Nearest-centroid assignment of faiss k-means with ``k`` clusters (every point alone when k >= n);
    ``verbose``: faiss prints each iteration with its time (the progress of a long exact run)."""
    import faiss
    if k <= 1:
        return np.zeros(x.shape[0], dtype=np.int64)
    if x.shape[0] <= k:
        return np.arange(x.shape[0], dtype=np.int64)
    extra = {"min_points_per_centroid": 1} if quiet else {}
    if verbose:
        extra["verbose"] = True
    kmeans = faiss.Kmeans(x.shape[1], k, niter=niter, nredo=nredo, seed=seed, max_points_per_centroid=10**7, **extra)
    kmeans.train(x)
    _, assignment = kmeans.index.search(x, 1)
    return assignment[:, 0].astype(np.int64)


def _split_clusters(sizes: np.ndarray, k: int) -> np.ndarray:
    """``k`` clusters shared out over groups of ``sizes`` points in proportion (largest remainder), each non-empty
    group at least one and at most its size."""
    share = sizes / sizes.sum() * k
    alloc = np.minimum(np.maximum(np.floor(share).astype(np.int64), (sizes > 0).astype(np.int64)), sizes)
    order = np.argsort(-(share - np.floor(share)), kind="stable")
    while alloc.sum() < k:
        grew = False
        for i in order:
            if alloc.sum() >= k:
                break
            if alloc[i] < sizes[i]:
                alloc[i] += 1
                grew = True
        if not grew:
            break
    while alloc.sum() > k:
        i = int(np.argmax(np.where(alloc > 1, alloc, -1)))
        alloc[i] -= 1
    return alloc


def nmi(embeddings: torch.Tensor, labels: torch.Tensor, seed: int = 0, niter: int = 20, nredo: int = 1,
        method: str = "exact", progress: bool = False) -> float:
    """NMI between labels and k-means clusters (K = number of distinct labels), as Roth and PML do.

    One k-means start (``nredo=1``) as Roth; with very few items per class (faiss asks for >= 39 per
    centroid) a poor start can merge clusters, so raise ``nredo`` for tiny evaluation sets.

    ``method="exact"`` runs one k-means with K centroids and ``niter`` iterations: its cost grows with n x K x niter
    (at PUMA's unified scale, 148.5K items and K = 15.9K, about a minute on two CPU threads). ``"candidates"`` runs
    the same iterations, but only the first two assignments compare an item with every centroid; later ones choose
    among its 32 nearest centroids of the second (:func:`umlkit.metrics.kmeans.candidate_kmeans`). ``"auto"`` (the
    default of :func:`evaluate_retrieval`) is exact up to :data:`NMI_EXACT_MAX_K` clusters; above, it is
    ``"candidates"`` with :data:`NMI_LARGE_K_NITER` iterations (figures in docs/guide.md's metric definitions,
    ``benchmarks/bench_nmi.py``). ``"hierarchical"`` clusters into ceil(sqrt(K)) groups first, then splits each
    group into its share of the K clusters (in proportion to its size): about sqrt(K) / 2 times fewer distance
    computations, but 0.056 below the exact value there. ``progress`` prints faiss's per-iteration times (exact),
    or a bar over the iterations (candidates, auto above the threshold) or over the second level (hierarchical).
    """
    from sklearn.metrics import normalized_mutual_info_score

    if method not in ("exact", "candidates", "hierarchical", "auto"):
        raise ValueError(f"NMI method must be 'exact', 'candidates', 'hierarchical' or 'auto', got {method!r}")
    x = np.ascontiguousarray(embeddings.numpy(), dtype=np.float32)
    y = labels.numpy()
    n_clusters = int(np.unique(y).size)
    if n_clusters < 2 or x.shape[0] <= n_clusters:
        raise ValueError(f"NMI needs at least 2 classes and more items than classes; got {x.shape[0]} items, "
                         f"{n_clusters} classes")
    if method == "auto":
        large = n_clusters > NMI_EXACT_MAX_K
        niter, method = (min(niter, NMI_LARGE_K_NITER), "candidates") if large else (niter, "exact")
    if method == "candidates":
        from umlkit.metrics.kmeans import candidate_kmeans
        return float(normalized_mutual_info_score(y, candidate_kmeans(x, n_clusters, seed, niter, progress=progress)))
    if method == "exact":
        assignment = _kmeans_assign(x, n_clusters, seed, niter, nredo, verbose=progress)
        return float(normalized_mutual_info_score(y, assignment))
    top = int(np.ceil(np.sqrt(n_clusters)))
    coarse = _kmeans_assign(x, top, seed, niter, nredo, quiet=True)
    alloc = _split_clusters(np.bincount(coarse, minlength=top), n_clusters)
    assignment = np.empty(x.shape[0], dtype=np.int64)
    groups = range(top)
    if progress:
        from umlkit._progress import tqdm
        groups = tqdm(groups, desc=f"NMI: k-means, {x.shape[0]} items into {n_clusters} clusters", unit="group")
    offset = 0
    for c in groups:
        members = np.flatnonzero(coarse == c)
        if members.size:
            assignment[members] = offset + _kmeans_assign(x[members], int(alloc[c]), seed + 1 + c, niter, nredo,
                                                          quiet=True)
        offset += int(alloc[c])
    return float(normalized_mutual_info_score(y, assignment))


# --------------------------------------------------------------------------------------------------
# engine
# --------------------------------------------------------------------------------------------------
def _label_counts(gallery_labels: torch.Tensor, query_labels: torch.Tensor) -> torch.Tensor:
    """For each query label, the number of gallery items carrying it."""
    uniq, counts = torch.unique(gallery_labels, return_counts=True)
    pos = torch.searchsorted(uniq, query_labels).clamp(max=uniq.numel() - 1)
    found = uniq[pos] == query_labels
    return torch.where(found, counts[pos], torch.zeros_like(pos))


def evaluate_indices(
    embeddings: torch.Tensor,
    labels: torch.Tensor,
    query_index: torch.Tensor,
    gallery_index: torch.Tensor,
    *,
    recall_ks: Sequence[int],
    others: Sequence[str],
    map_at_r_convention: str = "musgrave",
    search_dtype: torch.dtype | None = None,
    seed: int = 0,
    block_entries: int = 1 << 24,
    nmi_method: str = "auto",
    progress: bool = False,
) -> dict[str, float]:
    """Evaluate queries ``embeddings[query_index]`` against gallery ``embeddings[gallery_index]``.

    Items are identified by their global index: a query never retrieves itself, whether or not it is also
    in the gallery. Embeddings must already be checked and L2-normalised. The search runs in query blocks of at
    most ``block_entries`` neighbour entries (2^24: about 0.2 GB of indices and scores per block); ``progress``
    shows a bar over the blocks and over NMI's second k-means level; ``nmi_method`` is :func:`nmi`'s ``method``.
    """
    if map_at_r_convention not in ("musgrave", "roth"):
        raise ValueError(f"map_at_r_convention must be 'musgrave' or 'roth', got {map_at_r_convention!r}")
    q = embeddings[query_index]
    # one copy when the query set is the gallery (the CUB/Cars/SOP protocol): 76 MB less at PUMA's test size
    g = q if torch.equal(query_index, gallery_index) else embeddings[gallery_index]
    ql, gl = labels[query_index], labels[gallery_index]
    nq, ng = q.shape[0], g.shape[0]
    if nq == 0 or ng == 0:
        raise ValueError(f"need at least one query and one gallery item, got {nq} queries and {ng} gallery items")
    if "NMI" in others:   # checked before the search, whose results its failure would otherwise discard
        n_classes = int(torch.unique(ql).numel())
        if n_classes < 2 or nq <= n_classes:
            raise ValueError(f"NMI needs at least 2 classes and more items than classes; got {nq} queries, {n_classes} "
                             f"classes. Leave it out (metrics=['R@1', 'MAP@R', ...]; the default metric set "
                             f"includes it)")
    self_index, in_gallery = _self_positions(query_index, gallery_index)
    any_self = bool(in_gallery.any())
    available = ng - (1 if any_self else 0)
    class_count = _label_counts(gl, ql)  # same-label gallery items, the query included if it is there
    r = class_count - in_gallery.long()  # Musgrave's R: other same-label items
    need_r = any(name in ("MAP@R", "RP") for name in others)
    max_recall = max(recall_ks, default=0)
    if max_recall > available:
        raise ValueError(f"R@{max_recall} needs k={max_recall} neighbours but the gallery offers only "
                         f"{available} per query")
    # per-query search depth: only as deep as that query's metrics need
    depth = torch.full((nq,), max(max_recall, 1), dtype=torch.long)
    if need_r:
        depth = torch.maximum(depth, r)
        if map_at_r_convention == "roth":
            depth = torch.maximum(depth, class_count.clamp(max=available))
    if "mAP@1000" in others:
        depth = torch.maximum(depth, torch.full_like(depth, min(1000, available)))
    with limited_threads(nq * ng):   # on a busy machine, only the idle cores (umlkit.metrics.threads)
        out = _search_and_score(q, g, ql, gl, depth, self_index, any_self, recall_ks, others, need_r,
                                map_at_r_convention, r, class_count, available, search_dtype, block_entries, progress)
        if "NMI" in others:
            out["NMI"] = nmi(q, ql, seed=seed, method=nmi_method, progress=progress)
    out["n_queries"] = float(nq)
    out["n_gallery"] = float(ng)
    return out


def _search_and_score(q, g, ql, gl, depth, self_index, any_self, recall_ks, others, need_r, convention, r,
                      class_count, available, search_dtype, block_entries, progress) -> dict[str, float]:
    """The neighbour search in query blocks and the metrics read from it (R@k, MAP@R, RP, mAP@1000)."""
    out: dict[str, float] = {}
    if recall_ks or need_r or "mAP@1000" in others:
        hits: dict[int, list] = {k: [] for k in recall_ks}
        parts: dict[str, list] = {"map": [], "rp": [], "m1000": []}
        order: dict[str, list] = {"map": [], "rp": [], "m1000": []}
        for rows, match in _matches(q, g, ql, gl, depth, self_index, any_self, others, class_count, search_dtype,
                                    block_entries, progress):
            _score_block(match, rows, recall_ks, others, need_r, convention, r, class_count, available, hits, parts)
            for name, keep in (("map", r[rows] > 0), ("rp", r[rows] > 0), ("m1000", class_count[rows] > 0)):
                order[name].append(rows[keep])
        for name, values in parts.items():   # back in query order: the means then sum in the same order as ever
            if values:
                parts[name] = [torch.cat(values)[torch.argsort(torch.cat(order[name]))]]
        out.update(_summarise(hits, parts, r, recall_ks, others, need_r))
    return out


def _matches(q, g, ql, gl, depth, self_index, any_self, others, class_count, search_dtype, block_entries, progress):
    """Yield (query rows, relevance of their ranked neighbours up to their depth): from the streamed pass of
    :mod:`umlkit.metrics.deep_ap` when mAP@1000 is asked of a large gallery, else from the search in query blocks of
    at most ``block_entries`` neighbour entries (memory stays bounded whatever the depth; every per-query value is the
    same as in one block)."""
    nq = q.shape[0]
    if "mAP@1000" in others and STREAM_MIN_GALLERY <= g.shape[0] < STREAM_MAX_GALLERY and \
            int(class_count.max()) <= STREAM_MAX_CLASS and streams(search_dtype)[0]:
        yield from streamed_matches(q, g, ql, gl, self_index if any_self else None, class_count, int(depth.max()),
                                    progress=progress)
        return
    block = max(1, int(block_entries) // max(int(depth.max()), 1))
    starts = range(0, nq, block)
    if progress and len(starts) > 1:
        from umlkit._progress import tqdm
        starts = tqdm(starts, desc=f"searching {nq} queries in blocks of {block}", unit="block")
    for start in starts:
        rows = torch.arange(start, min(start + block, nq))
        # (inputs checked above: the gallery's finiteness pass is not repeated per block)
        _, idx = knn_search_checked(q[rows], g, depth[rows], self_index=self_index[rows] if any_self else None,
                             search_dtype=search_dtype)
        yield rows, (idx >= 0) & (gl[idx.clamp(min=0)] == ql[rows, None])


def _self_positions(query_index: torch.Tensor, gallery_index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each query's position inside the gallery (-1 when it is not a gallery item) and whether it is one."""
    order = torch.argsort(gallery_index)
    sorted_g = gallery_index[order]
    pos = torch.searchsorted(sorted_g, query_index).clamp(max=gallery_index.numel() - 1)
    in_gallery = sorted_g[pos] == query_index
    return torch.where(in_gallery, order[pos], torch.full_like(pos, -1)), in_gallery


def _score_block(match, sl, recall_ks, others, need_r: bool, convention: str, r, class_count, available: int,
                 hits: dict, parts: dict) -> None:
    """One query block's per-query values (hits at each k, MAP@R, RP, mAP@1000), appended to ``hits``/``parts``."""
    for k in recall_ks:
        hits[k].append(match[:, :k].any(dim=1))
    if need_r:
        valid = r[sl] > 0
        mv, rv = match[valid], r[sl][valid]
        if convention == "roth":
            # Roth/VPTSP: R counts the query itself; the neighbour list excludes it
            depth_roth = torch.clamp(class_count[sl][valid], max=available)
            denom = class_count[sl][valid]
            parts["map"].append(map_at_r(mv, depth_roth, denominator=denom))
            parts["rp"].append(r_precision(mv, depth_roth, denominator=denom))
        else:
            parts["map"].append(map_at_r(mv, rv))
            parts["rp"].append(r_precision(mv, rv))
    if "mAP@1000" in others:
        valid = class_count[sl] > 0
        parts["m1000"].append(map_at_1000(match[valid], class_count[sl][valid]))


def _summarise(hits: dict, parts: dict, r, recall_ks, others, need_r: bool) -> dict[str, float]:
    """The means over every query block of the values :func:`_score_block` collected."""
    out: dict[str, float] = {}
    for k in recall_ks:
        out[f"R@{k}"] = torch.cat(hits[k]).double().mean().item()
    if need_r:
        valid = r > 0
        out["n_without_positives"] = float((~valid).sum().item())
        map_vals, rp_vals = torch.cat(parts["map"]), torch.cat(parts["rp"])
        if "MAP@R" in others:
            out["MAP@R"] = map_vals.mean().item() if valid.any() else float("nan")
        if "RP" in others:
            out["RP"] = rp_vals.mean().item() if valid.any() else float("nan")
    if "mAP@1000" in others:
        m1000 = torch.cat(parts["m1000"])
        out["mAP@1000"] = m1000.mean().item() if m1000.numel() else float("nan")
    return out


def evaluate_retrieval(
    query,
    query_labels,
    gallery=None,
    gallery_labels=None,
    *,
    ks: Sequence[int] = DEFAULT_KS,
    metrics: Sequence[str] | None = None,
    map_at_r_convention: str = "musgrave",
    search_dtype: torch.dtype | None = None,
    seed: int = 0,
    nmi_method: str = "auto",
    progress: bool = False,
) -> dict[str, float]:
    """Retrieval metrics of query embeddings against a gallery (or against themselves).

    Args:
        query: (n, d) embeddings (tensor or array); L2-normalised here, zero rows and NaN/inf rejected.
        query_labels: (n,) integer class labels.
        gallery: (m, d) separate gallery (In-shop protocol), or ``None`` to search the query set against
            itself with the self-match excluded (CUB/Cars/SOP protocol).
        gallery_labels: (m,) labels of the gallery; required with ``gallery``.
        ks: the k of the ``"R@k"`` keys when ``metrics`` is None.
        metrics: names to compute, e.g. ``["R@1", "MAP@R"]``; ``None`` = R@k for ``ks`` plus MAP@R, RP,
            mAP@1000 and NMI.
        map_at_r_convention: ``"musgrave"`` (R excludes the query) or ``"roth"`` (R counts it, as Roth's
            ``mAP_c`` and VPTSP's ``mAP_R``).
        search_dtype: ``torch.bfloat16`` or ``torch.int8`` (fast exact searches; int8 for self-searches),
            ``torch.float32``, or ``None`` (default): the fastest on this CPU
            (:func:`umlkit.metrics.knn.choose_search_dtype`).
        seed: k-means seed for NMI.
        nmi_method: :func:`nmi`'s ``method``: ``"auto"`` (default: Roth's and PML's value up to
            :data:`NMI_EXACT_MAX_K` classes, 5 k-means iterations instead of 20 above), ``"exact"`` (20 at any size)
            or ``"hierarchical"`` (a two-level approximation, cheaper and coarser).
        progress: progress bars for the search blocks (or mAP@1000's streamed pass) and NMI's k-means (large
            evaluations).

    Returns:
        ``{"R@1": ..., "MAP@R": ..., "RP": ..., "mAP@1000": ..., "NMI": ..., "n_queries": ..., "n_gallery": ...,
        "n_without_positives": ...}``; metric values lie in [0, 1].

    Example:
        >>> import torch
        >>> x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
        >>> evaluate_retrieval(x, [0, 0, 1, 1], metrics=["R@1", "MAP@R"])["R@1"]
        1.0
    """
    q = check_embeddings(query, "query")
    ql = check_labels(query_labels, q.shape[0], "query_labels", "query")
    recall_ks, others = parse_metrics(metrics, ks)
    if gallery is None:
        if gallery_labels is not None:
            raise ValueError("gallery_labels given without gallery; pass both or neither")
        emb = torch.nn.functional.normalize(q, dim=1)
        labels = ql
        query_index = gallery_index = torch.arange(q.shape[0])
    else:
        if gallery_labels is None:
            raise ValueError("gallery given without gallery_labels; pass both or neither")
        g = check_embeddings(gallery, "gallery")
        gl = check_labels(gallery_labels, g.shape[0], "gallery_labels", "gallery")
        if g.shape[1] != q.shape[1]:
            raise ValueError(f"query has dimension {q.shape[1]} but gallery has {g.shape[1]}")
        emb = torch.nn.functional.normalize(torch.cat([q, g]), dim=1)
        labels = torch.cat([ql, gl])
        query_index = torch.arange(q.shape[0])
        gallery_index = torch.arange(q.shape[0], q.shape[0] + g.shape[0])
    return evaluate_indices(
        emb, labels, query_index, gallery_index, recall_ks=recall_ks, others=others,
        map_at_r_convention=map_at_r_convention, search_dtype=search_dtype, seed=seed, nmi_method=nmi_method,
        progress=progress,
    )


def neighbour_class_counts(embeddings, labels, k: int = 20) -> np.ndarray:
    """(C, C) counts: row c, column j = how many of the ``k`` nearest neighbours of class c's images (each image a
    query against the rest of the set, itself excluded) carry label j. The language-guidance paper's Fig. 3
    (Sec. 4.3) reads the top-20 neighbours of every test image this way and compares, per query class, the counts
    of its semantically closest classes with and without guidance. Labels must be 0..C-1."""
    emb = torch.nn.functional.normalize(check_embeddings(embeddings), dim=1)
    y = check_labels(labels, emb.shape[0])
    n = emb.shape[0]
    if int(y.min()) < 0 or int(y.max()) >= n:   # the (C, C) table is sized by the largest label
        raise ValueError(f"labels must be class indices 0..C-1 with C <= {n} (the number of embeddings), got "
                         f"[{int(y.min())}, {int(y.max())}]; map raw class ids to 0..C-1 first (e.g. np.unique(labels, "
                         f"return_inverse=True))")
    if not 1 <= k < n:
        raise ValueError(f"k={k} neighbours need 1 <= k < {n} (the number of embeddings)")
    _, idx = knn_search(emb, emb, k, self_index=torch.arange(n))
    c = int(y.max()) + 1
    flat = y[:, None].expand(-1, k).reshape(-1) * c + y[idx].reshape(-1)
    return torch.bincount(flat, minlength=c * c).reshape(c, c).numpy()
