"""Few-shot adaptation (ooDML Sec. 4.4): episodes, which parameters move, and that adapting helps where it must."""
import numpy as np
import pytest
import torch

from umlkit.models.embedding import EmbeddingModel
from umlkit.train.adapt import (
    adapt_head,
    adaptable_head,
    episodes_from_support_lists,
    few_shot_adaptation,
    few_shot_episodes,
)


def test_episodes_draw_k_items_per_class_reproducibly_and_leave_a_query():
    labels = np.repeat(np.arange(5), [3, 4, 5, 6, 7])
    eps = few_shot_episodes(labels, shots=2, episodes=4, seed=1)
    assert len(eps) == 4
    for sup in eps:
        assert np.bincount(labels[sup]).tolist() == [2] * 5 and len(set(sup.tolist())) == 10
    assert any(not np.array_equal(eps[0], e) for e in eps[1:])
    again = few_shot_episodes(labels, shots=2, episodes=4, seed=1)
    assert all(np.array_equal(x, y) for x, y in zip(eps, again))
    assert not np.array_equal(few_shot_episodes(labels, 2, 1, seed=2)[0], eps[0])
    with pytest.raises(ValueError, match=r"more than 3 items per class; class\(es\) \[0\]"):
        few_shot_episodes(labels, shots=3)


def test_published_support_lists_become_indices_and_missing_files_are_named():
    paths = ["/data/cub/images/001.A/x1.jpg", "/data/cub/images/001.A/x2.jpg", "/data/cub/images/002.B/y1.jpg"]
    idx = episodes_from_support_lists(paths, [{"001.A": ["images/001.A/x2.jpg"], "002.B": ["y1.jpg"]}])
    assert idx[0].tolist() == [1, 2]
    with pytest.raises(KeyError, match="z9.jpg"):
        episodes_from_support_lists(paths, [{"001.A": ["z9.jpg"]}])


class _Backbone(torch.nn.Module):
    def forward(self, x):
        return x


def _model(dim_in=8, dim_out=4, seed=0, aux=False):
    torch.manual_seed(seed)
    head = torch.nn.Sequential(torch.nn.Linear(dim_in, dim_in), torch.nn.ReLU(), torch.nn.Linear(dim_in, dim_out))
    aux_heads = {"x": torch.nn.Linear(dim_in, 3)} if aux else None
    return EmbeddingModel(_Backbone(), head, "full", "toy", dim_out, aux_heads=aux_heads, eval_concat_aux=aux)


def test_only_the_last_linear_layer_of_each_evaluated_head_moves():
    model = _model(aux=True)
    heads = adaptable_head(model)
    feats, labels = torch.randn(40, 8), np.repeat(np.arange(10), 4)
    before = {k: v.clone() for k, v in heads.state_dict().items()}
    adapt_head(heads, feats, labels, lr=1e-2, iterations=5, batch_size=8, m=2)
    after = heads.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed == {"head.2.weight", "head.2.bias", "aux.x.weight", "aux.x.bias"}
    # the copy is independent of the model, and its output is the model's evaluation embedding
    assert torch.equal(model.head[2].weight, before["head.2.weight"])
    with torch.no_grad():
        assert torch.allclose(adaptable_head(model)(feats), model(feats), atol=1e-6)


def test_adaptation_recovers_classes_that_the_head_cannot_see():
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(12), 8)
    feats = rng.normal(scale=0.3, size=(96, 8)).astype(np.float32)
    feats[:, :2] += rng.normal(size=(12, 2)).astype(np.float32)[labels] * 3  # the classes live in dims 0-1
    torch.manual_seed(0)
    model = EmbeddingModel(_Backbone(), torch.nn.Linear(8, 4), "full", "toy", 4)
    with torch.no_grad():  # the trained head ignores dims 0-1: zero-shot retrieval is near chance
        model.head.weight[:, :2] = 0
    res = few_shot_adaptation(model, torch.from_numpy(feats), labels, shots=[3], episodes=2, lr=3e-2, iterations=150,
                              batch_size=24, m=3)["3"]
    assert len(res["few"]["R@1"]) == 2
    assert res["zero_mean"]["R@1"] < 40 and res["few_mean"]["R@1"] > res["zero_mean"]["R@1"] + 20


def test_one_step_is_adam_on_roths_margin_with_a_fixed_beta_on_a_class_sampler_batch():
    """The official fine-tuning (utilities/finetune_utils.py): Adam on the last linear layer only, Roth's Margin
    criterion with distance sampling, beta fixed (the criterion's beta is not in the optimiser)."""
    from umlkit.losses.roth_margin import RothMarginLoss
    from umlkit.train.adapt import _class_batches
    model = _model(seed=3)
    feats, labels = torch.randn(30, 8, generator=torch.Generator().manual_seed(1)), np.repeat(np.arange(10), 3)
    heads = adapt_head(adaptable_head(model), feats, labels, lr=1e-2, iterations=1, batch_size=12, m=2, seed=5,
                       beta=0.6)
    ref = adaptable_head(model)
    gen = torch.Generator().manual_seed(5)
    np.random.seed(5)
    batch = _class_batches(torch.as_tensor(labels), 10, 12, 2, gen)
    last = ref.head[2]
    opt = torch.optim.Adam(last.parameters(), lr=1e-2)
    loss = RothMarginLoss(None, beta=0.6, learn_beta=False)(ref(feats[batch]), torch.as_tensor(labels)[batch])
    assert loss.item() > 0
    loss.backward()
    opt.step()
    assert torch.equal(heads.head[2].weight, last.weight) and torch.equal(heads.head[2].bias, last.bias)
    assert torch.equal(heads.head[0].weight, ref.head[0].weight)          # the first layer did not move


def test_the_class_sampler_draws_classes_and_items_with_replacement():
    from umlkit.train.adapt import _class_batches
    y = torch.as_tensor(np.repeat(np.arange(4), 2))
    gen = torch.Generator().manual_seed(0)
    batches = [_class_batches(y, 4, 8, 2, gen) for _ in range(50)]
    assert all(len(b) == 8 for b in batches)
    assert all((y[b].view(4, 2)[:, 0] == y[b].view(4, 2)[:, 1]).all() for b in batches)   # m items of one class
    assert any(len(set(y[b].tolist())) < 4 for b in batches)          # a class drawn twice in one batch
    assert any(b[0] == b[1] for b in batches)                         # an item drawn twice for its class


def test_iterations_per_shot_count_and_zero_steps_leave_the_model_as_it_was():
    feats, labels = torch.randn(40, 8, generator=torch.Generator().manual_seed(2)), np.repeat(np.arange(8), 5)
    res = few_shot_adaptation(_model(), feats, labels, shots=[2, 3], episodes=2, lr=5e-2, iterations={2: 0, 3: 30},
                              batch_size=8, m=2)
    assert res["2"]["few"]["R@1"] == res["2"]["zero"]["R@1"]
    assert res["3"]["few"]["R@1"] != res["3"]["zero"]["R@1"]
