"""While the second edition retrains a paper's sweep (configs/second_edition.yaml ``in_progress``), its records are
a mix of editions and its choice may move: the tests that compare configured values with the sweep's argmax check
what still holds (each configured value is one the sweep tries) and skip the comparison, naming the choices that
move so far. Once the entry is removed the full comparison runs again."""
from __future__ import annotations

import pytest

from umlkit.experiments.claims.editions import retrain_reason


def wait_while_retuning(paper: str, sweep: str, configured: dict, chosen: dict, tried: dict) -> None:
    """Skip while ``paper``'s ``sweep`` retrains, after asserting each configured value is in its unit's ``tried``
    values; ``configured``, ``chosen`` (the current argmax) and ``tried`` map a unit to its value(s)."""
    reason = retrain_reason(paper, sweep, whole_paper=False)
    if not reason:
        return
    moved = []
    for unit, have in configured.items():
        if unit in tried:
            assert any(have == pytest.approx(v) for v in tried[unit]), (paper, sweep, unit, have, tried[unit])
        if unit in chosen and have != pytest.approx(chosen[unit]):
            moved.append(f"{unit} {have:g} -> {chosen[unit]:g}")
    pytest.skip(f"{paper} {sweep}: {reason}; {len(moved)} choice(s) move so far, e.g. {moved[:3]}")


def tried_values(frame, unit_columns: list[str], value: str) -> dict:
    """Each unit's values in a sweep frame (unit: a column's value, or a tuple of several)."""
    keys = frame[unit_columns[0]] if len(unit_columns) == 1 else list(zip(*(frame[c] for c in unit_columns)))
    out: dict = {}
    for k, v in zip(keys, frame[value]):
        out.setdefault(k, []).append(float(v))
    return out
