"""Benchmark: full-profile epochs at the real architecture, random-init weights, on real-layout synthetic data.

What a user's first GPU hour spends: PUMA's Table 2 unified run (``Ours``: ViT-S/16 at 224 px, stochastic adapters
+ conditional prompt pool, CurricularFace, all eight sources, batch 180) and, as the baseline measured in the same
run, Table 2's full fine-tuning with the same loss (``CurricularFace``), each taken from PUMA's full-profile job
list (``umlkit.experiments.tables.registry.papers()["puma"].job_list("tables", "full")``) unchanged except: ``--epochs``
epochs (2 by default: the first holds cuDNN's autotuning and the loader's start), one evaluation after the last
epoch, random-init weights (the hub cannot be reached; the weights do not change the time), and the data root.
The data are UML-Mini written in each real dataset's on-disk layout (``make_mini(size="large")``: 100 classes of
12 images per side for the CUB-like source, more for SOP-like; JPEG decoding and the 224-px transforms run as on
real data, on smaller files).

Printed per job: the steps and images of an epoch, the last epoch's seconds and images/s (and the share of it the
training loop spent waiting for the loader, the log's ``data_seconds``), the evaluation's seconds (the fit's time
minus its epochs), peak GPU memory, the ratio to the baseline's images/s, and the physical
bound: the model's FLOPs per training image (``torch.utils.flop_counter.FlopCounterMode`` over forward + backward
of 8 images at the job's precision) times the images/s, as a fraction of the GEMM rate measured in the same run
(an 8192^3 matrix product at the job's precision). The epoch rows go to ``--out`` as JSON.

    python benchmarks/full_epoch.py --device cuda --out benchmarks/results/full_epoch_h200.json
    python benchmarks/full_epoch.py --device cpu --size tiny --epochs 1      # the code path, on the CPU
    python benchmarks/full_epoch.py --device cuda --loader-only    # the loaders alone: the most they can feed
    python benchmarks/full_epoch.py --device cuda --jobs Ours-seed0 --cached [--no-loss-checks]   # the loop alone
    python benchmarks/full_epoch.py --device cuda --compile off,reduce-overhead   # train.compile: eager vs compiled

The baseline is the last job's eager run (``--compile`` lists modes; each job runs once per mode and per seed of
``--seeds``), so a compiled row's ratio is compilation's gain and its test R@1 sits beside the eager one's.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

JOBS = ("Ours-seed0", "CurricularFace-seed0")   # PUMA, then full fine-tuning with PUMA's loss (the baseline)


def job_config(label: str, epochs: int, device: str, workers: str | None = None, compile_mode: str = "off",
               seed: int | None = None) -> dict:
    """The first configuration of PUMA's full-profile Table 2 job ``label``, cut to ``epochs`` epochs (and
    ``workers`` loader processes, ``train.compile`` and the seed where given)."""
    from umlkit.experiments.ops.table_runs import configs_of
    from umlkit.experiments.tables.registry import papers
    jobs = [j for j in papers()["puma"].job_list("tables", "full") if j[0] == "table2" and j[1] == label]
    if not jobs:
        raise SystemExit(f"--jobs: no job {label!r} in PUMA's full-profile Table 2 job list")
    cfg = configs_of(jobs[0][2])[0]
    cfg["model"].update(pretrained=False, weights=None)
    cfg["train"].update(epochs=epochs, eval_every=epochs, progress=False)
    cfg.update(device=device)
    if compile_mode != "off":
        cfg["train"]["compile"] = compile_mode
    if seed is not None:
        cfg["seed"] = seed
    if workers is not None:
        cfg["data"]["num_workers"] = workers if workers == "auto" else int(workers)
    return cfg


def flops_per_image(model: torch.nn.Module, device: torch.device, precision: str) -> float:
    """Forward + backward FLOPs of one training image (8 images counted, divided by 8) at the patch embedding's
    input size; NaN, with the reason printed, where the model cannot be called on images alone."""
    from torch.utils.flop_counter import FlopCounterMode
    embed = next((m for m in model.modules() if hasattr(m, "img_size") and hasattr(m, "patch_size")), None)
    size = embed.img_size[0] if embed is not None else 224
    x = torch.randn(8, 3, size, size, device=device)
    model.train()
    try:
        with FlopCounterMode(display=False) as counter:
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
                out = model(x)
            (out[0] if isinstance(out, tuple) else out).float().sum().backward()
    except Exception as err:   # a benchmark row without its FLOPs beats no row
        print(f"FLOPs not counted: {type(err).__name__}: {err}", flush=True)
        return float("nan")
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops() / 8


def gemm_rate(device: torch.device, precision: str, n: int = 8192, reps: int = 10) -> float:
    """FLOP/s of an n^3 matrix product at ``precision`` (the mean of ``reps`` after 3 warm-ups)."""
    if device.type != "cuda":
        n, reps = 1024, 3
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    t = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync()
    return 2 * n**3 * reps / (time.perf_counter() - t)


def cache_batches() -> None:
    """Every later ``fit`` trains on one pass of its loader held on the device: the batches are drawn once, when the
    run is set up (outside the epochs' time), and replayed each epoch, so an epoch's time is the training loop's own
    (the loader's share, ``data_seconds``, drops to nothing). A measurement device, not a training mode: every epoch
    sees the same augmented images."""
    from umlkit.train import engine
    set_up = engine._set_up

    def cached(*args, **kwargs):
        run = set_up(*args, **kwargs)
        run.loader = [[t.to(run.device) for t in batch] for batch in run.loader]
        return run
    engine._set_up = cached


def skip_loss_checks() -> None:
    """The losses' input checks (:func:`umlkit.losses._checks.check_inputs`: finite embeddings, label range; each
    reads the device before the backward) become no-ops in every loss module: what those host reads cost a step."""
    import umlkit.losses  # noqa: F401  (imports every loss module)
    for name, module in list(sys.modules.items()):
        if name.startswith("umlkit.losses") and hasattr(module, "check_inputs"):
            module.check_inputs = lambda *args, **kwargs: None


def run_job(label: str, epochs: int, device: str, work: Path, workers: str | None = None, compile_mode: str = "off",
            seed: int | None = None) -> dict:
    """Fit one job; its epochs' times, images, memory, FLOPs and test R@1."""
    from umlkit.train.config import resolve_config
    from umlkit.train.engine import fit
    from umlkit.train.runtime import resolve_device, resolve_precision
    cfg = resolve_config(job_config(label, epochs, device, workers, compile_mode, seed))
    dev = resolve_device(cfg["device"])
    precision = resolve_precision(cfg["precision"], dev)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    res = fit(cfg, run_dir=work / "runs" / f"{label}-{time.time_ns()}")
    total = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated() / 2**20 if dev.type == "cuda" else float("nan")
    last = res.history[-1]
    batch = int(cfg["data"]["batch_size"])
    images = last["steps"] * batch
    return {"job": label, "compile": compile_mode, "seed": cfg["seed"], "workers": cfg["data"]["num_workers"],
            "method": cfg["model"]["method"],
            "backbone": cfg["model"]["backbone"],
            "sources": len(cfg["data"]["datasets"]), "precision": precision, "batch": batch, "steps": last["steps"],
            "images_per_epoch": images, "epoch_seconds": [h["seconds"] for h in res.history],
            "data_seconds": [h.get("data_seconds", float("nan")) for h in res.history],
            "img_per_s": images / last["seconds"], "eval_seconds": total - sum(h["seconds"] for h in res.history),
            "peak_mib": peak, "flops_per_image": flops_per_image(res.model, dev, precision),
            "test_R@1": {k: float(v) for k, v in res.last["R@1"].items()} if res.last is not None else {}}


def loader_rate(label: str, epochs: int, device: str, workers: str | None = None) -> dict:
    """The job's training loader alone, as the engine builds it (its sampler, workers and pinned memory), each
    batch copied to ``device`` and nothing trained: images/s of the last epoch, the most the loader can feed."""
    from umlkit.data import build_sampler
    from umlkit.models.backbones import backbone_data_config
    from umlkit.train.config import resolve_config
    from umlkit.train.engine import build_data
    from umlkit.train.runtime import resolve_device, resolve_workers
    cfg = resolve_config(job_config(label, epochs, device, workers))
    dev, d = resolve_device(cfg["device"]), cfg["data"]
    train_set = build_data(cfg, backbone_data_config(cfg["model"]["backbone"]))[0]
    sampler = build_sampler(d["sampler"], train_set.labels, d["batch_size"], d["samples_per_class"], train_set.sources,
                            int(cfg["seed"]))
    loader = torch.utils.data.DataLoader(train_set, batch_sampler=sampler, num_workers=resolve_workers(
        d["num_workers"]), pin_memory=dev.type == "cuda")
    seconds = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        t = time.perf_counter()
        for x, _ in loader:
            x.to(dev, non_blocking=True)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        seconds.append(round(time.perf_counter() - t, 2))
    images = len(sampler) * int(d["batch_size"])
    return {"job": label, "loader_only": True, "workers": d["num_workers"], "images_per_epoch": images,
            "epoch_seconds": seconds, "img_per_s": images / seconds[-1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--size", choices=("large", "default", "tiny"), default="large", help="UML-Mini's size")
    parser.add_argument("--jobs", default=",".join(JOBS), help="Table 2 job labels; the last is the baseline")
    parser.add_argument("--workers", default=None, help="data.num_workers for every job (default: the job's, auto)")
    parser.add_argument("--work", default=None, help="folder for the data and runs (default: a temporary one)")
    parser.add_argument("--out", default=None, help="JSON file for the rows")
    parser.add_argument("--loader-only", action="store_true",
                        help="time each job's training loader alone (no model), the most it can feed")
    parser.add_argument("--cached", action="store_true",
                        help="train on one pass of the loader held on the device: the loop's own time per epoch")
    parser.add_argument("--compile", default="off", help="train.compile for every job, or a comma list of modes "
                        "(off, default, reduce-overhead): each job runs once per mode, in that order")
    parser.add_argument("--seeds", default=None, help="comma list of seeds: each job runs once per seed (default: "
                        "the job's own)")
    parser.add_argument("--no-loss-checks", action="store_true",
                        help="the losses' input checks (host reads before the backward) skipped")
    args = parser.parse_args()
    if args.cached:
        cache_batches()
    if args.no_loss_checks:
        skip_loss_checks()
    work = Path(args.work or tempfile.mkdtemp(prefix="umlkit_full_epoch_"))
    from umlkit.data import make_mini
    t = time.perf_counter()
    os.environ["UMLKIT_DATA"] = str(make_mini(work / "data", size=args.size))
    os.environ["UMLKIT_RESULTS"] = str(work / "results")
    print(f"UML-Mini ({args.size}) in the real layouts: {time.perf_counter() - t:.0f} s", flush=True)
    rows = []
    seeds = [int(v) for v in args.seeds.split(",")] if args.seeds else [None]
    runs = [(label, mode, seed) for label in args.jobs.split(",") for mode in args.compile.split(",") for seed in seeds]
    for label, mode, seed in runs:
        if args.loader_only:
            print(json.dumps(loader_rate(label, args.epochs, args.device, args.workers)), flush=True)
            continue
        rows.append(run_job(label, args.epochs, args.device, work, args.workers, mode, seed))
        rows[-1]["variant"] = ", ".join(v for v, on in (("cached batches", args.cached),
                                                        ("no loss checks", args.no_loss_checks)) if on) or "as shipped"
        print(json.dumps(rows[-1]), flush=True)
    if not rows:
        return
    report(rows, torch.device("cuda" if args.device.startswith("cuda") else args.device))
    if args.out:
        Path(args.out).write_text(json.dumps({"machine": _describe(args.device), "rows": rows}, indent=1))


def report(rows: list[dict], device: torch.device) -> None:
    base = next((r for r in rows if r["job"] == rows[-1]["job"] and r["compile"] == "off"), rows[-1])
    rates = {p: gemm_rate(device, p) for p in {r["precision"] for r in rows}}
    print(f"\n{_describe(str(device))}; baseline: {base['job']}; GEMM rate measured now: "
          + ", ".join(f"{p} {v / 1e12:.1f} TFLOP/s" for p, v in rates.items()))
    for r in rows:
        achieved = r["flops_per_image"] * r["img_per_s"]
        print(f"{r['job']:>22} seed {r['seed']} compile {r['compile']} {r['method']:>6} {r['sources']} sources "
              f"{r['precision']} {r['workers']} workers "
              f"({r.get('variant', 'as shipped')}): "
              f"{r['steps']} steps x "
              f"{r['batch']} = {r['images_per_epoch']} images/epoch, epochs {r['epoch_seconds']} s, "
              f"{r['img_per_s']:.0f} img/s (x{r['img_per_s'] / base['img_per_s']:.2f} the baseline; "
              f"{r['data_seconds'][-1] / r['epoch_seconds'][-1]:.0%} of the epoch waiting for the loader), eval "
              f"{r['eval_seconds']:.1f} s, peak {r['peak_mib']:.0f} MiB, {r['flops_per_image'] / 1e9:.1f} GFLOP/img "
              f"-> {achieved / 1e12:.1f} TFLOP/s = {achieved / rates[r['precision']]:.1%} of the GEMM rate; test "
              f"R@1 Unified {r['test_R@1'].get('Unified', float('nan')):.2f}")


def _describe(device: str) -> str:
    sys.path.insert(0, str(Path(__file__).parent))
    from _machine import describe
    return describe(device)


if __name__ == "__main__":
    main()
