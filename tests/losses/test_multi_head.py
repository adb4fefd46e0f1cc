"""Uniform Prior, S2SD and DiVA: hand-computed values, brute-force miners, gradient directions, gradcheck."""
import math

import pytest
import torch
from torch import nn

from umlkit.losses import DiVALoss, aux_heads_for, create_loss, similarity_distillation
from umlkit.losses.multi_head import grad_reverse
from umlkit.models import create_model


def _numerical_grad(f, x, eps=1e-6):
    g = torch.zeros_like(x)
    flat = x.detach().clone().reshape(-1)
    for i in range(flat.numel()):
        hi, lo = flat.clone(), flat.clone()
        hi[i] += eps
        lo[i] -= eps
        g.view(-1)[i] = (f(hi.view_as(x)) - f(lo.view_as(x))).item() / (2 * eps)
    return g


def _assert_reversed_gradcheck(f, x):
    """gradcheck for adversarial terms: the analytic gradient must be exactly minus the finite-difference one."""
    x = x.detach().clone().requires_grad_()
    f(x).backward()
    with torch.no_grad():
        numeric = _numerical_grad(f, x)
    assert torch.allclose(x.grad, -numeric, atol=1e-6, rtol=1e-4)


def test_grad_reverse_negates_and_scales():
    x = torch.randn(5, requires_grad=True)
    (grad_reverse(x, 2.0) * torch.arange(5.0)).sum().backward()
    assert torch.equal(x.grad, -2.0 * torch.arange(5.0))


def test_similarity_distillation_hand_value():
    s = torch.tensor([[1.0, 0.0], [0.0, 1.0]])             # student: orthogonal
    t = torch.tensor([[1.0, 0.0], [1.0, 0.0]])             # teacher: identical rows
    # student rows softmax([1, 0]); teacher rows softmax([1, 1]) = (.5, .5)
    p = torch.tensor([0.5, 0.5])
    q = torch.softmax(torch.tensor([1.0, 0.0]), 0)
    expected = float((p * (p / q).log()).sum())  # both rows give the same KL
    assert similarity_distillation(s, t).item() == pytest.approx(expected, rel=1e-6)
    assert similarity_distillation(t, t).item() == pytest.approx(0.0, abs=1e-7)


def test_similarity_distillation_gradcheck_and_detached_teacher():
    s = nn.functional.normalize(torch.randn(5, 4, dtype=torch.float64), dim=1).requires_grad_()
    t = nn.functional.normalize(torch.randn(5, 7, dtype=torch.float64), dim=1).requires_grad_()
    assert torch.autograd.gradcheck(lambda a: similarity_distillation(a, t, 0.5), (s,))
    similarity_distillation(s, t).backward()
    assert t.grad is None and s.grad.abs().sum() > 0


def _disc_bce(disc, x, label):
    logits = disc(x).squeeze(-1)
    p = torch.sigmoid(logits)
    return -(label * p.log() + (1 - label) * (1 - p).log()).mean()


def test_uniform_prior_value_and_gradient_directions():
    torch.manual_seed(0)
    loss = create_loss("uniform_prior", embedding_size=6, weight=1.0, hidden=8)
    emb = nn.functional.normalize(torch.randn(4, 6), dim=1).requires_grad_()
    prior = nn.functional.normalize(torch.randn(4, 6), dim=1)
    reg = loss.regulariser(emb, prior)
    expected = _disc_bce(loss.discriminator, prior, 1.0) + _disc_bce(loss.discriminator, emb, 0.0)
    assert reg.item() == pytest.approx(expected.item(), rel=1e-6)
    # the embedding gets the *reversed* gradient of the discriminator's loss; the discriminator the plain one
    reg.backward()
    emb2 = emb.detach().clone().requires_grad_()
    plain = (_disc_bce(loss.discriminator, prior, 1.0)
             + _disc_bce(loss.discriminator, nn.functional.normalize(emb2, dim=1), 0.0))
    d_grads = [p.grad.clone() for p in loss.discriminator.parameters()]
    loss.discriminator.zero_grad()
    plain.backward()
    assert torch.allclose(emb.grad, -emb2.grad, atol=1e-7)
    for g, p in zip(d_grads, loss.discriminator.parameters()):
        assert torch.allclose(g, p.grad, atol=1e-7)


