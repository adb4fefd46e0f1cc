"""The claims scoreboard reads stored records only: it never trains, and covers every declared claim."""
from umlkit.experiments.claims.verdicts import (
    AT_CEILING,
    CONTRADICTED,
    EXCLUDED,
    INCONCLUSIVE,
    NO_EFFECT,
    NO_EFFECT_INSIDE,
    NOT_A_TEST,
    REPRODUCED,
    SMALLER,
    STALE,
    TIMING,
)
from umlkit.experiments.tables.table import VERDICTS, is_final
from umlkit.experiments.views.scoreboard import declared_claims, scoreboard, scoreboard_summary


def test_scoreboard_checks_every_declared_claim_from_records(no_training, quick_board):
    board = quick_board
    declared = declared_claims("quick")
    puma = board[board["paper"] == "puma"]
    assert len(puma) == declared["puma"]
    in_progress = board["in_progress"].astype(bool)   # a table declared before its runs: its missing claims wait
    untested = (AT_CEILING, TIMING, NOT_A_TEST, STALE)
    assert all(is_final(v) or v in untested or v.startswith(("holds, ", "not reproduced, ", "not comparable: "))
               for v in board.loc[~in_progress, "verdict"])
    # a table under way may also read the sign of the gap from the seeds trained so far ("holds, 1 seed")
    assert all(is_final(v) or v in ("missing records", *untested)
               or v.startswith(("holds, ", "not reproduced, ", "not comparable: "))
               for v in board.loc[in_progress, "verdict"])
    # a reproduced or contradicted verdict after Holm was one before it, and its adjusted p is below the level; a
    # "no effect", "smaller than the paper's" or "paper's gap excluded" verdict has its own adjusted p below it
    final = board[board["verdict"].isin([REPRODUCED, CONTRADICTED])]
    assert (final["verdict"] == final["raw verdict"]).all() and (final["p adjusted"] < 0.05).all()
    assert (board.loc[board["verdict"].isin([NO_EFFECT, NO_EFFECT_INSIDE]), "p no effect"] < 0.05).all()
    assert (board.loc[board["verdict"].isin([SMALLER, EXCLUDED]), "p smaller"] < 0.05).all()
    # "smaller than the paper's" is a gain shown (issue 76: never a negative gap)
    assert (board.loc[board["verdict"] == SMALLER, "test gap"] > 0).all()
    assert (board.loc[board["verdict"] == SMALLER, "p adjusted"] < 0.05).all()
    assert (board["p adjusted"].dropna() >= board.loc[board["p adjusted"].notna(), "p decision"] - 1e-12).all()
    # no final verdict rests on a run below its frozen backbone: those read "not comparable" (VPTSP-G on the SOP-
    # and In-shop-like sources); each names the row and where it fell
    nc = board[board["verdict"].str.startswith("not comparable")]
    assert {"Hyp-ViT beats VPTSP-G (the gain turns on many-class sources) (SOP, R@1)",
            "VPTSP-G beats VPTSP-M (GRU beats EMA) (InShop, R@1)"} <= set(nc["claim"])
    assert nc["verdict"].str.match(r"not comparable: .+ \(.+\) (below its frozen backbone|collapsed|has a collapsed "
                                   r"seed|did not move from its frozen backbone)$").all()
    assert set(VERDICTS) == {REPRODUCED, INCONCLUSIVE, CONTRADICTED, NO_EFFECT, NO_EFFECT_INSIDE, SMALLER, EXCLUDED}
    assert set(puma["table"]) == {"Table 2", "Table 3", "Table 4", "Table 5", "Few-shot", "Budget"}
    assert set(board.loc[board["paper"] == "regime", "table"]) == {"Regime map", "Regime map, second edition",
                                                                    "Regime map, third edition"}
    summary = scoreboard_summary(board, declared)
    for paper in declared:   # every declared claim is on the board, checked
        under_way = summary.loc[paper].get("with runs under way", 0)   # a table declared before its runs
        assert summary.loc[paper, "checked"] + under_way == declared[paper] == (board["paper"] == paper).sum()
    beats, equiv = board[board["margin"].isna()], board[board["margin"].notna()]
    prelim = beats[beats["verdict"].str.startswith(("holds, ", "not reproduced, "))]
    for _, row in prelim.iterrows():   # too few seeds: the sign of the gap
        if abs(row["gap"]) >= 0.1:                                       # (the board's gap is rounded)
            assert (row["gap"] > 0) == row["verdict"].startswith("holds, ") and row["seeds"] < 3
    for _, row in beats[beats["verdict"] == "reproduced"].iterrows():
        assert row["p"] < 0.05 and row["measured A"] > row["measured B"] and row["seeds"] >= 3
    for _, row in equiv[equiv["verdict"] == "reproduced"].iterrows():    # "within d": the gap is inside the margin
        assert row["p"] < 0.05 and abs(row["gap"]) < row["margin"] and row["test"].startswith("TOST")
    lg = board[board["paper"] == "language_guidance"]
    assert "Table 2" in set(lg["table"]) and "Unified setting" in set(lg["table"])


