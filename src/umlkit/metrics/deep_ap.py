"""mAP@1000 on large galleries from one streamed, threshold-filtered bf16 pass, exact like every other path.

Roth's mAP@1000 (``metrics/mAP_1000.py``, Roth et al. 2020; reported by ooDML) needs the rank of each relevant item
among a query's 1,000 nearest neighbours. Taking those neighbours with a top-k (faiss's heap, or torch's ``topk``)
over every row of a 148,500-item gallery (PUMA's unified test set) costs far more than the similarity GEMM: at
14,850 items faiss's k = 1,000 selection alone took 4.4 s of a 9.8 s evaluation on one core, and it grows with n^2.
No library ranks by a threshold filter with an error certificate, so this module does, per block of queries:

1. **the relevant items are known from the labels**: every gallery item of the query's class (the query itself
   left out) is scored exactly in fp32 by :func:`umlkit.metrics.knn.rescore`, the numbers every search path ranks
   by;
2. **a cut per query from a sample**: bf16 scores against every 16th gallery item; the ``j``-th best, ``j`` about
   1.25x (``_MARGIN``) the sample's share of ``limit``, lowered by the bf16 error bound, is the cut ``c``: with high
   probability at least ``limit`` items score ``c`` or more. Only relevant items scoring at least
   ``t = max(c, lowest relevant score)`` can reach the top ``limit``;
3. **one pass over the gallery** in tiles of 1,024 queries x 4,096 items: bf16 GEMM, the scores read as int16
   (order-preserving for non-negative floats, as in :mod:`umlkit.metrics.knn`) and compared with the query's floor
   (the smallest bf16 score whose error interval reaches ``t``); the mask is read as 64-bit words first, so the
   sparse hits are found in an eighth of its elements. The non-relevant items at or above the floor are kept (about
   1,600 per query at the unified scale); every item not kept scores below ``t`` exactly;
4. **certificate** (queries with ``t = c``): at least ``limit`` items, kept or relevant, provably score ``c`` or
   more, so every relevant item below ``c`` ranks behind ``limit`` others;
5. **exact ranks**: a kept item whose error interval lies above every counted relevant score beats them all, one
   below all beats none; one whose interval holds no relevant score beats the same ones whatever its exact score,
   and only those whose interval holds one are re-scored exactly. Each counted relevant item's rank is 1 +
   the items that beat it by (score, then lower index), counted with one sorted search of 64-bit keys (query,
   score, index) instead of a sort of every row. The first ``limit`` places then carry the relevance row of the
   exact top ``limit``, so R@k, MAP@R, RP and :func:`umlkit.metrics.retrieval.map_at_1000` read from it give the
   engine's values bit for bit.

**Only where bf16 is native** (:func:`streams`): the pass is bf16 GEMMs throughout, and without ``avx512_bf16`` or
``amx_bf16`` (or with oneDNN limited below them) oneDNN emulates them at 0.09-0.10x fp32, and ATen's fallback ran
on one thread: on a Zen 3 EPYC (AVX2 only) the default metric set at the unified scale ran 13.7 min single-threaded
without finishing, where it takes 99 s on a Zen 4. There mAP@1000 takes the engine's exact search to depth 1,000
(fp32 on such a CPU, :mod:`umlkit.metrics.kernels`), unless bf16 is pinned (``search_dtype`` or
``UMLKIT_SEARCH_DTYPE=bf16``). Both give the same values; only the time differs.

Queries whose floor is not positive (int16 order breaks for negative floats) or whose certificate fails take the
exact search (:func:`umlkit.metrics.knn.knn_search_checked`, depth ``limit``): the value never depends on the sample,
only the speed does. Galleries under :data:`STREAM_MIN_GALLERY` items or of 2^21 items or more (the keys' index field),
and classes over :data:`STREAM_MAX_CLASS` items, keep the engine's one search.
"""
from __future__ import annotations

import torch

from umlkit.metrics.knn import bf16_error_bound, knn_search_checked, monotone_bits, rescore, rescore_pairs

__all__ = ["STREAM_MAX_CLASS", "STREAM_MAX_GALLERY", "STREAM_MIN_GALLERY", "streamed_matches", "streams"]

