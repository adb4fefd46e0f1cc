"""Issue 59 item 3: no number typed in a chapter's prose unless it is glued, a paper's number, a setting, or allowed
with its reason (umlkit._typed_numbers)."""
import itertools
import json
from pathlib import Path

import numpy as np
import yaml

from umlkit._typed_numbers import typed_numbers, unexplained_numbers

ROOT = Path(__file__).resolve().parents[1]


def test_no_chapter_types_an_unexplained_number():
    found, stale = unexplained_numbers(ROOT)
    assert not found, "typed numbers with no source (glue them, or give a reason in book/_typed_numbers.yaml):" \
        + "".join(f"\n  {t['chapter']} (cell {t['cell']}): {t['number']} in '{t['context']}'" for t in found)
    assert not stale, f"book/_typed_numbers.yaml allows numbers no chapter types any more: {stale}"


def _toy(root: Path, prose: str, allowed: dict) -> None:
    (root / "book").mkdir()
    cells = [{"cell_type": "markdown", "id": "m1", "metadata": {}, "source": prose},
             {"cell_type": "code", "id": "c1", "metadata": {}, "outputs": [], "source": "x = 99.9"}]
    (root / "book" / "toy.ipynb").write_text(json.dumps({"cells": cells}))
    (root / "book" / "_typed_numbers.yaml").write_text(yaml.safe_dump(allowed))
    (root / "configs").mkdir()
    (root / "configs" / "toy.yaml").write_text("train: {epochs: 15, images: 2000}\n")
    (root / "data" / "paper_tables").mkdir(parents=True)
    (root / "data" / "paper_tables" / "toy.csv").write_text("table,section,method,setting,dataset,metric,value\n"
                                                            "Table 2,,A,,CUB,R@1,61.2\n")


def test_a_typed_measurement_is_found_and_sources_are_not(tmp_path):
    prose = ("In Table 2 (WACV 2025) A reaches 63.9 R@1 against the paper's 61.2, {glue:text}`gap` points, after 15 "
             "epochs on 2,000 images with ViT-S/16 and `lr=0.001` [12, 14]; $x^2 + 0.5$; |ρ| above 0.64.")
    _toy(tmp_path, prose, {"toy": {"0.64": "a critical value", "7": "a sentence that is gone"}})
    assert [t["number"] for t in typed_numbers(tmp_path)] == ["63.9", "61.2", "15", "2,000", "0.64"]
    found, stale = unexplained_numbers(tmp_path)
    assert [(t["chapter"], t["number"]) for t in found] == [("toy", "63.9")]
    assert "reaches 63.9 R@1" in found[0]["context"]
    assert stale == ["toy: 7"]


def test_an_allowance_without_a_reason_is_refused(tmp_path):
    import pytest
    _toy(tmp_path, "nothing typed", {"toy": {"3": ""}})
    with pytest.raises(ValueError, match="_typed_numbers.yaml: expected .* a reason for every number"):
        unexplained_numbers(tmp_path)


def test_the_allowed_spearman_critical_value_is_the_exact_one_for_eight_sources():
    """PUMA's page: with n = 8, a one-sided 5 % permutation test needs rho of about 0.64 (over all 8! orderings)."""
    n = 8   # rho = 1 - 6 D / (n (n^2 - 1)) with D the sum of squared rank differences: count in integers
    squares = np.array([sum((i - j) ** 2 for i, j in enumerate(p)) for p in itertools.permutations(range(n))])
    largest = max(dc for dc in np.unique(squares) if (squares <= dc).mean() <= 0.05)
    assert f"{1 - 6 * largest / (n * (n * n - 1)):.2f}" == "0.64"
    assert "0.64" in yaml.safe_load((ROOT / "book" / "_typed_numbers.yaml").read_text())["puma"]
