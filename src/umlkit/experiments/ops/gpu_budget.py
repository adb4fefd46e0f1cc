"""GPU-time estimates of full-profile runs, for planning a cluster submission (``umlkit plan``, the Slurm executor's
time limits and ``benchmarks/gpu_hours.py``).

A configuration is priced as

    training: epochs x training images / rate(method) x cost(backbone) / cost(ViT-S/16)
    evaluation: evaluations x test images / evaluation rate x cost(backbone) / cost(ViT-S/16)

with the real datasets' image counts (:data:`umlkit.data.datasets.DATASETS`; where a dataset documents only its
total, each part's share of it is its share of the classes; ``data.few_shot: k`` takes k images per training
class), the epoch pace measured on an NVIDIA H200 in bf16 (``benchmarks/results/full_epoch_h200.json``: PUMA's
Table 2 unified job 1,898 img/s, its full fine-tuning 2,177 img/s for every other method, evaluation 1,334 img/s
over 10,136 test images; ViT-S/16 at 224 px, batch 180), and a backbone's cost as its forward FLOPs per image
relative to ViT-S/16's. An estimate to plan a budget with, within about a factor of two, not a measurement.
"""
from __future__ import annotations

import math

__all__ = ["H200_RATES", "REFERENCE_BACKBONE", "images", "backbone_cost", "price", "gpu_seconds"]

H200_RATES = {"puma": 1898.3, "other": 2177.1, "eval": 10_136 / 7.6006}
REFERENCE_BACKBONE = "vit_s16_in21k_ft_in1k"
_COSTS: dict[str, float] = {}


def images(cfg: dict, part: str) -> int:
    """Training (``part="train"``) or test images of a configuration's sources in the real datasets."""
    from umlkit.data.datasets import DATASETS
    total = 0
    for src in cfg["data"]["datasets"]:
        spec = DATASETS[src]
        all_classes = sum(c for _, c in spec.counts.values())
        count = {p: n if n is not None else round(spec.total_images * c / all_classes)
                 for p, (n, c) in spec.counts.items()}
        if part == "train":
            k = cfg["data"].get("few_shot")
            total += count["train"] if not k else int(str(k).split(":")[-1]) * spec.counts["train"][1]
        else:
            total += sum(n for p, n in count.items() if p != "train")
    return total


def backbone_cost(name: str) -> float:
    """Forward GFLOPs of one image at the backbone's input size (random init; computed once per process)."""
    if name not in _COSTS:
        import torch
        from torch.utils.flop_counter import FlopCounterMode

        from umlkit.models.backbones import create_backbone
        model = create_backbone(name, pretrained=False).eval()
        size = model.pretrained_cfg.get("input_size", (3, 224, 224))[-1]
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            model(torch.randn(1, 3, size, size))
        _COSTS[name] = counter.get_total_flops() / 1e9
    return _COSTS[name]


def price(cfg: dict, rates: dict | None = None, reference: float | None = None) -> float:
    """GPU-seconds of one resolved full-profile configuration (``rates``: :data:`H200_RATES` by default)."""
    r = rates or H200_RATES
    reference = reference or backbone_cost(REFERENCE_BACKBONE)
    scale = backbone_cost(cfg["model"]["backbone"]) / reference
    epochs = int(cfg["train"]["epochs"]) if cfg["objective"] else 0
    train = epochs * images(cfg, "train") / (r["puma"] if cfg["model"]["method"] == "puma" else r["other"])
    evaluations = math.ceil(epochs / int(cfg["train"]["eval_every"])) if epochs else 1
    return (train + evaluations * images(cfg, "test") / r["eval"]) * scale


def gpu_seconds(key: dict) -> float:
    """GPU-seconds of a record key (the sum over its configurations: a specialists key holds one per source)."""
    from umlkit.experiments.ops.table_runs import configs_of
    return sum(price(cfg) for cfg in configs_of(key))
