"""The ``umlkit`` command line: ``umlkit --help`` lists the commands."""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

import umlkit
from umlkit._paths import data_root, repo_root, results_root


def _cmd_info(args: argparse.Namespace) -> int:
    import torch

    info = {
        "umlkit": umlkit.__version__,
        "torch": torch.__version__,
        "cuda_available": torch.cuda.is_available(),
        "repo_root": str(repo_root()) if repo_root() else None,
        "data_root": str(data_root()),
        "results_root": str(results_root()),
    }
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        for key, value in info.items():
            print(f"{key:>14}: {value}")
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    """Evaluate saved embeddings (.npz with 'embeddings' and 'labels', optional 'gallery', 'gallery_labels')."""
    import numpy as np

    from umlkit.metrics import evaluate_retrieval

    try:
        blob = np.load(args.file)
    except (OSError, ValueError) as err:
        print(f"error: cannot read {args.file}: {err}", file=sys.stderr)
        return 2
    missing = [k for k in ("embeddings", "labels") if k not in blob]
    if missing:
        print(f"error: {args.file} lacks array(s) {missing}; expected 'embeddings' and 'labels' "
              "(and optionally 'gallery', 'gallery_labels')", file=sys.stderr)
        return 2
    gallery = blob["gallery"] if "gallery" in blob else None
    gallery_labels = blob["gallery_labels"] if "gallery_labels" in blob else None
    metrics = args.metrics.split(",") if args.metrics else None
    res = evaluate_retrieval(blob["embeddings"], blob["labels"], gallery, gallery_labels, metrics=metrics)
    print(json.dumps(res, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="umlkit",
        description="umlkit: reproduction toolkit for deep metric learning (PUMA, ooDML, VPTSP, language guidance).",
    )
    parser.add_argument("--version", action="version", version=f"umlkit {umlkit.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("info", help="print versions and the resolved data/results folders")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_info)
    p = sub.add_parser("evaluate", help="retrieval metrics of embeddings saved in an .npz file")
    p.add_argument("file", help="npz with arrays 'embeddings', 'labels' [, 'gallery', 'gallery_labels']")
    p.add_argument("--metrics", default=None, help="comma-separated, e.g. R@1,MAP@R (default: all)")
    p.set_defaults(func=_cmd_evaluate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
