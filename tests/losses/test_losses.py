import math

import pytest
import torch
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning import miners as pml_miners

from umlkit.losses import (
    LOSSES,
    CurricularFaceLoss,
    ExternalProxyAnchorLoss,
    HypLoss,
    LanguageGuidanceLoss,
    aux_heads_for,
    create_loss,
    loss_table,
    poincare_distance_matrix,
    to_poincare,
)

pytestmark = pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")


def _batch(n_classes=4, per_class=2, dim=8, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.nn.functional.normalize(torch.randn(n_classes * per_class, dim, generator=g, dtype=dtype), dim=1)
    return x, torch.arange(n_classes).repeat_interleave(per_class)


def _unit(deg):
    r = math.radians(deg)
    return torch.tensor([[math.cos(r), math.sin(r)]], dtype=torch.float64)


# ------------------------------------------------------------------------------------------ hand-computed values
def test_curricularface_hand_example():
    loss = CurricularFaceLoss(2, 2, margin=0.3, scale=32.0).double().eval()
    with torch.no_grad():
        loss.proxies.copy_(torch.eye(2, dtype=torch.float64))
        loss.t.fill_(0.5)
    # easy sample at 30 deg of class 0: target cos(30+m), no hard negative
    target = math.cos(math.radians(30) + 0.3)
    want = -math.log(math.exp(32 * target) / (math.exp(32 * target) + math.exp(32 * 0.5)))
    assert float(loss(_unit(30), torch.tensor([0]))) == pytest.approx(want, rel=1e-9)
    # sample at 60 deg of class 0: class 1 (cos 0.866) beats cos(60 + m) -> hard negative cos * (t + cos)
    c1 = math.cos(math.radians(30))
    target = math.cos(math.radians(60) + 0.3)
    hard = c1 * (0.5 + c1)
    want = -math.log(math.exp(32 * target) / (math.exp(32 * target) + math.exp(32 * hard)))
    assert float(loss(_unit(60), torch.tensor([0]))) == pytest.approx(want, rel=1e-9)


def test_curricularface_t_updates():
    per_class = CurricularFaceLoss(3, 2).double()
    with torch.no_grad():
        per_class.proxies.copy_(torch.tensor([[1.0, 0], [0, 1], [-1, 0]], dtype=torch.float64))
    x = torch.cat([_unit(0), _unit(60), _unit(90)])
    per_class(x, torch.tensor([0, 0, 1]))
    # class 0: mean target (1 + 0.5) / 2 = 0.75 -> 0.01 * 0.75; class 1: 0.01 * 1; class 2 untouched
    assert per_class.t.tolist() == pytest.approx([0.0075, 0.01, 0.0])
    glob = CurricularFaceLoss(3, 2, t_mode="global").double()
    with torch.no_grad():
        glob.proxies.copy_(per_class.proxies)
    glob(x, torch.tensor([0, 0, 1]))
    assert glob.t.tolist() == pytest.approx([0.01 * (1 + 0.5 + 1) / 3])


@pytest.mark.parametrize("normalisation", ["vptsp", "original"])
def test_external_proxy_anchor_hand(normalisation):
    loss = ExternalProxyAnchorLoss(alpha=32, delta=0.1, normalisation=normalisation)
    x = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    proxies = torch.eye(2, dtype=torch.float64)
    pos0 = math.log1p(math.exp(-32 * 0.9))
    neg1 = math.log1p(math.exp(32 * 0.1))
    want = pos0 / 2 + neg1 / 2 if normalisation == "vptsp" else pos0 / 1 + neg1 / 2
    assert float(loss(x, torch.tensor([0]), proxies)) == pytest.approx(want, rel=1e-9)


def test_external_proxy_anchor_equals_pml_with_original_normalisation():
    x, y = _batch(5, 3, 16, seed=1)
    pml = pml_losses.ProxyAnchorLoss(num_classes=7, embedding_size=16, margin=0.1, alpha=32)
    ours = ExternalProxyAnchorLoss(alpha=32, delta=0.1, normalisation="original")
    assert float(ours(x, y, pml.proxies.detach())) == pytest.approx(float(pml(x, y)), rel=1e-5)


def test_hyp_distance_and_loss_by_hand():
    c = 0.1
    x = torch.tensor([[0.3, -0.4], [1.0, 0.5]], dtype=torch.float64)
    # distance from the origin: 2/sqrt(c) artanh(sqrt(c) |x|)
    d0 = poincare_distance_matrix(torch.zeros(1, 2, dtype=torch.float64), x, c)
    want = [2 / math.sqrt(c) * math.atanh(math.sqrt(c) * float(v.norm())) for v in x]
    # the official hyptorch offsets the Möbius denominator by 1e-5 (umlkit follows it): within 2e-5 of the textbook
    assert d0[0].tolist() == pytest.approx(want, rel=2e-5)

    def mobius_dist(u, v):  # the textbook formula, one pair at a time
        mu = -u
        num = (1 + 2 * c * (mu @ v) + c * (v @ v)) * mu + (1 - c * (mu @ mu)) * v
        den = 1 + 2 * c * (mu @ v) + c * c * (mu @ mu) * (v @ v) + 1e-5   # hyptorch's offset
        return 2 / math.sqrt(c) * math.atanh(math.sqrt(c) * float((num / den).norm()))

    d = poincare_distance_matrix(x, x.flip(0), c)
    assert d[0, 0] == pytest.approx(mobius_dist(x[0], x[1]))
    # loss: 2 classes x 2 views; view i picks its own class among view j and the other samples of view i
    emb = torch.tensor([[0.5, 0.1], [-0.2, 0.6], [0.45, 0.2], [-0.3, 0.5]], dtype=torch.float64)
    labels = torch.tensor([0, 1, 0, 1])
    z = to_poincare(emb, c, 2.3)
    views = [z[[0, 1]], z[[2, 3]]]
    total = 0.0
    for i, j in ((0, 1), (1, 0)):
        for a in range(2):
            pos = -mobius_dist(views[i][a], views[j][a]) / 0.2
            others = [-mobius_dist(views[i][a], views[j][b]) / 0.2 for b in range(2) if b != a]
            others += [-mobius_dist(views[i][a], views[i][b]) / 0.2 for b in range(2) if b != a]
            total += -pos + math.log(math.exp(pos) + sum(math.exp(o) for o in others))
    want = total / 2 / 2  # mean over the 2 samples, then over the 2 ordered view pairs
    assert float(HypLoss(c=c, clip_r=2.3, tau=0.2)(emb, labels)) == pytest.approx(want, rel=1e-6)
    # PUMA's SupCon divides the same sum by k^2 = 4 loop steps instead of k(k-1) = 2
    assert float(HypLoss(c=c, clip_r=2.3, tau=0.2, divisor="all_pairs")(emb, labels)) == pytest.approx(want / 2,
                                                                                                        rel=1e-6)


def test_language_guidance_hand_example():
    x = torch.cat([_unit(0), _unit(60)])
    lang = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)  # orthogonal class names: cosine 0
    loss = LanguageGuidanceLoss(lang).double()
    s_img = [[2.0, 0.5], [0.5, 2.0]]
    s_lang = [[2.0, 1.0], [1.0, 2.0]]  # 0 + shift 1; diagonal 1 + shift
    kl = 0.0
    for row_i, row_l in zip(s_img, s_lang):
        p = [math.exp(v) / sum(math.exp(u) for u in row_i) for v in row_i]
        q = [math.exp(v) / sum(math.exp(u) for u in row_l) for v in row_l]
        kl += sum(pi * math.log(pi / qi) for pi, qi in zip(p, q))  # KL(P_img || P_lang)
    assert float(loss(x, torch.tensor([0, 1]))) == pytest.approx(kl / 2, rel=1e-9)
    # same class: both rows become constant -> no signal
    assert float(loss(x, torch.tensor([0, 0]))) == pytest.approx(0.0, abs=1e-12)
    # PLG: k slots averaged
    plg = LanguageGuidanceLoss(torch.stack([lang, lang.flip(1)], dim=1)).double()  # slot 2 swaps the axes
    s_img_plg, s_lang_plg = plg.similarities(x, torch.tensor([0, 1]))
    assert float(s_lang_plg[0, 1]) == pytest.approx(1.0)  # both slots orthogonal -> 0 + shift
    assert torch.allclose(s_img_plg, torch.tensor(s_img, dtype=torch.float64))


