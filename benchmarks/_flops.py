"""FLOPs of one step by kind, GEMM and attention, with ``torch.utils.flop_counter.FlopCounterMode``.

PyTorch's counter knows the GPU attention kernels but not ``aten::_scaled_dot_product_flash_attention_for_cpu``
(forward and backward), so on a CPU it counted attention as zero (torch 2.14) and a FLOP bound over-stated what
a frozen backbone saves: attention is paid in full by every method, and more by one that adds tokens (PUMA's 8
prompts). The CPU kernels are mapped here to PyTorch's own formulas (``sdpa_flop_count``: 4 B H N^2 d forward;
``sdpa_backward_flop_count``: 10 B H N^2 d backward, with the recomputed scores).
"""
from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

_ATTENTION = ("scaled_dot_product", "flash_attention", "efficient_attention", "cudnn_attention")


def _cpu_forward(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    return sdpa_flop_count(query_shape, key_shape, value_shape)


def _cpu_backward(grad_out_shape, query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    return sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape)


def counter() -> FlopCounterMode:
    """A FlopCounterMode that also counts the CPU flash-attention kernels."""
    aten = torch.ops.aten
    mapping = {}
    if hasattr(aten, "_scaled_dot_product_flash_attention_for_cpu"):
        mapping[aten._scaled_dot_product_flash_attention_for_cpu] = _cpu_forward
    if hasattr(aten, "_scaled_dot_product_flash_attention_for_cpu_backward"):
        mapping[aten._scaled_dot_product_flash_attention_for_cpu_backward] = _cpu_backward
    return FlopCounterMode(display=False, custom_mapping=mapping)


def by_kind(mode: FlopCounterMode) -> dict[str, float]:
    """GFLOP of attention and of everything else counted (the GEMMs and convolutions) from a finished count."""
    counts = mode.get_flop_counts().get("Global", {})
    attention = sum(v for op, v in counts.items() if any(a in str(op) for a in _ATTENTION))
    return {"attention": attention / 1e9, "gemm": (mode.get_total_flops() - attention) / 1e9}
