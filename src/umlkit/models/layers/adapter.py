"""Bottleneck adapters: PUMA's (stochastic) adapter and AdaptFormer's parallel MLP adapter.

* :class:`Adapter` follows PUMA (Kim et al., WACV 2025), Sec. 4.1, Eq. 3-4, as the official
  ``models/prompt.py: StochasticAdapter`` does (implementation_notes.md §1): ReLU(x D) U * s with **no biases and
  no LayerNorm**, a **fixed** scale s = 0.1, D initialised with ``kaiming_uniform_(a=1)`` on D as the official
  (dim, r) tensor (fan-in r: bound sqrt(3 / r); on ``nn.Linear``'s (r, dim) weight torch would take fan-in dim, a
  bound 1/sqrt(3) of the official one at ViT-S's 384 / 128) and U with zeros (so the model starts as the frozen
  ViT), and a per-sample Bernoulli keep with probability p, implemented like the
  official code with timm's ``DropPath(1 - p)`` (kept samples rescaled by 1/p in training; full output at eval).
  ``keep_prob=1`` is the static adapter of PUMA Table 3.
  ``skip_dropped=True`` (an option, off by default) computes the branch on the kept samples only: the same Bernoulli
  draws, the same output values and the same RNG stream, but about half the adapter FLOPs at p = 0.5. Its weight
  gradients sum over fewer rows, so they differ from the default path by float rounding; the committed records use
  the default path. :meth:`Adapter.add_to` is the entry point (``residual + adapter(x)``). In low precision
  (bf16/fp16 or autocast) the scale and the per-sample keep multiply the 128-d bottleneck rather than the output
  (equal up to rounding; a third of the elementwise work at ViT-S's width); fp32 keeps the records' order.
* :class:`AdaptFormerAdapter` follows AdaptFormer (Chen et al., NeurIPS 2022): down/up projections **with**
  biases, ReLU, a fixed scale 0.1, parallel to the MLP branch; LoRA-style init (Kaiming down, zero up).
  PUMA's Table 2 uses it "scaled to the same parameters" (bottleneck 256 on ViT-S: 2.37M); the official
  ``models/prompt.py: AdaptFormer`` feeds it the MLP's LayerNorm output. VPTSP's Adapter baseline
  (``architectures/peft_vit.py: AdapterLayer`` at its defaults: parallel, post LayerNorm, scale 1.0, LoRA init,
  dropout 0) adds the LayerNorm and sits on the last L blocks (``_setup_adapter``); the factory's ``adaptformer``
  method chooses between them with its ``variant`` option.
"""
from __future__ import annotations

import math

import torch
from timm.layers import DropPath
from torch import nn

__all__ = ["Adapter", "AdaptFormerAdapter", "puma_adapter_pair"]