def test_a_profile_without_records_keeps_every_claim_as_missing(no_training, monkeypatch, tmp_path):
    """Without training records only the claims read from a committed benchmark file (VPTSP Table 10's step
    times, benchmarks/results) are checked; every other declared claim stays on the board as "missing records",
    naming its cells, and counts in the summary. Nothing is written into the empty results folder."""
    from umlkit.experiments.papers import vptsp
    from umlkit.experiments.tables.table import MISSING
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path))
    board = scoreboard("quick")
    declared = declared_claims("quick")
    assert board.groupby("paper").size().to_dict() == declared
    checked = board[board["verdict"] != MISSING]
    assert set(zip(checked["paper"], checked["table"])) <= {("vptsp", "Table 10")}
    assert len(checked) == len(vptsp.table10_claims()) and (checked["seeds"] >= 3).all()
    lost = board[board["verdict"] == MISSING]
    assert (lost["missing"].str.len() > 0).all() and lost["missing"].str.contains(r"\(").all()
    summary = scoreboard_summary(board, declared)
    under_way = summary.get("with runs under way", 0)   # the missing claims of a table declared before its runs
    assert (summary["checked"] + summary[MISSING] + under_way == summary["declared"]).all()
    assert (summary[MISSING] + under_way).sum() == len(lost) and summary["checked"].sum() == len(checked)
    assert not any(tmp_path.rglob("*"))


def test_the_view_shows_gaps_seeds_the_test_and_the_verdict():
    import pandas as pd

    from umlkit.experiments.views.scoreboard import scoreboard_view
    board = pd.DataFrame({"paper": ["p", "p"], "table": ["T", "T"], "claim": ["a", "b"], "paper A": [80.0, 70.0],
                          "paper B": [70.0, 75.0], "gap": [3.2, -1.0], "seeds": [3, 1], "p": [0.0123, float("nan")],
                          "test": ["Welch t: t=4.10, df=3.1, p=0.0123", "none (fewer than 3 seeds)"],
                          "verdict": ["reproduced", "not reproduced, 1 seed"]})
    view = scoreboard_view(board)
    assert list(view.columns) == ["claim", "paper gap", "measured gap [95 % interval]", "seeds", "test", "verdict"]
    assert view["measured gap [95 % interval]"].tolist() == ["+3.2", "-1.0"]   # no interval without one
    assert view["paper gap"].tolist() == [10.0, -5.0] and view["test"].tolist() == ["Welch p=0.012", "–"]


def test_the_view_names_the_cells_of_a_claim_with_missing_records():
    import pandas as pd

    from umlkit.experiments.views.scoreboard import scoreboard_summary, scoreboard_view
    board = pd.DataFrame({"paper": ["p", "p"], "table": ["T", "T"], "claim": ["a", "b"], "paper A": [80.0, 70.0],
                          "paper B": [70.0, 75.0], "gap": [3.2, float("nan")], "seeds": [3, 0],
                          "p": [0.0123, float("nan")], "test": ["Welch t: t=4.10, df=3.1, p=0.0123", float("nan")],
                          "verdict": ["reproduced", "missing records"], "missing": ["", "X (CUB)"]})
    view = scoreboard_view(board)
    assert view["test"].tolist() == ["Welch p=0.012", "–"] and view["missing records"].tolist() == ["", "X (CUB)"]
    summary = scoreboard_summary(board, {"p": 2})
    assert summary.loc["p", ["declared", "checked", "reproduced", "missing records"]].tolist() == [2, 1, 1, 1]


