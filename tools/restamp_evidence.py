"""The evidence a restamp needs: stored records' runs trained again under the code of this checkout, compared field
by field with what the records hold.

Usage: python tools/restamp_evidence.py OUT.json --what "the change compared" RECORD.json [RECORD.json ...]

Run it under the new code (e.g. ``PYTHONPATH=<worktree>/src``) on records that are *current* under the old code (trained
by it, pinned to the quick profile's numerics): each one's runner runs again on its stored key, pinned the same way
(:func:`umlkit._numerics.pin_for_records`, before torch is imported) and on the record's thread count (a GEMM
split over other threads sums in another order: MAP@R moved in the third decimal), and every leaf of the result is
compared; the
timing fields (``*_seconds``) are listed apart. Nothing is written under ``results/``. When every record agrees,
``tools/restamp_records.py --reason ...`` marks the stale records current (cite OUT.json in the reason).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from umlkit._numerics import pin_for_records

pin_for_records()   # before torch: the records were trained pinned


def compare(stored: dict, fresh: dict) -> dict:
    """Field counts and the differing paths (timing fields apart)."""
    from umlkit.experiments.runs.record_check import flatten  # every number by its path (records verify's)
    a, b = flatten(stored), flatten(json.loads(json.dumps(fresh, default=float)))
    timing = sorted(p for p in set(a) | set(b) if p.endswith("seconds"))
    differ = sorted(p for p in set(a) | set(b) if p not in timing and a.get(p, "<absent>") != b.get(p, "<absent>"))
    return {"fields": len(a), "differing (timing fields excluded)": len(differ), "differing": differ[:20],
            "timing fields": timing}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("records", nargs="+", type=Path)
    parser.add_argument("--what", required=True, help="what was compared: the two codes, the machine, the pinning")
    args = parser.parse_args(argv)
    from umlkit.experiments.runs import runners
    rows = []
    import torch
    for path in args.records:
        rec = json.loads(path.read_text())
        torch.set_num_threads(int((rec.get("software") or {}).get("threads") or 1))   # as it was trained
        fresh = runners.run(rec["runner"], rec["key"])
        rows.append({"record": str(path), **compare(rec["result"], fresh)})
        print(f"{path.name}: {rows[-1]['differing (timing fields excluded)']} differing of {rows[-1]['fields']}",
              flush=True)
    import datetime
    args.out.write_text(json.dumps({"what": args.what, "date": datetime.date.today().isoformat(), "rows": rows},
                                   indent=1) + "\n")
    return 0 if all(r["differing (timing fields excluded)"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
