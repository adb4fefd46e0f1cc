"""WiSE-FT (Wortsman et al., "Robust fine-tuning of zero-shot models", CVPR 2022, Eq. 1): the weight-space ensemble
``theta(alpha) = (1 - alpha) * theta_0 + alpha * theta_1`` of the weights a fine-tuning run started from
(``theta_0``) and the weights it ended with (``theta_1``), evaluated at a few mixing coefficients. No extra training:
one evaluation per coefficient at the end of the run.

What theta_0 is here: every parameter and floating-point buffer of the model as :func:`umlkit.train.fit` built it
before the first step - the pretrained backbone and the freshly initialised embedding head. The official code
(``wise_ft.py``, ``_merge``) mixes the zero-shot model, whose head is CLIP's text-derived classifier; a metric
learning model has no such head, so alpha = 0 is the pretrained backbone seen through the untrained head (close to
the frozen backbone up to a random projection), alpha = 1 the fine-tuned model. Integer buffers (counters) keep
the fine-tuned values.

Why by hand: the interpolation is three lines of tensor arithmetic; the official package is not on PyPI.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import contextmanager

import torch
from torch import nn

__all__ = ["initial_state", "mixed", "wise_ft_curve", "check_alphas"]


def check_alphas(value) -> tuple[float, ...]:
    """``train.wise_ft``: a non-empty list of mixing coefficients in [0, 1]; a bad value names the key."""
    ok = isinstance(value, (list, tuple)) and value and all(
        isinstance(a, (int, float)) and not isinstance(a, bool) and 0 <= a <= 1 for a in value)
    if not ok:
        raise ValueError(f"config key train.wise_ft = {value!r}: expected a list of mixing coefficients in [0, 1], "
                         f"e.g. [0, 0.25, 0.5, 0.75, 1] (WiSE-FT, evaluated at the end of the run)")
    return tuple(float(a) for a in value)


def initial_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """A copy of the model's floating-point state (theta_0), on the CPU."""
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items() if v.is_floating_point()}


@contextmanager
def mixed(model: nn.Module, start: dict[str, torch.Tensor], alpha: float):
    """The model with weights ``(1 - alpha) * start + alpha * current`` inside the block; its own weights after."""
    final = {k: v.detach().clone() for k, v in model.state_dict().items() if k in start}
    with torch.no_grad():
        state = model.state_dict()
        for k, theta_1 in final.items():
            theta_0 = start[k].to(theta_1.device, theta_1.dtype)
            state[k].copy_(torch.lerp(theta_0, theta_1, float(alpha)))
    try:
        yield model
    finally:
        with torch.no_grad():
            for k, theta_1 in final.items():
                state[k].copy_(theta_1)


def wise_ft_curve(model: nn.Module, start: dict[str, torch.Tensor], alphas: Sequence[float],
                  evaluate: Callable[[nn.Module], dict]) -> list[dict]:
    """``[{"alpha": a, **evaluate(model at a)}, ...]`` for each mixing coefficient, the model restored after."""
    out = []
    for a in alphas:
        with mixed(model, start, a) as m:
            out.append({"alpha": float(a), **evaluate(m)})
    return out
