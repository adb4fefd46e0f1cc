"""umlkit.experiments.tables.table: the exact join with the paper, the saved long format with status, the paper-layout
view and the claims' verdicts, on hand-made frames."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from umlkit.experiments.papers import puma
from umlkit.experiments.tables import table as tb

B = puma.SECTIONS["b"]
C = puma.SECTIONS["c"]



def _c(section: str, method: str) -> dict:
    """A Harmonic cell of PUMA's Table 2 (as its tables.yaml spells them)."""
    return {"section": puma.SECTIONS[section], "method": method, "setting": puma.VIT_S, "dataset": "Harmonic"}

def _measured(values: dict, table="Table 2", section=B, method="CurricularFace", setting=puma.VIT_S, row=None):
    rows = []
    for seed, per in values.items():
        rows += [{"table": table, "section": section, "method": method, "setting": setting,
                  "row": row or method or setting, "seed": seed, "dataset": d, "metric": "R@1", "value": v,
                  "stale": ""} for d, v in per.items()]
    return pd.DataFrame(rows)


def test_compare_mean_spread_and_exact_paper_join():
    m = _measured({0: {"CUB": 70.0, "Harmonic": 50.0}, 1: {"CUB": 74.0, "Harmonic": 52.0}})
    cmp = tb.compare(m, "puma").set_index("dataset")
    # sample std: sqrt(8)
    assert ((cmp.loc["CUB", "measured"], cmp.loc["CUB", "spread"], cmp.loc["CUB", "seeds"])
            == (72.0, pytest.approx(2 ** 1.5), 2))
    assert cmp.loc["CUB", "paper"] == 78.3                       # Table 2 (b) CurricularFace CUB as printed
    assert cmp.loc["CUB", "delta"] == pytest.approx(72.0 - 78.3)
    assert cmp.loc["Harmonic", "paper"] == 79.5
    # a setting the paper does not use joins nothing (no silent fallback to another row)
    other = tb.compare(_measured({0: {"CUB": 1.0}}, setting="backbone=tiny ViT"), "puma")
    assert other["paper"].isna().all()
    t3 = tb.compare(_measured({0: {"Harmonic": 40.0}}, table="Table 3", section="", method="",
                              setting="prompt=none;adapter=Stat."), "puma")
    assert t3["paper"].tolist() == [80.8]


def test_results_frame_lists_every_paper_cell_with_a_status():
    spec = puma.TABLE5("quick")
    shipped = [r for r in spec.rows if puma.backbones_quick("quick")[r.group]["paper"]]   # stands in for ViT-S/16
    lines = []
    for r in shipped:
        lines += tb.score_rows("Table 5", r, 0, {d: 10.0 for d in puma.DATASET_COLUMNS}, "R@1", puma.DATASET_COLUMNS)
    cmp = tb.compare(pd.DataFrame(lines).assign(stale=""), "puma")
    assert cmp["paper"].notna().all() and len(cmp) == 3 * 10    # the shipped tiny ViT joins the ViT-S/16 cells
    out = tb.results_frame(spec, cmp, "quick", rows=shipped)
    assert list(out.columns[:len(tb.RESULT_COLUMNS)]) == tb.RESULT_COLUMNS
    paper = puma.paper_table("puma", "Table 5")
    assert len(out) == len(paper)                               # every paper cell appears once
    other = out[out["setting"].str.startswith(("arch=DeiT", "arch=DINO", "arch=CLIP"))]
    assert len(other) == 90 and other["status"].str.startswith("full-profile only:").all()
    assert other["measured"].isna().all() and (out.loc[out["status"] == "", "measured"] == 10.0).all()


