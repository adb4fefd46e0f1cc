"""Freeze a later seed plan from the quick board: ``--stage 2`` (``configs/seed_plan_2.yaml``), the rule of
:mod:`umlkit.experiments.claims.seed_plan` once more after the first plan's runs; ``--stage 3``
(``configs/seed_plan_3.yaml``),
the claims that had their needed seeds and stayed open, up to the cap (``RULE_3``). ooDML's AGS claims (Table S3)
pool every split of a method in the source's shift table, so they name those rows. Run once per stage; a frozen plan
is never edited.

    .venv/bin/python tools/make_seed_plan.py --stage 3 [--dry-run]
"""
from __future__ import annotations

import argparse
import sys

from umlkit.experiments.claims import seed_plan
from umlkit.experiments.claims.more_seeds import SEED_PLAN_FILES, plan_path
from umlkit.experiments.tables.registry import papers
from umlkit.experiments.views.scoreboard import scoreboard


def _ags_pool(oodml_tables):
    """AGS claim ``"{m} beats Margin (D) by AGS ({d})"``: methods m and Margin (D) over every split of d's table."""
    from umlkit.experiments.papers.oodml import config
    names = {v: k for k, v in config.AGS_NAMES.items()}
    by_name = {config.SOURCE_NAMES[src]: table for src, table in config.SHIFT_TABLES.items()}

    def pool(claim):
        methods = [names.get(claim.a["method"], claim.a["method"]), names.get(claim.b["method"], claim.b["method"])]
        return oodml_tables[by_name[claim.a["dataset"]]], methods
    return pool


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
    ap.add_argument("--stage", type=int, choices=(2, 3), required=True, help="which later plan to freeze")
    args = ap.parse_args(argv)
    path = plan_path().with_name(SEED_PLAN_FILES[args.stage - 1])
    if path.exists() and not args.dry_run:
        sys.exit(f"{path} exists: a frozen plan is not remade")
    board = scoreboard("quick")
    specs = {(name, t): s for name, p in papers().items() for t, s in p.claim_tables("quick").items()}
    oodml = papers()["oodml"].claim_tables("quick")
    pooled = {("oodml", "Table S3"): _ags_pool(oodml)}
    chosen = seed_plan.choose(board, specs, "quick", pooled=pooled, to_cap=args.stage == 3)
    print(chosen[["paper", "table", "claim", "seeds", "seeds needed", "extra seeds", "hours"]].to_string())
    if not args.dry_run:
        rule = seed_plan.RULE_2 if args.stage == 2 else seed_plan.RULE_3
        print("wrote", seed_plan.write(chosen, path, rule=rule))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
