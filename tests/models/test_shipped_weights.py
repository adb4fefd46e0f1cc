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


def test_v2_weights_recorded_and_every_head_learned():
    """The v2 backbone's heads read every generator attribute of fresh images (>= 80 %, the UML-Mini v2 target;
    period only on textured bodies and disc hue only where there is a disc, as the recipe masks them)."""
    import numpy as np

    from umlkit.data.mini import PRETRAIN_HEADS, pretraining_set
    from umlkit.models.backbones import TINY_WEIGHTS_V2, create_backbone
    from umlkit.models.pretrain import IGNORE, _to_input, observable_targets, weight_files
    files = weight_files("v2")
    assert files["weights"] == TINY_WEIGHTS_V2
    recorded = dict(reversed(line.split()) for line in TINY_SHA.read_text().splitlines())
    assert recorded[TINY_WEIGHTS_V2.name] == sha256(TINY_WEIGHTS_V2)
    assert recorded[files["heads"].name] == sha256(files["heads"])
    model = create_backbone("vit_tiny_uml_v2", pretrained=True).eval()
    heads = load_heads(files["heads"])
    images, targets, _ = pretraining_set(400, seed=99)
    targets = observable_targets(targets)
    with torch.no_grad():
        feats = model(_to_input(images))
        for k in PRETRAIN_HEADS:
            keep = targets[k] != IGNORE
            acc = (heads[k](feats[keep]).argmax(1).numpy() == targets[k][keep]).mean()
            assert acc >= 0.8, (k, acc)
    assert np.all(targets["period"][targets["texture"] == 0] == IGNORE)


def test_plateau_epoch_and_masking_by_hand():
    import numpy as np

    from umlkit.models.pretrain import IGNORE, observable_targets, plateau_epoch
    assert plateau_epoch([10, 5, 3, 2.99, 2.98]) == 3       # from epoch 3 on, never 1 % lower
    assert plateau_epoch([10, 5, 3, 2]) == 4
    t = {"texture": np.array([0, 1, 0]), "period": np.array([1, 0, 1]), "disc_pos": np.array([0, 2, 3]),
         "disc_hue": np.array([5, 6, 7])}
    m = observable_targets(t)
    assert m["period"].tolist() == [IGNORE, 0, IGNORE] and m["disc_hue"].tolist() == [IGNORE, 6, 7]
    assert t["period"].tolist() == [1, 0, 1]                # the input is not modified
