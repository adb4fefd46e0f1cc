"""Language guidance's ablation terms (Table 4's ViT Prediction, Mining mask, Weight scaling; Table S3's Multi and
Dense) and the WordNet name similarities of the word-hierarchy rows, against brute-force loops and nltk."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from umlkit.losses import (
    LanguageGuidanceLoss,
    LanguageMultiSimilarityLoss,
    LanguageSlotGuidanceLoss,
    LanguageTokenPredictionLoss,
    create_loss,
)


def _batch(seed=0, n=12, d=8, classes=4, k=3, dl=6):
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(n, d, generator=g)
    labels = torch.arange(n) % classes
    lang = torch.randn(classes, k, dl, generator=g)
    return emb, labels, lang


def test_one_kl_per_slot_is_the_mean_of_single_slot_losses():
    emb, labels, lang = _batch()
    multi = LanguageSlotGuidanceLoss(lang)(emb, labels)
    singles = [LanguageGuidanceLoss(lang[:, j])(emb, labels) for j in range(lang.shape[1])]
    assert torch.allclose(multi, torch.stack(singles).mean(), atol=1e-6)
    # one slot: exactly the row-wise KL of Eq. 2; several: not the KL of the slot-averaged similarity
    assert torch.allclose(LanguageSlotGuidanceLoss(lang[:, :1])(emb, labels), singles[0], atol=1e-7)
    assert not torch.allclose(multi, LanguageGuidanceLoss(lang)(emb, labels), atol=1e-4)


def _ms_loop(emb, labels, lang, use, alpha, beta, base=0.5, eps=0.1, nu1=0.5, nu=0.75):
    """Multi-Similarity with language mining (Eq. S1-S2) or scales (Eq. S3), one anchor and one pair at a time."""
    x = torch.nn.functional.normalize(emb.double(), dim=1)
    lg = torch.nn.functional.normalize(lang.double(), dim=-1)
    n, total = len(labels), 0.0
    for i in range(n):
        pos = [j for j in range(n) if j != i and labels[j] == labels[i]]
        neg = [j for j in range(n) if labels[j] != labels[i]]
        s = {j: float(x[i] @ x[j]) for j in range(n)}
        sl = {j: float((lg[labels[i]] * lg[labels[j]]).sum(-1).mean()) for j in range(n)}
        hn, hp = max(s[j] for j in neg), min(s[j] for j in pos)
        score = {j: ((1 - nu1) * sl[j] + nu1 * s[j]) if use == "mining" else s[j] for j in range(n)}
        scale = {j: (min(max(((1 + sl[j]) / 2) / ((1 + s[j]) / 2), 1e-3), 1e3) ** nu if use == "scaling" else 1.0)
                 for j in range(n)}
        p = sum(math.exp(-alpha * scale[j] * (s[j] - base)) for j in pos if score[j] - eps < hn)
        q = sum(math.exp(beta * scale[j] * (s[j] - base)) for j in neg if score[j] + eps > hp)
        total += math.log1p(p) / alpha + math.log1p(q) / beta
    return total / n


@pytest.mark.parametrize("use,alpha,beta", [("mining", 2.0, 40.0), ("scaling", 1.5, 45.0)])
def test_language_multisimilarity_matches_a_loop(use, alpha, beta):
    emb, labels, lang = _batch(seed=3, n=16)
    loss = LanguageMultiSimilarityLoss(lang, use=use)
    assert (loss.alpha, loss.beta) == (alpha, beta)
    got = float(loss(emb.double(), labels))
    assert got == pytest.approx(_ms_loop(emb, labels, lang, use, alpha, beta), rel=1e-6)  # fp32 language rows


def test_language_mining_with_image_weight_one_is_pml_multisimilarity():
    """nu1 = 1 leaves the language out of the mining rule: PML's MultiSimilarityLoss with its miner, per anchor."""
    from pytorch_metric_learning import losses, miners
    emb, labels, lang = _batch(seed=5, n=16)
    ours = LanguageMultiSimilarityLoss(lang, use="mining", nu1=1.0)(emb.double(), labels)
    pml = losses.MultiSimilarityLoss(alpha=2, beta=40, base=0.5)
    mined = miners.MultiSimilarityMiner(epsilon=0.1)(emb.double(), labels)
    assert float(ours) == pytest.approx(float(pml(emb.double(), labels, mined)), rel=1e-6)


