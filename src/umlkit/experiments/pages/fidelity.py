"""The Fidelity page: each piece the chapters train, against its paper's text and its paper's official code.

``data/fidelity.yaml`` lists the pieces (paper, what the paper's text says, the official file and function, umlkit's
module, the status and, for a deliberate deviation, why). For the pieces with a stored reference, :func:`agreement`
measures now how far umlkit's output lies from the official one on the reference inputs: the official modules' outputs
are stored in ``tests/losses/parity_reference.json`` (how they were computed: the docstring of
``tests/losses/test_parity.py``), and each check below recomputes umlkit's side on the same inputs. The parity tests
assert these differences below 1e-5 (1e-4 for losses of size ~10-50, float32); the page shows them.
"""
from __future__ import annotations

import functools
import json
from collections.abc import Callable

import numpy as np
import pandas as pd
import torch

from umlkit._paths import repo_root
from umlkit._yaml import read_yaml

__all__ = ["CHECKS", "SEEDS", "agreement", "fidelity_table", "pieces", "reference", "oodml_inputs", "puma_inputs",
           "split_inputs", "is_exact"]

SEEDS = ("0", "1", "2")


@functools.lru_cache(maxsize=1)
def reference() -> dict:
    """The official outputs on the reference inputs (``tests/losses/parity_reference.json``)."""
    return json.loads((repo_root() / "tests" / "losses" / "parity_reference.json").read_text())


def oodml_inputs(seed: str):
    """ooDML's and language guidance's reference batch: 8 classes x 2, 16-d, L2-normalised."""
    g = torch.Generator().manual_seed(int(seed))
    return torch.nn.functional.normalize(torch.randn(16, 16, generator=g), dim=1), torch.arange(8).repeat_interleave(2)


def puma_inputs(seed: str):
    """PUMA's reference batch: 6 classes x 4, 12-d, not normalised."""
    g = torch.Generator().manual_seed(int(seed))
    return torch.randn(24, 12, generator=g), torch.arange(6).repeat_interleave(4)


def split_inputs(seed: str) -> tuple[dict, list, list]:
    """ooDML's split reference: 60 class means (6-d, drifting along one direction), even classes train, odd test."""
    rng = np.random.default_rng(int(seed))
    means = rng.normal(size=(60, 6)) + np.linspace(0, 2, 60)[:, None] * rng.normal(size=6)
    return {c: means[c] for c in range(60)}, list(range(0, 60, 2)), list(range(1, 60, 2))


def _swap_splits(seed: str) -> list:
    """The official ``split_maker`` records the split before each of its 6 iterations (2 swaps each, history 5)."""
    from umlkit.experiments.splits.features import swap_progression
    means, train, test = split_inputs(seed)
    return [[s.train, s.test] for s in swap_progression(means, train, test, iterations=5, swaps_per_iter=2)]


def _removal_splits(seed: str) -> list:
    """``split_maker_with_class_removal`` over 10 iterations from the stored start (the swap run's final state)."""
    from umlkit.experiments.splits.features import Split, removal_progression
    means, _, _ = split_inputs(seed)
    start = reference()["oodml"][seed]["removal_start"]
    return [start] + [[s.train, s.test] for s in removal_progression(means, Split(*start, 0.0), iterations=9)]


def is_exact(check: str) -> bool:
    """Checks that compare index lists (sampled triplets, class splits): equal or not."""
    return check.endswith(("sampling", "splits"))


def _triplets(seed: str, cp: float | None) -> list[list[int]]:
    from umlkit.losses.roth_margin import distance_triplets, rho_distance_triplets
    x, y = oodml_inputs(seed)
    np.random.seed(100 + int(seed))
    got = distance_triplets(x, y.numpy()) if cp is None else rho_distance_triplets(x, y.numpy(), cp=cp)
    return [list(t) for t in got]


def _margin(seed: str, name: str, options: dict) -> float:
    from umlkit.losses import create_loss
    x, y = oodml_inputs(seed)
    loss = create_loss(name, num_classes=8, embedding_size=16, **options)
    with torch.no_grad():
        loss.beta.copy_(torch.linspace(0.4, 0.9, 8))
    np.random.seed(100 + int(seed))
    return float(loss(x, y).detach())


def _loss(seed: str, name: str, inputs: Callable, **options) -> float:
    from umlkit.losses import create_loss
    x, y = inputs(seed)
    return float(create_loss(name, **options)(x, y).detach())


def _arcface_oodml(seed: str) -> float:
    from umlkit.losses import create_loss
    x, y = oodml_inputs(seed)
    loss = create_loss("arcface", num_classes=8, embedding_size=16, variant="roth", scale=16.0)
    with torch.no_grad():
        loss.class_map.copy_(torch.tensor(reference()["oodml"][seed]["arcface_class_map"]).view(8, 16))
    return float(loss(x, y).detach())


def _arcface_puma(seed: str) -> float:
    from umlkit.losses import create_loss
    x, y = puma_inputs(seed)
    loss = create_loss("arcface", num_classes=6, embedding_size=12)
    with torch.no_grad():
        loss.loss.W.copy_(torch.tensor(reference()["puma"][seed]["arc_proxies"]).view(6, 12).T)
    return float(loss(x, y).detach())


def _curricularface(seed: str) -> list[float]:
    """Three training steps of PUMA's CurricularFace from the seed's proxies: the losses, then the t buffer."""
    from umlkit.losses import create_loss
    x, y = puma_inputs(seed)
    torch.manual_seed(int(seed))
    loss = create_loss("curricularface", num_classes=6, embedding_size=12)
    got = [float(loss(x + 0.3 * k, y).detach()) for k in range(3)]
    return got + loss.t.tolist()


