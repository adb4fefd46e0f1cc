"""The shipped tiny-ViT weights: recorded sha256, size limit, offline loading through timm's registry."""
import torch

from umlkit.models import create_model
from umlkit.models.backbones import TINY_WEIGHTS
from umlkit.models.pretrain import TINY_HEADS, TINY_SHA, class_logits, class_names, load_heads, sha256


def test_sha256_and_size():
    recorded = dict(reversed(line.split()) for line in TINY_SHA.read_text().splitlines())
    assert recorded[TINY_WEIGHTS.name] == sha256(TINY_WEIGHTS)
    assert recorded[TINY_HEADS.name] == sha256(TINY_HEADS)
    assert TINY_WEIGHTS.stat().st_size <= 10 * 2 ** 20


def test_pretrained_loads_offline_and_differs_from_random():
    from safetensors.torch import load_file
    m = create_model("vit_tiny_uml", "zero_shot", pretrained=True)
    state = load_file(str(TINY_WEIGHTS))
    assert torch.equal(m.backbone.vit.pos_embed if hasattr(m.backbone, "vit") else m.backbone.pos_embed,
                       state["pos_embed"])
    r = create_model("vit_tiny_uml", "zero_shot", pretrained=False)
    x = torch.randn(2, 3, 32, 32)
    assert not torch.allclose(m(x), r(x))


def test_named_class_head():
    heads = load_heads()
    feats = torch.randn(3, heads["shape"].in_features)
    logp = class_logits({k: h(feats) for k, h in heads.items()})
    assert logp.shape == (3, 320) and torch.allclose(logp.exp().sum(1), torch.ones(3), atol=1e-5)
    assert class_names()[0] == "red plain disc" and len(set(class_names())) == 320
