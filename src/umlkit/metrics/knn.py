# size: one exact k-NN search in three kernels with threads and blocks; its parts share internals
"""Exact cosine k-nearest-neighbour search on CPU, with a bf16 (or int8) candidate pass and an fp32 re-rank.

Why written here and not taken from faiss or pytorch-metric-learning: both search in fp32 (faiss
``IndexFlatIP``; PML's ``FaissKNN``), which on a two-core CPU is bounded by the fp32 GEMM. The UML test set
(148,500 x 128-d in PUMA) makes that the slowest step of every unified evaluation. This module returns the
same neighbours as an exact fp32 search, faster:

1. **block maxima**: bf16 similarities, reduced to the maximum of every block of 128 gallery columns. The
   reduction reads the bf16 bits as int16 (an order-preserving view for non-negative floats; a block whose
   maximum is negative is bounded by 0 instead, still an upper bound) because torch reduces int16 4-15x faster
   than bf16 on the CPU (measured on a 2,048 x 2,048 tile, along rows and along columns). In a
   **self-search** (query set = gallery, self-match excluded: the CUB/Cars/SOP protocol) the similarity
   matrix is symmetric, so each 2,048 x 2,048 tile above the diagonal is computed once and reduced along its
   rows and its columns: half the GEMM of a plain search.
2. **candidates**: each query opens its best ``k + 8`` blocks by their maxima; the smallest opened maximum,
   ``tau``, bounds every closed block. In a self-search the opened blocks are recomputed gallery block by
   gallery block, each with all the queries of a group (up to ``_OPEN_PAIRS`` (query, block) pairs) that opened
   it, as batched GEMMs over slabs of blocks, and only scores >= the query's ``tau`` are kept: about 60 per
   query at PUMA's test size instead of ``(k + 8) * 128``. The best ``k + extra`` of them are the candidates.
   Large groups make large GEMMs (2-4x faster per row on the CPU than one small GEMM per block and chunk of
   queries) while the kept scores stay small. A plain search keeps each chunk's bf16 scores and takes the
   candidates from its ``k + extra`` best blocks;
3. **re-rank**: the exact fp32 cosine of each candidate, sorted by (similarity desc, gallery index asc);
4. **certificate**: every gallery item outside the candidates has a bf16 score at most ``t`` (the last
   candidate, or the best block that was not opened), so its exact score is at most ``t + eps``, where ``eps``
   bounds the bf16 error (input rounding of both vectors measured per vector, fp32 accumulation and the
   rounding of the product to bf16, with slack). Where the exact k-th score beats ``t + eps`` the row's top k
   is provably exact; other rows get a second, 4x deeper candidate list from their full bf16 rows, and rows
   that fail again are recomputed by a full fp32 pass. The result never depends on bf16 luck, only the
   speed does.

``k`` may differ per query (MAP@R needs R_i neighbours for query i): queries are processed in order of their
depth so each group searches only as deep as it must; unused columns are index -1, similarity -inf. Queries
too deep for block selection (k + extra blocks would cover more than a quarter of the gallery) take the top k
of their full bf16 rows instead (int8 search: full fp32 rows). Ties are broken by the lower gallery index so
results are deterministic. A query never retrieves the gallery position given in ``self_index``: that is how the
CUB/Cars/SOP protocol (query set = gallery) excludes the self-match while In-shop (separate gallery) excludes
nothing.

**int8 self-search** (``search_dtype=torch.int8``). The symmetric tiles can instead be int8 products
(``torch._int_mm``: exact int32 sums) of the embeddings quantised on one scale, ``round(x * 127 / max|x|)``. Their
block maxima bound every block's fp32 scores within a per-row error measured from the rounding
(:func:`_int8_error_bound`, Cauchy-Schwarz on the rounding residuals: about 0.025 on UML-like 128-d embeddings,
against about 0.002 for bf16). The looser bound is paid in the second phase, which runs in fp32: each row opens
its best blocks, takes the k-th best score found there as a real lower bound L, then opens every further block
whose bound reaches L (:func:`_search_int8`; about 50 blocks per row instead of 36 at PUMA's test size). No second
candidate pass is needed; a row whose final check fails takes a full fp32 row. int8 GEMMs stay fast where bf16 ones
are not: on a 512 x 128 x 512 product, in three benchmark runs here, 2.9-3.2x fp32 natively, 1.9-2.2x with oneDNN
limited to AVX-512 without bf16, 1.6x limited to AVX2 (bf16: 1.8-2.0x, 0.37-0.46x, 0.08-0.10x).

**Which search runs** (``search_dtype=None``, the default): :func:`explain_search`, from
:mod:`umlkit.metrics.kernels`. A search smaller than the representative one (65,536 items against themselves, or
32,768 against 32,768) runs fp32; a larger one the kernel that finished a representative whole search first on this
machine (the CPU's instruction set decides which kernels are timed; the seconds are cached per machine, and only
when the machine stayed quiet). Measured end to end, not by a GEMM tile: at 148,500 items the int8 and bf16
searches took 13-20 s and 14-16 s in different runs on this project's AMD EPYC, fp32 42-59 s, while a 2,048-row
tile put int8 at 2x bf16's speed; below about 20,000 items the three were within 0.3 s of each other, and at
32,768 one measurement ranked fp32 first although int8 had been 1.5-2.1x faster at that size in two others.

The int8 self-search ran as fast as bf16 natively and 2.95x faster than it limited (benchmarks/README.md). Every
search returns the exact top k.
"""
from __future__ import annotations

import contextlib
import os

import numpy as np
import torch

__all__ = ["choose_search_dtype", "explain_search", "forced_search_dtype", "knn_search", "self_search_size"]

_NEG_INF = float("-inf")
_INT32_MIN = -(1 << 31)
_BLOCK = 128            # gallery columns per block maximum
_TILE = 2048            # side of a self-search tile (8 MB of bf16 scores: stays in the L3 cache while reduced)
_OPEN_PAIRS = 1 << 20    # (row, opened block) pairs of one self-search group (8 MB per int64 array)
_SLAB_ENTRIES = 1 << 21  # scores of one batched GEMM over a slab of opened blocks (4 MB of bf16)
_MERGE_AT = 4            # kept scores per candidate slot of a group before they are cut to each row's best
_OPEN_EXTRA = 8          # blocks opened beyond a row's depth (its candidates, depth + candidate_extra, come from them)


