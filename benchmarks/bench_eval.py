"""Benchmark: umlkit's retrieval engine vs pytorch-metric-learning's AccuracyCalculator on a UML-sized test set.

Data: 148,500 L2-normalised 128-d embeddings whose class sizes resemble PUMA's unified test set (about 15,900
classes, mostly 2-10 items, a tail up to ~100). Metrics: R@1/2/4/8, MAP@R, RP.

Each implementation runs in its own subprocess so that its peak RSS is its own. Printed: seconds, peak RSS,
the ratio to AccuracyCalculator (baseline, same run), and whether the metrics equal the fp32 exact search.
``umlkit`` is the default engine, which runs the kernel that finished a representative search first on this
machine (printed: int8, bf16 or fp32, with the reason; ``umlkit.metrics.kernels``); ``umlkit-int8`` /
``umlkit-bf16`` / ``umlkit-fp32`` force one. ``pml-default`` / ``pml-m1000`` / ``pml-nmi`` are AccuracyCalculator's
equals of ``umlkit-default`` / ``umlkit-m1000`` / ``umlkit-nmi`` (NMI alone); each umlkit line's speed-up is against
its equal.
``ONEDNN_MAX_CPU_ISA=AVX512_CORE`` (or ``AVX2``) in the environment makes this CPU's bf16 and int8 GEMMs behave
like those of a CPU without bf16 (or AVX-512) instructions, to check the choice; fp32 GEMMs are not limited.

    python benchmarks/bench_eval.py            # full size (a few minutes on 2 cores)
    python benchmarks/bench_eval.py --scale 0.1
    python benchmarks/bench_eval.py --compete 1   # with a process spinning on one core all along (a busy machine)
    python benchmarks/bench_eval.py --impls pml,umlkit --scales 0.01,0.03,0.1,0.3,1 \
        --json benchmarks/results/eval_scales_cpu.json   # where the speed-up crosses 1 (the evaluation chapter)
    python benchmarks/bench_eval.py --impls gemm-bf16,umlkit-m1000,umlkit-default   # the default metric set

``umlkit-default`` is ``evaluate_retrieval``'s default metric set (R@1/2/4/8, MAP@R, RP, mAP@1000, NMI);
``umlkit-m1000`` the six metrics plus mAP@1000, read from the streamed pass (:mod:`umlkit.metrics.deep_ap`), and
``umlkit-m1000-search`` the same from the engine's search at depth 1,000 (the previous path: use ``--scale 0.1``),
``umlkit-m1000-r8`` the streamed pass with the bf16 product's rounding bounded by 2^-8 instead of 2^-7 (narrower
error intervals, valid only where the GEMM rounds to nearest: an experiment, not a library setting);
``gemm-bf16`` times the full n x n bf16 GEMM alone, the floor of a pass that reads every pair; ``cuda-fp32`` runs
an exact fp32 search on the GPU and scores it on the CPU (not a library path: what a GPU would give).

The machine (CPU model, torch, threads) is printed first: a ratio measured on one CPU does not hold on another.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import torch
from _machine import describe

from umlkit.metrics.examples import UML_TEST_CLASSES as N_CLASSES
from umlkit.metrics.examples import UML_TEST_ITEMS as N_ITEMS
from umlkit.metrics.examples import uml_like_embeddings

DIM = 128


def run_one(impl: str, scale: float) -> dict:
    x, y = uml_like_embeddings(scale, dim=DIM)
    metrics = ["R@1", "R@2", "R@4", "R@8", "MAP@R", "RP"]
    choice = None
    if impl == "umlkit":   # the kernel choice first: its one-off measurement (once per machine) is not timed
        from umlkit.metrics.knn import explain_search
        start = time.perf_counter()
        choice = explain_search(True, x.shape[1], len(y) ** 2)
        choice_s = time.perf_counter() - start
    start = time.perf_counter()
    search = None
    if impl in ("umlkit", "umlkit-fp32", "umlkit-bf16", "umlkit-int8"):
        from umlkit.metrics import evaluate_retrieval

        # "umlkit" is the default: the kernel that finished a representative search first on this machine
        dtype = {"umlkit": None, "umlkit-fp32": torch.float32, "umlkit-bf16": torch.bfloat16,
                 "umlkit-int8": torch.int8}[impl]
        from umlkit.metrics.threads import LARGE_SEARCH, search_threads
        threads = torch.get_num_threads()   # what the search will run on (a large one leaves busy cores out)
        threads = search_threads(threads) if len(y) ** 2 >= LARGE_SEARCH else threads
        res = evaluate_retrieval(x, y, metrics=metrics, search_dtype=dtype)
        out = {m: res[m] for m in metrics}
        if choice is not None:
            search = f"{threads} thread(s), {choice.kernel}: {choice.reason} [choice took {choice_s:.1f} s]"
        else:
            search = f"{threads} thread(s), " + str(dtype).replace("torch.", "")
    elif impl in ("umlkit-default", "umlkit-m1000", "umlkit-m1000-search", "umlkit-m1000-r8"):
        out = _default_set(impl, x, y, metrics)
    elif impl == "gemm-bf16":
        out = {"GEMM seconds": _gemm_pass(x)}
    elif impl == "cuda-fp32":
        out, search = _cuda_search(x, y, metrics)
    elif impl in _PML:
        out = _pml(impl, x, y)
    elif impl == "umlkit-nmi":
        from umlkit.metrics import evaluate_retrieval
        out = {"NMI": evaluate_retrieval(x, y, metrics=["NMI"])["NMI"]}
    else:
        raise ValueError(impl)
    seconds = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"impl": impl, "seconds": seconds, "peak_rss_mb": peak_mb, "metrics": out, "search": search}


# AccuracyCalculator's metrics and k for each PML implementation: "pml" the six metrics' equal, "pml-default" the
# default set's (its NMI is faiss's k-means, 20 iterations), "pml-m1000" without NMI, "pml-nmi" NMI alone
_PML = {
    "pml": (("precision_at_1", "mean_average_precision_at_r", "r_precision"), "max_bin_count"),
    "pml-default": (("precision_at_1", "mean_average_precision_at_r", "r_precision", "mean_average_precision",
                     "NMI"), 1000),
    "pml-m1000": (("precision_at_1", "mean_average_precision_at_r", "r_precision", "mean_average_precision"), 1000),
    "pml-nmi": (("NMI",), 1),
}
_PML_NAMES = {"precision_at_1": "R@1", "mean_average_precision_at_r": "MAP@R", "r_precision": "RP",
              "mean_average_precision": "mAP@1000", "NMI": "NMI"}


def _pml(impl: str, x, y) -> dict:
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

    include, k = _PML[impl]
    # a custom label comparison takes the loop path, which avoids the (labels x items) bool matrix; PML refuses it
    # with clustering, so the sets with NMI run its default comparison
    loop = {} if "NMI" in include else {"label_comparison_fn": lambda a, b: a == b}
    calc = AccuracyCalculator(include=include, k=k, device=torch.device("cpu"), **loop)
    res = calc.get_accuracy(x, y)
    return {_PML_NAMES[name]: res[name] for name in include}


def _default_set(impl: str, x, y, metrics: list[str]) -> dict:
    """``evaluate_retrieval``'s default metric set (R@1/2/4/8, MAP@R, RP, mAP@1000, NMI: ``umlkit-default``), or the
    six metrics plus mAP@1000 from the streamed pass (``umlkit-m1000``) or from the search (``-search``)."""
    import umlkit.metrics.deep_ap as deep_ap
    import umlkit.metrics.retrieval as retrieval
    if impl.endswith("-search"):
        retrieval.STREAM_MIN_GALLERY = 1 << 40
    if impl.endswith("-r8"):   # the product's rounding bounded by 2^-8 (round to nearest) instead of 2^-7
        deep_ap._ROUNDING = 2.0 ** -8
    res = retrieval.evaluate_retrieval(x, y, metrics=None if impl == "umlkit-default" else metrics + ["mAP@1000"])
    return {k: v for k, v in res.items() if k not in ("n_queries", "n_gallery", "n_without_positives")}


def _cuda_search(x, y, metrics: list[str]) -> tuple[dict, str]:
    """The six metrics from an exact fp32 self-search on the GPU (TF32 off; blocks of 8,192 queries against the whole
    set, each row's top 'largest class - 1' after its self-match is set to -inf), scored on the CPU by umlkit's own
    metric functions. Not a library path: what a GPU would give the evaluation, timed with the copies."""
    from umlkit.metrics.retrieval import map_at_r, r_precision
    torch.backends.cuda.matmul.allow_tf32 = False
    xn = torch.nn.functional.normalize(torch.as_tensor(x, dtype=torch.float32), dim=1)
    yt = torch.as_tensor(y)
    r = torch.bincount(yt)[yt] - 1
    depth = max(int(r.max()), 8)
    g = xn.cuda()
    idx = []
    for start in range(0, g.shape[0], 8192):
        s = g[start:start + 8192] @ g.T
        s[torch.arange(s.shape[0], device=s.device), torch.arange(start, start + s.shape[0], device=s.device)] = -2
        idx.append(torch.topk(s, depth, dim=1).indices.cpu())
    match = yt[torch.cat(idx)] == yt[:, None]
    out = {f"R@{k}": match[:, :k].any(dim=1).double().mean().item() for k in (1, 2, 4, 8)}
    valid = r > 0
    out["MAP@R"] = map_at_r(match[valid], r[valid]).mean().item()
    out["RP"] = r_precision(match[valid], r[valid]).mean().item()
    return {m: out[m] for m in metrics}, f"{torch.cuda.get_device_name()}, fp32, depth {depth}"


def _gemm_pass(x) -> float:
    """Seconds of the full n x n bf16 similarity GEMM in the streamed pass's tiles (1,024 queries x 4,096 items),
    scores discarded: the floor of any exact ranking that reads every pair in bf16."""
    xb = x.to(torch.bfloat16)
    out = torch.empty(1024, 4096, dtype=torch.bfloat16)
    start = time.perf_counter()
    for i in range(0, xb.shape[0], 1024):
        for j in range(0, xb.shape[0], 4096):
            a, b = xb[i:i + 1024], xb[j:j + 4096]
            torch.mm(a, b.T, out=out[:a.shape[0], :b.shape[0]])
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the 148,500-item problem")
    parser.add_argument("--impls", default="pml,umlkit-fp32,umlkit")
    parser.add_argument("--compete", type=int, default=0,
                        help="start this many processes that spin on a core each while the benchmark runs (a busy "
                             "machine)")
    parser.add_argument("--scales", default=None,
                        help="comma-separated fractions: the whole comparison at each size (instead of --scale)")
    parser.add_argument("--json", default=None, help="also write the results (machine, sizes, seconds) to this file")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(args.child, args.scale)))
        return
    print(describe(), flush=True)
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.compete)]
    runs = []
    try:
        for scale in ([float(s) for s in args.scales.split(",")] if args.scales else [args.scale]):
            args.scale = scale
            results = _run_all(args)
            _summary(results, args)
            runs += [{"scale": scale, "items": int(N_ITEMS * scale), "impl": impl, "seconds": r["seconds"],
                      "peak_rss_mb": r["peak_rss_mb"], "search": r["search"]} for impl, r in results.items()]
    finally:
        for p in spinners:
            p.kill()
    if args.json:
        from umlkit.results import atomic_write
        data = {"machine": describe(), "date": time.strftime("%Y-%m-%d"), "competing processes": args.compete,
                "dim": DIM, "results": runs}
        atomic_write(args.json, json.dumps(data, indent=1))
        print("wrote", args.json)


def _run_all(args) -> dict:
    if args.compete:
        print(f"busy machine: {args.compete} competing process(es) spinning", flush=True)
    results = {}
    for impl in args.impls.split(","):
        proc = subprocess.run([sys.executable, __file__, "--child", impl, "--scale", str(args.scale)],
                              capture_output=True, text=True, check=True)
        results[impl] = json.loads(proc.stdout.strip().splitlines()[-1])
        r = results[impl]
        search = f"   search {r['search']}" if r["search"] else ""
        print(f"{impl:>14}: {r['seconds']:7.1f} s   peak RSS {r['peak_rss_mb']:7.0f} MB{search}   {r['metrics']}",
              flush=True)
    return results


# each umlkit implementation's AccuracyCalculator equal (the others: "pml", the six metrics)
_BASELINE = {"umlkit-default": "pml-default", "umlkit-m1000": "pml-m1000", "umlkit-m1000-search": "pml-m1000",
             "umlkit-nmi": "pml-nmi"}


def _summary(results: dict, args) -> None:
    exact = results.get("umlkit-fp32")
    print(f"\nproblem: {int(N_ITEMS * args.scale)} items x {DIM}-d, ~{int(N_CLASSES * args.scale)} classes, "
          f"torch threads {torch.get_num_threads()}, competing processes {args.compete}")
    for impl, r in results.items():
        line = f"{impl:>14}: {r['seconds']:7.1f} s"
        base_name = _BASELINE.get(impl, "pml")
        base = results.get(base_name)
        if base and not impl.startswith("pml"):
            line += f"   speed-up vs AccuracyCalculator ({base_name}) x{base['seconds'] / r['seconds']:.2f}"
        common = [k for k in r["metrics"] if exact and k in exact["metrics"]]
        if common and impl != "umlkit-fp32":
            diff = max(abs(r["metrics"][k] - exact["metrics"][k]) for k in common)
            line += f"   max |metric - fp32 exact search| = {diff:.1e}"
        gemm = results.get("gemm-bf16")
        if gemm and impl.startswith("umlkit-m1000"):
            line += f"   x{r['seconds'] / gemm['metrics']['GEMM seconds']:.1f} the full bf16 GEMM"
        print(line)


if __name__ == "__main__":
    main()
