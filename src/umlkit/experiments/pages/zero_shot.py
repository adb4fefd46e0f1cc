"""Zero-shot retrieval of the tiny ViT on UML-Mini: shipped pretraining vs the same ViT randomly initialised.

The issue's acceptance check for the quick-profile backbone: pretraining must help clearly, and the frozen
features must leave room for adaptation (R@1 well below 100 %).
"""
from __future__ import annotations

import pandas as pd
import torch

from umlkit.data import build_transforms, load_unified
from umlkit.data.mini import ensure_mini
from umlkit.models import create_model
from umlkit.train.evaluate import evaluate_model

__all__ = ["zero_shot_table"]


def zero_shot_table(root=None, seeds=(0,), metrics=("R@1",), backbones=None) -> pd.DataFrame:
    """Per-source, Unified and Harmonic R@1 (percent) of the frozen CLS feature: pretrained and random init
    (``seeds`` random initialisations, mean reported). ``backbones`` ({column: backbone name}) compares several
    pretrained tiny ViTs (default: the shipped ``vit_tiny_uml``), with the ``gain`` of each over random init."""
    root = ensure_mini(root)
    backbones = backbones or {"pretrained": "vit_tiny_uml"}
    cols = {}
    test = None
    for column, name in backbones.items():
        pre = create_model(name, "zero_shot", pretrained=True)
        if test is None:
            test = load_unified(root, "test", transform=build_transforms("mini", pre.data_config, train=False),
                                cache=True)
        cols[column] = evaluate_model(pre, test, metrics)[metrics[0]]
    rand = []
    for s in seeds:
        torch.manual_seed(s)
        rand.append(evaluate_model(create_model("vit_tiny_uml", "zero_shot", pretrained=False),
                                   test, metrics)[metrics[0]])
    cols["random init"] = sum(rand) / len(rand)
    out = pd.DataFrame(cols)
    for column in backbones:  # what pretraining adds over the random initialisation
        out[f"gain ({column})" if len(backbones) > 1 else "gain"] = out[column] - out["random init"]
    return out.round(1)