def test_language_guidance_per_sample_rows_by_index():
    """Per-image rows are looked up by the images' indices: each image carrying its class's row gives the class-level
    loss; errors name what is missing or out of range."""
    lang = torch.nn.functional.normalize(torch.randn(3, 4, generator=torch.Generator().manual_seed(0)), dim=1)
    x, y = _batch(3, 2, 5, seed=3)
    images = torch.tensor([2, 0, 1, 1, 0, 2, 1, 2])   # the class of each of 8 training images
    batch = torch.tensor([1, 4, 2, 3, 0, 5])          # training-set indices of the batch, with these labels
    assert torch.equal(images[batch], y)
    per = LanguageGuidanceLoss(lang[images], per_sample=True, num_classes=3)
    assert per.inputs == ("embeddings", "labels", "indices")
    assert torch.equal(per(x, y, indices=batch), LanguageGuidanceLoss(lang)(x, y))
    with pytest.raises(ValueError, match="needs indices"):
        per(x, y)
    with pytest.raises(ValueError, match=r"values in 0..7"):
        per(x, y, indices=batch + 5)
    with pytest.raises(ValueError, match="needs num_classes"):
        LanguageGuidanceLoss(lang[images], per_sample=True)


# --------------------------------------------------------------------------------------------------- gradcheck
def test_gradchecks():
    x, y = _batch(3, 2, 5, seed=2, dtype=torch.float64)
    x = x.clone().requires_grad_(True)
    cf = CurricularFaceLoss(3, 5).double().eval()
    assert torch.autograd.gradcheck(lambda e: cf(e, y), (x,))
    proxies = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    pa = ExternalProxyAnchorLoss()
    assert torch.autograd.gradcheck(lambda e, p: pa(e, y, p), (x, proxies))
    hyp = HypLoss()
    assert torch.autograd.gradcheck(lambda e: hyp(e, y), (x,))
    for mode in ("kl_rowwise", "row_l2", "full_kl"):
        for direction in ("backward", "forward"):
            lg = LanguageGuidanceLoss(torch.randn(3, 2, 6), mode=mode, direction=direction).double()
            assert torch.autograd.gradcheck(lambda e: lg(e, y), (x,)), (mode, direction)