def test_full_profile_rows_join_every_paper_cell_of_tables_2_to_5():
    """Simulated full-profile measurements (every row, every column): each paper cell is joined exactly once."""
    for spec in puma.TABLES("full").values():
        cols = tb._columns(spec)
        lines = []
        for i, r in enumerate(spec.rows):   # the zero-shot row first, every trained row above it
            lines += tb.score_rows(spec.table, r, 0, {d: 1.0 + 5 * i for d in cols}, "R@1", cols)
            lines += tb.params_rows(spec.table, r, 0, 1000)
        cmp = tb.compare(pd.DataFrame(lines).assign(stale=""), "puma")
        paper = puma.paper_table("puma", spec.table)
        joined = cmp.dropna(subset=["paper"])
        assert len(joined) == len(paper), spec.table
        out = tb.results_frame(spec, cmp, "full")
        assert (out["status"] == "").all(), spec.table


def test_side_by_side_is_the_papers_layout():
    m = pd.concat([_measured({0: {"CUB": 70.0, "Harmonic": 50.0}, 1: {"CUB": 74.0, "Harmonic": 52.0}}),
                   _measured({0: {"CUB": 60.0, "Harmonic": 40.0}}, section=C, method="Ours")])
    m.loc[m["method"] == "Ours", "stale"] = "code"
    sbs = tb.side_by_side(tb.compare(m, "puma"))
    assert list(sbs.columns) == ["CUB", "Harmonic"]
    assert sbs.loc[("(b)", "CurricularFace"), "CUB"] == "72.0 ±2.8 (78.3)"
    assert sbs.loc[("(c)", "Ours"), "CUB"] == "60.0 (83.9) †"
    note = " ".join(tb.stale_note(tb.compare(m, "puma")).split())   # wrapped to the page's width
    assert "Ours" in note and "code" in note and "umlkit reproduce --stale" in note


def test_seeds_read_beyond_a_rows_own_are_counted_marked_and_named():
    """A cell that counts seeds another table's claims asked for (measure's ``borrowed``) says so: ‡ in the table
    and a note naming the row and how many of its seeds are borrowed; a table without such seeds has neither."""
    m = _measured({0: {"CUB": 70.0}, 1: {"CUB": 72.0}, 2: {"CUB": 74.0}, 3: {"CUB": 76.0}})
    m["borrowed"] = m["seed"] >= 2
    cmp = tb.compare(m, "puma")
    assert cmp["borrowed"].tolist() == [2] and cmp["seeds"].tolist() == [4]
    assert tb.side_by_side(cmp).loc[("(b)", "CurricularFace"), "CUB"] == "73.0 ±2.6 (78.3) ‡"
    assert " ".join(tb.borrowed_note(cmp).split()).endswith("CurricularFace (2 of 4 seeds).")
    own = tb.compare(m.assign(borrowed=False), "puma")
    assert tb.borrowed_note(own) == "" and not tb.side_by_side(own).iloc[0, 0].endswith("‡")


def test_vptsp_table6_names_the_hyp_seeds_it_reads_from_table2(no_training):
    """VPTSP's Table 6 trains Hyp on seeds 0-2; the seeds 3 and 4 that Table 2's claims asked for are the same runs
    and counted, marked as borrowed (issue 82, item 7)."""
    from umlkit.experiments.papers import vptsp
    spec = vptsp.TABLES("quick")["Table 6"]
    cmp = tb.compare(tb.measure(spec, train=False, progress=False, log=None), "vptsp")
    hyp = cmp[(cmp["method"] == "Hyp") & (cmp["metric"] == "R@1")].iloc[0]
    own = spec.seeds_of(next(r for r in spec.rows if r.method == "Hyp"), "quick")
    assert hyp["borrowed"] == hyp["seeds"] - len(own) > 0
    assert "Hyp" in tb.borrowed_note(cmp)


