"""Mark stale quick-profile records current after a training-path change that did not move their numbers.

Usage: python tools/restamp_records.py --reason "what was compared" [--paper P] [--parts code]

Run the old and the new code on the same configurations first (a few records of each runner, e.g. with
``umlkit.experiments.runs.records.recompute`` in a scratch results folder) and compare the results; the reason is stored
in every restamped record (:func:`umlkit.experiments.runs.records.restamp`).
"""
import argparse

from umlkit.experiments.runs.records import restamp

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--reason", required=True)
parser.add_argument("--paper", default=None)
parser.add_argument("--profile", default="quick")
parser.add_argument("--parts", nargs="+", default=["code"], choices=["code", "data", "weights"])
args = parser.parse_args()
changed = restamp(args.profile, args.reason, paper=args.paper, parts=tuple(args.parts))
print(f"restamped {len(changed)} record(s)")
