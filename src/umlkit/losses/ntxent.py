"""NT-Xent (Chen et al. 2020, SimCLR, Eq. 1) with pytorch-metric-learning's numbers at a fraction of its cost.

DiVA's self-supervised head (ooDML's ``criteria/diva.py``; :class:`umlkit.losses.DiVALoss`) uses PML's
``NTXentLoss``. For every positive pair PML builds a row over *all* negative pairs of the batch and masks the ones
whose anchor differs (``ntxent_loss.py``: ``n_per_p``), so one step of 2B views materialises a 2B x 2B(2B - 2)
matrix and takes its exponential: 11 million exps and a dozen dense passes in the backward at B = 112 — about a
third of a DiVA training job on one CPU core. That cost is the reason this module exists; PML has no cheaper form.

:class:`NTXentLoss` is PML's class with ``_compute_loss`` replaced when every anchor has exactly one positive (the
instance-discrimination case: two views per image). It takes the exponential of the unmasked entries only, then
places them at the positions PML's dense row gives them and sums the same dense rows, so the forward value and every
gradient are bit-for-bit PML's (tested against PML on CPU; the sum's reduction order depends on positions, which is
why the dense row is kept for it). Any other case (several positives per anchor, a plain distance) is handed to
PML's own code.
"""
from __future__ import annotations

import torch
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning.utils import common_functions as c_f

__all__ = ["NTXentLoss"]


class NTXentLoss(pml_losses.NTXentLoss):
    """PML's NT-Xent (same constructor, same reducer, same values); see the module docstring for what differs."""

    def _compute_loss(self, pos_pairs, neg_pairs, indices_tuple):
        a1, _p, a2, _n = indices_tuple
        if len(a1) == 0 or len(a2) == 0 or not self.distance.is_inverted or a1.unique().numel() != a1.numel():
            return super()._compute_loss(pos_pairs, neg_pairs, indices_tuple)
        # Entry (row r, column m) of PML's matrix is live when negative pair m has positive pair r's anchor.
        owner = torch.full((int(max(a1.max(), a2.max())) + 1,), -1, dtype=torch.long, device=a1.device)
        owner[a1] = torch.arange(len(a1), device=a1.device)
        cols = torch.nonzero(owner[a2] >= 0).squeeze(1)
        rows = owner[a2[cols]]
        pos = pos_pairs.unsqueeze(1) / self.temperature
        live = (neg_pairs / self.temperature)[cols]
        with torch.no_grad():   # PML detaches its max too; masked entries (finfo.min) never win against a positive
            row_max = torch.full((len(a1),), c_f.neg_inf(live.dtype), dtype=live.dtype, device=live.device)
            row_max = row_max.scatter_reduce(0, rows, live, "amax").unsqueeze(1)
            max_val = torch.max(pos, row_max)
        numerator = torch.exp(pos - max_val).squeeze(1)
        dense = live.new_zeros((len(a1), len(a2))).index_put((rows, cols), torch.exp(live - max_val[rows, 0]))
        denominator = dense.sum(dim=1) + numerator
        log_exp = torch.log((numerator / denominator) + c_f.small_val(live.dtype))
        return {"loss": {"losses": -log_exp, "indices": (a1, _p), "reduction_type": "pos_pair"}}