def test_check_claims_verdicts():
    rows = {"Ours": (50.0, 52.0, 51.0), "VPT": (40.0, 41.0, 40.5), "LoRA": (50.5, 51.0, 51.8),
            "AdaptFormer": (60.0, 60.0, 61.0), "VPTSP-G": (51.5, 51.5, 49.0)}
    m = pd.concat([_measured({s: {"Harmonic": v} for s, v in enumerate(vals)}, section=C, method=k)
                   for k, vals in rows.items()])
    cmp = tb.compare(m, "puma")
    assert cmp.set_index("method").loc["Ours", "spread"] == pytest.approx(1.0)   # sample std of 50, 52, 51
    claims = [tb.Claim(f"Ours > {x}", _c("c", "Ours"), _c("c", x)) for x in list(rows)[1:]]
    out = tb.check_claims(cmp, claims).set_index("claim")
    assert out.loc["Ours > VPT", "verdict"] == "reproduced"               # gap 10.5, se² = 1/3 + 0.25/3 -> t = 16.27
    assert out.loc["Ours > LoRA", "verdict"] == "inconclusive"           # gap -0.1
    assert out.loc["Ours > AdaptFormer", "verdict"] == "contradicted"    # gap -9.3
    assert out.loc["Ours > VPTSP-G", "verdict"] == "inconclusive"        # gap 0.5, spread 1.4
    assert out.loc["Ours > VPT", "test"].startswith("Welch t: t=16.27, df=2.9")
    assert bool(out.loc["Ours > VPT", "holds in paper"]) is True         # paper: 84.1 vs 70.4
    one = tb.compare(pd.concat([_measured({0: {"Harmonic": 50.0}}, section=C, method="Ours"),
                                _measured({0: {"Harmonic": 49.0}}, section=C, method="VPT")]), "puma")
    single = tb.check_claims(one, claims[:1]).iloc[0]
    assert single["verdict"] == "holds, 1 seed" and single["seeds"] == 1 and np.isnan(single["p"])
    reverse = tb.Claim("r", claims[0].b, claims[0].a)
    assert tb.check_claims(one, [reverse]).iloc[0]["verdict"] == "not reproduced, 1 seed"
    with pytest.raises(KeyError, match="matches 0 rows"):
        tb.check_claims(cmp, [tb.Claim("x", _c("c", "MLP-3 Embedding"), _c("c", "VPT"))])


def test_claim_test_welch_by_hand_and_against_scipy():
    from scipy import stats
    r = tb.claim_test([1.0, 2.0, 3.0], [0.0, 0.0, 1.0])
    # by hand: gap 5/3, s² = 1 and 1/3, se² = 1/3 + 1/9 = 4/9 -> t = 2.5; df = (4/9)² / ((1/3)²/2 + (1/9)²/2) = 3.2
    assert r["t"] == pytest.approx(2.5) and r["df"] == pytest.approx(3.2)
    assert r["se"] == pytest.approx(2 / 3)
    rng = np.random.default_rng(0)
    for _ in range(20):
        a, b = rng.normal(1, 1, int(rng.integers(3, 8))), rng.normal(0, 2, int(rng.integers(3, 8)))
        ref = stats.ttest_ind(a, b, equal_var=False, alternative="greater")
        got = tb.claim_test(list(a), list(b))
        assert got["t"] == pytest.approx(ref.statistic) and got["p"] == pytest.approx(ref.pvalue)
        assert got["df"] == pytest.approx(ref.df)
        # two-sided: each direction at alpha / 2
        assert got["verdict"] == ("reproduced" if ref.pvalue < 0.025 else
                                  "contradicted" if ref.pvalue > 0.975 else "inconclusive")
        # an exact (seed-free) B is the one-sample test against its value
        one = stats.ttest_1samp(a, b[0], alternative="greater")
        assert tb.claim_test(list(a), [b[0]], exact_b=True)["p"] == pytest.approx(one.pvalue)
        # paired: the one-sample test of the differences over the common seeds
        n = min(len(a), len(b))
        rel = stats.ttest_rel(a[:n], b[:n], alternative="greater")
        got = tb.claim_test(dict(enumerate(a)), dict(enumerate(b)), paired=True)
        assert got["p"] == pytest.approx(rel.pvalue) and got["test"].startswith("paired t")


