"""Train (or read) a paper's quick-profile records from the command line, optionally as one of n workers.

    python tools/train_records.py oodml lr_sweep --worker 0/2 &
    python tools/train_records.py oodml lr_sweep --worker 1/2 &

Two single-thread workers on two cores is the fastest way to fill a record set; each record is written atomically
when its run finishes, so an interrupted job list resumes where it stopped.
"""
from __future__ import annotations

import argparse
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paper", choices=["oodml"])
    ap.add_argument("jobs", help="a job list of the paper module: lr_sweep, tables, ...")
    ap.add_argument("--worker", default="0/1", help="i/n: this process takes every n-th job from the i-th")
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    i, n = (int(x) for x in a.worker.split("/"))
    from umlkit.experiments import oodml
    jobs = oodml.job_list(a.jobs, a.profile)
    t = time.time()
    recs = oodml.run_jobs(jobs, a.profile, worker=(i, n),
                          log=lambda msg: print(f"[{time.time() - t:7.0f}s] {msg}", flush=True))
    print(f"worker {i}/{n}: {len(recs)} records in {time.time() - t:.0f}s", flush=True)


if __name__ == "__main__":
    main()
