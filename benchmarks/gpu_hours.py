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
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EPOCH_FILE = ROOT / "benchmarks" / "results" / "full_epoch_h200.json"
EVAL_IMAGES = 10_136   # the test images (In-shop: query + gallery) of the epoch benchmark's world, UML-Mini large


def rates() -> dict:
    """Training images/s per method class and evaluation images/s, from the measured epochs."""
    rows = {r["method"]: r for r in json.loads(EPOCH_FILE.read_text())["rows"]}
    ev = sum(r["eval_seconds"] for r in rows.values()) / len(rows)
    return {"puma": rows["puma"]["img_per_s"], "other": rows["full"]["img_per_s"], "eval": EVAL_IMAGES / ev}


def main() -> None:
    sys.path.insert(0, str(ROOT))
    import tempfile

    from tests.full.world import full_jobs, make_world
    from umlkit.experiments.ops.gpu_budget import REFERENCE_BACKBONE, backbone_cost, price
    from umlkit.experiments.ops.table_runs import configs_of
    mp = pytest.MonkeyPatch()
    make_world(Path(tempfile.mkdtemp(prefix="umlkit_gpu_hours_")), mp)
    r = rates()
    reference = backbone_cost(REFERENCE_BACKBONE)
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
