"""Cross-CPU experiment (issue 74 item 5): do stored quick-profile records retrain bit for bit on another kind of CPU,
natively or with the numerics pinned to AVX2, and what does the pin cost?

Each named record is retrained from its stored key on one thread in a temporary results folder (the repository is
never written), in a child process per mode so that the environment reaches torch, MKL and oneDNN before they load:

* ``native``: the host's own kernels;
* ``pinned``: ``ATEN_CPU_CAPABILITY=avx2`` (torch's vectorised kernels), ``MKL_CBWR=AVX2`` (MKL's conditional
  numerical reproducibility: the AVX2 code path on every CPU that has it), ``ONEDNN_MAX_CPU_ISA=AVX2`` and
  ``torch.use_deterministic_algorithms(True)``.

It writes one JSON per run (host CPU model and flags, mode, seconds, each record's result) and, with ``--compare A B
...``, prints which fields differ between runs and from the stored records. Run it on an AVX2-only host and an
AVX-512 one (a GPU machine's host CPU counts), then compare the files:

    python benchmarks/cross_cpu_records.py --out benchmarks/results/cross_cpu_zen3.json          # both modes
    python benchmarks/cross_cpu_records.py --compare benchmarks/results/cross_cpu_*.json
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDS = [   # four runners' worth: train_analysis (three papers) and train (the regime map's tuning)
    "results/quick/records/puma/regime_map_3_tuning/hardest-all-lora-lr0.001-seed0-5893e695e2c3.json",
    "results/quick/records/vptsp/diagnosis/cub-VPT_B_-seed3-ad031b0e4a32.json",
    "results/quick/records/language_guidance/omega_sweep/cars-Multisimilarity_+_ELG-w0.3-seed0-095fb746bbc1.json",
    "results/quick/records/oodml/tables5/cars-R-Margin_D_-split2-seed1-33a71578fe37.json",
]
PINNED = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}


def _child(mode: str, paths: list[str]) -> dict:
    import torch
    torch.set_num_threads(1)
    if mode == "pinned":
        torch.use_deterministic_algorithms(True)
    os.environ["UMLKIT_RESULTS"] = tempfile.mkdtemp(prefix="umlkit-cross-cpu-")
    from umlkit.experiments.runs.runners import run
    out, seconds = {}, {}
    for p in paths:
        rec = json.loads((ROOT / p).read_text())
        t0 = time.perf_counter()
        out[p] = json.loads(json.dumps(run(rec["runner"], rec["key"])))
        seconds[p] = round(time.perf_counter() - t0, 2)
    return {"results": out, "seconds": seconds, "capability": torch.backends.cpu.get_cpu_capability()}


def _host() -> dict:
    sys.path.insert(0, str(Path(__file__).parent))
    from _machine import cpu_flags, describe
    return {"machine": describe(), "flags": cpu_flags()}


def _run(modes: list[str], paths: list[str]) -> dict:
    runs = {}
    for mode in modes:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "UMLKIT_PROGRESS": "0", **(PINNED if mode == "pinned" else {})}
        done = subprocess.run([sys.executable, __file__, "--child", mode, *paths], env=env, capture_output=True,
                              text=True, check=True)
        runs[mode] = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{mode}: torch capability {runs[mode]['capability']}, seconds {runs[mode]['seconds']}", flush=True)
    return {**_host(), "runs": runs}


def _compare(files: list[str]) -> None:
    sys.path.insert(0, str(ROOT / "src"))
    from umlkit.experiments.runs.record_check import flatten
    runs = {}
    for f in files:
        data = json.loads(Path(f).read_text())
        for mode, run in data["runs"].items():
            runs[f"{Path(f).stem}:{mode}"] = run
    for p in sorted({p for r in runs.values() for p in r["results"]}):
        stored = flatten(json.loads((ROOT / p).read_text())["result"])
        print(Path(p).name)
        for name, r in runs.items():
            if p not in r["results"]:
                continue
            new = flatten(r["results"][p])
            diff = [k for k in stored.keys() | new.keys() if stored.get(k) != new.get(k) and "seconds" not in k]
            print(f"  {name:32s} vs stored: {len(diff)} of {len(stored)} fields differ"
                  + (f" (e.g. {diff[0]}: {stored.get(diff[0])} -> {new.get(diff[0])})" if diff else ""))
        names = [n for n, r in runs.items() if p in r["results"]]
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                fa, fb = flatten(runs[a]["results"][p]), flatten(runs[b]["results"][p])
                diff = [k for k in fa.keys() | fb.keys() if fa.get(k) != fb.get(k) and "seconds" not in k]
                print(f"  {a} vs {b}: {len(diff)} fields differ")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="native,pinned")
    parser.add_argument("--records", nargs="*", default=RECORDS)
    parser.add_argument("--out", default=None, help="write the host, modes, seconds and results here (JSON)")
    parser.add_argument("--compare", nargs="+", default=None, metavar="FILE")
    parser.add_argument("--child", nargs="+", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.child[0], args.child[1:])))
    elif args.compare:
        _compare(args.compare)
    else:
        data = _run(args.modes.split(","), args.records)
        if args.out:
            Path(args.out).write_text(json.dumps(data, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