def _sort_desc_by_value_then_index(values: torch.Tensor, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sort each row by value descending, ties by index ascending, with one sort of a 64-bit key.

    The float's bits, made monotone as a signed integer (negative floats have their magnitude bits flipped;
    ``+ 0.0`` turns -0.0 into +0.0 so the two tie as floats do), are negated into the high 32 bits and the
    (non-negative, distinct) index fills the low 32: ascending keys are the wanted order, so the result is the
    same as two stable sorts (index, then value) at a third of their cost on a 1,000-wide row."""
    order = ((-monotone_bits(values)) * (1 << 32) + index).argsort(dim=1)
    return values.gather(1, order), index.gather(1, order)


def monotone_bits(values: torch.Tensor) -> torch.Tensor:
    """fp32 values as int64 ordered like the floats (-0.0 and +0.0 equal), in [-2^31, 2^31)."""
    bits = (values + 0.0).view(torch.int32)
    return torch.where(bits < 0, bits ^ 0x7FFFFFFF, bits).long()


def _exact_rows(q: torch.Tensor, g: torch.Tensor, k: int, self_index: torch.Tensor | None
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Full fp32 similarities for some rows, then the top k with the deterministic tie rule.

    The first cut comes from faiss's fp32 flat search (``faiss.knn``, inner product: GEMM and selection fused), 2.4x
    faster than torch's product plus ``topk`` for 1,024 queries against 29,700 items at k = 107 on this project's
    AMD EPYC (0.066 s against 0.156 s for torch's product, ``topk`` and re-scoring). It returns k + 8 (+ 1 where a
    self-match is excluded), which are re-scored (:func:`rescore`) and sorted, ties by index. Every item it left
    out scores at most its last returned score, so within ``slack`` (two fp32 dot products of the same vectors
    differ by less) of that after re-scoring; a row whose k-th re-scored value does not beat that bound (ties across
    the cut, e.g. more exact duplicates than the 8 spare places) is searched again with 4x as many returned, up to
    the whole gallery."""
    import faiss

    n, m = q.shape[0], g.shape[0]
    gn = np.ascontiguousarray(g.numpy())
    slack = q.shape[1] * 2.0**-22 * q.norm(dim=1) * g.norm(dim=1).max() + 1e-7
    out_v, out_i = torch.empty(n, k), torch.empty(n, k, dtype=torch.long)
    rows, width = torch.arange(n), k + 8 + (0 if self_index is None else 1)
    while rows.numel():
        kk = min(m, width)
        last, i = faiss.knn(np.ascontiguousarray(q[rows].numpy()), gn, kk, metric=faiss.METRIC_INNER_PRODUCT)
        i = torch.from_numpy(i).long()
        si = None if self_index is None else self_index[rows]
        v, i = _sort_desc_by_value_then_index(rescore(q[rows], g, i, si), i)
        done = torch.ones(rows.numel(), dtype=torch.bool) if kk == m else \
            v[:, k - 1] > torch.from_numpy(last[:, -1]) + slack[rows]
        out_v[rows[done]], out_i[rows[done]] = v[done, :k], i[done, :k]
        rows, width = rows[~done], 4 * width
    return out_v, out_i


def _fp32_rows(query, gallery, self_index, rows, depth, out_v, out_i, chunk_size) -> None:
    """Full fp32 rows (:func:`_exact_rows`) for the queries ``rows``, at most ``chunk_size`` at once, each chunk as
    deep as its deepest row, written into ``out_v`` / ``out_i``."""
    for start in range(0, rows.numel(), chunk_size):
        part = rows[start:start + chunk_size]
        kc = int(depth[part].max())
        si = None if self_index is None else self_index[part]
        _put(out_v, out_i, part, kc, *_exact_rows(query[part], gallery, kc, si))


def _transposed_blocks(g: torch.Tensor) -> torch.Tensor:
    """(blocks, d, _BLOCK): each block of a padded gallery transposed, the right operand of the openings' batched
    GEMMs."""
    return g.view(-1, _BLOCK, g.shape[1]).transpose(1, 2).contiguous()


_RESCORE_ELEMENTS = 1 << 17