def test_claim_test_edge_cases():
    assert tb.claim_test([1.0, 1.0], [0.0, 0.0, 0.0])["verdict"] == "holds, 2 seeds"       # too few seeds
    assert tb.claim_test([5.0, 5.0, 5.0], [4.0, 4.0, 4.0])["verdict"] == "reproduced"       # no variance: the sign
    same = tb.claim_test([4.0, 4.0, 4.0], [4.0, 4.0, 4.0])   # one run read twice: nothing to test
    assert same["verdict"] == tb.NOT_A_TEST and not tb.is_final(same["verdict"]) and np.isnan(same["p"])
    assert tb.claim_test([4.0], [5.0], exact_a=True, exact_b=True)["verdict"] == "contradicted"
    assert tb.claim_test({0: 1.0, 1: 2.0}, {1: 1.0, 2: 0.0, 3: 0.0}, paired=True)["verdict"] == "holds, 1 seed"
    with pytest.raises(TypeError, match="paired"):
        tb.claim_test([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], paired=True)
    # non-finite values are dropped before counting seeds
    nan = tb.claim_test([5.0, float("nan"), 5.1, 4.9], [4.0, 4.1, 3.9])
    assert nan["n"] == 3 and nan["verdict"] == "reproduced" and np.isfinite(nan["t"])
    assert tb.claim_test([5.0, float("nan"), 5.1], [4.0, 4.1, 3.9])["verdict"] == "holds, 2 seeds"
    # float noise is no gap
    assert tb.claim_test([1.0, 1.0, 1.0], [1.0 - 1e-15, 1.0 - 1e-15, 1.0 - 1e-15])["verdict"] == tb.NOT_A_TEST
    # paired: the common seeds count
    part = tb.claim_test({0: 2.0, 1: 3.0, 2: 4.0}, {1: 1.0, 2: 2.0, 3: 0.0}, paired=True)
    assert part["n"] == 2 and part["verdict"] == "holds, 2 seeds" and "common" in part["test"]
    assert tb.verdict_group("holds, 2 seeds") == "holds (< 3 seeds)" and tb.verdict_group("reproduced") == "reproduced"
    assert all(f"'{v}'" in tb.VERDICT_RULE + tb.HOLM_RULE for v in tb.VERDICTS)
    assert f"p < {tb.ALPHA / 2:g}" in tb.VERDICT_RULE


def test_equivalence_is_two_one_sided_welch_tests():
    """TOST: "A matches B within d" = A + d beats B and A - d loses to B, each a one-sided Welch test (scipy on
    shifted values); p is the larger p-value."""
    from scipy import stats
    rng = np.random.default_rng(1)
    seen = set()
    for _ in range(30):
        a, b = rng.normal(rng.normal(0, 1.5), 0.6, int(rng.integers(3, 7))), rng.normal(0, 0.6, int(rng.integers(3, 7)))
        d = float(rng.uniform(0.3, 2.0))
        lo = stats.ttest_ind(a + d, b, equal_var=False, alternative="greater").pvalue
        hi = stats.ttest_ind(a - d, b, equal_var=False, alternative="less").pvalue
        out = min(stats.ttest_ind(a + d, b, equal_var=False, alternative="less").pvalue,
                  stats.ttest_ind(a - d, b, equal_var=False, alternative="greater").pvalue)
        got = tb.claim_test(list(a), list(b), margin=d)
        assert got["p"] == pytest.approx(max(lo, hi)) and got["test"].startswith("TOST (Welch t, margin")
        want = "reproduced" if max(lo, hi) < 0.025 else ("contradicted" if out < 0.025 else "inconclusive")
        assert got["verdict"] == want
        seen.add(want)
    assert seen == {"reproduced", "contradicted", "inconclusive"}
    # by hand: a = (1, 2, 3), b = (1, 1, 1) exact -> gap 1, se = 1/sqrt(3); margin 3: t = (1 - 3) sqrt(3) = -3.46
    r = tb.claim_test([1.0, 2.0, 3.0], [1.0], exact_b=True, margin=3.0)
    assert r["t"] == pytest.approx(-2 * np.sqrt(3)) and r["df"] == 2
    assert r["p"] == pytest.approx(stats.t.cdf(-2 * np.sqrt(3), 2))
    assert tb.claim_test([5.0, 5.0], [4.0, 4.0], margin=2.0)["verdict"] == "holds, 2 seeds"
    assert tb.claim_test([5.0, 5.0], [1.0, 1.0], margin=2.0)["verdict"] == "not reproduced, 2 seeds"
    assert tb.claim_test([5.0, 5.0, 5.0], [4.5, 4.5, 4.5], margin=1.0)["verdict"] == "reproduced"    # exact inside
    with pytest.raises(ValueError, match="margin must be > 0"):
        tb.claim_test([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], margin=0.0)