def test_uniform_prior_gradcheck_and_total():
    torch.manual_seed(1)
    loss = create_loss("uniform_prior", embedding_size=3, hidden=4).double()
    prior = nn.functional.normalize(torch.randn(4, 3, dtype=torch.float64), dim=1)
    emb = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    _assert_reversed_gradcheck(lambda e: loss.regulariser(e, prior), emb)
    labels = torch.tensor([0, 0, 1, 1])
    e = nn.functional.normalize(torch.randn(4, 3), dim=1)
    loss = loss.float()
    total = loss(e, labels, prior_samples=prior.float())
    assert total.item() == pytest.approx((loss.base(e, labels) + 0.1 * loss.regulariser(e, prior.float())).item(),
                                         rel=1e-6)


def _s2sd_inputs(dims, b=8, d=4, feat=12):
    torch.manual_seed(2)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])[:b]
    emb = nn.functional.normalize(torch.randn(b, d), dim=1).requires_grad_()
    aux = {f"s2sd_{j}": nn.functional.normalize(torch.randn(b, k), dim=1).requires_grad_() for j, k in enumerate(dims)}
    return emb, labels, aux, torch.randn(b, feat)


def test_s2sd_equals_base_plus_targets_plus_distillation():
    dims = (6, 10)
    loss = create_loss("s2sd", num_classes=4, embedding_size=4, base="cosface", target_dims=dims, weight=3.0,
                       feature_weight=2.0)
    emb, labels, aux, feats = _s2sd_inputs(dims)
    total = loss(emb, labels, aux=aux, features=feats)
    # ooDML's criteria/s2sd.py: (source + mean of the target losses) / 2 + w * mean of the distillations
    targets = [tl(aux[f"s2sd_{j}"], labels) for j, tl in enumerate(loss.target_losses)]
    kls = [similarity_distillation(emb, aux[f"s2sd_{j}"]) for j in range(len(dims))]
    expected = (loss.base(emb, labels) + sum(targets) / 2) / 2 + 3.0 * sum(kls) / 2
    expected = expected + 2.0 * similarity_distillation(emb, nn.functional.normalize(feats, dim=1))
    assert total.item() == pytest.approx(expected.item(), rel=1e-6)
    # each target head has its own proxies of its own size
    assert [tl.loss.W.shape[0] for tl in loss.target_losses] == [6, 10]


def test_s2sd_distillation_does_not_train_the_targets():
    dims = (6,)
    loss = create_loss("s2sd", num_classes=4, embedding_size=4, base="cosface", target_dims=dims,
                       feature_weight=0.0)
    emb, labels, aux, _ = _s2sd_inputs(dims)
    class Silent(nn.Module):  # the target head's own loss switched off: only base + distillation remain
        def forward(self, e, labels):
            return e.sum() * 0.0

    loss.target_losses[0] = Silent()
    loss(emb, labels, aux=aux).backward()
    assert aux["s2sd_0"].grad.abs().max() == 0  # only the base and the distillation remain: teacher detached
    assert emb.grad.abs().max() > 0


def test_s2sd_missing_heads_error():
    loss = create_loss("s2sd", num_classes=4, embedding_size=4, target_dims=(6,))
    emb, labels, _, _ = _s2sd_inputs((6,))
    with pytest.raises(ValueError, match="s2sd_0"):
        loss(emb, labels)