def rescore(q: torch.Tensor, g: torch.Tensor, index: torch.Tensor, self_index: torch.Tensor | None) -> torch.Tensor:
    """fp32 similarity of each query with its candidates; every path ranks by these same numbers. Computed in
    blocks of rows whose gathered candidates hold at most ``_RESCORE_ELEMENTS`` values: at k close to the gallery
    size (mAP@1000 on a test set of ~1,000 items) one gather of every row would move gigabytes (4x slower on
    one core); the per-element arithmetic, and so every value, is the same either way.

    Each value is an elementwise product summed along the embedding (in place on the gathered rows), so it depends
    on the two vectors only. A batched product (``einsum``) picked its kernel by the candidate list's width and
    gave one pair values 1 ulp apart in lists of different widths, and the searches, whose lists differ, then broke
    exact ties differently (27 of 2,048 ternary embeddings got another nearest neighbour in the bf16 search than
    in the fp32 one); the two cost the same (about 0.65 s for 8,192 x 130 candidates of 128-d on one core)."""
    rows = max(1, _RESCORE_ELEMENTS // max(1, index.shape[1] * g.shape[1]))
    pad = index < 0   # an unfilled candidate slot (index -1): scored -inf
    if bool(pad.any()):
        index = index.clamp(min=0)
    else:
        pad = None
    # embedding() copies whole rows; advanced indexing g[index] computes every element's offset (one 1,000 x 128
    # gather: 0.41 ms against 0.05 ms on an AMD EPYC core)
    v = torch.cat([torch.nn.functional.embedding(index[i:i + rows], g).mul_(q[i:i + rows, None, :]).sum(dim=2)
                   for i in range(0, q.shape[0], rows)]) if q.shape[0] else q.new_zeros(index.shape)
    if self_index is not None:
        v[index == self_index[:, None]] = _NEG_INF
    if pad is not None:
        v[pad] = _NEG_INF
    return v


def rescore_pairs(q: torch.Tensor, g: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """fp32 similarity of the pairs (query ``rows[i]``, gallery ``cols[i]``), the same per-pair arithmetic as
    :func:`rescore` (both rows gathered whole, multiplied in place, summed along the embedding), so the same values
    bit for bit; a flat list of pairs spends nothing on the padding of a (queries, widest row) matrix. Chunks of
    ``_RESCORE_ELEMENTS`` gathered values keep the rows in cache."""
    step = max(1, _RESCORE_ELEMENTS // max(1, g.shape[1]))
    out = q.new_empty(rows.shape[0])
    for i in range(0, rows.shape[0], step):
        gathered = torch.nn.functional.embedding(cols[i:i + step], g)
        out[i:i + step] = gathered.mul_(torch.nn.functional.embedding(rows[i:i + step], q)).sum(dim=1)
    return out


def bf16_error_bound(q: torch.Tensor, qb: torch.Tensor, dg_max: torch.Tensor, gb_max: torch.Tensor,
                      value: torch.Tensor) -> torch.Tensor:
    """Upper bound, per query row, of (fp32 similarity - bf16 similarity) for items whose bf16 score is <= value.

    Input rounding: q.g - qb.gb = (q-qb).gb + q.(g-gb), so |.| <= ||q-qb|| max||gb|| + ||q|| max||g-gb||, with
    the norms measured (times 1.1 for slack). Accumulation in fp32: d * 2^-23 * ||qb|| max||gb||. Rounding of
    the product to bf16 (unit roundoff 2^-8): at most 2^-8 |fp32 product|, bounded by 2^-7 |value| + tiny.
    """
    d = q.shape[1]
    dq = (q - qb.float()).norm(dim=1)
    magnitude = qb.float().norm(dim=1) * gb_max
    inputs = 1.1 * (dq * gb_max + q.norm(dim=1) * dg_max)
    return inputs + magnitude * d * 2.0**-23 + 2.0**-7 * value.abs() + 1e-6


def _uncertified(q, qb, dg_max, gb_max, v, kr, rest) -> torch.Tensor:
    """Rows whose exact k-th similarity does not provably beat every item outside the candidates."""
    kth = v.gather(1, (kr - 1)[:, None]).squeeze(1)
    ok = kth > rest + bf16_error_bound(q, qb, dg_max, gb_max, rest)
    return torch.nonzero(~ok).flatten()


def _int16_block_max(scores: torch.Tensor) -> torch.Tensor:
    """Block maxima of bf16 rows (width a multiple of ``_BLOCK``) as int16 bits, one pass over the scores."""
    b, width = scores.shape
    return scores.view(torch.int16).view(b, width // _BLOCK, _BLOCK).amax(dim=2)


def _self_block_maxima(g: torch.Tensor, n: int, shift: int = 1) -> torch.Tensor:
    """(n, blocks) int16 block maxima of the self-similarity of ``g`` (padded to whole blocks; rows beyond n are
    padding), the diagonal excluded. Each tile at or above the diagonal is computed once and reduced along both
    axes.

    ``g`` bf16: the maxima are the scores' bits; a negative maximum reads as 0 (clamped), an upper bound all the
    same. ``g`` int8 (quantised, :func:`_quantize`): the int32 dot products' maxima divided by ``shift`` (a power of
    two) and rounded up, so ``bm * shift`` bounds each block's largest product from above and ``(bm - 1) * shift``
    from below; the self-match and the padding are excluded, and a block with no item left reads -32768.
    """
    int8 = g.dtype == torch.int8
    m_pad = g.shape[0]
    bm = torch.empty(n, m_pad // _BLOCK, dtype=torch.int16)
    if int8:
        bits_of_shift = shift.bit_length() - 1   # shift is a power of two: an arithmetic shift rounds down

        def to_int16(maxima: torch.Tensor) -> torch.Tensor:
            return ((maxima + (shift - 1)) >> bits_of_shift).clamp_(-32768, 32767).to(torch.int16)
    else:
        def to_int16(maxima: torch.Tensor) -> torch.Tensor:
            return maxima
    for i0 in range(0, n, _TILE):
        i1 = min(i0 + _TILE, m_pad)
        r1 = min(i1, n)
        for j0 in range(i0, m_pad, _TILE):
            j1 = min(j0 + _TILE, m_pad)
            if int8:
                bits = torch._int_mm(g[i0:i1], g[j0:j1].T)   # exact int32 dot products
                if j0 == i0:
                    bits.diagonal().fill_(_INT32_MIN)
                bits[:, max(0, n - j0):] = _INT32_MIN    # padding columns
                bits[max(0, n - i0):] = _INT32_MIN       # padding rows (read by the column maxima)
            else:
                s = torch.mm(g[i0:i1], g[j0:j1].T)
                if j0 == i0:
                    s.diagonal().fill_(-0.0)  # the self-match: bits 0x8000, the smallest int16
                bits = s.view(torch.int16)
            bm[i0:r1, j0 // _BLOCK:j1 // _BLOCK] = to_int16(bits[:r1 - i0].view(r1 - i0, -1, _BLOCK).amax(dim=2))
            if j0 != i0 and j0 < n:
                c1 = min(j1, n)
                cols = bits.view((i1 - i0) // _BLOCK, _BLOCK, j1 - j0).amax(dim=1)
                bm[j0:c1, i0 // _BLOCK:i1 // _BLOCK] = to_int16(cols[:, :c1 - j0].T)
    return bm if int8 else bm.clamp_(min=0)


def _threshold_candidates(bm_rows: torch.Tensor, qb: torch.Tensor, gt_blocks: torch.Tensor, si: torch.Tensor | None,
                          m: int, kk: int, n_open: int | torch.Tensor, top: tuple | None = None
                          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Candidates of a bf16 self-search group from its precomputed block maxima.

    Each row opens its ``n_open`` best blocks; ``tau``, the smallest maximum among them, bounds every closed block.
    The opened blocks' scores >= the row's ``tau`` are kept (:func:`_keep_at_least`, compared as int16 bits:
    ``tau`` >= 0). Per row the best ``kk`` kept scores are the candidates, ordered by score, ties by index (so that
    the re-rank fills its slots in score order); a row with fewer has index -1 and score -inf in its last slots.
    Returns (values, indices, rest): ``rest`` bounds every item outside the candidates (``tau``, or the last
    candidate when some were left out). ``top``: the rows' ``bm_rows.topk(max n_open)``, where already computed.
    """
    b, nb = bm_rows.shape
    n_open = torch.as_tensor(n_open).expand(b).clamp(1, nb)
    top_v, top_b = top if top is not None else bm_rows.topk(int(n_open.max()), dim=1)
    tau = top_v.gather(1, (n_open - 1)[:, None]).squeeze(1)   # int16 bits of a non-negative bf16 value
    pair_row, slot = torch.nonzero(torch.arange(top_b.shape[1]) < n_open[:, None], as_tuple=True)
    row, col, val, rank, overflow = _keep_at_least(pair_row, top_b[pair_row, slot], qb, gt_blocks, tau, si, m, kk)
    cand_i = torch.full((b, kk), -1, dtype=torch.long)
    cand_v = torch.full((b, kk), _NEG_INF)
    cand_i[row, rank] = col
    cand_v[row, rank] = val.view(torch.bfloat16).float()
    rest = tau.view(torch.bfloat16).float()
    # a row cut to kk: every score it dropped is <= its kk-th candidate (candidates only improve after a cut)
    rest[overflow] = torch.maximum(rest[overflow], cand_v[overflow, -1])
    return cand_v, cand_i, rest


def _keep_at_least(pair_row: torch.Tensor, pair_block: torch.Tensor, q: torch.Tensor, gt_blocks: torch.Tensor,
                   th: torch.Tensor, si: torch.Tensor | None, m: int, kk: int
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The scores of query rows against gallery blocks, for the given (row, block) pairs, that reach the row's
    threshold ``th``; then each row's best ``kk`` of them (:func:`_best_per_row`'s five tensors).

    The pairs are grouped by block, and consecutive blocks form slabs of one batched GEMM each (``_slabs``): a block
    opened by hundreds of rows is one large GEMM, 2-4x faster per row on the CPU than small per-chunk GEMMs. bf16
    scores are compared as int16 bits (``th`` holds the bits of non-negative scores), fp32 scores as floats. The
    self-match (``si``) and padding items (>= ``m``) are never kept. When nearly equal scores (a collapsed
    embedding) pass by the thousand, the kept scores are cut to each row's best ``kk`` whenever they exceed
    ``_MERGE_AT`` per candidate slot, so memory stays bounded.
    """
    b, nb = th.shape[0], gt_blocks.shape[0]
    order = pair_block.argsort(stable=True)
    pair_row, flat = pair_row[order], pair_block[order]          # pairs grouped by block
    counts = torch.bincount(flat, minlength=nb)
    first = counts.cumsum(0) - counts
    pos = torch.arange(flat.numel()) - first[flat]           # a pair's row inside its block's GEMM
    bits16 = q.dtype == torch.bfloat16
    never = 0x7FFF if bits16 else float("inf")   # the threshold of padding slots: above every finite score
    # a zero query and the threshold ``never`` in an extra last row: the padding slots of every slab point there
    q = torch.cat([q, q.new_zeros(1, q.shape[1])])
    th = torch.cat([th, th.new_full((1,), never)])
    rows, cols, vals = [], [], []
    held, limit = 0, max(_MERGE_AT * b * kk, _SLAB_ENTRIES // 8)
    overflow = torch.zeros(b, dtype=torch.bool)
    for b0, b1, m_max in _slabs(counts.tolist()):
        p0, p1 = int(first[b0]), int(first[b1 - 1] + counts[b1 - 1])
        if p0 == p1:
            continue
        who = torch.full((b1 - b0, m_max), b, dtype=torch.long)   # the query row of each slot (b: padding)
        who[flat[p0:p1] - b0, pos[p0:p1]] = pair_row[p0:p1]
        # (index_select of the flat slots: 8x faster than embedding() with the 2-d index on fp32 rows)
        scores = torch.bmm(q.index_select(0, who.flatten()).view(b1 - b0, m_max, -1), gt_blocks[b0:b1])
        if bits16:
            scores = scores.view(torch.int16)
        kb, kp, kc = torch.nonzero(scores >= th[who][:, :, None], as_tuple=True)
        r, c, v = who[kb, kp].long(), (kb + b0) * _BLOCK + kc, scores[kb, kp, kc]
        keep = c < m                               # padding items
        if si is not None:
            keep &= c != si[r]                     # the self-match
        rows.append(r[keep])
        cols.append(c[keep])
        vals.append(v[keep])
        held += int(keep.sum())
        if held > limit:   # near-equal scores (a collapsed embedding) pass by the thousand: keep each row's best kk
            row, col, val, _, cut = _best_per_row(torch.cat(rows), torch.cat(cols), torch.cat(vals), b, kk,
                                                  nb * _BLOCK)
            rows, cols, vals, held = [row], [col], [val], row.numel()
            overflow |= cut
    if not rows:
        empty = torch.empty(0, dtype=torch.long)
        return empty, empty, torch.empty(0, dtype=q.dtype if not bits16 else torch.int16), empty, overflow
    row, col, val, rank, cut = _best_per_row(torch.cat(rows), torch.cat(cols), torch.cat(vals), b, kk, nb * _BLOCK)
    return row, col, val, rank, overflow | cut


def _crowded(bm_rows: torch.Tensor, top_v: torch.Tensor, n_open: torch.Tensor, low: torch.Tensor) -> torch.Tensor:
    """Rows where more than half of the blocks have a maximum >= ``low`` (int16, per row): near-equal embeddings,
    whose scores spread less than the error bound, so that no certificate short of most of the row can hold. Such a
    row takes a full fp32 row at once. Only rows whose ``n_open``-th largest maximum (``top_v``: each row's largest
    maxima, descending) reaches ``low`` are counted, in parts (int32 sums: no int64 copy of the rows); the others
    have at most ``n_open`` such blocks, at most half the row."""
    b, nb = bm_rows.shape
    crowded = torch.zeros(b, dtype=torch.bool)
    nth = top_v.gather(1, (n_open - 1).clamp(max=top_v.shape[1] - 1)[:, None]).squeeze(1)
    maybe = torch.nonzero((nth >= low) | (n_open * 2 > nb)).flatten()
    for part in maybe.split(4096):
        crowded[part] = (bm_rows[part] >= low[part, None]).sum(dim=1, dtype=torch.int32) * 2 > nb
    return crowded


def _slabs(counts: list[int]) -> list[tuple[int, int, int]]:
    """Consecutive blocks grouped into slabs of one batched GEMM each: (first, end, rows) with every block's
    rows padded to the slab's largest count (padding never passes: its threshold is 0x7FFF, above every finite
    bf16), while the padded scores stay within ``_SLAB_ENTRIES``. A block opened by far more queries than the
    others (a hub) then pads only its own slab."""
    slabs, b0, widest = [], 0, 0
    for j, c in enumerate(counts):
        if j > b0 and (j + 1 - b0) * max(widest, c) * _BLOCK > _SLAB_ENTRIES:
            slabs.append((b0, j, max(1, widest)))
            b0, widest = j, c
        else:
            widest = max(widest, c)
    slabs.append((b0, len(counts), max(1, widest)))
    return slabs


def _best_per_row(row: torch.Tensor, col: torch.Tensor, val: torch.Tensor, b: int, kk: int, m_pad: int
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The best ``kk`` (score desc, index asc) of each row's kept scores as (row, col, val, rank within the row),
    ordered by row then rank, and whether each row had more. ``val``: int16 bits of non-negative bf16 scores
    (ordered as integers: 15 bits) or fp32 scores (made monotone: 32 bits). One sort of a 64-bit key where it
    fits, else two stable sorts (by index, then by row and score)."""
    if val.dtype == torch.float32:
        key, width = monotone_bits(val) + (1 << 31), 32
    else:
        key, width = val.long(), 15
    desc = (1 << width) - 1 - key        # ascending = best first
    if b * (1 << width) * m_pad < 1 << 62:
        order = ((row * (1 << width) + desc) * m_pad + col).argsort()
    else:   # the same order from two stable sorts
        order = col.argsort(stable=True)
        order = order[(row[order] * (1 << width) + desc[order]).argsort(stable=True)]
    row, col, val = row[order], col[order], val[order]
    per_row = torch.bincount(row, minlength=b)
    rank = torch.arange(row.numel()) - (per_row.cumsum(0) - per_row)[row]
    take = rank < kk
    return row[take], col[take], val[take], rank[take], per_row > kk


def _set_self(scores: torch.Tensor, si: torch.Tensor | None, value: float) -> torch.Tensor:
    """Write ``value`` over each row's self-match (``si`` >= 0), in place: -inf to exclude it from a top-k,
    -0.0 (int16 0x8000, the smallest) before int16 block maxima."""
    if si is not None:
        r = torch.nonzero(si >= 0).flatten()
        scores[r, si[r]] = value
    return scores


def _mask_rows(values: torch.Tensor, si: torch.Tensor | None, m: int) -> torch.Tensor:
    """In full score rows (b, padded gallery), set the self-match and the padding items (>= m) to -inf."""
    values[:, m:] = _NEG_INF
    return _set_self(values, si, _NEG_INF)


def _mask_blocks(values: torch.Tensor, opened: torch.Tensor, si: torch.Tensor | None, m: int) -> torch.Tensor:
    """In the scores of opened blocks (b, opened * _BLOCK), set the self-match and padding items (>= m) to -inf."""
    slot_of = torch.arange(opened.shape[1]) * _BLOCK
    last, tail = (m - 1) // _BLOCK, m % _BLOCK
    if tail:  # padding sits in the last block only
        r, c = torch.nonzero(opened == last, as_tuple=True)
        cols = (slot_of[c] + tail)[:, None] + torch.arange(_BLOCK - tail)
        values[r[:, None], cols] = _NEG_INF
    if si is not None:
        r, c = torch.nonzero(opened == (si // _BLOCK)[:, None], as_tuple=True)
        keep = si[r] >= 0
        r, c = r[keep], c[keep]
        values[r, slot_of[c] + si[r] % _BLOCK] = _NEG_INF
    return values


def _from_blocks(bm_rows: torch.Tensor, kk: int, n_open: int,
                 values_of) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Candidates from block maxima: open the best ``n_open`` blocks of each row (``values_of(opened)`` gives their
    masked bf16 scores) and keep the best ``kk`` scores. Returns (values, gallery indices, bound on every other
    item: the last candidate or the best block left closed)."""
    nb = bm_rows.shape[1]
    n_open = min(nb, n_open)
    top_v, top_b = bm_rows.topk(min(nb, n_open + 1), dim=1, sorted=False)
    if nb > n_open:   # the smallest of the n_open + 1 maxima is the best block left closed; the rest are opened
        low = top_v.argmin(dim=1, keepdim=True)
        closed = top_v.gather(1, low).squeeze(1).contiguous().view(torch.bfloat16).float()
        keep = torch.ones_like(top_b, dtype=torch.bool).scatter_(1, low, False)
        opened = top_b[keep].view(-1, n_open)
    else:
        closed, opened = None, top_b
    # sorted: the re-rank's fp32 value of a candidate can depend on its slot (einsum rounds trailing slots apart),
    # so exact duplicates keep the lower-index-first order only when the slots are filled in score order
    cand_v, pos = values_of(opened).topk(kk, dim=1)
    cand_v = cand_v.float()
    cand_i = opened.gather(1, pos // _BLOCK) * _BLOCK + pos % _BLOCK
    rest = cand_v.amin(dim=1)
    if closed is not None:
        rest = torch.maximum(rest, closed)
    return cand_v, cand_i, rest


_DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32, "int8": torch.int8}


def forced_search_dtype() -> torch.dtype | None:
    """The dtype ``UMLKIT_SEARCH_DTYPE`` pins (None when unset or empty); a value it cannot take is an error naming
    it (the training engine asks at start-up, not at its first evaluation)."""
    forced = os.environ.get("UMLKIT_SEARCH_DTYPE") or None
    if forced is not None and forced not in _DTYPES:
        raise ValueError(f"UMLKIT_SEARCH_DTYPE={forced!r}: expected 'bf16', 'fp32' or 'int8' (or unset: measure)")
    return None if forced is None else _DTYPES[forced]


def choose_search_dtype(self_search: bool = False, dim: int = 128, pairs: int = 0) -> torch.dtype:
    """The search :func:`knn_search` runs by default for ``pairs`` query x gallery pairs at dimension ``dim``:
    :func:`explain_search`'s kernel. (A self-search here: query = gallery, ``self_index`` = ``arange(n)`` and more
    than ``_TILE`` items; smaller ones are plain searches.)

    The environment variable ``UMLKIT_SEARCH_DTYPE`` (``bf16``, ``fp32`` or ``int8``) overrides the choice, e.g. to
    compare kernels or to pin one; ``int8`` applies to self-searches (a plain search has no int8 path and chooses
    as without it).
    """
    return _DTYPES[explain_search(self_search, dim, pairs).kernel]


def explain_search(self_search: bool, dim: int, pairs: int, measure: bool = True):
    """:class:`umlkit.metrics.kernels.Choice`: the kernel a search of ``pairs`` pairs gets on this machine and why:
    the one ``UMLKIT_SEARCH_DTYPE`` pins (``int8`` for self-searches only), else small searches fp32 and larger ones
    the fastest on a representative search, measured once per quiet machine (``measure=False``: kernel
    ``"unmeasured"`` where that measurement has not been stored yet)."""
    from umlkit.metrics.kernels import Choice, choose
    forced = forced_search_dtype()
    if forced is not None and (forced != torch.int8 or self_search):
        return Choice(next(k for k, v in _DTYPES.items() if v == forced), "pinned by UMLKIT_SEARCH_DTYPE")
    return choose(bool(self_search), int(pairs), int(dim), measure, search=knn_search_checked)


def self_search_size(n: int) -> bool:
    """Whether ``n`` items searched against themselves take the self-search paths (more than one tile)."""
    return n > _TILE


def _is_self_search(query: torch.Tensor, gallery: torch.Tensor, self_index: torch.Tensor | None) -> bool:
    n = query.shape[0]
    return (self_index is not None and n == gallery.shape[0] and self_search_size(n)
            and torch.equal(self_index.long(), torch.arange(n)) and torch.equal(query, gallery))


def _check_inputs(query, gallery, k, self_index, chunk_size=1024, candidate_extra=24) -> None:
    """Clear errors for what the search cannot take (it would fail deep inside, or silently return -inf / -1)."""
    for name, x in (("query", query), ("gallery", gallery)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"knn_search: {name} must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() != 2 or x.dtype != torch.float32:
            raise ValueError(f"knn_search: {name} must be a 2-d float32 tensor (rows of L2-normalised embeddings), "
                             f"got shape {tuple(x.shape)} and dtype {x.dtype}")
        if not bool(torch.isfinite(x).all()):
            rows = torch.nonzero(~torch.isfinite(x).all(dim=1)).flatten()
            raise ValueError(f"knn_search: {name} has {rows.numel()} row(s) with NaN or inf (first: row "
                             f"{int(rows[0])})")
    if query.shape[1] != gallery.shape[1]:
        raise ValueError(f"knn_search: query has dimension {query.shape[1]} but gallery has {gallery.shape[1]}")
    if isinstance(k, torch.Tensor):
        if k.dtype.is_floating_point or k.dtype == torch.bool:
            raise ValueError(f"knn_search: k must be an int or an integer tensor, got dtype {k.dtype}")
    elif isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"knn_search: k must be an int or an integer tensor, got {k!r}")
    for name, value, low in (("chunk_size", chunk_size, 1), ("candidate_extra", candidate_extra, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"knn_search: {name} must be an integer >= {low}, got {value!r}")
    if self_index is not None:
        n, m = query.shape[0], gallery.shape[0]
        if not isinstance(self_index, torch.Tensor) or self_index.dtype.is_floating_point or \
                self_index.shape != (n,):
            raise ValueError(f"knn_search: self_index must be an integer tensor of shape ({n},), got "
                             f"{getattr(self_index, 'dtype', type(self_index).__name__)} "
                             f"{tuple(getattr(self_index, 'shape', ()))}")
        if n and (int(self_index.min()) < -1 or int(self_index.max()) >= m):
            raise ValueError(f"knn_search: self_index values must be gallery positions in [0, {m}) or -1, got "
                             f"[{int(self_index.min())}, {int(self_index.max())}]")


@contextlib.contextmanager
def _ieee_fp32_matmul():
    """fp32 products in full fp32 while a search runs. Every exact path's slack assumes fp32 inputs and fp32
    accumulation; a process that allowed bf16 arithmetic for fp32 matmuls
    (``torch.set_float32_matmul_precision("medium")``, or ``torch.backends.mkldnn.matmul.fp32_precision = "bf16"``:
    oneDNN then runs them in bf16 on CPUs with bf16 units) would void the certificate. The setting is restored
    afterwards, also when the search raises."""
    mkldnn = getattr(torch.backends.mkldnn, "matmul", None)
    if mkldnn is not None and hasattr(mkldnn, "fp32_precision"):   # torch >= 2.9: the per-backend setting
        before = mkldnn.fp32_precision
        if before in ("none", "ieee"):
            yield
            return
        mkldnn.fp32_precision = "ieee"
        try:
            yield
        finally:
            mkldnn.fp32_precision = before
        return
    before = torch.get_float32_matmul_precision()
    if before == "highest":
        yield
        return
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def knn_search(
    query: torch.Tensor,
    gallery: torch.Tensor,
    k: int | torch.Tensor,
    *,
    self_index: torch.Tensor | None = None,
    chunk_size: int = 1024,
    candidate_extra: int = 24,
    search_dtype: torch.dtype | None = None,
    stats: dict | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact top-k neighbours by dot product (cosine for L2-normalised inputs).

    Args:
        query: (n, d) float32, L2-normalised.
        gallery: (m, d) float32, L2-normalised.
        k: neighbours per query: an int, or an (n,) tensor of per-query depths.
        self_index: (n,) long; for each query the gallery position it must never retrieve, or -1.
        chunk_size: queries per block of a plain search (its score buffer holds ``chunk_size * m`` bf16 values);
            a self-search opens blocks for up to 8x as many queries at once.
        candidate_extra: candidates beyond k taken in the bf16 pass.
        search_dtype: ``torch.bfloat16`` (candidates + exact re-rank), ``torch.int8`` (int8 tiles + fp32
            candidates; self-searches only: a plain search given it runs as with ``None``), ``torch.float32``
            (plain fp32 search) or ``None``: :func:`choose_search_dtype`, the faster on this CPU for this kind of
            search.
        stats: if given, receives ``{"rows": n, "search_dtype": dtype, "self_search": bool, "second_pass_rows": r2,
            "fp32_fallback_rows": r3}``: the search that ran, whether the symmetric tiles were used, rows searched a
            second time (bf16: the certificate failed, 4x more candidates; int8: further blocks opened), and rows
            that then needed a full fp32 row (int8: also the rows too deep for blocks).

    Returns:
        (similarities, indices), both (n, max k); row i sorted by similarity descending (ties by gallery
        index) in its first k_i columns, then similarity -inf and index -1.
    """
    from umlkit.metrics.threads import limited_threads
    _check_inputs(query, gallery, k, self_index, chunk_size, candidate_extra)
    with limited_threads(query.shape[0] * gallery.shape[0]):   # on a busy machine, only the idle cores
        return knn_search_checked(query, gallery, k, self_index=self_index, chunk_size=chunk_size,
                           candidate_extra=candidate_extra, search_dtype=search_dtype, stats=stats)


@_ieee_fp32_matmul()
@torch.no_grad()
def knn_search_checked(query, gallery, k, *, self_index=None, chunk_size=1024, candidate_extra=24, search_dtype=None,
                stats=None):
    """:func:`knn_search` on inputs already checked: umlkit's own metrics call it with embeddings that
    ``check_embeddings`` validated, so the finiteness pass over the gallery (about 54 ms at 148,500 x 128 on this
    project's CPU) is not repeated for every block of queries."""
    if search_dtype not in (None, torch.bfloat16, torch.float32, torch.int8):
        raise ValueError(f"search_dtype must be torch.bfloat16, torch.float32, torch.int8 or None, got {search_dtype}")
    self_search = search_dtype != torch.float32 and _is_self_search(query, gallery, self_index)
    if search_dtype is None or (search_dtype == torch.int8 and not self_search):
        search_dtype = choose_search_dtype(self_search, query.shape[1], query.shape[0] * gallery.shape[0])
    n, m = query.shape[0], gallery.shape[0]
    depth = torch.full((n,), int(k), dtype=torch.long) if not isinstance(k, torch.Tensor) else k.to(torch.long)
    if depth.shape != (n,):
        raise ValueError(f"k must be an int or a tensor of shape ({n},), got shape {tuple(depth.shape)}")
    k_max = int(depth.max()) if n else 0
    if n and int(depth.min()) < 1:
        raise ValueError(f"k must be >= 1, got {int(depth.min())}")
    available = m - (1 if self_index is not None and bool((self_index >= 0).any()) else 0)
    if k_max > available:
        raise ValueError(f"k={k_max} is larger than the {available} gallery items a query can retrieve")
    out_v = torch.full((n, k_max), _NEG_INF, dtype=torch.float32)
    # int32 while searching (the self-search's block maxima are alive then), int64 once they are freed
    out_i = torch.full((n, k_max), -1, dtype=torch.int32 if m < 2**31 else torch.long)
    counts = {"rows": n, "search_dtype": search_dtype, "self_search": False, "second_pass_rows": 0,
              "fp32_fallback_rows": 0}
    if n == 0:
        return out_v, out_i.long()
    order = torch.argsort(depth, stable=True)  # shallow queries first: each group searches only as deep as it needs
    if search_dtype == torch.float32:
        _fp32_rows(query, gallery, self_index, order, depth, out_v, out_i, chunk_size)
    elif search_dtype == torch.int8:
        counts["self_search"] = True
        _search_int8(query, self_index, depth, order, available, chunk_size, candidate_extra, out_v, out_i, counts)
    else:
        _search_bf16(query, gallery, depth, order, self_index, available, chunk_size, candidate_extra,
                     out_v, out_i, counts, self_search)
    # blank the columns beyond each row's own depth
    beyond = torch.arange(k_max)[None, :] >= depth[:, None]
    out_v[beyond] = _NEG_INF
    out_i[beyond] = -1
    out_i = out_i.long()
    if stats is not None:
        stats.update(counts)
    return out_v, out_i


def _put(out_v, out_i, rows, kc, v, i) -> None:
    """Write one group's results into the first ``kc`` columns of its rows (indices in ``out_i``'s dtype)."""
    out_v[rows, :kc] = v
    out_i[rows, :kc] = i.to(out_i.dtype)


def _search_bf16(query, gallery, depth, order, self_index, available, chunk_size, extra, out_v, out_i, counts,
                 self_search):
    m = gallery.shape[0]
    pad = (-m) % _BLOCK
    gb = gallery.to(torch.bfloat16)
    if pad:
        gb = torch.cat([gb, torch.zeros(pad, gallery.shape[1], dtype=torch.bfloat16)])
    s = _Search(query, gallery, gb, self_index, available, m, chunk_size)
    kk_of = (depth + extra).clamp(max=available)   # candidates per row
    by_blocks = s.by_blocks(kk_of)
    if self_search and bool(by_blocks.any()):
        s.self_search()
    counts["self_search"] = s.bm is not None
    for rows, blocked in _groups(order, depth, by_blocks, chunk_size, paired=s.bm is not None):
        s.rows(rows, depth, int(kk_of[rows].max()), blocked, out_v, out_i, counts)


def _groups(order, depth, by_blocks, chunk_size, paired):
    """Consecutive queries of ``order`` (shallow first) in groups, each all block-selected or all full-row (a
    query's ``by_blocks`` only turns off with depth). A block-selected group of a self-search (``paired``) holds at
    most ``_OPEN_PAIRS`` opened (row, block) pairs, any other group at most ``chunk_size`` rows. Yields (rows,
    block-selected)."""
    pairs = (depth[order] + _OPEN_EXTRA).cumsum(0) if paired else None
    start = 0
    while start < order.numel():
        first = order[start]
        size = chunk_size
        if paired and by_blocks[first]:
            before = int(pairs[start - 1]) if start else 0
            size = max(1, int(torch.searchsorted(pairs, before + _OPEN_PAIRS, right=True)) - start)
        rows = order[start:start + size]
        rows = rows[by_blocks[rows] == by_blocks[first]]
        start += rows.numel()
        yield rows, bool(by_blocks[first])


class _Search:
    """The state of one bf16 search: the padded bf16 gallery, its rounding error, and (self-search) the block
    maxima of every row and the gallery's blocks transposed for :func:`_threshold_candidates`."""

    def __init__(self, query, gallery, gb, self_index, available, m, chunk_size):
        self.query, self.gallery, self.gb, self.self_index = query, gallery, gb, self_index
        self.available, self.m, self.chunk_size = available, m, chunk_size
        self.nb = gb.shape[0] // _BLOCK
        self.dg_max = (gallery - gb[:m].float()).norm(dim=1).max()
        self.gb_max = gb[:m].float().norm(dim=1).max()
        self.bm = self.gt_blocks = None

    def by_blocks(self, kk: torch.Tensor) -> torch.Tensor:
        """Rows whose candidates come from block maxima: while the opened blocks cover at most a quarter of the
        gallery (deeper rows take the top of their full bf16 row)."""
        return (kk < self.available) & (kk * _BLOCK * 4 <= self.gb.shape[0])

    def self_search(self) -> None:
        self.bm = _self_block_maxima(self.gb, self.query.shape[0])
        self.gt_blocks = _transposed_blocks(self.gb)

    def candidates(self, qb, si, kk, n_open, bm_rows=None, top=None):
        """(values, indices, rest) of the best ``kk`` bf16 scores: from ``n_open`` blocks (precomputed maxima
        ``bm_rows`` with recomputed blocks, ``top`` their top-k where computed, or the maxima and blocks of the bf16
        rows); ``n_open=0``: from the whole rows."""
        if bm_rows is not None:
            return _threshold_candidates(bm_rows, qb, self.gt_blocks, si, self.m, kk, n_open, top)
        scores = torch.mm(qb, self.gb.T)
        if n_open:
            blocks = scores.view(qb.shape[0], self.nb, _BLOCK)
            picked = torch.arange(qb.shape[0])[:, None]
            maxima = _int16_block_max(_set_self(scores, si, -0.0)).clamp_(min=0)
            v, i, rest = _from_blocks(maxima, kk, n_open, lambda opened: _mask_blocks(
                blocks[picked, opened].reshape(qb.shape[0], -1), opened, si, self.m))
            return v, i.clamp_(max=self.m - 1), rest
        cand_v, cand_i = _mask_rows(scores.float(), si, self.m).topk(kk, dim=1)
        return cand_v, cand_i, cand_v[:, -1]

    def rows(self, rows, depth, kk, by_blocks, out_v, out_i, counts):
        """One group of queries (one mode): candidates, exact re-rank, certificate, a 4x deeper second chance,
        fp32 fallback."""
        kc = int(depth[rows].max())
        q = self.query[rows]
        si = None if self.self_index is None else self.self_index[rows]
        if kk >= self.available:  # every retrievable item is a candidate: the exact search costs the same
            _fp32_rows(self.query, self.gallery, self.self_index, rows, depth, out_v, out_i, self.chunk_size)
            return
        qb = q.to(torch.bfloat16)
        precomputed = self.bm is not None and by_blocks
        bm_rows = top = None
        if precomputed:   # per row: its depth + _OPEN_EXTRA blocks
            bm_rows, n_open = self.bm[rows], depth[rows] + _OPEN_EXTRA
            top = bm_rows.topk(int(n_open.max()), dim=1)
            # near-equal embeddings (every score within the bf16 error of the k-th): full fp32 rows at once, before
            # two candidate passes that cannot certify them
            kth = top[0].gather(1, (depth[rows] - 1)[:, None]).squeeze(1).view(torch.bfloat16).float()
            low = (kth - bf16_error_bound(q, qb, self.dg_max, self.gb_max, kth)).clamp(min=0)
            crowded = _crowded(bm_rows, top[0], n_open, low.to(torch.bfloat16).view(torch.int16))
            if bool(crowded.any()):
                counts["fp32_fallback_rows"] += int(crowded.sum())
                _fp32_rows(self.query, self.gallery, self.self_index, rows[crowded], depth, out_v, out_i,
                           self.chunk_size)
                keep = ~crowded
                rows, q, qb, bm_rows, n_open = rows[keep], q[keep], qb[keep], bm_rows[keep], n_open[keep]
                top = (top[0][keep], top[1][keep])
                si = None if si is None else si[keep]
                if not rows.numel():
                    return
        else:
            n_open = kk if by_blocks else 0
        cand_v, cand_i, rest = self.candidates(qb, si, kk, n_open, bm_rows=bm_rows, top=top)
        v, i = _sort_desc_by_value_then_index(rescore(q, self.gallery, cand_i, si), cand_i)
        _put(out_v, out_i, rows, kc, v[:, :kc], i[:, :kc])
        kr = depth[rows]
        bad = _uncertified(q, qb, self.dg_max, self.gb_max, v, kr, rest)
        if bad.numel():
            counts["second_pass_rows"] += bad.numel()
            # second chance: 4x the candidates from twice the blocks (or the whole rows when those cover half)
            kk2 = min(self.available, 4 * kk + 64)
            n_open2 = max(2 * kk, -(-kk2 // _BLOCK) + 1)   # enough blocks for kk2 candidates besides padding
            n_open2 = n_open2 if by_blocks and n_open2 * _BLOCK * 2 <= self.gb.shape[0] else 0
            if kk2 < self.available:   # (in parts of at most _OPEN_PAIRS opened pairs, as the first pass)
                failed = []
                for part in bad.split(max(1, _OPEN_PAIRS // n_open2) if n_open2 else self.chunk_size):
                    sb = None if si is None else si[part]
                    cv2, ci2, rest2 = self.candidates(qb[part], sb, kk2, n_open2,
                                                      bm_rows=bm_rows[part] if precomputed and n_open2 else None)
                    v2, i2 = _sort_desc_by_value_then_index(rescore(q[part], self.gallery, ci2, sb), ci2)
                    _put(out_v, out_i, rows[part], kc, v2[:, :kc], i2[:, :kc])
                    failed.append(part[_uncertified(q[part], qb[part], self.dg_max, self.gb_max, v2, kr[part],
                                                    rest2)])
                bad = torch.cat(failed)
        counts["fp32_fallback_rows"] += bad.numel()
        _fp32_rows(self.query, self.gallery, self.self_index, rows[bad], depth, out_v, out_i, self.chunk_size)



def _quantize(x: torch.Tensor) -> tuple[torch.Tensor, float, torch.Tensor]:
    """int8 codes of ``x`` on one scale for every vector (so that code dot products compare across items):
    ``round(x * scale)`` with ``scale = 127 / max|x|``; returns (codes, scale, per-vector rounding error norm)."""
    amax = float(x.abs().max()) if x.numel() else 0.0
    scale = 127.0 / amax if amax > 0 else 1.0
    codes = (x * scale).round_().clamp_(-127, 127).to(torch.int8)
    return codes, scale, (x - codes.float() / scale).norm(dim=1)


def _int8_error_bound(x: torch.Tensor, codes: torch.Tensor, scale: float, err: torch.Tensor) -> torch.Tensor:
    """Per row r, a bound on |x_r.x_c - codes_r.codes_c / scale^2| for every item c of ``x``: with x = x~ + e (x~ the
    decoded codes), the difference is e_r.x~_c + x_r.e_c, at most |e_r| max|x~| + |x_r| max|e| (Cauchy-Schwarz),
    with the norms measured; 2^-10 relative and 1e-6 absolute slack cover their fp32 rounding."""
    return (err * (codes.float() / scale).norm(dim=1).max() + x.norm(dim=1) * err.max()) * (1 + 2.0**-10) + 1e-6


def _search_int8(x, self_index, depth, order, available, chunk_size, extra, out_v, out_i, counts):
    """Self-search with int8 block maxima and fp32 candidates (``knn_search(..., search_dtype=torch.int8)``).

    The symmetric tiles are int8 products (``torch._int_mm``: exact int32 sums), whose maxima bound every
    block's fp32 scores within ``E_r``: with x = x~ + e (x~ the decoded codes), |x_r.x_c - x~_r.x~_c| <=
    |e_r| max|x~| + |x_r| max|e|, measured per vector. Per row, in fp32:

    1. open the row's ``depth + _OPEN_EXTRA`` blocks of largest maxima and keep their scores >= ``T``, the lower
       bound of the k-th best score that the k largest of those maxima give (each is an item's product);
    2. ``L``, the k-th best kept score, is a real item's: open every further block whose bound reaches
       ``L - 3 slack`` (``slack`` bounds how two fp32 dot products of the same vectors differ) and keep its scores
       above that. Rows that would open more than a quarter of the blocks take a full fp32 row instead;
    3. the best ``depth + extra`` kept scores are the candidates; re-ranked by :func:`rescore`, the k-th must beat
       everything left out (the threshold, or the last candidate where more passed) by ``slack``, else the row
       takes a full fp32 row.
    """
    n, d = x.shape
    pad = (-n) % _BLOCK
    codes, scale, err = _quantize(x)
    dot_max = int(codes.int().pow(2).sum(dim=1).max())   # no product of two codes exceeds it (Cauchy-Schwarz)
    shift = 1
    while dot_max > 32766 * shift:
        shift *= 2
    nb = (n + pad) // _BLOCK
    kk_of = (depth + extra).clamp(max=available)
    by_blocks = (kk_of < available) & (kk_of * _BLOCK * 4 <= nb * _BLOCK)
    zeros = torch.zeros(pad, d)
    # (no tiles when every row is too deep for blocks)
    bm = _self_block_maxima(torch.cat([codes, zeros.to(torch.int8)]), n, shift) if bool(by_blocks.any()) else None
    gt_blocks = _transposed_blocks(torch.cat([x, zeros]))
    norm = x.norm(dim=1)
    unit = shift / scale ** 2                     # a score per step of the int16 maxima
    bound = _int8_error_bound(x, codes, scale, err)
    slack = d * 2.0**-22 * norm * norm.max() + 1e-7
    for rows, blocked in _groups(order, depth, by_blocks, chunk_size, paired=True):
        if blocked:   # rows too deep for blocks, and those _int8_group leaves, take full fp32 rows
            rows = _int8_group(x, rows, depth[rows], int(kk_of[rows].max()), bm[rows], gt_blocks, unit,
                               bound[rows], slack[rows], out_v, out_i, counts)
        counts["fp32_fallback_rows"] += rows.numel()
        _fp32_rows(x, x, self_index, rows, depth, out_v, out_i, chunk_size)


def _int8_group(x, rows, k, kk, bm_rows, gt_blocks, unit, bound, slack, out_v, out_i, counts) -> torch.Tensor:
    """Steps 1-3 of :func:`_search_int8` for one group of rows; returns the rows left for a full fp32 search."""
    b, nb = bm_rows.shape
    m = x.shape[0]
    n_open = (k + _OPEN_EXTRA).clamp(max=nb)
    top_v, top_b = bm_rows.topk(int(n_open.max()), dim=1)
    kth_max = top_v.gather(1, (k - 1)[:, None]).squeeze(1)
    # L is typically near the k-th largest maximum, so step 2 would open about the blocks within one bound of it:
    # where those already pass half the gallery (near-equal embeddings, where the bound exceeds the scores' spread),
    # the row takes a full fp32 row at once instead of after step 1
    steps = torch.floor(kth_max.float() - bound / unit).clamp(-32768, 32767).to(torch.int16)
    hopeless = _crowded(bm_rows, top_v, n_open, steps)
    gave_up = rows[hopeless]
    if gave_up.numel():
        keep = ~hopeless
        rows, k, bm_rows, bound, slack, n_open, top_v, top_b, kth_max = (
            t[keep] for t in (rows, k, bm_rows, bound, slack, n_open, top_v, top_b, kth_max))
        b = rows.numel()
        if not b:
            return gave_up
    q = x[rows]
    # 1. the depth + _OPEN_EXTRA blocks of largest maxima, scores >= the k-th largest maximum's lower bound
    low = torch.where(kth_max > -32768, (kth_max.float() - 1) * unit - bound - slack, _NEG_INF)
    # kept from step 1: the scores above the k-th largest maximum less a quarter of the bound, not the whole bound.
    # Typical rounding errors are a small part of the worst case: on UML-like embeddings (148,500 x 128) the k-th
    # best score exceeded that maximum by at most 0.23 of the bound. A row that keeps fewer than k scores this way
    # has no L and takes a full fp32 row.
    low = torch.maximum(low, kth_max.float() * unit - bound / 4 - slack)
    pair_row, slot = torch.nonzero(torch.arange(top_b.shape[1]) < n_open[:, None], as_tuple=True)
    pair_block = top_b[pair_row, slot]
    row, col, val, rank, cut = _keep_at_least(pair_row, pair_block, q, gt_blocks, low, rows, m, kk)
    # 2. every other block that may hold a score >= L - 3 slack, L the k-th best score kept so far
    kth = torch.full((b,), _NEG_INF)
    at_k = rank == k[row] - 1
    kth[row[at_k]] = val[at_k]
    th = kth - 3 * slack
    steps = torch.floor((th - bound) / unit).clamp(-32768, 32767)   # bm * unit + bound >= th, on int16 steps
    more = bm_rows >= steps.to(torch.int16)[:, None]
    more[pair_row, pair_block] = False
    pr, pb = torch.nonzero(more, as_tuple=True)
    del more
    extra_blocks = torch.bincount(pr, minlength=b)   # (a sum over the bool rows would make int64 copies of them)
    too_many = extra_blocks * 4 > nb
    counts["second_pass_rows"] += int((extra_blocks > 0).sum())
    keep = ~too_many[pr]
    pr, pb = pr[keep], pb[keep]
    if pr.numel():
        row2, col2, val2, _, cut2 = _keep_at_least(pr, pb, q, gt_blocks, th, rows, m, kk)
        cut |= cut2
        if row2.numel():   # merged into the rows that found more only (a handful: step 2 mostly proves)
            hit = torch.zeros(b, dtype=torch.bool)
            hit[row2] = True
            sel = hit[row]
            merged = _best_per_row(torch.cat([row[sel], row2]), torch.cat([col[sel], col2]),
                                   torch.cat([val[sel], val2]), b, kk, nb * _BLOCK)
            # (a row cut to kk in step 1 dropped only scores below its kk-th, which only rises)
            row, col, val, rank = (torch.cat([t[~sel], u]) for t, u in zip((row, col, val, rank), merged))
            cut |= merged[4]
    # 3. candidates in score order (ties by index), exact re-rank, certificate
    cand_i = torch.full((b, kk), -1, dtype=torch.long)
    cand_v = torch.full((b, kk), _NEG_INF)
    cand_i[row, rank] = col
    cand_v[row, rank] = val
    rest = torch.maximum(th, low)   # step 1 dropped its blocks' scores below low
    rest[cut] = torch.maximum(rest[cut], cand_v[cut, -1])
    # only candidates >= th are re-ranked (usually about k per row): the others score below rest + slack, so the
    # check below already proves them out of the top k
    kc = int(k.max())
    width = max(kc, int((cand_v >= th[:, None]).sum(dim=1).max()))
    cand_i = cand_i[:, :width]
    v, i = _sort_desc_by_value_then_index(rescore(q, x, cand_i, rows), cand_i)
    _put(out_v, out_i, rows, kc, v[:, :kc], i[:, :kc])
    kth_exact = v.gather(1, (k - 1)[:, None]).squeeze(1)
    return torch.cat([gave_up, rows[too_many | ~(kth_exact > rest + slack)]])