def test_a_seed_free_cell_counts_as_exact():
    m = pd.concat([_measured({s: {"Harmonic": v} for s, v in enumerate((50.0, 51.0, 52.0))}, section=C, method="Ours"),
                   _measured({0: {"Harmonic": 48.0}}, section=C, method="VPT").assign(seed_free=True)])
    cmp = tb.compare(m.fillna({"seed_free": False}), "puma")
    out = tb.check_claims(cmp, [tb.Claim("x", _c("c", "Ours"), _c("c", "VPT"))]).iloc[0]
    # the one-sample t of (50, 51, 52) against 48: t = 3 / (1 / sqrt(3)) = 5.20 on 2 df, one-sided p 0.018 < 0.025
    assert out["seeds"] == 3 and out["verdict"] == "reproduced" and out["test"].startswith("Welch t: t=5.20, df=2, ")


def test_rank_view_by_hand():
    import pandas as pd

    from umlkit.experiments.tables.table import rank_view
    cmp = pd.DataFrame({"section": ["", "(b) x", "(c) y", "(c) y"], "row": ["Zero-Shot", "FT", "A", "B"],
                        "dataset": "Harmonic", "metric": "R@1",
                        "paper": [60.0, 80.0, 85.0, 70.0], "measured": [30.0, 50.0, 40.0, 45.0]})
    v = rank_view(cmp, gain=(("", "Zero-Shot"), ("(b)", "FT")))
    assert v["row"].tolist() == ["A", "FT", "B", "Zero-Shot"]                    # by paper rank
    assert v["measured rank"].tolist() == [3, 1, 2, 4] and v["rank shift"].tolist() == [-2, 1, 1, 0]
    assert v["paper gain"].tolist() == [1.25, 1.0, 0.5, 0.0] and v["measured gain"].tolist() == [0.5, 1.0, 0.75, 0.0]
    assert v.attrs["spearman"] == pytest.approx(0.4)                             # 1 - 6*6/(4*15)
    with pytest.raises(KeyError, match="matches 0 rows"):
        rank_view(cmp, gain=(("", "nope"), ("(b)", "FT")))


def test_distinct_jobs_lists_each_configuration_once_with_per_row_seeds():
    """Seed-major; a configuration two tables share is one job; a row's own seeds win; a seed-free row once."""
    from umlkit.experiments.tables.table import Row, Table, distinct_jobs

    def config(row, seed, profile, overrides):
        return {"m": row.spec["m"], "seed": 0 if row.seed_free else seed}
    a = Table("p", "Table A", [Row(method="x", spec={"m": 1}, label="x"),
                               Row(method="z", spec={"m": 0}, label="z", seed_free=True)], config, seeds=(0, 1))
    b = Table("p", "Table B", [Row(method="x", spec={"m": 1}, label="x-again"),
                               Row(method="y", spec={"m": 2, "seeds": (1,)}, label="y", runner="other")], config,
              seeds=(0, 1))
    jobs = distinct_jobs({"A": a, "B": b})
    assert [(f, label, r) for f, label, _, r in jobs] == [
        ("tablea", "x-seed0", "train"), ("tablea", "z-seed0", "train"),
        ("tablea", "x-seed1", "train"), ("tableb", "y-seed1", "other")]
    assert [j[1] for j in distinct_jobs({"B": b}, seeds=(0,))] == ["x-again-seed0", "y-seed0"]   # seeds for all rows