def _normalised(inputs: Callable) -> Callable:
    def make(seed):
        x, y = inputs(seed)
        return torch.nn.functional.normalize(x, dim=1), y
    return make


def _puma_ms(seed: str) -> float:
    torch.manual_seed(50 + int(seed))   # PML's distance-weighted miner draws from torch's stream
    return _loss(seed, "multisimilarity", _normalised(puma_inputs), variant="puma")


# check -> (paper, key in the reference, umlkit's output on the reference inputs)
CHECKS: dict[str, tuple[str, Callable[[str], object], Callable[[dict], object]]] = {
    "distance sampling": ("oodml", lambda s: _triplets(s, None), lambda r: r["distance_triplets"]),
    "rho-distance sampling": ("oodml", lambda s: _triplets(s, 0.4), lambda r: r["rho_triplets_cp0.4"]),
    "Margin (roth)": ("oodml", lambda s: _margin(s, "margin", {"variant": "roth"}), lambda r: r["margin_loss"]),
    "R-Margin": ("oodml", lambda s: _margin(s, "r_margin", {"cp": 0.4}), lambda r: r["r_margin_loss"]),
    "Multi-Similarity (roth)": ("oodml", lambda s: _loss(s, "multisimilarity", oodml_inputs, beta=40.0,
                                                         variant="roth"), lambda r: r["ms_oodml"]),
    "Multi-Similarity (lg_code)": ("oodml", lambda s: _loss(s, "multisimilarity", oodml_inputs, beta=40.0,
                                                            variant="lg_code"), lambda r: r["ms_lg"]),
    "ArcFace (roth)": ("oodml", _arcface_oodml, lambda r: r["arcface_oodml"]),
    "class-swap splits": ("oodml", _swap_splits, lambda r: r["swap_splits"]),
    "class-removal splits": ("oodml", _removal_splits, lambda r: r["removal_splits"]),
    "CurricularFace": ("puma", _curricularface, lambda r: r["cf_losses"] + r["cf_pos_sim"]),
    "ArcFace (puma)": ("puma", _arcface_puma, lambda r: r["arc_loss"]),
    "Triplet (puma)": ("puma", lambda s: _loss(s, "triplet", _normalised(puma_inputs), variant="puma", margin=0.05),
                       lambda r: r["triplet"]),
    "Multi-Similarity (puma)": ("puma", _puma_ms, lambda r: r["ms"]),
    "Margin (puma)": ("puma", lambda s: _loss(s, "margin", _normalised(puma_inputs), variant="puma"),
                      lambda r: r["margin"]),
    "Hyp (puma)": ("puma", lambda s: _loss(s, "hyp", puma_inputs, tau=0.1, divisor="all_pairs"),
                   lambda r: r["supcon_hyp"]),
}


def _difference(ours, theirs) -> float:
    if isinstance(theirs, list) and theirs and isinstance(theirs[0], list):   # index triplets: equal or not
        return 0.0 if ours == theirs else float("inf")
    return float(np.max(np.abs(np.asarray(ours, dtype=float) - np.asarray(theirs, dtype=float))))


@functools.lru_cache(maxsize=1)
def agreement() -> pd.Series:
    """Per check, the largest |umlkit - official| over the reference seeds (0 for identical triplets, inf if any
    triplet differs)."""
    ref = reference()
    return pd.Series({name: max(_difference(ours(s), key(ref[paper][s])) for s in SEEDS)
                      for name, (paper, ours, key) in CHECKS.items()}, name="max |umlkit - official|")


def pieces() -> list[dict]:
    """The pieces of ``data/fidelity.yaml``, each checked for its fields."""
    path = repo_root() / "data" / "fidelity.yaml"
    items = read_yaml(path)["pieces"]
    need = {"paper", "piece", "text", "official", "umlkit", "status"}
    for i, p in enumerate(items):
        if missing := need - set(p):
            raise ValueError(f"{path}: piece {i} ({p.get('piece', '?')!r}) lacks {sorted(missing)}")
        if p.get("check") is not None and p["check"] not in CHECKS:
            raise ValueError(f"{path}: piece {p['piece']!r} names check {p['check']!r}; known: {sorted(CHECKS)}")
    return items


def _shown(check: str, value: float) -> str:
    if is_exact(check):
        what = "splits" if check.endswith("splits") else "triplets"
        return f"identical {what}" if value == 0 else f"{what} differ"
    return f"max difference {value:.1e}"


def fidelity_table(paper: str | None = None) -> pd.DataFrame:
    """The page's table: one row per piece (of ``paper``, or all), with the measured agreement where a reference is
    stored."""
    got = agreement()

    def agreed(p: dict) -> str:
        return _shown(p["check"], got[p["check"]]) if p.get("check") else p.get("agreement", "not stored")
    from umlkit.experiments.tables.registry import papers
    title = {name: entry.title.split(" (")[0] or name for name, entry in papers().items()}   # "ooDML", not "oodml"
    rows = [{"paper": title.get(p["paper"], p["paper"]), "piece": p["piece"], "the paper's text": p["text"],
             "official code": p["official"],
             "umlkit": p["umlkit"], "agreement on the reference inputs": agreed(p),
             "status": p["status"] + (f": {p['why']}" if p.get("why") else "")}
            for p in pieces() if paper is None or p["paper"] == paper]
    return pd.DataFrame(rows)