STREAM_MIN_GALLERY = 32_000   # below this the sample holds too few items for the cut; the engine's search is used
STREAM_MAX_GALLERY = 1 << 21  # gallery indices fill 21 bits of the ranking keys
STREAM_MAX_CLASS = 8192       # every relevant item is scored and ranked: larger classes keep the engine's search
_ROW_BITS = 10                # queries per block <= 2^10: the keys' query field (bits 53-62)
_SAMPLE_EVERY = 16            # every 16th gallery item is in the sample that sets the cut
_MARGIN = 1.25                # the cut's sample rank, relative to the sample's expected share of the top limit
_TILE = 4096                  # gallery items per GEMM tile (8 MB of bf16 scores for 1,024 queries)
_EXACT_ROWS = 128             # queries per exact search (depth 1,000 reads whole rows: 0.1 GB at 148,500 items)
_ROUNDING = 2.0 ** -7         # bf16 rounding of the product, relative (see knn.bf16_error_bound)
_INDEX_FIELD = (1 << 21) - 1  # the keys' gallery-index field (bits 0-20)


def streams(search_dtype: torch.dtype | None = None) -> tuple[bool, str]:
    """Whether a large gallery's mAP@1000 takes the streamed bf16 pass on this machine, and why (the kernel rule of
    :mod:`umlkit.metrics.kernels`: native bf16, or bf16 pinned by ``search_dtype`` or ``UMLKIT_SEARCH_DTYPE``)."""
    from umlkit.metrics.kernels import cpu_flags, native
    from umlkit.metrics.knn import forced_search_dtype
    if search_dtype == torch.bfloat16 or (search_dtype is None and forced_search_dtype() == torch.bfloat16):
        return True, "one streamed bf16 pass (bf16 pinned)"
    if native("bf16", cpu_flags()):
        return True, "one streamed bf16 pass (this CPU runs bf16 natively)"
    return False, ("the exact search to depth 1,000, not the streamed bf16 pass: this CPU has no native bf16 "
                   "(no avx512_bf16/amx_bf16, or oneDNN limited below them), where that pass would be emulated")


def streamed_matches(q: torch.Tensor, g: torch.Tensor, ql: torch.Tensor, gl: torch.Tensor,
                     self_index: torch.Tensor | None, class_count: torch.Tensor, limit: int, *,
                     progress: bool = False, stats: dict | None = None):
    """Yield ``(rows, match)`` for consecutive blocks of queries: ``match[i, p]`` says whether the item at place
    ``p + 1`` of query ``rows[i]``'s exact ranking (score descending, lower gallery index first, the self-match left
    out) shares its label, for the first ``limit`` places: the relevance row the engine's search gives.

    ``q``/``g`` are L2-normalised fp32 embeddings, ``self_index`` each query's own gallery position (or -1), or None;
    ``class_count`` the gallery items sharing each query's label (the query included). ``stats`` receives the number
    of queries that took the exact search (``"exact_rows"``) and the mean kept and re-scored items per query
    (``"kept"``, ``"rescored"``)."""
    m = g.shape[0]
    if m >= STREAM_MAX_GALLERY or q.shape[0] == 0:
        raise ValueError(f"the streamed ranking needs queries and fewer than {STREAM_MAX_GALLERY} gallery items, got "
                         f"{q.shape[0]} queries and {m} gallery items")
    state = _Gallery(g, gl)
    redo, kept, rescored = [], 0, 0
    starts = range(0, q.shape[0], 1 << _ROW_BITS)
    if progress and len(starts) > 1:
        from umlkit._progress import tqdm
        starts = tqdm(starts, desc=f"ranking {q.shape[0]} queries to depth {limit} in one streamed pass",
                      unit="block")
    for start in starts:
        rows = torch.arange(start, min(start + (1 << _ROW_BITS), q.shape[0]))
        si = None if self_index is None else self_index[rows]
        match, ok, (n_kept, n_rescored) = _block(state, q[rows], ql[rows], si, limit)
        kept, rescored = kept + n_kept, rescored + n_rescored
        redo.append(rows[~ok])
        yield rows[ok], match[ok]
    redo = torch.cat(redo)
    for start in range(0, redo.numel(), _EXACT_ROWS):   # queries the pass could not certify: the exact search
        rows = redo[start:start + _EXACT_ROWS]
        _, idx = knn_search_checked(q[rows], g, limit, self_index=None if self_index is None else self_index[rows])
        yield rows, (idx >= 0) & (gl[idx.clamp(min=0)] == ql[rows, None])
    if stats is not None:
        stats.update(exact_rows=int(redo.numel()), kept=kept / max(q.shape[0], 1),
                     rescored=rescored / max(q.shape[0], 1))


