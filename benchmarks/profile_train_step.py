"""Profile: where one training step of ViT-S/16 (224 px, CPU, fp32) spends its time, full fine-tuning against a
parameter-efficient method (default PUMA), by operator (torch.profiler).

Issue 14 asks why PUMA, whose backbone is frozen, is not >= 1.4x full fine-tuning's throughput. The step is
dominated by the linear layers' GEMMs. Full fine-tuning pays three per linear layer (forward, input gradient, weight
gradient); a frozen layer skips the weight gradient, so the backbone's GEMM work falls to about 2/3. But gradients
must still flow back through every frozen block to reach the adapters of the earlier blocks (the input gradient
stays), and the method's own modules add GEMMs of their own, forward and backward. This prints, per method, the
step time, the GEMM time (aten::mm + aten::addmm) and its share, the top operators, and the ratios to full
fine-tuning measured in the same run, with the CPU model.

    python benchmarks/profile_train_step.py [--methods full,puma] [--batch 8] [--threads 1]
"""
from __future__ import annotations

import argparse
import time

import torch

from _machine import describe


def profile_method(method: str, batch: int, rows: int) -> dict:
    from torch.profiler import ProfilerActivity, profile

    from umlkit.models import create_model
    torch.manual_seed(0)
    model = create_model("vit_s16_in21k_ft_in1k", method, embed_dim=128, pretrained=False).train()
    params = [p for p in model.parameters() if p.requires_grad]
    proxies = torch.nn.Parameter(torch.randn(batch, 128))
    opt = torch.optim.AdamW(params + [proxies], lr=1e-4)
    x, y = torch.randn(batch, 3, 224, 224), torch.arange(batch) // 2

    def step():
        emb = model(x)
        loss = torch.nn.functional.cross_entropy(32 * emb @ torch.nn.functional.normalize(proxies, dim=1).T, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    step()   # warm-up
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        step()
        step()
        seconds = (time.perf_counter() - start) / 2
    ops = {e.key: e.self_cpu_time_total / 2e6 for e in prof.key_averages()}   # seconds per step
    total = sum(ops.values())
    gemm = ops.get("aten::mm", 0.0) + ops.get("aten::addmm", 0.0)
    top = sorted(ops.items(), key=lambda kv: -kv[1])[:rows]
    return {"method": method, "step s": seconds, "op s": total, "gemm s": gemm, "top": top,
            "trainable": sum(p.numel() for p in params)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--methods", default="full,puma")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rows", type=int, default=8)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(describe())
    print(f"ViT-S/16, 224 px, batch {args.batch}, fp32, CPU; seconds per step (mean of 2 profiled steps)")
    results = [profile_method(m, args.batch, args.rows) for m in args.methods.split(",")]
    base = results[0]
    for r in results:
        print(f"\n{r['method']}: {r['trainable'] / 1e6:.2f}M trainable; step {r['step s']:.2f} s "
              f"({base['step s'] / r['step s']:.2f}x {base['method']}'s throughput); GEMM {r['gemm s']:.2f} s = "
              f"{100 * r['gemm s'] / r['op s']:.0f}% of operator time ({r['gemm s'] / base['gemm s']:.2f}x "
              f"{base['method']}'s GEMM time)")
        for name, s in r["top"]:
            print(f"  {name[:60]:<60} {s:7.3f} s  {100 * s / r['op s']:5.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
