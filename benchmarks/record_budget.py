"""Benchmark: how long a paper's quick record set takes to retrain on two cores, and whether today's code still
produces the stored records.

The issues give each paper's quick set a budget (ooDML: 3 hours, language guidance: 2 hours, VPTSP: 2.5 hours, on
2 cores as two single-thread workers). The records' own ``seconds`` are no measure of it: most were trained while
other processes shared the cores. This script groups the jobs of a job list (``umlkit records train PAPER JOBS``) by
what decides their cost (runner, method and objective, sources, the analysis after training: few-shot episodes,
transfer, neighbour counts; the batch size and the prompt and accumulator options), runs ``--per-group`` jobs of
every group in ``--workers`` single-thread processes with nothing else running, and extrapolates: estimated wall
time = sum over groups of (mean sampled seconds x group size) / workers. The baseline printed beside it is the
issue's budget (the ratio: estimate / budget).

Every sampled job is also compared with its stored record: the result must be identical except for the timing
fields. That makes the run the evidence a restamp after a refactoring needs (``tools/restamp_records.py``).

    python benchmarks/record_budget.py oodml tables [--per-group 1] [--workers 2] [--budget-hours 3]
    python benchmarks/record_budget.py language_guidance omega_sweep tables semantic unified_sweep unified \
        --budget-hours 2
    python benchmarks/record_budget.py vptsp lr_sweep tables --budget-hours 2.5

CPUs differ: the estimate holds for the CPU printed, not for another.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import time
from collections import defaultdict

from _machine import describe

TIMING = ("train_seconds", "seconds")


def _group(job: tuple) -> tuple:
    key = job[2]
    cfg = key.get("config", key)
    ana = key.get("analysis", {})
    runner = job[3] if len(job) > 3 else "train_analysis"
    objective = tuple((t["name"], str(t.get("options", {}).get("base")), bool(t.get("options", {}).get("per_sample")))
                      for t in cfg["objective"])
    return (job[0], runner, cfg["model"]["method"], objective, tuple(cfg["data"]["datasets"]),
            tuple(sorted(k for k, v in ana.items() if v and k not in ("metrics", "fixed_classes"))),
            cfg["data"].get("batch_size"), tuple(sorted((k, str(v)) for k, v in cfg["model"].get("options", {}).items()
                                                        if k in ("num_prompts", "prompt_depth", "accumulator",
                                                                 "proxy_source"))))


def _strip(result):
    if isinstance(result, dict):
        return {k: _strip(v) for k, v in result.items() if k not in TIMING}
    if isinstance(result, list):
        return [_strip(v) for v in result]
    return result


def _work(args):
    job, runner = args
    import torch

    from umlkit.experiments.runs import runners
    from umlkit.experiments.runs.records import find_record, load_record, normalise_key
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    result = runners.run(runner, job[2])
    seconds = time.perf_counter() - t0
    path = find_record(normalise_key(job[2]), "quick")
    stored = load_record(path)["result"] if path is not None else None
    same = None if stored is None else _strip(json.loads(json.dumps(result))) == _strip(stored)
    return (job[0], job[1]), seconds, same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paper", choices=("oodml", "language_guidance", "vptsp"))
    parser.add_argument("jobs", nargs="+", help="one or more job lists (their union is the record set)")
    parser.add_argument("--per-group", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--budget-hours", type=float, default=None)
    args = parser.parse_args()
    from umlkit.experiments.papers import language_guidance, oodml, vptsp
    module = {"oodml": oodml, "language_guidance": language_guidance, "vptsp": vptsp}[args.paper]
    from umlkit.experiments.runs.records import config_hash, normalise_key
    jobs, seen = [], set()
    for name in args.jobs:   # a run listed by two job lists is one record
        for job in module.job_list(name, "quick"):
            h = config_hash(normalise_key(job[2]))
            if h not in seen:
                seen.add(h)
                jobs.append(job)
    groups: dict[tuple, list] = defaultdict(list)
    for job in jobs:
        groups[_group(job)].append(job)
    sample = [(j, j[3] if len(j) > 3 else "train_analysis") for g in groups.values() for j in g[:args.per_group]]
    print(f"{args.paper} {' + '.join(args.jobs)}: {len(jobs)} jobs in {len(groups)} cost groups; "
          f"timing {len(sample)} with {args.workers} single-thread workers", flush=True)
    with mp.get_context("spawn").Pool(args.workers) as pool:
        timed = {}
        for label, seconds, same in pool.imap_unordered(_work, sample):
            timed[label] = seconds
            print(f"  {seconds:7.1f} s  {'same as stored' if same else 'NO RECORD' if same is None else 'DIFFERS'}  "
                  f"{'/'.join(label)}", flush=True)
    total = 0.0
    for g, members in groups.items():
        measured = [timed[(j[0], j[1])] for j in members[:args.per_group]]
        total += sum(measured) / len(measured) * len(members)
    hours = total / args.workers / 3600
    print(describe().split("; torch")[0] + f"; {args.workers} workers of 1 thread each")
    print(f"estimated retrain time: {hours:.2f} h on {args.workers} workers ({total / 3600:.2f} h of single-thread "
          f"work)")
    if args.budget_hours:
        print(f"budget {args.budget_hours:g} h: estimate / budget = {hours / args.budget_hours:.2f}")


if __name__ == "__main__":
    main()
