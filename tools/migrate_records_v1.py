"""One-off migration of the version-1 PUMA run records (``results/quick/records/<kind>/``) to the layout of
:mod:`umlkit.experiments.runs.records` (``results/quick/records/puma/<table>/``), without retraining.

A version-1 record is moved only when nothing that decides its numbers changed:

1. its stored configuration, converted to the current configuration format (``loss`` -> ``objective``, plus the
   defaults added since, such as ``data.splits``), must equal the configuration that a current table row builds
   (the current ``configs/puma/*.yaml`` and :func:`umlkit.experiments.papers.puma.run_config`): the new key is computed,
   not edited;
2. the code change between the two layouts must not change a training run: checked separately by training the
   first epoch of every stored configuration with the old and the new code and comparing the loss and every
   test R@1 exactly (see the commit that introduced this file).

The migrated record keeps its ``result`` and ``seconds``, gains ``runner``, ``paper``, ``table`` and the current
``fingerprint``, and records where it came from (``migrated_from``: old path and key hash). Run from the
repository root: ``python tools/migrate_records_v1.py [--dry-run]``.
"""
from __future__ import annotations

import argparse
import json
import sys

from umlkit._paths import results_root
from umlkit.experiments.papers import puma
from umlkit.experiments.runs.fingerprint import fingerprint
from umlkit.experiments.runs.records import normalise_key, record_path
from umlkit.results import atomic_write, config_hash
from umlkit.train.config import resolve_config

OLD_KINDS = ("lr_sweep", "specialists", "table2", "table2b", "table2c", "table3", "table5")


def convert(old_key: dict) -> dict:
    if "model" in old_key:
        return normalise_key(resolve_config(old_key))
    return normalise_key({src: resolve_config(cfg) for src, cfg in old_key.items()})


def current_rows(profile: str = "quick") -> dict[str, tuple[str, str, str]]:
    """hash -> (table slug, record label, runner) for every row x seed the current tables and the lr sweep build."""
    out = {}
    for spec in puma.TABLES(profile).values():
        for row in spec.rows:
            for seed in (0, 1, 2):
                key = normalise_key(spec.config(row, seed, profile, ()))
                out.setdefault(config_hash(key), (spec.slug, f"{row.label or row.title}-seed{seed}", row.runner))
    for method, lrs in {"full": (3e-4, 1e-3, 3e-3), "puma": (1e-3, 3e-3, 1e-2)}.items():
        for lr in lrs:
            key = normalise_key(puma.run_config(profile, method=method, lr=lr, overrides=["data.val_fraction=0.2"]))
            out[config_hash(key)] = ("lr_sweep", f"{method}-lr{lr:g}-seed0", "train")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    root = results_root("quick") / "records"
    targets = current_rows()
    moved, refused = 0, []
    for kind in OLD_KINDS:
        for path in sorted((root / kind).glob("*.json")):
            old = json.loads(path.read_text())
            if config_hash(old["key"]) != old["key_hash"]:
                refused.append(f"{path}: edited (stored key does not hash to key_hash)")
                continue
            key = convert(old["key"])
            h = config_hash(key)
            if h not in targets:
                refused.append(f"{path}: no current table row builds its configuration")
                continue
            table, label, runner = targets[h]
            new = {"paper": "puma", "table": table, "label": label, "profile": "quick", "runner": runner, "key": key,
                   "key_hash": h, "fingerprint": fingerprint(key), "result": old["result"], "seconds": old["seconds"],
                   "created": old["created"], "software": old["software"],
                   "migrated_from": {"path": str(path.relative_to(root)), "key_hash": old["key_hash"]}}
            dest = record_path("puma", table, label, key, "quick")
            print(f"{path.relative_to(root)} -> {dest.relative_to(root)}")
            if not args.dry_run:
                atomic_write(dest, json.dumps(new, indent=1, sort_keys=True))
                path.unlink()  # a version-1 record written by umlkit, now stored under its new path
            moved += 1
    for r in refused:
        print("NOT MIGRATED:", r, file=sys.stderr)
    print(f"{moved} records migrated, {len(refused)} refused")
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