def _brute_shared(emb, labels):
    out = []
    for i in range(len(labels)):
        others = [j for j in range(len(labels)) if labels[j] != labels[i]]
        if not others:
            continue
        d = {j: float((emb[i] - emb[j]).norm()) for j in others}
        p, n = min(d, key=d.get), max(d, key=d.get)
        if p != n:
            out.append((i, p, n))
    return out


def _brute_intra(emb, labels):
    out = []
    for i in range(len(labels)):
        same = [j for j in range(len(labels)) if labels[j] == labels[i] and j != i]
        if len(same) < 2:
            continue
        d = {j: float((emb[i] - emb[j]).norm()) for j in same}
        out.append((i, min(d, key=d.get), max(d, key=d.get)))
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_diva_miners_match_brute_force(seed):
    torch.manual_seed(seed)
    labels = torch.tensor([0, 0, 0, 1, 1, 1, 1, 2, 3, 3])
    emb = torch.randn(10, 5)
    for miner, brute in ((DiVALoss.shared_triplets, _brute_shared), (DiVALoss.intra_triplets, _brute_intra)):
        a, p, n = miner(emb, labels)
        assert list(zip(a.tolist(), p.tolist(), n.tolist())) == brute(emb, labels)


def test_diva_total_and_decorrelation_directions():
    torch.manual_seed(3)
    loss = create_loss("diva", num_classes=3, embedding_size=4, base="cosface", decorrelation=1.0)
    labels = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2])
    emb = nn.functional.normalize(torch.randn(9, 4), dim=1).requires_grad_()
    aux = {h: nn.functional.normalize(torch.randn(9, 4), dim=1).requires_grad_() for h in DiVALoss.HEADS}
    views = nn.functional.normalize(aux["selfsup"].detach() + 0.1 * torch.randn(9, 4), dim=1)
    total = loss(emb, labels, aux=aux, views=views)
    trip = loss.triplet
    ids = torch.arange(9)
    expected = (loss.base(emb, labels)
                + 0.3 * trip(aux["shared"], labels, DiVALoss.shared_triplets(aux["shared"], labels))
                + 0.3 * trip(aux["intra"], labels, DiVALoss.intra_triplets(aux["intra"], labels))
                + 0.3 * loss.ntxent(torch.cat([aux["selfsup"], views]), torch.cat([ids, ids]))
                + loss.decorrelation_loss(emb, aux))
    assert total.item() == pytest.approx(expected.item(), rel=1e-6)
    # decorrelation alone: the projector *raises* the agreement (descent on -agreement), the embeddings get
    # the reversed gradient, i.e. a gradient step on them lowers it
    emb.grad = None
    loss.zero_grad()
    dec = loss.decorrelation_loss(emb, aux)
    dec.backward()
    with torch.no_grad():
        moved = emb - 0.05 * emb.grad
        assert loss.decorrelation_loss(moved, aux).item() > dec.item()
        for p in loss.projectors.parameters():
            p -= 0.05 * p.grad
        assert loss.decorrelation_loss(emb, aux).item() < dec.item()


def test_diva_decorrelation_projects_each_auxiliary_head_onto_the_main_embedding():
    """ooDML's adversarial_separation: -mean over items of the mean over dimensions of (normalise(g_h(aux_h)) *
    normalise(main))^2, summed over the three heads."""
    torch.manual_seed(5)
    loss = create_loss("diva", num_classes=3, embedding_size=4)
    emb = torch.randn(6, 4)
    aux = {h: torch.randn(6, 4) for h in DiVALoss.HEADS}
    expected = 0.0
    for h in DiVALoss.HEADS:
        with torch.no_grad():   # the projectors' weights require grad; the expected value needs none
            src = nn.functional.normalize(loss.projectors[h](aux[h]), dim=-1)
        tgt = nn.functional.normalize(emb, dim=-1)
        expected -= sum(float(((src[i] * tgt[i]) ** 2).sum()) / 4 for i in range(6)) / 6
    assert loss.decorrelation_loss(emb, aux).item() == pytest.approx(expected, rel=1e-5)