def test_language_mining_keeps_a_negative_the_images_alone_would_drop():
    """Two tight classes on opposite sides: the images mine no negative (cosine -0.9 is far below the hardest
    positive's 0.9 - epsilon); with language rows that agree (cosine 1) and nu1 = 0.1 the interpolated score is
    0.81 > 0.8, so the negatives enter the loss; with opposite rows they stay out."""
    t = math.acos(0.9)
    emb = torch.tensor([[1.0, 0.0], [math.cos(t), math.sin(t)], [-1.0, 0.0], [-math.cos(t), -math.sin(t)]])
    labels = torch.tensor([0, 0, 1, 1])
    row = torch.tensor([[1.0, 0.0, 0.0]])
    far = LanguageMultiSimilarityLoss(torch.stack([row, -row]), use="mining", nu1=0.1)(emb, labels)
    near = LanguageMultiSimilarityLoss(torch.stack([row, row]), use="mining", nu1=0.1)(emb, labels)
    images_only = LanguageMultiSimilarityLoss(torch.stack([row, row]), use="mining", nu1=1.0)(emb, labels)
    assert float(far) == pytest.approx(float(images_only))
    negative = math.log1p(2 * math.exp(40 * (-0.9 - 0.5))) / 40
    assert float(near) == pytest.approx(float(far) + negative, rel=1e-5)


def _tiny_model():
    from umlkit.models import create_model
    return create_model("vit_tiny_uml", "full", embed_dim=16)


def test_token_prediction_reads_the_last_feature_map_and_trains_the_backbone():
    torch.manual_seed(0)
    model = _tiny_model()
    lang = torch.randn(3, 10)
    loss = create_loss("language_token_prediction", num_classes=3, embedding_size=16, language_embeddings=lang,
                       feature_width=96)
    with pytest.raises(RuntimeError, match="attach_model"):
        loss(torch.randn(4, 16), torch.tensor([0, 1, 2, 0]))
    loss.attach_model(model)
    x, y = torch.randn(4, 3, 32, 32), torch.tensor([0, 1, 2, 0])
    out = model.forward_train(x, y)
    value = loss(out["embeddings"], y)
    # by hand: the last block's tokens, the query in front, the encoder, the projection, 1 - cosine
    tokens = model.backbone.vit.forward_features(x)          # timm's own pass: the normed token sequence
    seq = torch.cat([loss.query.expand(4, -1, -1), tokens], dim=1)
    pred = torch.nn.functional.normalize(loss.out(loss.encoder(seq)[:, 0]), dim=1)
    want = (1 - (pred * torch.nn.functional.normalize(lang[y], dim=1)).sum(1)).mean()
    assert torch.allclose(value, want, atol=1e-5)
    value.backward()
    assert model.backbone.vit.blocks[0].attn.qkv.weight.grad.abs().sum() > 0
    assert loss.query.grad is not None


def test_the_training_step_attaches_a_term_that_reads_the_model():
    from umlkit.train.engine import _TrainStep
    model = _tiny_model()
    term = LanguageTokenPredictionLoss(torch.randn(3, 10), feature_width=96)
    step = _TrainStep(model, torch.nn.ModuleList([term]), [1.0], world_size=1)
    value = step(torch.randn(4, 3, 32, 32), torch.tensor([0, 1, 2, 1]))
    assert torch.isfinite(value) and value.requires_grad


def _kl_by_hand(emb, labels, s_lang):
    """Eq. 2 with the official shift (1), overwrite and backward direction, for a given language similarity."""
    x = torch.nn.functional.normalize(emb, dim=1)
    same = labels[:, None] == labels[None, :]
    img = torch.where(same, torch.tensor(2.0), x @ x.T)
    lang = torch.where(same, torch.tensor(2.0), s_lang + 1.0)
    return torch.nn.functional.kl_div(torch.log_softmax(lang, 1), torch.log_softmax(img, 1), log_target=True,
                                      reduction="sum") / len(labels)


def test_dense_pairs_every_slot_with_every_slot():
    """Supp. B.3 and its footnote 7: Dense uses the similarity of each of the k^2 slot pairings, regardless of order,
    averaged into one target; Dense + Multi distils each pairing's matrix in a KL of its own."""
    emb, labels, lang = _batch(seed=11)
    unit = torch.nn.functional.normalize(lang, dim=-1)[labels]                       # (B, k, d)
    k = lang.shape[1]
    matrices = [unit[:, i] @ unit[:, j].T for i in range(k) for j in range(k)]
    assert len(matrices) == k * k
    dense = LanguageSlotGuidanceLoss(lang, pairing="all", one_kl=True)(emb, labels)
    assert torch.allclose(dense, _kl_by_hand(emb, labels, torch.stack(matrices).mean(0)), atol=1e-6)
    both = LanguageSlotGuidanceLoss(lang, pairing="all")(emb, labels)
    assert torch.allclose(both, torch.stack([_kl_by_hand(emb, labels, m) for m in matrices]).mean(), atol=1e-6)
    # aligned pairs in one KL: PLG itself
    plg = LanguageSlotGuidanceLoss(lang, one_kl=True)(emb, labels)
    assert torch.allclose(plg, LanguageGuidanceLoss(lang)(emb, labels), atol=1e-6)
    with pytest.raises(ValueError, match="pairing"):
        LanguageSlotGuidanceLoss(lang, pairing="diagonal")


# ------------------------------------------------------------------------------------------------ WordNet
wn_names = pytest.importorskip("umlkit.experiments.papers.language_guidance.wordnet_names")


