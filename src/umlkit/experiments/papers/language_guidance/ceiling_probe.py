"""The ceiling probe (issue 61, item 4): do language guidance's Table 2 claims become testable on a harder UML-Mini?

On the default world the CUB- and Cars-like sources let Multi-Similarity reach 87 and 98 R@1, so a gain of a few
points has no room to show and the claims read "at ceiling". The probe trains Table 2's Multi-Similarity rows with
and without ELG on the hard variant of the two sources (``data.root: uml_mini:hard``, :data:`umlkit.data.mini.SIZES`:
the same classes, layouts and counts with the generator's difficulty knobs turned up), tuned as the chapter tunes
them except for the rate: omega is chosen again on the hard world's validation classes from the chapter's grid, the
learning rate stays the one ooDML's protocol chose on the default world. Three seeds per row, and the claim test of
the book's verdict rule on R@1 and MAP@R.

Its records live in their own results folder (``probe_root``), never in the book's: no table reads them.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from umlkit.experiments.claims.verdicts import CEILING, claim_test

__all__ = ["HARD_ROOT", "SOURCES", "ROWS", "probe_jobs", "omega_jobs", "frozen_jobs", "probe_frame", "probe_claims",
           "chosen_omegas", "probe_root"]

HARD_ROOT = "uml_mini:hard"
SOURCES = ("cub", "cars")
ROWS = ("Multisimilarity", "Multisimilarity + ELG")


def _hard(key: dict) -> dict:
    key = json.loads(json.dumps(key))
    key["config"]["data"]["root"] = HARD_ROOT
    return key


def frozen_jobs(profile: str = "quick") -> list[tuple]:
    """(label, key) of the frozen backbone on each source's hard test classes."""
    from umlkit.experiments.papers.language_guidance import config as lg
    from umlkit.experiments.tables.table import Row
    return [(f"{s}-zero_shot", _hard(lg.config_for(Row(spec={"zero_shot": True, "source": s}), 0, profile)))
            for s in SOURCES]


def omega_jobs(profile: str = "quick") -> list[tuple]:
    """(label, key) of the omega sweep on the hard world's validation classes (seed 0; the unguided row once)."""
    from umlkit.experiments.papers.language_guidance import config as lg
    out = []
    for s in SOURCES:
        out.append((f"{s}-Multisimilarity-val", _hard(lg.omega_key("Multisimilarity", None, profile, 0, s))))
        for w in lg.omega_grid("Multisimilarity + ELG", source=s):
            out.append((f"{s}-Multisimilarity + ELG-w{w:g}-val", _hard(lg.omega_key("Multisimilarity + ELG", w, profile,
                                                                                    0, s))))
    return out


def probe_jobs(omegas: dict[str, float], profile: str = "quick", seeds=(0, 1, 2)) -> list[tuple]:
    """(label, key) of the test runs: both rows on both sources, ``seeds``, ELG at ``omegas[source]``."""
    from umlkit.experiments.papers.language_guidance import config as lg
    from umlkit.experiments.tables.table import Row
    out = []
    for s in SOURCES:
        analysis = lg.config_for(Row(spec={"method": "Multisimilarity", "source": s}), 0, profile)["analysis"]
        for seed in seeds:
            for row, w in (("Multisimilarity", None), ("Multisimilarity + ELG", omegas[s])):
                cfg = lg.run_config(profile, method=row, source=s, seed=seed, omega=w)
                out.append((f"{s}-{row}-seed{seed}", _hard({"config": cfg, "analysis": analysis})))
    return out


def probe_frame(records: dict[str, dict]) -> pd.DataFrame:
    """One line per (source, row, seed) of the stored probe records ``{label: record}``: R@1 and MAP@R on the test
    classes (``val`` runs: on the validation classes)."""
    lines = []
    for label, rec in records.items():
        source, rest = label.split("-", 1)
        test = rec["result"]["test"]
        name = {"cub": "CUB", "cars": "Cars"}[source]
        lines.append({"source": source, "label": rest, "R@1": test["R@1"][name], "MAP@R": test["MAP@R"][name]})
    return pd.DataFrame(lines)


def probe_claims(frame: pd.DataFrame) -> pd.DataFrame:
    """"Multisimilarity + ELG beats Multisimilarity" per source and metric on the probe's seeds: the gap, its 95 %
    interval, the raw verdict, and whether both cells sit at the ceiling."""
    out = []
    for s in SOURCES:
        for metric in ("R@1", "MAP@R"):
            def cell(row):
                sub = frame[(frame["source"] == s) & frame["label"].str.fullmatch(rf"{row}-seed\d+", case=True)]
                return {int(lab.rsplit("seed", 1)[1]): v for lab, v in zip(sub["label"], sub[metric])}
            a, b = cell(r"Multisimilarity \+ ELG"), cell("Multisimilarity")
            if len(a) < 3 or len(b) < 3:
                continue
            res = claim_test(a, b)
            out.append({"source": s, "metric": metric, "ELG": np.mean(list(a.values())),
                        "baseline": np.mean(list(b.values())), "gap": res["gap"], "low": res["low"],
                        "high": res["high"], "p": res["p"], "raw verdict": res["verdict"],
                        "at ceiling": metric == "R@1" and min(np.mean(list(a.values())),
                                                              np.mean(list(b.values()))) >= CEILING})
    return pd.DataFrame(out)


def chosen_omegas(records: dict[str, dict]) -> dict[str, float]:
    """Per source, the omega whose validation run scored the best MAP@R (the chapter's selection rule) among the
    stored sweep records ``{label: record}``; a source without sweep records is left out."""
    best: dict[str, tuple[float, float]] = {}
    for label, rec in records.items():
        source, rest = label.split("-", 1)
        if "-w" not in rest:
            continue
        w = float(rest.rsplit("-w", 1)[1].split("-", 1)[0])
        score = rec["result"]["test"]["MAP@R"][{"cub": "CUB", "cars": "Cars"}[source]]
        if source not in best or score > best[source][1]:
            best[source] = (w, score)
    return {s: w for s, (w, _) in best.items()}


def probe_root() -> Path:
    """The probe's own results folder (``results/ceiling_probe``, beside the profiles' and never read by a
    table); its records sit under ``<probe_root>/quick/records``."""
    from umlkit._paths import results_root
    return results_root() / "ceiling_probe"