def test_diva_decorrelation_gradcheck():
    torch.manual_seed(4)
    loss = create_loss("diva", num_classes=3, embedding_size=3).double()
    emb = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    aux = {h: torch.randn(4, 3, dtype=torch.float64) for h in DiVALoss.HEADS}
    _assert_reversed_gradcheck(lambda e: loss.decorrelation_loss(e, aux), emb)


def test_diva_needs_views_unless_selfsup_off():
    loss = create_loss("diva", num_classes=3, embedding_size=4)
    labels = torch.tensor([0, 0, 1, 1])
    emb = nn.functional.normalize(torch.randn(4, 4), dim=1)
    aux = {h: nn.functional.normalize(torch.randn(4, 4), dim=1) for h in DiVALoss.HEADS}
    with pytest.raises(ValueError, match="views"):
        loss(emb, labels, aux=aux)
    off = create_loss("diva", num_classes=3, embedding_size=4, alpha_selfsup=0.0)
    assert math.isfinite(off(emb, labels, aux=aux).item())
    with pytest.raises(ValueError, match="shared"):
        off(emb, labels)


def test_models_build_the_heads_the_losses_need():
    x = torch.randn(3, 3, 32, 32)
    m = create_model("vit_tiny_uml", "full", embed_dim=8, aux_heads=aux_heads_for("s2sd", target_dims=(16, 32)))
    out = m.forward_train(x)
    assert {k: v.shape[1] for k, v in out["aux"].items()} == {"s2sd_0": 16, "s2sd_1": 32}
    assert m(x).shape == (3, 8)  # evaluation: the main embedding only
    d = create_model("vit_tiny_uml", "full", embed_dim=8, aux_heads=aux_heads_for("diva", 8), eval_concat_aux=True)
    e = d(x)
    assert e.shape == (3, 32) and torch.allclose(e.norm(dim=1), torch.ones(3))
    with pytest.raises(ValueError, match="base"):
        create_loss("s2sd", embedding_size=4, base="diva")


def _lg(mode, lang, d):
    from umlkit.losses import LanguageGuidanceLoss
    return LanguageGuidanceLoss(lang, mode=mode, embedding_size=d)


def test_language_guidance_devise_hand_value():
    d = 3
    lang = nn.functional.normalize(torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]]), dim=1)
    loss = _lg("devise", lang, d)
    with torch.no_grad():  # make the MLP the identity: relu(x) - relu(-x) = x
        loss.projection[0].weight.copy_(torch.cat([torch.eye(d), -torch.eye(d)]))
        loss.projection[0].bias.zero_()
        loss.projection[2].weight.copy_(torch.cat([torch.eye(d), -torch.eye(d)], dim=1))
        loss.projection[2].bias.zero_()
    x = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 2.0]])
    labels = torch.tensor([0, 1])
    cos0 = 1 / math.sqrt(2)              # (1,1,0)/sqrt2 . (1,0,0)
    cos1 = 1 / math.sqrt(2)              # (0,0,1) . (0,1,1)/sqrt2
    assert loss(x, labels).item() == pytest.approx(1 - (cos0 + cos1) / 2, rel=1e-6)


def test_language_guidance_clip_hand_value():
    lang = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    loss = _lg("clip", lang, 2)
    with torch.no_grad():
        loss.projection.weight.copy_(torch.eye(2))
    x = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    labels = torch.tensor([0, 1])
    t = 0.07
    c = 1 / math.sqrt(2)
    logits = torch.tensor([[1.0, 0.0], [c, c]]) / t   # rows: images, columns: class-language embeddings
    row = -torch.log_softmax(logits, 1).diagonal().mean()
    col = -torch.log_softmax(logits.T, 1).diagonal().mean()
    assert loss(x, labels).item() == pytest.approx(0.5 * (row + col).item(), rel=1e-5)