def test_the_board_page_has_no_raw_missing_values_and_a_reason_column():
    import pandas as pd

    from umlkit.experiments.views.scoreboard import board_table
    board = pd.DataFrame({"paper": ["p", "p"], "table": ["T", "T"], "claim": ["a beats b", "c beats d"],
                          "paper A": [80.0, float("nan")], "paper B": [70.0, float("nan")], "gap": [3.24, -1.0],
                          "seeds": [3, 3], "p": [0.0123, 0.9], "test": ["Welch t: p=0.0123", "Welch t: p=0.9"],
                          "verdict": ["reproduced", "not comparable: d (split=1) collapsed"], "missing": ["", ""]})
    t = board_table(board)
    assert list(t.columns[:5]) == ["where", "claim", "verdict", "paper", "measured [95 % interval]"]
    assert t["where"].tolist() == ["p · T"] * 2
    assert t["paper"].tolist() == ["+10.0", "–"] and t["measured [95 % interval]"].tolist() == ["+3.2", "-1.0"]
    assert t["verdict"].tolist() == ["reproduced", "not comparable"]
    assert t["note"].tolist() == ["–", "d (split=1) collapsed"]
    assert list(t.columns) == ["where", "claim", "verdict", "paper", "measured [95 % interval]", "test (p → Holm p)",
                               "note"]
    wide = board_table(board.assign(low=[1.0, -3.0], high=[5.5, 1.0], verdict=["inconclusive", "reproduced"],
                                    **{"seeds needed": [12, float("nan")], "beyond": [False, False]}))
    assert wide["measured [95 % interval]"].tolist() == ["+3.2 [+1.0, +5.5]", "-1.0 [-3.0, +1.0]"]
    assert wide["note"].tolist() == ["to decide: 12 seeds per side", "–"]
    done = board_table(board.assign(low=[1.0, -3.0], high=[5.5, 1.0], verdict=["inconclusive", "reproduced"],
                                    seeds=[10, 3], **{"seeds needed": [10, float("nan")], "beyond": [False, False]}))
    assert done["note"].tolist() == ["to decide: has the 10 seeds per side it needs; still open", "–"]
    assert t["test (p → Holm p)"].tolist() == ["Welch p=0.012, 3 seeds", "Welch p=0.9, 3 seeds"]
    assert not t.isna().any().any()


def test_the_front_pages_sentences_name_each_papers_counts_and_headline(quick_board):
    from umlkit.experiments.tables.registry import papers
    from umlkit.experiments.views.scoreboard import paper_summaries
    facts = paper_summaries(quick_board)
    for name, paper in papers().items():
        n = int((quick_board["paper"] == name).sum())
        assert facts[f"sum_{name}"].startswith(f"{n} claims: ")
        head = quick_board[(quick_board["paper"] == name) & (quick_board["claim"] == paper.headline)].iloc[0]
        assert facts[f"head_{name}"].startswith(f"“{paper.headline}”: ") and facts[f"head_{name}"].endswith(
            head["verdict"])
    assert "paper" not in facts["head_regime"].split("”: ", 1)[1]     # the book's own claim: no paper gap
    assert facts["head_puma"].split("”: ", 1)[1].startswith("paper +")