class _Gallery:
    """The gallery as the pass reads it: bf16 (padded to whole tiles), its rounding error, the sample that sets the
    cut, and its items grouped by label (each query's relevant items)."""

    def __init__(self, g: torch.Tensor, gl: torch.Tensor):
        m = g.shape[0]
        self.g, self.gl, self.m = g, gl, m
        self.gb = torch.cat([g.to(torch.bfloat16), g.new_zeros((-m) % _TILE, g.shape[1], dtype=torch.bfloat16)])
        self.dg_max = (g - self.gb[:m].float()).norm(dim=1).max()
        self.gb_max = self.gb[:m].float().norm(dim=1).max()
        self.sample = torch.arange(0, m, _SAMPLE_EVERY)
        self.gs = self.gb[self.sample]
        self.by_label = torch.argsort(gl, stable=True)
        self.sorted_labels = gl[self.by_label]

    def members(self, ql: torch.Tensor, si: torch.Tensor | None) -> torch.Tensor:
        """(queries, largest class) gallery indices of each query's class, the query itself and padding -1."""
        first = torch.searchsorted(self.sorted_labels, ql)
        count = torch.searchsorted(self.sorted_labels, ql, right=True) - first
        slot = torch.arange(max(1, int(count.max()) if count.numel() else 0))   # at least one column
        pos = (first[:, None] + slot[None, :]).clamp(max=self.m - 1)
        idx = torch.where(slot[None, :] < count[:, None], self.by_label[pos], -1)
        if si is not None:
            idx[idx == si[:, None]] = -1
        return idx


def _upper(v: torch.Tensor, bound: torch.Tensor) -> torch.Tensor:
    """Upper bound of the exact score of an item whose bf16 score is ``v`` (``bound``: the query's input error)."""
    return v + bound + _ROUNDING * v.abs()


def _lower(v: torch.Tensor, bound: torch.Tensor) -> torch.Tensor:
    return v - bound - _ROUNDING * v.abs()


def _block(state: _Gallery, q, ql, si, limit: int) -> tuple[torch.Tensor, torch.Tensor, tuple[int, int]]:
    """One block of queries: (relevance of the first ``limit`` places, whether it holds without the exact search,
    (items kept, items re-scored))."""
    qb = q.to(torch.bfloat16)
    bound = bf16_error_bound(q, qb, state.dg_max, state.gb_max, torch.zeros(q.shape[0]))
    rel_idx = state.members(ql, si)
    rel_score = rescore(q, state.g, rel_idx, None)          # exact; padding -inf
    cut = _cut(qb, state, si, bound, limit)
    lowest = torch.where(rel_idx >= 0, rel_score, torch.inf).amin(dim=1)
    needs_certificate = lowest < cut
    target = torch.where(needs_certificate, cut, lowest)    # only relevant items scoring >= target can rank <= limit
    floor = _floor_bits(target, bound)
    col, val, owner = _kept(qb, state, floor, ql)
    low_end, high_end = _lower(val, bound[owner]), _upper(val, bound[owner])    # each kept item's interval
    certain = torch.bincount(owner[low_end >= cut[owner]], minlength=q.shape[0]) + \
        (rel_score >= cut[:, None]).sum(dim=1)
    ok = ((floor >= 0) | torch.isinf(lowest)) & (~needs_certificate | (certain >= limit))
    counted = (rel_idx >= 0) & (rel_score >= target[:, None])
    # a kept item whose interval lies below every counted relevant score beats none of them, one above all beats all:
    # only the rest are re-scored
    top = torch.where(counted, rel_score, -torch.inf).amax(dim=1)
    low = torch.where(counted, rel_score, torch.inf).amin(dim=1)
    above = low_end > top[owner]
    beaten_by = torch.bincount(owner[above], minlength=q.shape[0])   # per query: kept items that beat every one
    between = ~above & (high_end >= low[owner])
    n_kept = col.numel()
    col, owner, low_end, high_end = col[between], owner[between], low_end[between], high_end[between]
    ref, row = _relevant_keys(rel_idx, rel_score, counted)
    pos, n_rescored = _places(q, state.g, ref, col, owner, low_end, high_end)
    return _match(ref, row, pos, owner, beaten_by, q.shape[0], limit), ok, (n_kept, n_rescored)


def _cut(qb, state: _Gallery, si, bound, limit: int) -> torch.Tensor:
    """The lower bound of each query's j-th best sampled score, j about ``_MARGIN`` x the sample's share of the top
    ``limit``."""
    sample = state.sample
    scores = torch.mm(qb, state.gs.T).float()
    if si is not None:
        scores[sample[None, :] == si[:, None]] = float("-inf")
    j = min(int(_MARGIN * limit * sample.numel() / state.m) + 8, sample.numel())
    return _lower(scores.topk(j, dim=1).values[:, -1], bound)


