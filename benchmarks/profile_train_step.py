"""Profile: where one training step of ViT-S/16 (224 px; CPU fp32, or a GPU in bf16) spends its time, full
fine-tuning against a parameter-efficient method (default PUMA), by operator (torch.profiler).

Issue 14 asks why PUMA, whose backbone is frozen, is not >= 1.4x full fine-tuning's throughput. The step is
dominated by the linear layers' GEMMs. Full fine-tuning pays three per linear layer (forward, input gradient, weight
gradient); a frozen layer skips the weight gradient, so the backbone's GEMM work falls to about 2/3. But gradients
must still flow back through every frozen block to reach the adapters of the earlier blocks (the input gradient
stays), and the method's own modules add GEMMs of their own, forward and backward. This prints, per method, the
step time, the GEMM time (aten::mm + aten::addmm) and its share, the top operators, and the ratios to full
fine-tuning measured in the same run, with the CPU model.

On a GPU (``--device cuda``) the times are the kernels' (``self_device_time_total``), and two more numbers say
whether the arithmetic or the launching sets the step: the GPU's busy fraction (kernel time over wall time) and the
kernels launched per step.

    python benchmarks/profile_train_step.py [--methods full,puma] [--batch 8] [--threads 1]
    python benchmarks/profile_train_step.py --device cuda --precision bf16 --batch 180
"""
from __future__ import annotations

import argparse
import time

import torch
from _machine import describe


def profile_method(method: str, batch: int, rows: int, device: str = "cpu", precision: str = "fp32") -> dict:
    from torch.profiler import ProfilerActivity, profile

    from umlkit.models import create_model
    torch.manual_seed(0)
    dev = torch.device(device)
    model = create_model("vit_s16_in21k_ft_in1k", method, embed_dim=128, pretrained=False).to(dev).train()
    params = [p for p in model.parameters() if p.requires_grad]
    proxies = torch.nn.Parameter(torch.randn(batch, 128, device=dev))
    opt = torch.optim.AdamW(params + [proxies], lr=1e-4)
    x, y = torch.randn(batch, 3, 224, 224, device=dev), torch.arange(batch, device=dev) // 2
    gpu = dev.type == "cuda"
    sync = torch.cuda.synchronize if gpu else (lambda: None)

    def step():
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            emb = model(x)
            logits = 32 * emb.float() @ torch.nn.functional.normalize(proxies, dim=1).T
            loss = torch.nn.functional.cross_entropy(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    for _ in range(3 if gpu else 1):   # warm-up
        step()
    sync()
    import _flops
    with _flops.counter() as counter:   # one more untimed step: its FLOPs by kind
        step()
    flops = _flops.by_kind(counter)
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])) as prof:
        start = time.perf_counter()
        step()
        step()
        sync()
        seconds = (time.perf_counter() - start) / 2
    events = prof.key_averages()
    if gpu:   # the kernels alone: an aten:: operator's device time is its kernels' again (counted twice before)
        from torch.autograd import DeviceType
        own = [(e.key, e.self_device_time_total / 2e6, e.count / 2) for e in events
               if getattr(e, "device_type", None) == DeviceType.CUDA]
        own = own or [(e.key, e.self_device_time_total / 2e6, e.count / 2) for e in events
                      if not e.key.startswith(("aten::", "cuda", "Memcpy", "Memset")) and e.self_device_time_total > 0]
    else:
        own = [(e.key, e.self_cpu_time_total / 2e6, e.count / 2) for e in events]
    ops = {k: t for k, t, _ in own}   # seconds per step
    total = sum(ops.values())
    # attention first, and GEMMs among the rest: a FlashAttention kernel's name can carry "cutlass" too
    is_attention = {k: any(a in k.lower() for a in ("scaled_dot_product", "flash", "fmha", "attention")) for k in ops}
    attention = sum(t for k, t in ops.items() if is_attention[k])
    gemm = sum(t for k, t in ops.items() if not is_attention[k] and (
        k in ("aten::mm", "aten::addmm", "aten::bmm")
        or any(g in k.lower() for g in ("gemm", "nvjet", "xmma", "cutlass"))))   # cuBLAS kernels on Hopper
    top = sorted(ops.items(), key=lambda kv: -kv[1])[:rows]
    return {"method": method, "step s": seconds, "op s": total, "gemm s": gemm, "attention s": attention,
            "gemm gflop": flops["gemm"], "attention gflop": flops["attention"], "top": top,
            "trainable": sum(p.numel() for p in params), "busy": total / seconds if gpu else None,
            "kernels": sum(n for _, _, n in own) if gpu else None}


def _bounds(base: dict, r: dict) -> str:
    """The FLOP bound (every FLOP at one speed) and the rate bound: the ratio the method would reach if its GEMM and
    attention FLOPs ran at ``base``'s measured rates and its other operators took what they took; the measured
    ratio over the rate bound says how well the method's own GEMMs and attention run."""
    flop = (base["gemm gflop"] + base["attention gflop"]) / (r["gemm gflop"] + r["attention gflop"])
    other = r["op s"] - r["gemm s"] - r["attention s"]
    at_base_rates = (r["gemm gflop"] * base["gemm s"] / base["gemm gflop"]
                     + r["attention gflop"] * base["attention s"] / max(base["attention gflop"], 1e-9) + other)
    rate = base["op s"] / at_base_rates
    measured = base["op s"] / r["op s"]
    return (f"operator-time ratio x{measured:.2f}, FLOP bound x{flop:.2f}, rate bound x{rate:.2f} "
            f"({measured / rate:.2f} of it)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--methods", default="full,puma")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(describe(args.device))
    print(f"ViT-S/16, 224 px, batch {args.batch}, {args.precision}, {args.device}; seconds per step (mean of 2 "
          f"profiled steps){'; times are GPU kernel times' if args.device != 'cpu' else ''}")
    results = [profile_method(m, args.batch, args.rows, args.device, args.precision) for m in args.methods.split(",")]
    base = results[0]
    for r in results:
        print(f"\n{r['method']}: {r['trainable'] / 1e6:.2f}M trainable; step {r['step s']:.2f} s "
              f"({base['step s'] / r['step s']:.2f}x {base['method']}'s throughput); GEMM {r['gemm s']:.2f} s = "
              f"{100 * r['gemm s'] / r['op s']:.0f}% of operator time ({r['gemm s'] / base['gemm s']:.2f}x "
              f"{base['method']}'s GEMM time)")
        print(f"  attention {r['attention s']:.2f} s ({r['attention gflop']:.1f} GFLOP, "
              f"{r['attention gflop'] / max(r['attention s'], 1e-9):.0f} GFLOP/s; GEMM {r['gemm gflop']:.1f} GFLOP, "
              f"{r['gemm gflop'] / max(r['gemm s'], 1e-9):.0f} GFLOP/s); {_bounds(base, r)}")
        if r["busy"] is not None:
            print(f"  GPU busy {100 * r['busy']:.0f}% of the step's wall time; {r['kernels']:.0f} kernels per step")
        for name, s in r["top"]:
            print(f"  {name[:60]:<60} {s:7.3f} s  {100 * s / r['op s']:5.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