def test_each_comparison_of_runs_is_declared_once_per_paper():
    """Two claims of one paper that compare the same runs (the same record keys on both sides) on the same dataset
    and metric count one comparison twice in the Holm family and in the verdict totals (VPTSP's Table 6 once
    repeated Table 2's "VPTSP-G beats Hyp-ViT (CUB)")."""
    from umlkit.experiments.runs.records import normalise_key
    from umlkit.experiments.tables.registry import get_paper, papers
    from umlkit.results import config_hash

    def side(spec, cell):
        rows = [r for r in spec.rows if r.method == cell["method"] and r.setting == cell.get("setting", r.setting)
                and r.section == cell.get("section", r.section)]
        keys = set()
        for r in rows:
            try:
                keys.add(config_hash(normalise_key(spec.config(r, spec.seeds_of(r, "quick")[0], "quick", ()))))
            except Exception:   # a row whose rate or side file is not there yet: named by its table and title
                keys.add(f"{spec.table}/{r.title}")
        return frozenset(keys) or frozenset({f"{spec.table}/{cell['method']}"})

    for paper in papers():
        seen = {}
        for name, spec in get_paper(paper).claim_tables("quick").items():
            if spec.derive is not None:
                continue
            for c in spec.claims:
                a, b = side(spec, c.a), side(spec, c.b)
                # two cells of the same runs (e.g. before and after adaptation) are told apart by their settings
                within = (c.a.get("setting"), c.b.get("setting")) if a == b or c.paired else None
                sig = (a, b, c.a.get("dataset"), c.metric, c.paired, c.margin, within)
                assert sig not in seen, f"{paper}: {name}'s {c.text!r} compares the runs of {seen[sig]!r}"
                seen[sig] = f"{name}: {c.text}"


def test_a_chapter_holding_the_whole_family_gets_the_boards_verdicts(monkeypatch):
    """A chapter whose claims are every claim of its paper (ooDML, VPTSP, language guidance) once had its family
    counted twice (an empty selection of the board, given the board's whole verdict column, came back with every
    row): its Holm-adjusted p-values were larger than the board's and its verdicts disagreed with its findings box."""
    import pandas as pd
    import pytest

    from umlkit.experiments.tables.table import holm_adjust
    from umlkit.experiments.views import scoreboard as sb
    raw = pd.DataFrame({"paper": ["p"] * 4, "claim": ["a", "b", "c", "d"], "p": [0.001, 0.005, 0.02, 0.6],
                        "p against": [0.999, 0.995, 0.98, 0.4], "looks": [1, 1, 2, 1],
                        "verdict": ["reproduced", "reproduced", "reproduced", "inconclusive"]})
    board = holm_adjust(raw, "paper")
    monkeypatch.setattr(sb, "family_board", lambda paper, profile: board)
    whole = sb.family_adjusted(raw.drop(columns="paper"), "p")
    assert whole["p adjusted"].tolist() == pytest.approx(board["p adjusted"].tolist())
    # Holm by hand on the two-sided decision p-values 0.002, 0.01, 2 x 0.04 (two looks) and 0.8 (twice d's
    # direction): 4p, 3p, 2p, p
    assert whole["p adjusted"].tolist() == pytest.approx([0.008, 0.03, 0.16, 0.8])
    assert whole["verdict"].tolist() == ["reproduced", "reproduced", "inconclusive", "inconclusive"]
    part = sb.family_adjusted(raw.drop(columns="paper").iloc[[1]], "p")   # one claim: the rest come from the board
    assert part["p adjusted"].tolist() == pytest.approx([0.03])


def test_linked_board_links_each_paper_to_its_chapter_and_escapes_the_rest():
    import pandas as pd

    from umlkit.experiments.views.scoreboard import linked
    view = pd.DataFrame({"where": ["puma · Table 2", "regime · Table 1", "nowhere · T"],
                         "claim": ["a < b", "x", "y"], "seeds": [3, 3, 3]})
    out = linked(view)
    assert out["where"].tolist() == ['<a href="puma.html">puma · Table 2</a>',
                                     '<a href="regime_map.html">regime · Table 1</a>', "nowhere · T"]
    assert out["claim"].iloc[0] == "a &lt; b" and out["seeds"].tolist() == [3, 3, 3]


def test_a_claim_links_to_the_chapter_that_shows_its_table():
    from umlkit.experiments.views.scoreboard import _chapter_of
    assert _chapter_of("puma", "Table 2") == "puma"
    assert _chapter_of("puma", "Table 3") == "puma_ablations" and _chapter_of("puma", "Few-shot") == "puma_ablations"
    assert _chapter_of("oodml", "Table S4") == "oodml" and _chapter_of("nowhere", "Table 1") is None


