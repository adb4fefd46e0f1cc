"""k-means for NMI at many clusters: Lloyd iterations whose later assignments look only at each item's nearest
centroids of an earlier iteration.

Roth et al. 2020 (``metrics/nmi.py``) and pytorch-metric-learning take NMI from one faiss k-means with K = the number
of classes (20 iterations, one start, centroids started at K random items). Each iteration compares every item with
every centroid: at PUMA's unified scale (148,500 test items, K = 15,900) that is 0.6 TFLOP per iteration, most of
NMI's time. After two exact iterations the centroids have left the random items they started at, and an item's
nearest centroid almost never lies outside its 32 nearest of the second iteration: on UML-like embeddings at that
scale (``benchmarks/bench_nmi.py``), the final assignment of 5 iterations agreed with the exact assignment to the
same final centroids for 99.99-100 % of the items, and NMI to 4 decimals, for k-means seeds 0, 1 and 2. So the
first two assignments here are exact (faiss's flat L2 search, the second returning the 32 nearest) and every later
one picks among those 32 (:func:`_restricted`); the cost of an iteration falls from n x K to n x 32 distances.

faiss has no assignment restricted to per-item candidate lists, hence the torch code for that step. Differences from
faiss's ``Kmeans`` besides the restriction: the starting items come from numpy's seeded permutation (faiss uses its
own generator), and a centroid that loses every item keeps its place (faiss splits the largest cluster instead).
"""
from __future__ import annotations

import numpy as np
import torch

__all__ = ["CANDIDATES", "candidate_kmeans"]

CANDIDATES = 32   # nearest centroids of the second iteration that later assignments choose from
_ROWS = 1024      # items per restricted assignment (their candidates' rows stay in cache)


def candidate_kmeans(x: np.ndarray, k: int, seed: int, niter: int, candidates: int = CANDIDATES,
                     progress: bool = False) -> np.ndarray:
    """Cluster index of each row of ``x`` (float32, (n, d)) after ``niter`` Lloyd iterations with ``k`` centroids
    started at ``k`` random rows (``seed``): the assignment to the final centroids. Assignments 1 and 2 are exact;
    later ones choose among each row's ``candidates`` nearest centroids of assignment 2."""
    n = x.shape[0]
    if not 1 <= k <= n:
        raise ValueError(f"k-means needs 1 <= k <= the number of items ({n}), got k={k}")
    if niter < 1 or candidates < 1:
        raise ValueError(f"k-means needs niter >= 1 and candidates >= 1, got niter={niter}, candidates={candidates}")
    xt = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    centroids = xt[torch.from_numpy(np.random.RandomState(seed).permutation(n)[:k])].clone()
    assignment = _nearest(xt, centroids, 1)[:, 0]
    steps = range(niter)
    if progress:
        from umlkit._progress import tqdm
        steps = tqdm(steps, desc=f"NMI: k-means, {n} items into {k} clusters", unit="iteration")
    nearest = None
    for _ in steps:
        centroids = _update(xt, assignment, centroids)
        if nearest is None:
            nearest = _nearest(xt, centroids, min(candidates, k))
            assignment = nearest[:, 0].clone()
        else:
            assignment = _restricted(xt, centroids, nearest)
    return assignment.numpy()


def _nearest(x: torch.Tensor, centroids: torch.Tensor, k: int) -> torch.Tensor:
    """(n, k) indices of each item's ``k`` nearest centroids by L2, nearest first (faiss's exact flat search)."""
    import faiss
    index = faiss.IndexFlatL2(centroids.shape[1])
    index.add(centroids.numpy())
    _, idx = index.search(x.numpy(), k)
    return torch.from_numpy(idx)


def _update(x: torch.Tensor, assignment: torch.Tensor, centroids: torch.Tensor) -> torch.Tensor:
    """Each centroid moved to the mean of its items; one without items stays where it is."""
    sums = torch.zeros_like(centroids).index_add_(0, assignment, x)
    counts = torch.bincount(assignment, minlength=centroids.shape[0])
    return torch.where(counts[:, None] > 0, sums / counts.clamp(min=1)[:, None], centroids)


def _restricted(x: torch.Tensor, centroids: torch.Tensor, nearest: torch.Tensor) -> torch.Tensor:
    """Each item's nearest centroid among its candidate list ``nearest`` (squared L2 less the item's own norm, which
    does not change the order; the first of equal distances)."""
    norms = (centroids * centroids).sum(dim=1)
    out = torch.empty(x.shape[0], dtype=torch.long)
    for i in range(0, x.shape[0], _ROWS):
        cand = nearest[i:i + _ROWS]
        rows = torch.nn.functional.embedding(cand, centroids)             # (items, candidates, d)
        dist = norms[cand] - 2 * torch.bmm(rows, x[i:i + _ROWS, :, None])[..., 0]
        out[i:i + _ROWS] = cand.gather(1, dist.argmin(dim=1, keepdim=True))[:, 0]
    return out
