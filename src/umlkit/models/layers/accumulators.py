"""Semantic-proxy accumulators of VPTSP (Ren et al., ICLR 2024), Sec. 3.3 and appendix Table 7.

Each accumulator maps the stored proxy rows ``h`` (C, D) of the C classes in a batch and their k new features
``x`` (C, k, D) to updated rows (C, D). Following the official ``_semantic_mix_with_container``
(implementation_notes.md §3):

* ``ema`` ("mix", VPTSP-M): h' = keep * h + (1 - keep) * mean_k(x), keep = 0.8;
* ``gru_relu`` (VPTSP-G, used by every official config): a hand-written GRU cell applied sequentially over the
  k samples, z = s(xW_iz + hW_hz + b_z), r = s(xW_ir + hW_hr + b_r), n = ReLU(xW_in + r * (hW_hn) + b_n),
  h' = (1 - z) n + z h; xavier-uniform weights, zero biases, dropout on the output. ``gru`` is the same with
  tanh. Written by hand because ``torch.nn.GRUCell`` has only tanh and carries six bias vectors, not three;
* Table 7 ablations: ``lstm`` and ``rnn`` (torch's ``LSTMCell``/``RNNCell`` run over the k samples, stored row as
  the hidden state) and ``cross_attention`` (the stored row attends to the k features, residual update).
"""
from __future__ import annotations

import torch
from torch import nn

__all__ = ["build_accumulator", "EMAAccumulator", "GRUAccumulator", "CellAccumulator", "CrossAttentionAccumulator",
           "ACCUMULATORS"]


class EMAAccumulator(nn.Module):
    def __init__(self, dim: int, keep: float = 0.8):
        super().__init__()
        if not 0 <= keep <= 1:
            raise ValueError(f"keep must be in [0, 1], got {keep}")
        self.keep = keep

    def forward(self, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.keep * h + (1.0 - self.keep) * x.mean(dim=1)


class GRUAccumulator(nn.Module):
    def __init__(self, dim: int, activation: str = "relu", dropout: float = 0.0):
        super().__init__()
        if activation not in ("relu", "tanh"):
            raise ValueError(f"activation must be 'relu' or 'tanh', got {activation!r}")
        self.activation = torch.relu if activation == "relu" else torch.tanh
        self.w_x = nn.Linear(dim, 3 * dim, bias=False)  # [W_iz | W_ir | W_in]
        self.w_h = nn.Linear(dim, 3 * dim, bias=False)  # [W_hz | W_hr | W_hn]
        self.bias = nn.Parameter(torch.zeros(3 * dim))  # [b_z | b_r | b_n]
        for w in (self.w_x.weight, self.w_h.weight):
            for chunk in w.data.chunk(3, dim=0):
                nn.init.xavier_uniform_(chunk)
        self.dropout = nn.Dropout(dropout)

    def cell(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        xz, xr, xn = self.w_x(x).chunk(3, dim=-1)
        hz, hr, hn = self.w_h(h).chunk(3, dim=-1)
        bz, br, bn = self.bias.chunk(3)
        z = torch.sigmoid(xz + hz + bz)
        r = torch.sigmoid(xr + hr + br)
        n = self.activation(xn + r * hn + bn)
        return (1 - z) * n + z * h

    def forward(self, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        for j in range(x.shape[1]):
            h = self.cell(x[:, j], h)
        return self.dropout(h)


class CellAccumulator(nn.Module):
    """LSTM or vanilla RNN cell run over the k samples, the stored row as the initial hidden state."""

    def __init__(self, dim: int, kind: str = "lstm", dropout: float = 0.0):
        super().__init__()
        if kind == "lstm":
            self.cell = nn.LSTMCell(dim, dim)
        elif kind == "rnn":
            self.cell = nn.RNNCell(dim, dim)
        else:
            raise ValueError(f"kind must be 'lstm' or 'rnn', got {kind!r}")
        self.kind = kind
        self.dropout = nn.Dropout(dropout)

    def forward(self, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        c = torch.zeros_like(h)
        for j in range(x.shape[1]):
            if self.kind == "lstm":
                h, c = self.cell(x[:, j], (h, c))
            else:
                h = self.cell(x[:, j], h)
        return self.dropout(h)


class CrossAttentionAccumulator(nn.Module):
    def __init__(self, dim: int, num_heads: int = 1, dropout: float = 0.0):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, num_heads, dropout=dropout, batch_first=True)

    def forward(self, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.attn(h[:, None, :], x, x, need_weights=False)
        return h + out[:, 0]


ACCUMULATORS = ("ema", "gru_relu", "gru", "lstm", "rnn", "cross_attention")


def build_accumulator(name: str, dim: int, dropout: float = 0.0, keep: float = 0.8) -> nn.Module:
    if name == "ema":
        return EMAAccumulator(dim, keep)
    if name == "gru_relu":
        return GRUAccumulator(dim, "relu", dropout)
    if name == "gru":
        return GRUAccumulator(dim, "tanh", dropout)
    if name in ("lstm", "rnn"):
        return CellAccumulator(dim, name, dropout)
    if name == "cross_attention":
        return CrossAttentionAccumulator(dim, dropout=dropout)
    raise ValueError(f"unknown accumulator {name!r}; choose one of {ACCUMULATORS}")
