"""Row-sparse ("lazy") optimisation of parameters that live off the training device, one row per class.

VPTSP (Ren et al., ICLR 2024, Sec. 4 and the appendix on SOP / In-shop) keeps one set of prompts per class. On the
many-class datasets the official code (``prompt_memory_bank: true``) keeps them on the CPU: each step only the rows
of the batch's classes go to the GPU, and their optimizer state (AdamW's step, exp_avg and exp_avg_sq, or SGD's
momentum) is swapped in with them and written back after ``step()``. A class absent from a batch therefore neither
moves nor ages its state: the update is *lazy*, unlike a dense optimizer, where weight decay and the moments still
move every row each step. The official runs without the memory bank (CUB, Cars) use the dense optimizer; umlkit
does the same when the prompts stay on the device.

:class:`RowSparseOptimizer` does the memory bank's bookkeeping for any torch optimizer: the parameters must receive
*sparse* row gradients (``torch.nn.functional.embedding(..., sparse=True)``), each row keeps its own optimizer state
and step count, and each step the touched rows are staged as one small parameter per step count and handed to a
private instance of the same torch optimizer, so the arithmetic is torch's own. Written here because torch's
``SparseAdam`` is Adam only (no weight decay, no SGD) and counts steps per tensor, not per row; no well-kept library
offers a per-row lazy wrapper of an arbitrary optimizer.

When every row is touched in every step the result equals the dense optimizer's exactly (tested, with a fit on a
dataset whose batches hold every class).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch import nn

__all__ = ["RowSparseOptimizer", "sparse_grads"]


class RowSparseOptimizer:
    """Lazy per-row updates of ``params`` by ``make_optimizer([param])`` (a torch optimizer factory).

    ``lr`` is read from ``lr_source()`` before every step (the main optimizer's parameter group, so its schedule and
    warm-up apply). Row states are kept on each parameter's device as full-size tensors allocated at first use.
    """

    def __init__(self, params: Iterable[nn.Parameter], make_optimizer: Callable[[list], torch.optim.Optimizer],
                 lr_source: Callable[[], float] | None = None):
        self.params = list(params)
        for i, p in enumerate(self.params):
            if p.dim() < 1:
                raise ValueError(f"RowSparseOptimizer: parameter {i} is a scalar; it needs rows (shape (rows, ...))")
        self._make = make_optimizer
        self._lr_source = lr_source
        self._inner: torch.optim.Optimizer | None = None
        self.state: list[dict] = [{} for _ in self.params]   # per parameter: "step" (rows,) int64 + full tensors

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None

    def _optimizer(self, stage: nn.Parameter) -> torch.optim.Optimizer:
        if self._inner is None:
            self._inner = self._make([stage])
        else:
            self._inner.param_groups[0]["params"] = [stage]
        if self._lr_source is not None:
            self._inner.param_groups[0]["lr"] = float(self._lr_source())
        return self._inner

    @torch.no_grad()
    def step(self) -> None:
        for p, st in zip(self.params, self.state):
            if p.grad is None:
                continue
            if not p.grad.is_sparse:
                raise TypeError("RowSparseOptimizer needs sparse row gradients (gather the rows with "
                                "torch.nn.functional.embedding(..., sparse=True)); got a dense gradient")
            grad = p.grad.coalesce()
            rows, values = grad.indices()[0], grad.values()
            if "step" not in st:
                st["step"] = torch.zeros(p.shape[0], dtype=torch.long, device=p.device)
            counts = st["step"][rows]
            for count in counts.unique().tolist():
                pick = counts == count
                sel = rows[pick]
                stage = nn.Parameter(p.data[sel].clone())
                stage.grad = values[pick].reshape(stage.shape).clone()
                opt = self._optimizer(stage)
                if count:
                    opt.state[stage] = {k: (v[sel].clone() if k != "step" else v)
                                        for k, v in self._row_state(st, count, stage).items()}
                opt.step()
                p.data[sel] = stage.data
                for k, v in opt.state.pop(stage, {}).items():
                    if torch.is_tensor(v) and v.shape == stage.shape:
                        if k not in st:
                            st[k] = torch.zeros_like(p.data)
                        st[k][sel] = v
                st["step"][sel] = count + 1

    def _row_state(self, st: dict, count: int, stage: nn.Parameter) -> dict:
        """The inner optimizer's state for rows that have taken ``count`` steps: their tensors, and the step in the
        form torch keeps it (a float32 scalar tensor, as ``torch.optim.Adam`` stores it)."""
        out = {k: v for k, v in st.items() if k != "step"}
        if isinstance(self._inner, (torch.optim.Adam, torch.optim.AdamW)):
            out["step"] = torch.tensor(float(count), dtype=torch.float32)
        return out

    def state_dict(self) -> dict:
        return {"state": [{k: v.clone() for k, v in st.items()} for st in self.state]}

    def load_state_dict(self, saved: dict) -> None:
        state = saved.get("state") if isinstance(saved, dict) else None
        if not isinstance(state, list) or len(state) != len(self.params):
            raise ValueError(f"the sparse optimizer's saved state has {len(state) if isinstance(state, list) else '?'} "
                             f"parameter(s); this model has {len(self.params)}")
        for i, (p, st) in enumerate(zip(self.params, state)):
            for k, v in st.items():
                want = (p.shape[0],) if k == "step" else tuple(p.shape)
                if tuple(v.shape) != want:
                    raise ValueError(f"the sparse optimizer's saved {k!r} of parameter {i} has shape {tuple(v.shape)}; "
                                     f"this model needs {want}")
        self.state = [{k: v.to(p.device) for k, v in st.items()} for p, st in zip(self.params, state)]


def sparse_grads(params: Iterable[nn.Parameter]) -> list[torch.Tensor]:
    """Stand-ins for gradient clipping: one tensor per parameter with a sparse gradient whose ``.grad`` is that
    gradient's values (coalesced in place, shared storage), so ``torch.nn.utils.clip_grad_norm_`` / ``_value_`` count
    and scale exactly the rows the step will apply."""
    out = []
    for p in params:
        if p.grad is None:
            continue
        p.grad = p.grad.coalesce()
        values = p.grad._values()
        holder = torch.empty_like(values)
        holder.grad = values
        out.append(holder)
    return out