def test_moved_view_shows_the_raw_verdicts_p_and_says_when_it_was_doubled():
    """A claim looked at twice was 'reproduced' at its own p (0.03) but enters Holm with 2 x 0.03; the page shows
    0.03 with the doubling named, never 0.06 beside 'reproduced'."""
    import pandas as pd

    from umlkit.experiments.views.scoreboard import moved_view
    board = pd.DataFrame({"paper": ["p", "p", "p"], "table": ["T1", "T1", "T2"], "claim": ["a", "b", "c"],
                          "raw verdict": ["reproduced", "contradicted", "reproduced"],
                          "verdict": ["inconclusive", "inconclusive", "reproduced"],
                          "p": [0.03, 0.99, 0.001], "p against": [0.97, 0.01, 0.999],   # b: contradicted
                          "p decision": [0.06, 0.01, 0.001], "looks": [2, 1, 1], "p adjusted": [0.12, 0.02, 0.003]})
    view = moved_view(board)
    assert view["claim"].tolist() == ["a", "b"]   # c kept its verdict
    assert view["p → Holm p"].tolist() == ["0.03 → 0.12 (x2: 2 looks)", "0.01 → 0.02"]
    assert view["verdict (before → after Holm)"].tolist() == ["reproduced → inconclusive",
                                                              "contradicted → inconclusive"]


def test_every_table_a_paper_declares_claims_for_is_on_the_board_once():
    """Issue 59 item 4 (one count everywhere): a chapter shows claims only from tables with declared claims, so
    the board counts every such table of the quick profile (PUMA's Budget table was shown with Holm p-values but
    left off the board), and no claim text appears twice in a paper's family (the Budget table's 15-epoch claims
    repeated Table 2's, now declared only there)."""
    import importlib

    from umlkit.experiments.tables.registry import papers
    for name, paper in papers().items():
        declared = importlib.import_module(f"umlkit.experiments.papers.{name}.config").DECLARED
        with_claims = {t for top in ("tables", "ablations") for t, v in (declared.get(top) or {}).items()
                       if isinstance(v, dict) and v.get("claims") and "quick" in v.get("profiles", ["quick"])}
        on_board = paper.claim_tables("quick")
        assert with_claims <= set(on_board), (name, with_claims - set(on_board))
        texts = [c.text for spec in on_board.values() for c in spec.claims]
        assert len(texts) == len(set(texts)), (name, {t for t in texts if texts.count(t) > 1})
    assert "Budget" in papers()["puma"].claim_tables("quick")
    budget = papers()["puma"].claim_tables("quick")["Budget"]
    assert [c.text for c in budget.claims] == ["PUMA beats unified full fine-tuning after 45 epochs (Unified)",
                                               "PUMA beats unified full fine-tuning after 45 epochs (Harmonic)"]


def test_a_count_of_claims_typed_in_the_readme_docs_or_a_chapter_is_the_boards(quick_board):
    """Issue 76 item 9: counts drift (a closing note said 293 claims while the board held 315). A number of ten or
    more typed before "claims" or "verdicts" in the README, the docs or a chapter's markdown must be one the board
    gives: its declared or tested claims, in all or for one paper; the chapters glue theirs (a handful, "the 2
    claims of Table 2", describes a table, not the board)."""
    import json
    import re
    from pathlib import Path

    from umlkit.experiments.claims.verdicts import is_final
    root = Path(__file__).resolve().parents[2]
    tested = quick_board[quick_board["verdict"].map(is_final)]
    allowed = {len(quick_board), len(tested), *quick_board.groupby("paper").size(), *tested.groupby("paper").size()}
    texts = {p: p.read_text() for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))]}
    for nb in sorted((root / "book").glob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        texts[nb] = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    pattern = re.compile(r"(?<![\w.])(\d[\d,]*) (?:declared |tested |decided )?(?:claims|verdicts)\b")
    wrong = [f"{path.relative_to(root)}: {m.group(0)!r}" for path, text in texts.items()
             for m in pattern.finditer(text) if 10 <= int(m.group(1).replace(",", "")) not in allowed]
    assert not wrong, f"typed counts the board does not give ({sorted(allowed)}): {wrong}"
    assert len(texts) > 10
