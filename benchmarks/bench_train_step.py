"""Benchmark: one training step (forward + backward + AdamW step) of ViT-S/16 at 224 px, per method.

Baseline: full fine-tuning, measured in the same run. For every method and precision (fp32, bf16 autocast) it
prints images/s and peak memory, and both as ratios to full fine-tuning. Goal (issue 14): PUMA >= 1.4x full
fine-tuning's throughput, which is above its FLOP bound (1.20x, 1.28x with ``+skip``; ViT-S/16 at batch 16). A frozen
backbone skips only the weight-gradient GEMMs, so VPT (trained input tokens only) is the ceiling of every method
that trains something at the input; ``profile_train_step.py`` shows where each step goes.
Each configuration runs in its own subprocess so that its peak memory is its own: CUDA's
``max_memory_allocated`` on a GPU; on the CPU the *step memory*, the process's peak RSS minus its resident size
just before the first step (model, optimizer and imports excluded: what activations, gradients and optimizer
state add). Suffixes of a method name select options: ``+light`` the memory-light mode (``checkpoint_blocks=True``:
blocks recomputed in the backward pass), ``+lightK`` the first K blocks only (``checkpoint_blocks=K``), ``+skip``
PUMA's ``skip_dropped=True`` (each stochastic adapter runs on its kept samples only), ``+matmul`` attention as
explicit matrix products and a softmax (timm's ``fused_attn=False`` path: under CPU bf16 autocast both products run
as bf16 GEMMs and the softmax in bf16) instead of PyTorch's fused kernel, ``+compile`` the model's forward through
``torch.compile`` (compiled in the warm-up; on a GPU, fewer and fused kernels for a step that is launch-bound),
``+graphs`` the same in torch.compile's ``reduce-overhead`` mode (forward and backward replayed as CUDA graphs),
``+capture`` the whole step, AdamW included, captured once as one CUDA graph and replayed (PyTorch's whole-network
capture; a model that reads a value back to the host in its step cannot be captured and is reported as failed);
e.g. ``puma+light8+skip``. ``--repeats R`` runs every configuration R times, interleaved (repeat 1 of every
configuration, then repeat 2, ...), so that a slow spell of a shared machine falls on all of them; each ratio is
taken to full fine-tuning of the same repeat (eager; add ``full+matmul`` as the baseline of ``+matmul`` rows), so a
``full+compile`` row is compilation's own gain, and printed as the median with its range.
Goal (issue 14): PUMA's memory-light mode at <= 0.5x full fine-tuning's peak memory and >= 0.9x its throughput.
Each configuration also counts one step's FLOPs (``torch.utils.flop_counter.FlopCounterMode``: matrix products,
convolutions, and attention, whose CPU kernels ``_flops.py`` maps to PyTorch's formulas: the counter left them out
before); full fine-tuning's count over a method's is the throughput ratio a step would reach if every FLOP ran at
the same speed, printed as "FLOP bound" beside the measured ratio.

    python benchmarks/bench_train_step.py                       # CPU: small step counts, slow
    python benchmarks/bench_train_step.py --methods full,puma,puma+light --precisions fp32
    python benchmarks/bench_train_step.py --device cuda --steps 20 --batch 180 --precisions bf16
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

import torch

METHODS = ("full", "linear", "vpt", "lora", "adaptformer", "puma", "puma+skip", "vptsp", "puma+light",
           "puma+light+skip", "lora+light", "adaptformer+light")


def run_one(method: str, precision: str, device: str, batch: int, steps: int, warmup: int, backbone: str,
            size: int) -> dict:
    from _machine import rss_mb

    from umlkit.models import count_trainable, create_model

    torch.manual_seed(0)
    name, kw = parse_method(method)
    n_classes = batch  # VPTSP needs its classes; 2 images per class in the batch
    if name == "vptsp":
        kw["num_classes"] = n_classes
    matmul_attention, compiled = kw.pop("matmul_attention", False), kw.pop("compile", None)
    capture = kw.pop("capture", False)
    model = create_model(backbone, name, embed_dim=128, **kw).to(device).train()
    # compiled on the first (warm-up) step; "reduce-overhead" also replays forward and backward as CUDA graphs
    net = torch.compile(model, mode=None if compiled == "default" else compiled) if compiled else model
    if matmul_attention:
        for module in model.modules():
            if hasattr(module, "fused_attn"):
                module.fused_attn = False
    proxies = torch.nn.Parameter(torch.randn(n_classes, 128, device=device))
    params = [p for p in model.parameters() if p.requires_grad] + [proxies]
    opt = torch.optim.AdamW(params, lr=1e-4, capturable=capture)
    x = torch.randn(batch, 3, size, size, device=device)
    y = torch.arange(batch, device=device) // 2

    def step(net=net):
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=precision == "bf16"):
            if name == "vptsp":
                out = model.forward_train(x, y)
                emb, prox = out["embeddings"], out["proxies"]
            else:
                emb, prox = net(x), proxies
            logits = 32 * emb.float() @ torch.nn.functional.normalize(prox.float(), dim=1).T
            loss = torch.nn.functional.cross_entropy(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    before = rss_mb()
    eager_step = step
    if capture:   # the whole step (forward, backward, AdamW) as one CUDA graph, replayed on static inputs
        step = _captured(step, opt, max(warmup, 3))
    for _ in range(warmup):
        step()
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    if device == "cuda":
        peak = torch.cuda.max_memory_allocated() / 2**20
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - before
    import _flops
    with _flops.counter() as counter:  # after the timing: its own step, not timed (the eager model: a compiled
        eager_step(model)              # one's kernels, and a captured graph's, are not seen by the counter)
    kinds = _flops.by_kind(counter)
    return {"method": method, "precision": precision, "img_per_s": batch * steps / seconds, "peak_mb": peak,
            "trainable": count_trainable(model), "gflop": kinds["gemm"] + kinds["attention"],
            "attention_gflop": kinds["attention"]}


def _captured(step, opt, warmup: int):
    """``step`` recorded once as a CUDA graph after ``warmup`` eager steps on a side stream (PyTorch's whole-network
    capture recipe: gradients set to None before the capture so the graph's pool owns them); returns its replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        step()
    return lambda *_: graph.replay()


def parse_method(method: str) -> tuple[str, dict]:
    """``"puma+light8+skip"`` -> ``("puma", {"checkpoint_blocks": 8, "skip_dropped": True})``."""
    name, *flags = method.split("+")
    kw: dict = {}
    for flag in flags:
        if flag == "skip":
            kw["skip_dropped"] = True
        elif flag == "matmul":
            kw["matmul_attention"] = True
        elif flag == "compile":
            kw["compile"] = "default"
        elif flag == "graphs":
            kw["compile"] = "reduce-overhead"
        elif flag == "capture":
            kw["capture"] = True
        elif flag.startswith("light") and (flag == "light" or flag[5:].isdigit()):
            kw["checkpoint_blocks"] = int(flag[5:]) if flag[5:] else True
        else:
            raise SystemExit(f"--methods: unknown suffix +{flag} in {method!r} (expected +light, +lightK, +skip, "
                             "+matmul, +compile, +graphs or +capture)")
    return name, kw


def baseline_of(method: str) -> str:
    """The configuration a method's ratios are taken to: full fine-tuning, with the same attention path and the
    same compilation."""
    kw = parse_method(method)[1]
    return "full" + "".join(f"+{s}" for s, k in (("matmul", "matmul_attention"),) if k in kw)


def ratios(results: list[dict]) -> dict[tuple[str, str], dict[str, list[float]]]:
    """Per (precision, method): throughput and memory ratios to its baseline *of the same repeat*, one value per
    repeat where both ran, and the FLOP bound (the baseline's FLOPs over the method's)."""
    by_key = {(r["repeat"], r["precision"], r["method"]): r for r in results}
    out: dict[tuple[str, str], dict[str, list[float]]] = {}
    for (repeat, precision, method), r in by_key.items():
        base = by_key.get((repeat, precision, baseline_of(method)))
        if base is None:
            continue
        row = out.setdefault((precision, method), {"throughput": [], "memory": [], "bound": []})
        row["throughput"].append(r["img_per_s"] / base["img_per_s"])
        row["memory"].append(r["peak_mb"] / base["peak_mb"])
        row["bound"].append(base["gflop"] / r["gflop"])
    return out


def _spread(values: list[float]) -> str:
    mid = statistics.median(values)
    return f"x{mid:.2f}" if len(values) == 1 else f"x{mid:.2f} [{min(values):.2f}-{max(values):.2f}]"


def _run_child(args, method: str, precision: str, steps: int, warmup: int) -> dict | None:
    cmd = [sys.executable, __file__, "--child", f"{method}:{precision}", "--device", args.device,
           "--batch", str(args.batch), "--steps", str(steps), "--warmup", str(warmup),
           "--backbone", args.backbone, "--size", str(args.size)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        print(f"{method} {precision}: failed\n{proc.stderr[-2000:]}", flush=True)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=None, help="timed steps (default 20 on GPU, 2 on CPU)")
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--backbone", default="vit_s16_in21k_ft_in1k")
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--repeats", type=int, default=1, help="runs of every configuration, interleaved")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeats < 1:
        raise SystemExit(f"--repeats {args.repeats}: expected 1 or more")
    steps = args.steps or (20 if args.device == "cuda" else 2)
    warmup = args.warmup if args.warmup is not None else (5 if args.device == "cuda" else 1)
    if args.child:
        method, precision = args.child.split(":")
        print(json.dumps(run_one(method, precision, args.device, args.batch, steps, warmup, args.backbone, args.size)))
        return
    for method in args.methods.split(","):
        parse_method(method)  # a typo fails before the first configuration runs
    precisions = args.precisions.split(",")
    if args.device == "cpu" and "bf16" in precisions:
        from umlkit.metrics.kernels import cpu_flags, native
        if not native("bf16", cpu_flags()):   # the kernel rule: emulated bf16 crawls (6 min for a few steps on a Zen 3)
            precisions = [p for p in precisions if p != "bf16"]
            print("# bf16 left out: this CPU has no native bf16 (no avx512_bf16/amx_bf16, or ONEDNN_MAX_CPU_ISA "
                  "below them), where oneDNN emulates it at about 0.1x fp32", flush=True)
    results = []
    for repeat in range(1, args.repeats + 1):
        if args.repeats > 1:
            print(f"# repeat {repeat} of {args.repeats} {time.strftime('%H:%M:%S')}", flush=True)
        for precision in precisions:
            for method in args.methods.split(","):
                r = _run_child(args, method, precision, steps, warmup)
                if r is None:
                    continue
                results.append({**r, "repeat": repeat})
                print(f"{precision:>5} {method:>12}: {r['img_per_s']:8.1f} img/s  peak {r['peak_mb']:8.0f} MB  "
                      f"trainable {r['trainable'] / 1e6:6.2f}M  {r['gflop']:7.1f} GFLOP/step "
                      f"({r['attention_gflop']:.1f} of them attention)", flush=True)
    from _machine import describe
    print(f"\n{args.backbone} at {args.size} px, batch {args.batch}, {steps} timed steps, {args.repeats} repeat(s) "
          f"on {args.device} ({describe(args.device)}); ratios to full fine-tuning of the same precision, "
          f"attention path, compilation and repeat (median [range]); 'of bound' = median throughput ratio / FLOP "
          f"bound:")
    for (precision, method), row in ratios(results).items():
        bound = statistics.median(row["bound"])
        print(f"{precision:>5} {method:>12}: throughput {_spread(row['throughput'])}   peak memory "
              f"{_spread(row['memory'])}   FLOP bound x{bound:.2f}   "
              f"{statistics.median(row['throughput']) / bound:.2f} of bound")


if __name__ == "__main__":
    main()