class Adapter(nn.Module):
    """PUMA adapter: ReLU(x @ D) @ U * scale, stochastic per sample when ``keep_prob < 1``."""

    def __init__(self, dim: int, bottleneck: int = 128, scale: float = 0.1, keep_prob: float = 0.5,
                 skip_dropped: bool = False):
        super().__init__()
        if not 0 < keep_prob <= 1:
            raise ValueError(f"keep_prob must be in (0, 1], got {keep_prob}")
        self.down = nn.Linear(dim, bottleneck, bias=False)
        self.up = nn.Linear(bottleneck, dim, bias=False)
        self.register_buffer("scale", torch.tensor(float(scale)), persistent=False)  # fixed, no gradient
        self.keep_prob = keep_prob
        self.skip_dropped = bool(skip_dropped)
        self.drop = DropPath(1.0 - keep_prob) if keep_prob < 1 else nn.Identity()
        nn.init.kaiming_uniform_(self.down.weight.T, a=1)   # D = weight.T, as the official (dim, r) tensor
        nn.init.zeros_(self.up.weight)

    def _branch(self, x: torch.Tensor, factor: torch.Tensor | None = None) -> torch.Tensor:
        """up(ReLU(down x)) * scale, times a per-sample ``factor`` when given. In low precision (bf16/fp16, or
        autocast) the multiplies act on the bottleneck instead of the output: ReLU(z) c = ReLU(z c) for c >= 0 and
        ``up`` is linear, so the value is the same up to rounding, on ``bottleneck / dim`` of the elements (the
        fp32 path keeps the order the committed records were trained with, bit for bit)."""
        if _low_precision(x):   # the factor in fp32 (bf16's 0.2 is 0.2002, a bias of 1e-3 in every adapter), the
            z = torch.relu(self.down(x))   # product rounded once back to the bottleneck's dtype for ``up``
            s = self.scale if factor is None else factor.float() * self.scale
            return self.up((z * s).to(z.dtype))
        out = self.up(torch.relu(self.down(x))) * self.scale
        return out if factor is None else out * factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self._branch(x))

    def _keep_factor(self, x: torch.Tensor) -> torch.Tensor:
        """timm's ``drop_path`` draws: one Bernoulli(keep) per sample, in the branch's dtype, divided by keep."""
        keep = 1.0 - self.drop.drop_prob  # timm's drop_path computes it this way: same float, same draws
        device = x.device.type
        dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else x.dtype
        factor = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1), dtype=dtype).bernoulli_(keep)
        if keep > 0.0 and self.drop.scale_by_keep:
            factor.div_(keep)
        return factor

    def add_to(self, residual: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``residual + self(x)``; with ``skip_dropped`` in training, the branch runs on the kept samples only; in
        low precision the per-sample keep and the scale multiply the bottleneck (:meth:`_branch`)."""
        stochastic = self.training and isinstance(self.drop, DropPath)
        if stochastic and self.skip_dropped:
            factor = self._keep_factor(x)
            kept = factor.view(-1).nonzero().squeeze(1)
            branch = self._branch(x.index_select(0, kept), factor.index_select(0, kept))
            return residual.index_add(0, kept, branch.to(residual.dtype))
        if _low_precision(x):
            return residual + self._branch(x, self._keep_factor(x) if stochastic else None)
        return residual + self(x)


def _low_precision(x: torch.Tensor) -> bool:
    return x.dtype in (torch.bfloat16, torch.float16) or torch.is_autocast_enabled(x.device.type)


def puma_adapter_pair(dim: int, bottleneck: int = 128, scale: float = 0.1, keep_prob: float = 0.5,
                      skip_dropped: bool = False) -> tuple[Adapter, Adapter]:
    """The two adapters of one PUMA layer (parallel to MSA and to MLP), starting from the same D (official init)."""
    a_attn = Adapter(dim, bottleneck, scale, keep_prob, skip_dropped)
    a_mlp = Adapter(dim, bottleneck, scale, keep_prob, skip_dropped)
    with torch.no_grad():
        a_mlp.down.weight.copy_(a_attn.down.weight)
    return a_attn, a_mlp


class AdaptFormerAdapter(nn.Module):
    """AdaptFormer's AdaptMLP: up(ReLU(down(x))) * scale, with biases; ``ln="post"`` adds VPTSP's LayerNorm on the
    up-projection's output (``architectures/peft_vit.py: AdapterLayer``, ``adapter_ln_position: post``: a zero
    up-projection stays zero through it, so the model still starts as the frozen ViT)."""

    def __init__(self, dim: int, bottleneck: int = 256, scale: float = 0.1, ln: str = "none"):
        super().__init__()
        if ln not in ("none", "post"):
            raise ValueError(f"ln must be 'none' or 'post', got {ln!r}")
        self.down = nn.Linear(dim, bottleneck)
        self.up = nn.Linear(bottleneck, dim)
        self.scale = float(scale)
        self.ln = nn.LayerNorm(dim) if ln == "post" else None
        nn.init.kaiming_uniform_(self.down.weight, a=math.sqrt(5))
        nn.init.zeros_(self.down.bias)
        nn.init.zeros_(self.up.weight)
        nn.init.zeros_(self.up.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.up(torch.relu(self.down(x))) * self.scale
        return out if self.ln is None else self.ln(out)
