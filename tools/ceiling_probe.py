"""Run the ceiling probe of issue 61 (umlkit.experiments.papers.language_guidance.ceiling_probe) and print its
table: the frozen backbone on the hard CUB- and Cars-like test classes, the omega sweep on their validation classes,
three seeds of Multi-Similarity with and without ELG, and the claim test on R@1 and MAP@R. Records go to the probe's
own results folder (``results/ceiling_probe``), which no table reads.

    python tools/ceiling_probe.py [--worker I/N] [--stage frozen|omega|test|report]
"""
import argparse
import os
import sys


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--stage", choices=("frozen", "omega", "test", "report"), default="report")
    p.add_argument("--worker", default="0/1")
    args = p.parse_args()
    from umlkit.experiments.papers.language_guidance import ceiling_probe as cp
    os.environ["UMLKIT_RESULTS"] = str(cp.probe_root())   # its records: results/ceiling_probe/quick/records
    from umlkit.experiments.runs.records import cached_record, find_record, normalise_key
    i, n = (int(x) for x in args.worker.split("/"))
    profile = "quick"

    def run(jobs, runner="train_analysis"):
        for k, (label, key) in enumerate(jobs):
            if k % n == i:
                cached_record("language_guidance", "ceiling_probe", label, key, runner, profile, log=print)

    def stored(jobs):
        return {label: cached_record("language_guidance", "ceiling_probe", label, key, "train_analysis", profile,
                                     log=None)
                for label, key in jobs if find_record(normalise_key(key), profile) is not None}
    if args.stage == "frozen":
        run(cp.frozen_jobs())
    elif args.stage == "omega":
        run(cp.omega_jobs())
    omegas = cp.chosen_omegas(stored(cp.omega_jobs()))
    if args.stage == "test":
        if set(omegas) != set(cp.SOURCES):
            raise SystemExit(f"the omega sweep is not complete (chosen so far: {omegas}); run --stage omega first")
        run(cp.probe_jobs(omegas))
    if args.stage == "report":
        import pandas as pd
        pd.set_option("display.width", 200)
        print("frozen backbone:", cp.probe_frame(stored(cp.frozen_jobs())).to_string())
        print("omegas chosen on the hard validation classes:", omegas)
        if set(omegas) == set(cp.SOURCES):
            print(cp.probe_claims(cp.probe_frame(stored(cp.probe_jobs(omegas)))).round(3).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
