"""Estimate: the GPU-hours each full-profile table needs, from one measured full-profile epoch.

Every job of every registered paper's full-profile job lists is read through its configurations (as
``tests/full`` reads them, on the tiny real-layout world, so that ooDML's split files resolve), and each
configuration is priced as

    training: epochs x training images / rate(method) x cost(backbone) / cost(ViT-S/16)
    evaluation: evaluations x test images / eval rate x cost(backbone) / cost(ViT-S/16)

* training images: the real dataset's training part (:data:`umlkit.data.datasets.DATASETS` counts; In-shop's query
  and gallery count as its test part) summed over the configuration's sources; ``data.few_shot: k`` (or
  ``published:k``) takes k images per training class; an ooDML split is priced as the standard split of its source
  (its training classes differ, their number is about the same);
* rate: the measured epoch pace on an NVIDIA H200 (``benchmarks/results/full_epoch_h200.json``: ViT-S/16 at 224 px,
  bf16, batch 180, 8 loader workers): PUMA's for ``puma``, full fine-tuning's for every other method (the step
  benchmark puts the others at 0.9-1.35x full fine-tuning's pace, so their hours are overstated by up to a third);
* cost(backbone): forward FLOPs of one 224-px image (``FlopCounterMode``), relative to ViT-S/16 (an estimate:
  small models do not use a GPU in proportion to their FLOPs);
* evaluation: ``ceil(epochs / eval_every)`` evaluations over the test images at the measured evaluation pace
  (all eight test sets of the epoch benchmark's world, embedding and retrieval together).

The output is an estimate to plan a budget with, within about a factor of two, not a measurement.

    python benchmarks/gpu_hours.py            # the table the README shows
"""
from __future__ import annotations

import json
import math
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
EPOCH_FILE = ROOT / "benchmarks" / "results" / "full_epoch_h200.json"
EVAL_IMAGES = 10_136   # the test images (In-shop: query + gallery) of the epoch benchmark's world, UML-Mini large


def rates() -> dict:
    """Training images/s per method class and evaluation images/s, from the measured epochs."""
    rows = {r["method"]: r for r in json.loads(EPOCH_FILE.read_text())["rows"]}
    ev = sum(r["eval_seconds"] for r in rows.values()) / len(rows)
    return {"puma": rows["puma"]["img_per_s"], "other": rows["full"]["img_per_s"], "eval": EVAL_IMAGES / ev}


def backbone_cost(name: str, cache: dict = {}) -> float:   # noqa: B006 - a per-process memo
    """Forward GFLOPs of one image at the backbone's input size (random init)."""
    if name not in cache:
        from torch.utils.flop_counter import FlopCounterMode

        from umlkit.models.backbones import create_backbone
        model = create_backbone(name, pretrained=False).eval()
        size = model.pretrained_cfg.get("input_size", (3, 224, 224))[-1]
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            model(torch.randn(1, 3, size, size))
        cache[name] = counter.get_total_flops() / 1e9
    return cache[name]


def images(cfg: dict, part: str) -> int:
    """Training (``part="train"``) or test images of a configuration's sources; where a dataset documents only its
    total (NABirds, Dogs, Flowers), each part's share of it is its share of the classes."""
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


def price(cfg: dict, r: dict, reference: float) -> float:
    """GPU-seconds of one configuration."""
    scale = backbone_cost(cfg["model"]["backbone"]) / reference
    epochs = int(cfg["train"]["epochs"]) if cfg["objective"] else 0
    train = epochs * images(cfg, "train") / (r["puma"] if cfg["model"]["method"] == "puma" else r["other"])
    evaluations = math.ceil(epochs / int(cfg["train"]["eval_every"])) if epochs else 1
    return (train + evaluations * images(cfg, "test") / r["eval"]) * scale


def main() -> None:
    sys.path.insert(0, str(ROOT))
    import tempfile

    from tests.full.world import full_jobs, make_world
    from umlkit.experiments.table_runs import configs_of
    mp = pytest.MonkeyPatch()
    make_world(Path(tempfile.mkdtemp(prefix="umlkit_gpu_hours_")), mp)
    r = rates()
    reference = backbone_cost("vit_s16_in21k_ft_in1k")
    hours, runs = defaultdict(float), defaultdict(int)
    for paper, jl, job in full_jobs():
        for cfg in configs_of(job[2]):
            hours[(paper, jl, job[0])] += price(cfg, r, reference) / 3600
            runs[(paper, jl, job[0])] += 1
    mp.undo()
    print(f"measured on an NVIDIA H200 (bf16): PUMA {r['puma']:.0f} img/s, other methods {r['other']:.0f} img/s "
          f"(ViT-S/16 training), evaluation {r['eval']:.0f} img/s; backbones priced by forward FLOPs relative to "
          f"ViT-S/16 ({reference:.1f} GFLOP)")
    print("\n| paper | job list | table | training runs | GPU-hours (estimate) |\n|---|---|---|---|---|")
    for (paper, jl, table), h in sorted(hours.items()):
        print(f"| {paper} | {jl} | {table} | {runs[(paper, jl, table)]} | {h:.1f} |")
    per_paper = defaultdict(float)
    for (paper, _, _), h in hours.items():
        per_paper[paper] += h
    print("\n" + ", ".join(f"{p}: {h:.0f} h" for p, h in sorted(per_paper.items()))
          + f"; all: {sum(per_paper.values()):.0f} GPU-hours")


if __name__ == "__main__":
    main()
