"""Benchmark: VPTSP (Ren et al., ICLR 2024) Table 10, the running time of one training step per method.

The paper's Table 10 reports "the running time of a single forward-backward step on Cars196 with batch size 32 and
64, averaged over 100 runs" for Full Fine-tuning (PA), linear, BitFit, Adapter, VPT and VPTSP. Here each of them
is the row of ``configs/vptsp/methods.yaml`` the chapter trains ("Full Fine-tuning (PA)", "Linear Prob", "BitFit",
"Adapter", "VPT", "VPTSP-G (B)"), configured by ``umlkit.experiments.papers.vptsp.run_config(profile, row=..., source=
"cars")`` and built as the training engine builds it (``umlkit.train.engine``: ``build_model`` with the Cars-like
training split's class count, ``build_objective``, ``param_groups`` + ``build_optimizer``, and the engine's own
step module). One step is what ``fit`` does per batch: forward (``model.forward_train``: VPTSP's image branch *and*
its proxy branch, the same images through the ViT a second time with the class prompts; the baselines' embeddings)
+ the row's loss (VPTSP: ``proxy_anchor_external`` over its semantic proxies; the baselines: ``proxy_anchor`` with
learnable proxies) + backward + gradient clipping as configured + the optimizer step. Inputs are random images of
the backbone's input size with 2 images per class, grouped by class (``y = arange(batch) // 2``), as the
class-random sampler gives. Profile ``quick``: the tiny ViT ``vit_tiny_uml_v2`` (shipped weights) at 32 px with a
128-d embedding; ``full``: ViT-S/16 at 224 px, 384-d (random init: the weights do not change the time), meant for
a GPU.

Baseline: full fine-tuning, measured in the same run. The measurements are interleaved: for each of ``--rounds``
rounds, for each batch size, for each method, a freshly built model takes ``--warmup`` untimed steps and then
``--steps`` timed steps (``time.perf_counter``, ``torch.cuda.synchronize`` on a GPU), so a slowdown of the machine
hits every method alike. The table gives per method and batch size the mean ms per step over the rounds, its
standard deviation, and the ratio to full fine-tuning (the mean of the per-round ratios); on a GPU also the peak
memory (``torch.cuda.max_memory_allocated`` from the model's construction on). **The absolute times depend on the
machine (and on the CPU on its load and thread count); the ratio to full fine-tuning is the number to compare
with the paper.** The raw per-round results go to a JSON file (``--out``).

    python benchmarks/bench_vptsp_step.py --profile quick                  # CPU, 1 thread, about a minute
    python benchmarks/bench_vptsp_step.py --profile quick --rounds 2 --steps 5
    python benchmarks/bench_vptsp_step.py --profile full --device cuda     # GPU: 100 timed steps per method
    python benchmarks/bench_vptsp_step.py --profile full --device cuda --precision bf16   # as the full runs train
"""
from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import torch

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # _machine, when imported rather than run as a script
    sys.path.insert(0, str(HERE))

# (the paper's name in Table 10, the row of configs/vptsp/methods.yaml); the first is the baseline
METHODS = (("Full Fine-tuning (PA)", "Full Fine-tuning (PA)"), ("linear", "Linear Prob"), ("BitFit", "BitFit"),
           ("Adapter", "Adapter"), ("VPT", "VPT"), ("VPTSP", "VPTSP-G (B)"))
BASELINE = METHODS[0][0]
SOURCE = "cars"


def method_config(profile: str, row: str) -> dict:
    """The resolved ``fit`` configuration of ``row`` on the Cars-like source (the rate does not change the time)."""
    from umlkit.experiments.papers import vptsp
    return vptsp.run_config(profile, row=row, source=SOURCE, lr=1e-3)


def train_classes(cfg: dict) -> int:
    """The number of training classes ``fit`` gives the model and the loss: the classes ``data.splits`` lists for the
    source (quick: the Cars-like default split of UML-Mini), else Cars196's own training split (98 classes)."""
    from umlkit.data import DATASETS
    split = (cfg["data"].get("splits") or {}).get(SOURCE)
    if split and isinstance(split, dict) and split.get("train"):
        n = len(split["train"])
    else:
        n = DATASETS[SOURCE].counts["train"][1]
    if cfg["data"].get("val_fraction"):
        n -= max(1, int(round(n * cfg["data"]["val_fraction"])))
    return n