def test_measure_reads_a_seed_free_row_at_its_first_seed_only(tmp_path, monkeypatch):
    """A seed-free row (a frozen backbone) is one exact record: measure() must not train it again per seed, as
    distinct_jobs() does not list it per seed."""
    from umlkit.experiments.runs.runners import RUNNERS
    from umlkit.experiments.tables.table import Row, Table, measure
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path))
    calls = []
    from umlkit.experiments.papers.puma import run_config
    monkeypatch.setitem(RUNNERS, "count_calls", lambda key: calls.append((key["model"]["method"], key["seed"]))
                        or {"test": {"CUB": 50.0 + key["seed"]}})
    rows = [Row(method="Zero-Shot", runner="count_calls", seed_free=True, spec={"method": "zero_shot"}),
            Row(method="Ours", runner="count_calls", spec={"method": "puma"})]
    spec = Table("puma", "Seed test", rows, lambda row, seed, profile, over: run_config(
        profile, method=row.spec["method"], seed=seed), seeds=(0, 1, 2), params=False, columns=["CUB"])
    m = measure(spec, "quick", progress=False, log=None)
    assert sorted(calls) == [("puma", 0), ("puma", 1), ("puma", 2), ("zero_shot", 0)]
    assert sorted(m[m["method"] == "Zero-Shot"]["seed"]) == [0]


def test_run_table_measures_compares_marks_and_saves_like_a_chapter(tmp_path, monkeypatch):
    """The chapters' one helper: VPTSP Table 10 (derived from its benchmark file, no records) measured, compared with
    the paper's printed times and saved as results/<profile>/vptsp_table10.csv; an unmeasured table is saved only
    when asked and when it has no rows of its own."""
    from umlkit.experiments.papers import vptsp
    from umlkit.experiments.tables import table as tables
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path))
    spec = vptsp.TABLES("quick")["Table 10"]
    m, cmp = tables.run_table(spec, "quick", floors=False)
    saved = tmp_path / "quick" / "vptsp_table10.csv"
    # the committed quick CPU step-time file (benchmarks/results/vptsp_table10_quick_cpu.json) is measured
    assert not m.empty and saved.is_file() and cmp["paper"].notna().any()
    assert set(cmp["method"]) == set(m["method"]) and "floor" not in cmp   # floors=False: no marks
    t3 = vptsp.TABLES("quick")["Table 3"]   # quoted cells only: saved with save_unmeasured
    tables.run_table(t3, "quick", save_unmeasured=True)
    assert (tmp_path / "quick" / "vptsp_table3.csv").is_file()


def test_metric_blocks_follow_the_papers_blocks_and_quoted_rows_say_why():
    """VPTSP Table 2 prints R@1/2/4 for CUB and Cars, R@1/10/100 for SOP and R@1/10/20 for In-shop: one frame of
    (dataset, metric) columns without R@1 (shown on its own), "measured (paper)" cells with no spread; the
    ViT-B/16 rows and RS@K, which the quick profile does not run, are listed with their reasons."""
    from umlkit.experiments.papers import vptsp
    spec = vptsp.TABLES("quick")["Table 2"]
    setting = "batch_size=64/32;arch=ViT-S16;dim=384"
    lines = [{"table": "Table 2", "section": "", "method": "VPT-Base", "setting": setting, "row": "VPT-Base",
              "seed": seed, "dataset": d, "metric": m, "value": v + seed, "stale": ""}
             for seed in (0, 1) for d, m, v in (("CUB", "R@1", 90.0), ("CUB", "R@2", 95.0), ("CUB", "R@4", 97.0),
                                               ("SOP", "R@10", 80.0), ("SOP", "R@100", 96.0))]
    cmp = tb.compare(pd.DataFrame(lines), "vptsp")
    blocks = tb.metric_blocks(cmp, spec)
    assert list(blocks.columns) == [("CUB", "R@2"), ("CUB", "R@4"), ("SOP", "R@10"), ("SOP", "R@100")]
    assert blocks.loc["VPT-Base", ("CUB", "R@2")] == "95.5 (91.1)"   # mean of 95 and 96; the paper's 91.1
    quoted = tb.quoted_rows(spec, cmp, "quick").set_index("method")
    assert set(quoted.index) >= {"RS@K", "VPTSP-G"} and "VPT-Base" not in quoted.index
    assert quoted.loc["RS@K", "why not measured here"].startswith("quoted:")
