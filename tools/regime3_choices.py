"""The third regime-map edition's tuning, as YAML to enter in ``configs/regime/edition3.yaml``: ``--extra`` prints
the next rates of every unit whose choice sits on its grid's edge (for ``tuning.extra``), ``--lr`` the choices (for
``lr``). Merges with what the file already holds; prints, never writes.

    .venv/bin/python tools/regime3_choices.py --extra
    .venv/bin/python tools/regime3_choices.py --lr
"""
from __future__ import annotations

import argparse

import yaml

from umlkit.experiments.papers.regime import edition3 as e3


def _merge(old: dict, new: dict) -> dict:
    out = {k: dict(v) for k, v in (old or {}).items()}
    for split, levels in new.items():
        for data, methods in levels.items():
            block = out.setdefault(split, {}).setdefault(str(data), {})
            for method, value in methods.items():
                block[method] = sorted({*block.get(method, []), *value}) if isinstance(value, list) else value
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--extra", action="store_true")
    ap.add_argument("--lr", action="store_true")
    args = ap.parse_args(argv)
    frame = e3.tuning_frame()
    if args.extra:
        merged = _merge(e3.settings()["tuning"].get("extra") or {}, e3.edge_extensions(frame))
        print(yaml.safe_dump({"extra": merged}, default_flow_style=None, sort_keys=False, width=118))
    if args.lr:
        best = frame[frame["chosen"]]
        choice: dict = {}
        for r in best.itertuples():
            choice.setdefault(r.split, {}).setdefault(str(r.data), {})[r.method] = float(f"{r.lr:.0e}")
        print(yaml.safe_dump({"lr": choice}, default_flow_style=None, sort_keys=False, width=118))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