def image_size(cfg: dict) -> int:
    from umlkit.models.backbones import backbone_data_config
    return int(backbone_data_config(cfg["model"]["backbone"])["input_size"][-1])


def build_step(cfg: dict, profile: str, batch: int, device: str, precision: str = "fp32"):
    """(model, step): the model, objective and optimizer as ``umlkit.train.engine.fit`` builds them, and a function
    running one training step of ``fit``'s loop on a fixed random batch (2 images per class, grouped by class)."""
    from umlkit.train import engine

    n_classes = train_classes(cfg)
    if batch % 2 or batch // 2 > n_classes:
        raise ValueError(f"batch {batch}: needs an even size with at most {2 * n_classes} images (2 per class)")
    torch.manual_seed(int(cfg["seed"]))
    # quick: the shipped tiny-ViT weights (offline); full: random init (no download; the time does not depend on it)
    model = engine.build_model(cfg, n_classes, load_weights=profile == "quick").to(device).train()
    # build_objective reads only the class count of the training set (no language embeddings in these rows)
    objective = engine.build_objective(cfg, SimpleNamespace(num_classes=n_classes), model.embed_dim).to(device)
    groups = engine.param_groups(model, objective)
    opt = engine.build_optimizer(cfg, groups)
    sparse = [p for p in getattr(model, "sparse_parameters", lambda: [])() if p.requires_grad]
    sparse_opt = engine._sparse_optimizer(cfg, opt, sparse, 1) if sparse else None
    runner = engine._TrainStep(model, objective, [float(t["weight"]) for t in cfg["objective"]], 1)
    size = image_size(cfg)
    x = torch.randn(batch, 3, size, size, device=device)
    y = torch.arange(batch, device=device) // 2
    amp = {"fp32": None, "bf16": torch.bfloat16}[precision]
    clip = cfg["clip"]

    def step() -> None:
        with torch.autocast(torch.device(device).type, dtype=amp, enabled=amp is not None):
            value = runner(x, y, None)
        opt.zero_grad(set_to_none=True)
        if sparse_opt is not None:
            sparse_opt.zero_grad()
        value.backward()
        params = [p for g in opt.param_groups for p in g["params"] if p.grad is not None]
        if clip["mode"] == "value":
            torch.nn.utils.clip_grad_value_(params, clip["max"])
        elif clip["mode"] == "norm":
            torch.nn.utils.clip_grad_norm_(params, clip["max"])
        opt.step()
        if sparse_opt is not None:
            sparse_opt.step()

    return model, step


