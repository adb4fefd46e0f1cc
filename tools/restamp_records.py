"""Mark stale quick-profile records current after a training-path change that did not move their numbers.

Usage: python tools/restamp_records.py --reason "what was compared" [--paper P] [--parts code] [--losses L ...]
       python tools/restamp_records.py --list-current BEFORE.txt   (under the old code), then after the change
       python tools/restamp_records.py --reason "..." --only BEFORE.txt   (only the records current before it)

``--losses``: only records whose objective terms (wrappers' bases included) all use these losses, for a change that
moved some losses' numbers and left the others' alone (the others are retrained); records that train no loss
(zero-shot evaluations) count as using none of them and are restamped too. ``--except-methods``: and whose model
methods are none of these.

Run the old and the new code on the same configurations first (a few records of each runner, e.g. with
``umlkit.experiments.runs.records.recompute`` in a scratch results folder) and compare the results; the reason is stored
in every restamped record (:func:`umlkit.experiments.runs.records.restamp`).
"""
import argparse
from pathlib import Path

from umlkit.experiments.runs.code_reach import _option_strings
from umlkit.experiments.runs.fingerprint import _configs
from umlkit.experiments.runs.records import restamp

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--reason", default=None, help="what was compared (required unless --list-current)")
parser.add_argument("--paper", default=None)
parser.add_argument("--profile", default="quick")
parser.add_argument("--parts", nargs="+", default=["code"], choices=["code", "data", "weights"])
parser.add_argument("--losses", nargs="+", default=None)
parser.add_argument("--except-methods", nargs="+", default=())
parser.add_argument("--only", type=Path, default=None,
                    help="a file listing record paths, one per line: only those (e.g. the records current before a "
                         "change, written by --list-current under the old code)")
parser.add_argument("--list-current", type=Path, default=None,
                    help="write the paths of the records current under this checkout's code to this file, restamp "
                         "nothing (run it before the change; --only reads it after)")
args = parser.parse_args()


def only_these(rec: dict) -> bool:
    from umlkit.losses import LOSSES, TERMS
    named = {n for c in _configs(rec["key"]) for t in c.get("objective") or []
             for n in {t["name"], *_option_strings(t.get("options"))} if n in LOSSES or n in TERMS}
    methods = {c["model"]["method"] for c in _configs(rec["key"]) if "model" in c}
    return (args.losses is None or named <= set(args.losses)) and not methods & set(args.except_methods)


if args.list_current is not None:
    from umlkit.experiments.runs.records import list_records, load_record
    current = [str(p) for p in list_records(args.profile, args.paper) if not load_record(p)["stale"]]
    args.list_current.write_text("\n".join(current) + "\n")
    print(f"{len(current)} current record(s) listed in {args.list_current}")
    raise SystemExit(0)
if not args.reason:
    parser.error("--reason is required: what was compared to show the numbers did not change")
listed = None if args.only is None else set(args.only.read_text().splitlines())


def keep(rec: dict) -> bool:
    return (listed is None or str(rec["path"]) in listed) and (
        only_these(rec) if args.losses or args.except_methods else True)


changed = restamp(args.profile, args.reason, paper=args.paper, parts=tuple(args.parts),
                  keep=keep if listed is not None or args.losses or args.except_methods else None)
print(f"restamped {len(changed)} record(s)")