# ------------------------------------------------------------------------------- PML-backed: the papers' settings
def _same(ours, theirs, x, y, seed=0):
    torch.manual_seed(seed)
    a = ours(x, y)
    torch.manual_seed(seed)
    b = theirs(x, y)
    assert float(a) == pytest.approx(float(b), rel=1e-6)


def test_pml_backed_configurations():
    x, y = _batch(6, 3, 16, seed=3)
    tri = create_loss("triplet")
    miner = pml_miners.TripletMarginMiner(margin=0.2, type_of_triplets="semihard")
    ref = pml_losses.TripletMarginLoss(margin=0.2)
    _same(tri, lambda e, y_: ref(e, y_, miner(e, y_)), x, y)

    ms = create_loss("multisimilarity")
    ms_miner = pml_miners.MultiSimilarityMiner(epsilon=0.1)
    ms_ref = pml_losses.MultiSimilarityLoss(alpha=2, beta=50, base=0.5)
    _same(ms, lambda e, y_: ms_ref(e, y_, ms_miner(e, y_)), x, y)

    margin = create_loss("margin", num_classes=6)
    assert margin.loss.beta.shape == (6,) and margin.loss.beta.requires_grad
    dw = pml_miners.DistanceWeightedMiner(cutoff=0.5, nonzero_loss_cutoff=1.4)
    m_ref = pml_losses.MarginLoss(margin=0.2, beta=1.2, learn_beta=True, num_classes=6)
    _same(margin, lambda e, y_: m_ref(e, y_, dw(e, y_)), x, y)

    for name, cls, kw in [("proxy_anchor", pml_losses.ProxyAnchorLoss, dict(margin=0.1, alpha=32)),
                          ("softtriple", pml_losses.SoftTripleLoss,
                           dict(centers_per_class=10, la=20, gamma=0.1, margin=0.01)),
                          ("cosface", pml_losses.CosFaceLoss, dict(margin=0.35, scale=64)),
                          ("arcface", pml_losses.ArcFaceLoss, dict(margin=28.64788975654116, scale=64))]:
        ours = create_loss(name, num_classes=6, embedding_size=16)
        ref = cls(num_classes=6, embedding_size=16, **kw)
        ref.load_state_dict(ours.loss.state_dict())
        _same(ours, ref, x, y)
        assert any(p.requires_grad for p in ours.parameters())  # proxies reach the optimizer


# --------------------------------------------------------------------------------------------------- robustness
_LANGUAGE = ("language_guidance", "language_guidance_slots", "language_multisimilarity", "language_token_prediction")
LABELLED = [n for n in LOSSES if n not in ("proxy_anchor_external", *_LANGUAGE)]


class _Tokens(torch.nn.Module):
    """A stand-in backbone whose last stage (``norm``) outputs three copies of each embedding as its tokens, so that
    the token-prediction term's gradient reaches the embeddings."""

    def __init__(self):
        super().__init__()
        self.blocks, self.norm = torch.nn.Identity(), torch.nn.Identity()

    def forward(self, x):
        return self.norm(x[:, None, :].repeat(1, 3, 1))