def measure(cfg: dict, profile: str, batch: int, device: str, precision: str, steps: int, warmup: int) -> dict:
    """Mean ms per step of a freshly built model (and on a GPU its peak memory in MB, construction included)."""
    cuda = torch.device(device).type == "cuda"
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    model, step = build_step(cfg, profile, batch, device, precision)
    for _ in range(warmup):
        step()
    if cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    if cuda:
        torch.cuda.synchronize()
    out = {"ms": (time.perf_counter() - start) * 1000 / steps}
    if cuda:
        out["peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
    del model, step
    return out


def summarize(results: list[dict]) -> list[dict]:
    """Per batch size and method: mean and standard deviation of ms over the rounds, and the mean of the per-round
    ratios to full fine-tuning of the same round and batch size (the chapter's own computation,
    :func:`umlkit.experiments.papers.vptsp.table10_lines`), and the mean peak memory when recorded."""
    from umlkit.experiments.papers.vptsp import table10_lines
    lines = table10_lines(results)
    rows = []
    for batch in sorted({r["batch_size"] for r in results}):
        for method in dict.fromkeys(r["method"] for r in results):
            rs = [r for r in results if r["method"] == method and r["batch_size"] == batch]
            if not rs:
                continue
            cell = lines[(lines["method"] == method) & (lines["setting"] == f"batch_size={batch}")]
            ms = cell.loc[cell["metric"] == "Latency(ms)", "value"]
            ratio = cell.loc[cell["metric"] == "Latency (x full)", "value"]
            row = {"method": method, "row": rs[0]["row"], "batch_size": batch, "ms": float(ms.mean()),
                   "ms_std": float(ms.std(ddof=1)) if len(ms) > 1 else 0.0, "ratio": float(ratio.mean())}
            if "peak_mb" in rs[0]:
                row["peak_mb"] = statistics.fmean(r["peak_mb"] for r in rs)
            rows.append(row)
    return rows


def format_table(report: dict) -> str:
    lines = [f"VPTSP Table 10: one training step (forward + loss + backward + optimizer step) on the Cars-like "
             f"source, profile {report['profile']}: {report['backbone']} at {report['image_size']} px, "
             f"{report['precision']}, {report['device']}",
             f"{report['rounds']} rounds x {report['steps']} timed steps after {report['warmup']} warm-up steps, "
             f"interleaved; ratio = mean of per-round ratios to {BASELINE} ({report['date']})",
             report["machine"], ""]
    rows = summarize(report["results"])
    peak = any("peak_mb" in r for r in rows)
    head = f"{'method':<22} {'methods.yaml row':<22} {'batch':>5} {'ms/step':>9} {'std':>7} {'x full FT':>9}"
    lines.append(head + (f" {'peak MB':>9}" if peak else ""))
    for r in rows:
        line = (f"{r['method']:<22} {r['row']:<22} {r['batch_size']:>5} {r['ms']:>9.2f} {r['ms_std']:>7.2f} "
                f"{r['ratio']:>9.2f}")
        lines.append(line + (f" {r['peak_mb']:>9.0f}" if peak else ""))
    return "\n".join(lines)


def write_json(path: Path, data: dict) -> None:
    """Atomically: a temporary file in the same folder, then renamed over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=1)
            fh.write("\n")
        os.chmod(tmp, 0o644)  # mkstemp creates it private
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def run(profile: str = "quick", device: str = "cpu", rounds: int = 5, steps: int | None = None,
        warmup: int | None = None, batches=(32, 64), precision: str = "fp32", out: str | Path | None = None,
        threads: int | None = None, methods=METHODS, log=sys.stderr) -> dict:
    """Measure, write the JSON report to ``out`` and return it."""
    from _machine import describe
    device_type = torch.device(device).type
    if device_type not in ("cpu", "cuda"):
        raise ValueError(f"device must be cpu or cuda, got {device!r}")
    if precision not in ("fp32", "bf16"):
        raise ValueError(f"precision must be fp32 or bf16, got {precision!r}")
    steps = steps if steps is not None else (100 if device_type == "cuda" else 10)
    warmup = warmup if warmup is not None else (10 if device_type == "cuda" else 3)
    if threads:
        torch.set_num_threads(int(threads))
    configs = {row: method_config(profile, row) for _, row in methods}
    first = next(iter(configs.values()))
    results = []
    for rnd in range(rounds):
        for batch in batches:
            for method, row in methods:
                r = measure(configs[row], profile, int(batch), device, precision, steps, warmup)
                results.append({"method": method, "row": row, "batch_size": int(batch), "round": rnd, **r})
                if log is not None:
                    print(f"round {rnd + 1}/{rounds} batch {batch:>3} {method:<22} {r['ms']:9.2f} ms/step", file=log,
                          flush=True)
    report = {"machine": describe(device), "device": device_type, "profile": profile,
              "backbone": first["model"]["backbone"], "image_size": image_size(first), "precision": precision,
              "steps": int(steps), "warmup": int(warmup), "rounds": int(rounds),
              "date": datetime.date.today().isoformat(), "results": results}
    path = Path(out) if out is not None else HERE / "results" / f"vptsp_table10_{profile}_{device_type}.json"
    write_json(path, report)
    return report


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", choices=("quick", "full"), default="quick")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=None, help="timed steps per measurement (100 on GPU, 10 on CPU)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps before them (10 on GPU, 3 on CPU)")
    parser.add_argument("--batches", default="32,64")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32", help="bf16: autocast, as fit does")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default 1 on the CPU, so that the ratios do not depend on the load)")
    parser.add_argument("--out", default=None, help="JSON file (default benchmarks/results/"
                                                    "vptsp_table10_<profile>_<device>.json)")
    args = parser.parse_args(argv)
    threads = args.threads if args.threads is not None else (1 if torch.device(args.device).type == "cpu" else None)
    report = run(args.profile, args.device, args.rounds, args.steps, args.warmup,
                 tuple(int(b) for b in args.batches.split(",")), args.precision, args.out, threads)
    print(format_table(report))
    return report


if __name__ == "__main__":
    main()
