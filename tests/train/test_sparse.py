"""Row-sparse optimizer: every row behaves as if it had its own torch optimizer that steps only when the row has a
gradient (brute force: one torch optimizer per row), and touching every row every step is the dense optimizer."""
import pytest
import torch
from torch import nn

from umlkit.train.sparse import RowSparseOptimizer, sparse_grads

OPTIMIZERS = {
    "adamw": lambda ps, lr: torch.optim.AdamW(ps, lr=lr, weight_decay=0.1),
    "adam": lambda ps, lr: torch.optim.Adam(ps, lr=lr, weight_decay=0.01),
    "sgd_momentum": lambda ps, lr: torch.optim.SGD(ps, lr=lr, momentum=0.9, weight_decay=0.05),
    "sgd": lambda ps, lr: torch.optim.SGD(ps, lr=lr),
}
ROWS_PER_STEP = [[1, 3], [1, 4], [0, 1, 2, 3, 4, 5], [5], [3, 1]]


def _sparse_grad(param, rows, g):
    """A sparse row gradient as F.embedding(sparse=True) leaves it: the gradient of sum(w * rows of param)."""
    param.grad = None
    picked = nn.functional.embedding(torch.tensor(rows), param, sparse=True)
    (picked * g[rows]).sum().backward()


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_each_row_is_its_own_optimizer_stepping_when_touched(name):
    torch.manual_seed(0)
    init = torch.randn(6, 4)
    param = nn.Parameter(init.clone())
    lrs = iter([0.1, 0.05, 0.05, 0.02, 0.01])
    current = {"lr": 0.1}
    opt = RowSparseOptimizer([param], lambda ps: OPTIMIZERS[name](ps, 0.1), lambda: current["lr"])
    rows_ref = [nn.Parameter(init[i].clone()) for i in range(6)]
    refs = [OPTIMIZERS[name]([r], 0.1) for r in rows_ref]
    for rows in ROWS_PER_STEP:
        current["lr"] = next(lrs)
        g = torch.randn(6, 4)
        _sparse_grad(param, rows, g)
        opt.step()
        for i in rows:
            refs[i].param_groups[0]["lr"] = current["lr"]
            rows_ref[i].grad = g[i].clone()
            refs[i].step()
        for i in range(6):
            assert torch.equal(param.data[i], rows_ref[i].data), (name, rows, i)
    assert opt.state[0]["step"].tolist() == [1, 4, 1, 3, 2, 2]


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_touching_every_row_every_step_is_the_dense_optimizer(name):
    torch.manual_seed(1)
    init = torch.randn(5, 3)
    sparse, dense = nn.Parameter(init.clone()), nn.Parameter(init.clone())
    opt = RowSparseOptimizer([sparse], lambda ps: OPTIMIZERS[name](ps, 0.05))
    ref = OPTIMIZERS[name]([dense], 0.05)
    for _ in range(4):
        g = torch.randn(5, 3)
        _sparse_grad(sparse, list(range(5)), g)
        opt.step()
        dense.grad = g.clone()
        ref.step()
        assert torch.equal(sparse.data, dense.data)


def test_untouched_rows_keep_value_and_state():
    param = nn.Parameter(torch.ones(4, 2))
    opt = RowSparseOptimizer([param], lambda ps: torch.optim.AdamW(ps, lr=0.1, weight_decay=0.5))
    _sparse_grad(param, [0], torch.ones(4, 2))
    opt.step()
    assert torch.equal(param.data[1:], torch.ones(3, 2))     # no weight decay on rows without a gradient
    assert opt.state[0]["exp_avg"][1:].abs().sum() == 0 and opt.state[0]["step"].tolist() == [1, 0, 0, 0]


def test_state_dict_round_trip_and_bad_state():
    param = nn.Parameter(torch.randn(3, 2))
    opt = RowSparseOptimizer([param], lambda ps: torch.optim.Adam(ps, lr=0.1))
    _sparse_grad(param, [2], torch.randn(3, 2))
    opt.step()
    saved = opt.state_dict()
    other = RowSparseOptimizer([nn.Parameter(param.data.clone())], lambda ps: torch.optim.Adam(ps, lr=0.1))
    other.load_state_dict(saved)
    assert torch.equal(other.state[0]["exp_avg_sq"], opt.state[0]["exp_avg_sq"])
    with pytest.raises(ValueError,
                       match="saved 'exp_avg' of parameter 0 has shape \\(3, 5\\); this model needs \\(3, 2\\)"):
        other.load_state_dict({"state": [{"step": torch.zeros(3, dtype=torch.long), "exp_avg": torch.zeros(3, 5)}]})
    with pytest.raises(ValueError, match="has 2 parameter"):
        other.load_state_dict({"state": [{}, {}]})


def test_dense_gradient_is_refused():
    param = nn.Parameter(torch.randn(3, 2))
    param.grad = torch.ones(3, 2)
    with pytest.raises(TypeError, match="sparse row gradients"):
        RowSparseOptimizer([param], lambda ps: torch.optim.SGD(ps, lr=0.1)).step()


def test_clipping_sees_the_sparse_rows():
    """clip_grad_norm_ over the stand-ins scales the sparse gradient exactly as it scales the same dense gradient."""
    g = torch.randn(4, 3) * 10
    sparse, dense = nn.Parameter(torch.zeros(4, 3)), nn.Parameter(torch.zeros(4, 3))
    _sparse_grad(sparse, [0, 2], g)
    dense.grad = torch.zeros(4, 3)
    dense.grad[[0, 2]] = g[[0, 2]]
    n_sparse = torch.nn.utils.clip_grad_norm_(sparse_grads([sparse]), 1.0)
    n_dense = torch.nn.utils.clip_grad_norm_([dense], 1.0)
    assert torch.allclose(n_sparse, n_dense)
    assert torch.allclose(sparse.grad.to_dense(), dense.grad)