def _floor_bits(target: torch.Tensor, bound: torch.Tensor) -> torch.Tensor:
    """int16 bits of a bf16 value at or below the smallest non-negative score whose upper bound reaches ``target``
    (``v + bound + 2^-7 v >= target``); -1 where that score is not positive, 32767 where nothing is to be kept."""
    lo = (target - bound) / (1 + _ROUNDING)
    bits = lo.clamp(max=1e30).to(torch.bfloat16).view(torch.int16).long() - 1   # the next bf16 below
    bits = torch.where(lo > 0, bits, torch.full_like(bits, -1))
    return torch.where(torch.isinf(target), torch.full_like(bits, 32767), bits).to(torch.int16)


def _kept(qb, state: _Gallery, floor, ql) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(gallery index, bf16 score as fp32, query row) of every non-relevant item at or above its query's floor,
    sorted by query row then gallery index. One pass over the gallery in tiles; the mask of each tile is read as
    64-bit words first (8 items each), so that the sparse hits are found in an eighth of the elements."""
    floor = torch.where(floor >= 0, floor, torch.full_like(floor, 32767))[:, None]   # rows searched exactly: none
    cols, vals, owners = [], [], []
    for j0 in range(0, state.gb.shape[0], _TILE):
        bits = torch.mm(qb, state.gb[j0:j0 + _TILE].T).view(torch.int16)
        hit = bits >= floor
        words = hit.view(torch.int64).view(-1).nonzero().squeeze(1)
        p, k = hit.view(-1, 8).index_select(0, words).nonzero(as_tuple=True)
        flat = words[p] * 8 + k
        owner, col = flat // _TILE, j0 + flat % _TILE
        if j0 + _TILE > state.m:    # the padding of the last tile
            owner, col, flat = owner[col < state.m], col[col < state.m], flat[col < state.m]
        owners.append(owner)
        cols.append(col)
        vals.append(bits.view(-1)[flat])
    col, owner = torch.cat(cols), torch.cat(owners)
    val = torch.cat(vals).view(torch.bfloat16).float()
    keep = state.gl[col] != ql[owner]    # relevant items (and the query itself) are scored apart
    col, val, owner = col[keep], val[keep], owner[keep]
    order = torch.argsort(owner, stable=True)   # query-major within each tile, tiles in gallery order
    return col[order], val[order], owner[order]


def _keys(owner: torch.Tensor, score: torch.Tensor, col: torch.Tensor | None) -> torch.Tensor:
    """64-bit keys ordered by (query, score, lower gallery index first); ``col=None``: the lowest key of that score."""
    key = (owner.long() << 53) | ((monotone_bits(score) + (1 << 31)) << 21)
    return key if col is None else key | (_INDEX_FIELD - col)


def _relevant_keys(rel_idx, rel_score, counted) -> tuple[torch.Tensor, torch.Tensor]:
    """(sorted keys of the counted relevant items, each key's query row): keys sort by query first."""
    row, slot = torch.nonzero(counted, as_tuple=True)
    ref, order = _keys(row, rel_score[row, slot], rel_idx[row, slot]).sort()
    return ref, row[order]


def _places(q, g, ref, col, owner, low_end, high_end) -> tuple[torch.Tensor, int]:
    """For each kept item, the number of relevant keys below its own (a global position in ``ref``). An item whose
    error interval holds no relevant score has the same position for every score in it, so its bf16 interval
    settles it; only the items whose interval holds one (a few per relevant item) are re-scored exactly (their
    number is returned too)."""
    pos = torch.searchsorted(ref, _keys(owner, low_end, None))
    straddle = torch.searchsorted(ref, _keys(owner, high_end, None) | _INDEX_FIELD, right=True) > pos
    rows, cols = owner[straddle], col[straddle]
    pos[straddle] = torch.searchsorted(ref, _keys(rows, rescore_pairs(q, g, rows, cols), cols))
    return pos, int(rows.numel())


def _match(ref, row, pos, owner, beaten_by, b: int, limit: int) -> torch.Tensor:
    """(queries, limit) relevance of the first ``limit`` places: each counted relevant item at its rank, 1 + the
    items that beat it: the query's ``beaten_by`` items above all of them, and the kept and relevant items with a
    stronger key (``pos``: each kept item's position among the relevant keys ``ref``)."""
    per_query = torch.bincount(row, minlength=b)
    end = per_query.cumsum(0)                        # after each query's last key (keys sort by query first)
    start = end - per_query
    beats = pos > start[owner]
    hist = torch.bincount(pos[beats], minlength=ref.numel() + 1).cumsum(0)
    t = torch.arange(ref.numel())
    rank = 1 + beaten_by[row] + (hist[end[row]] - hist[t]) + (end[row] - 1 - t)
    match = torch.zeros(b, limit, dtype=torch.bool)
    inside = rank <= limit
    match[row[inside], rank[inside] - 1] = True
    return match