def _call(name, x, y, dim=8):
    if name == "proxy_anchor_external":
        return create_loss(name)(x, y, torch.randn(8, dim))
    if name == "language_token_prediction":
        loss, model = create_loss(name, language_embeddings=torch.randn(8, 6), feature_width=dim), _Tokens()
        loss.attach_model(model)
        if isinstance(x, torch.Tensor) and x.ndim == 2 and x.shape[0]:
            model(x)
        return loss(x, y)
    if name in _LANGUAGE:
        return create_loss(name, language_embeddings=torch.randn(8, 2, 6))(x, y)
    if name in ("s2sd", "diva"):  # auxiliary embeddings derived from x so the gradient reaches it
        extra = {"target_dims": (12, 16)} if name == "s2sd" else {}
        heads = aux_heads_for(name, dim, **extra)
        g = torch.Generator().manual_seed(1)
        aux = {k: torch.nn.functional.normalize(x.float() @ torch.randn(dim, d, generator=g), dim=-1).to(x.dtype)
               if x.ndim == 2 else x for k, (d, _) in heads.items()}
        views = aux.get("selfsup", x).detach() if name == "diva" else None
        return create_loss(name, num_classes=8, embedding_size=dim, **extra)(x, y, aux=aux, views=views)
    return create_loss(name, num_classes=8, embedding_size=dim)(x, y)


@pytest.mark.parametrize("name", list(LOSSES))
@pytest.mark.parametrize("case", ["fp16", "bf16", "all_same", "all_unique", "singleton"])
def test_degenerate_batches_stay_finite(name, case):
    x, y = _batch(4, 2, 8, seed=5)
    if case in ("fp16", "bf16"):
        x = x.to(torch.float16 if case == "fp16" else torch.bfloat16).requires_grad_(True)
    elif case == "all_same":
        y = torch.zeros_like(y)
    elif case == "all_unique":
        y = torch.arange(8)
    else:
        y = torch.tensor([0, 0, 1, 1, 2, 2, 3, 5])
    x = x.detach().requires_grad_(True)
    if name == "hyp" and case in ("all_unique", "singleton"):  # Hyp-ViT's pairs need k >= 2 views per class
        with pytest.raises(ValueError, match="same number"):
            _call(name, x, y)
        return
    out = _call(name, x, y)
    assert torch.isfinite(out)
    out.backward()
    assert x.grad is not None and bool(torch.isfinite(x.grad).all())


@pytest.mark.parametrize("name", list(LOSSES))
def test_bad_inputs(name):
    x, y = _batch(4, 2, 8)
    bad = x.clone()
    bad[0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        _call(name, bad, y)
    with pytest.raises(ValueError, match="labels must have shape"):
        _call(name, x, y[:5])
    with pytest.raises(ValueError, match="2-D"):
        _call(name, x[0], y)
    if name not in ("triplet", "multisimilarity", "hyp"):
        with pytest.raises(ValueError, match="labels must lie"):
            _call(name, x, y + 20)
    # uint8 / bool labels index as masks (uint8 gave CosFace 66.7 instead of 47.3 for the same classes); int32
    # failed inside one_hot or cross-entropy; a list failed on .ndim; an empty batch gave NaN
    for labels, message in ((y.to(torch.uint8), r"int64 class ids \(torch.long\), got torch.uint8; cast them"),
                            (y.int(), "got torch.int32"), (y > 0, "got torch.bool$"), (y.tolist(), "got list")):
        with pytest.raises(TypeError, match=message):
            _call(name, x, labels)
    with pytest.raises(ValueError, match="the batch is empty"):
        _call(name, x[:0], y[:0])


@pytest.mark.parametrize("name, typo", [("triplet", "margn"), ("multisimilarity", "alhpa"), ("margin", "betta"),
                                        ("r_margin", "roh"), ("proxy_anchor", "delta"), ("cosface", "scael"),
                                        ("arcface", "scale_")])
def test_a_misspelt_option_of_a_pml_loss_is_refused(name, typo):
    """The PML-backed builders named their options and swallowed the rest: a typo trained with the default."""
    with pytest.raises(TypeError, match=rf"loss '{name}': unknown option\(s\) \['{typo}'\]; it takes \w"):
        create_loss(name, num_classes=8, embedding_size=6, **{typo: 0.5})
    # the umlkit losses and SoftTriple pass their options to a class that refuses unknown ones
    for other in ("curricularface", "softtriple", "hyp"):
        with pytest.raises(TypeError):
            create_loss(other, num_classes=8, embedding_size=6, **{typo: 0.5})


def test_registry_and_table():
    with pytest.raises(ValueError, match="unknown loss"):
        create_loss("npair")
    with pytest.raises(ValueError, match="needs num_classes"):
        create_loss("proxy_anchor", embedding_size=8)
    table = loss_table()
    assert set(table.index) == set(LOSSES) | {"model_regularizer"} and table["source"].str.len().min() > 10