def test_without_the_database_the_error_names_the_package(tmp_path, monkeypatch):
    monkeypatch.setenv("UMLKIT_WORDNET", str(tmp_path))
    with pytest.raises(wn_names.WordNetMissing, match="wordnet-base"):
        wn_names.wordnet()
    assert not wn_names.available()


def test_unit_embeddings_reproduce_a_positive_similarity():
    rng = np.random.default_rng(0)
    v = rng.normal(size=(6, 3))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    emb, err = wn_names.unit_embeddings(v @ v.T)
    assert err < 1e-9 and np.allclose(emb @ emb.T, v @ v.T, atol=1e-9)


needs_wordnet = pytest.mark.skipif(not wn_names.available(), reason="WordNet 3.0 (wordnet-base) is not installed")


@needs_wordnet
def test_names_map_to_their_head_noun_and_colours():
    wn = wn_names.wordnet()
    assert wn_names.name_synsets("Purple bird with a yellow head") == [wn.synset("bird.n.01"),
                                                                       wn.synset("purple.n.01"),
                                                                       wn.synset("yellow.n.01")]
    assert [x.name() for x in wn_names.name_synsets("Laysan Albatross")] == [wn.synsets("albatross", "n")[0].name()]
    assert wn_names.name_synsets("Qwzx") == []


@needs_wordnet
def test_wu_palmer_of_names_is_nltks_best_match_mean():
    wn = wn_names.wordnet()
    names = ["Amber bird with a cobalt head", "Large Striped Square", "red plain ring"]
    s = wn_names.similarity_matrix(names, "wup")
    a, b = wn_names.name_synsets(names[0]), wn_names.name_synsets(names[2])
    best = [max(x.wup_similarity(y) for y in b) for x in a], [max(y.wup_similarity(x) for x in a) for y in b]
    assert s[0, 2] == pytest.approx(0.5 * (np.mean(best[0]) + np.mean(best[1])))
    assert np.allclose(np.diag(s), 1) and np.allclose(s, s.T)
    one = wn_names.similarity_matrix(["square", "ring"], "wup")
    assert one[0, 1] == pytest.approx(wn.synsets("square", "n")[0].wup_similarity(wn.synsets("ring", "n")[0]))


@needs_wordnet
def test_hierarchy_similarity_is_one_minus_the_lcs_height_over_the_root_height():
    wn = wn_names.wordnet()
    names = ["square", "ring", "bird"]
    s = wn_names.similarity_matrix(names, "hierarchy")
    syn = [wn.synsets(n, "n")[0] for n in names]
    heights = {}
    for x in syn:   # the induced tree by hand: a node's longest distance down to one of the names
        for path in x.hypernym_paths():
            for depth, node in enumerate(path):
                heights[node] = max(heights.get(node, 0), len(path) - 1 - depth)
    top = max(heights.values())
    lcs = syn[0].lowest_common_hypernyms(syn[1])
    assert s[0, 1] == pytest.approx(1 - max(heights[c] for c in lcs) / top)
    assert 0 <= s.min() and s.max() <= 1


def test_reading_the_wordnet_rows_needs_no_wordnet(tmp_path, monkeypatch):
    """Without the database (an empty UMLKIT_WORDNET) the stored language files of the WordNet rows are still found:
    their identity names WordNet's version, not its bytes, so the book builds from the records."""
    from pathlib import Path

    from umlkit.experiments.papers.language_guidance.language_store import language_ref
    from umlkit.experiments.runs.records import read_only
    monkeypatch.setenv("UMLKIT_WORDNET", str(tmp_path))
    assert not wn_names.available()
    with read_only():
        for guidance, stem in (("WordNet", "cub-wordnet-"), ("HierMatch", "cub-wordnet-hierarchy-"),
                               ("PLG WordNet Top-5", "cub-pseudolabels-wordnet-")):
            assert Path(language_ref("cub", guidance, "quick")["file"]).name.startswith(stem)


def test_one_kl_per_matrix_and_one_kl_on_their_average_give_the_same_gradient():
    """With the official direction (KL(P_img || P_lang), the language side held constant) the gradient of the mean
    of per-matrix KLs equals that of one KL on the averaged similarity: each matrix's log-softmax differs from the
    average's by a constant per row, which a softmax's gradient ignores. So Multi trains as PLG and Dense + Multi
    as Dense (up to rounding); the loss values differ."""
    emb, labels, lang = _batch(seed=13, n=16)
    grads, values = [], []
    for one_kl, pairing in ((True, "aligned"), (False, "aligned"), (True, "all"), (False, "all")):
        x = emb.double().clone().requires_grad_(True)
        value = LanguageSlotGuidanceLoss(lang.double(), pairing=pairing, one_kl=one_kl)(x, labels)
        grads.append(torch.autograd.grad(value, x)[0])
        values.append(float(value))
    assert torch.allclose(grads[0], grads[1], atol=1e-12) and torch.allclose(grads[2], grads[3], atol=1e-12)
    assert values[0] != pytest.approx(values[1]) and not torch.allclose(grads[0], grads[2], atol=1e-6)
