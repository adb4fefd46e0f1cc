"""The Colab badge and set-up cell of every chapter are generated from ``_config.yml``'s repository block."""
import json
import shutil
from pathlib import Path

import pytest

from umlkit import _book
from umlkit.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_every_chapter_follows_the_config():
    assert _book.sync_colab(ROOT, check=True) == []
    repo = _book.repository(ROOT / "_config.yml")
    for path in (ROOT / "book").glob("*.ipynb"):
        nb = json.loads(path.read_text())
        setup = [c for c in nb["cells"] if "".join(c["source"]).startswith(_book.SETUP_MARKER)]
        assert len(setup) == 1 and "remove-cell" in setup[0]["metadata"]["tags"], path.name
        assert repo["url"] in "".join(setup[0]["source"])


def test_every_paper_is_linked_from_the_front_page_and_its_chapters_opening_and_the_badge_is_local():
    """Issue 59 item 6: the registered paper's public page in the front page's table and in the opening paragraph
    (the first markdown cell) of each of its chapters; the Colab badge is the book's own image, which exists."""
    import re

    from umlkit.experiments.tables.registry import papers
    first = {p.stem: "".join(json.loads(p.read_text())["cells"][0]["source"]) for p in (ROOT / "book").glob("*.ipynb")}
    linked = [p for p in papers().values() if p.link]
    assert linked and {p.name for p in linked} == {p.name for p in papers().values() if not p.own}
    for paper in linked:
        assert re.fullmatch(r"https://arxiv\.org/abs/\d{4}\.\d{5}", paper.link), paper.link
        assert f"]({paper.link})" in first["intro"], paper.name
        for chapter in paper.chapters:
            assert f"]({paper.link})" in first[chapter], (paper.name, chapter)
    for stem, text in first.items():
        assert f"[![Open In Colab]({_book.BADGE_IMAGE})]" in text, stem
        assert "colab.research.google.com/assets" not in text, stem
    assert (ROOT / "book" / _book.BADGE_IMAGE).resolve().is_file()


def _copy_book(tmp_path: Path) -> Path:
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "book", tmp_path / "book", ignore=shutil.ignore_patterns("_build", "*.png"))
    return tmp_path


def test_changing_the_url_once_rewrites_every_chapter(tmp_path, capsys):
    root = _copy_book(tmp_path)
    cfg = root / "_config.yml"
    cfg.write_text(cfg.read_text().replace("url: https://github.com/umlkit/umlkit", "url: https://github.com/lab/dml-book")
                   .replace("branch: main", "branch: v2"))
    # a chapter that lost its set-up cell and its badge gets both back
    nb_path = root / "book" / "losses.ipynb"
    nb = json.loads(nb_path.read_text())
    nb["cells"] = [c for c in nb["cells"] if not "".join(c["source"]).startswith(_book.SETUP_MARKER)]
    first = nb["cells"][0]
    first["source"] = ["".join(first["source"]).split("[![Open In Colab]")[0].rstrip() + "\n"]
    nb_path.write_text(json.dumps(nb))
    assert main(["book", "sync-colab", "--root", str(root), "--check"]) == 1
    assert main(["book", "sync-colab", "--root", str(root)]) == 0
    assert _book.sync_colab(root, check=True) == []        # a second run changes nothing
    for path in (root / "book").glob("*.ipynb"):
        text = path.read_text()
        assert "umlkit/umlkit" not in text, path.name
        assert "--branch v2 https://github.com/lab/dml-book" in text
        assert "colab.research.google.com/github/lab/dml-book/blob/v2/book/" + path.name in text
    nb = json.loads(nb_path.read_text())
    setup = [i for i, c in enumerate(nb["cells"]) if "".join(c["source"]).startswith(_book.SETUP_MARKER)]
    params = [i for i, c in enumerate(nb["cells"]) if "parameters" in c["metadata"].get("tags", [])]
    assert len(setup) == 1 and nb["cells"][setup[0]]["metadata"]["tags"] == ["remove-cell"]
    code = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code" and i != setup[0]]
    assert setup[0] == (params[0] if params else code[0]) + 1     # after the parameters cell (or the first code cell)


@pytest.mark.parametrize("url", ["", "git@github.com:lab/book.git", "https://gitlab.com/lab/book"])
def test_a_url_colab_cannot_open_is_refused_with_the_file(tmp_path, url):
    cfg = tmp_path / "_config.yml"
    cfg.write_text(f"repository:\n  url: '{url}'\n")
    with pytest.raises(ValueError, match=r"_config.yml: repository.url must be a https://github.com/OWNER/NAME"):
        _book.repository(cfg)


PAGE = """<html><body><nav>/home/nav/is/not/read</nav><article>{}</article></body></html>"""


def _page(root: Path, name: str, body: str) -> None:
    path = root / "book" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(PAGE.format(body), encoding="utf-8")


def test_check_html_finds_what_a_reader_must_not_see(tmp_path):
    (tmp_path / "_images").mkdir()
    (tmp_path / "_images" / "fig.png").write_bytes(b"png")
    _page(tmp_path, "clean.html", '<h1>Table 2</h1><table class="dataframe"><tr><td>72.0 (78.3)</td></tr></table>'
          '<p>run <code>.venv/bin/papermill book/x.ipynb out.ipynb</code></p><img src="../_images/fig.png">')
    _page(tmp_path, "bad.html",
          '<table class="dataframe"><tr><td>a</td></tr><tr><td>…</td></tr></table><p>78 rows × 10 columns</p>'
          '<div class="output stderr"><pre>/x/numpy/lib.py:3: UserWarning: array is not writable</pre></div>'
          '<p>data at /work/main/data/uml_mini</p><pre>UML-Mini:  12%|█▏        | 3/25 [00:01&lt;00:09,  2.3it/s]</pre>'
          '<img src="../_images/gone.png">')
    (tmp_path / "_static").mkdir()
    (tmp_path / "_static" / "theme.html").write_text(PAGE.format("/home/not/a/page 3 rows × 2 columns"))
    found = _book.check_html(tmp_path, layout=False)
    assert {f["page"] for f in found} == {"book/bad.html"}
    kinds = {f["defect"] for f in found}
    assert kinds == {"truncated table", "warning", "machine path", "progress fragment", "missing image"}
    assert any("gone.png" in f["excerpt"] for f in found)
    assert main(["book", "check-html", str(tmp_path)]) == 1
    (tmp_path / "book" / "bad.html").unlink()
    assert main(["book", "check-html", str(tmp_path)]) == 0


def test_check_html_finds_a_code_or_output_line_too_long_for_the_page(tmp_path):
    fits, cut = "x" * 105, "y" * 106
    _page(tmp_path, "ok.html", f'<div class="cell_input"><pre>{fits}</pre></div><p>{cut}</p>')
    _page(tmp_path, "bad.html", f'<div class="cell_output"><pre>short\n{cut}\n{cut}</pre></div>')
    found = _book.check_html(tmp_path, layout=False)
    assert [(f["page"], f["defect"]) for f in found] == [("book/bad.html", "line wider than the page")]
    assert found[0]["excerpt"].startswith("106 characters: yyy")


def test_check_html_finds_a_shrunk_figure_and_a_script_from_the_network(tmp_path):
    """A 1,170 px figure is shown at 936 / 1170 = 0.8 of its size (kept); 1,300 px at 0.72 (found); an output
    figure whose alt text is its file name says nothing to a screen reader; a figure outside a cell output (a
    logo) is not judged; a script from a CDN breaks the page offline."""
    from PIL import Image
    (tmp_path / "_images").mkdir()
    for name, width in (("ok.png", 1170), ("wide.png", 1300), ("logo.png", 2000)):
        Image.new("RGB", (width, 10)).save(tmp_path / "_images" / name)
    _page(tmp_path, "figs.html", '<div class="cell_output"><img src="../_images/ok.png" alt="R@1 per split">'
          '<img src="../_images/wide.png" alt="wide"><img src="../_images/ok.png" alt="../_images/ok.png"></div>'
          '<img src="../_images/logo.png">'
          '<script src="https://cdn.example.org/mathjax/tex-chtml.js"></script><script src="../_static/x.js"></script>')
    found = _book.check_html(tmp_path, layout=False)
    assert [(f["defect"], f["excerpt"][:40]) for f in found] == [
        ("figure shown below its natural size", "../_images/wide.png: 1300 px wide in a 9"),
        ("figure without alt text", "../_images/ok.png: alt='../_images/ok.pn"),
        ("loads from the network", "script https://cdn.example.org/mathjax/t")]
    assert "shown at 0.72 of its size" in found[0]["excerpt"]


def test_check_html_without_a_build_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="no built book here"):
        _book.check_html(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="no HTML pages found"):
        _book.check_html(tmp_path, layout=False)


def test_check_html_finds_raw_missing_values_cut_text_and_empty_glue(tmp_path):
    _page(tmp_path, "ok.html", '<table class="dataframe"><tr><td>72.0</td><td>–</td></tr></table>'
          '<p>R@1 is <span class="pasted-text">72.0</span> here.</p>')
    _page(tmp_path, "bad.html", '<table class="dataframe"><tr><th>PUMA</th><td>nan</td><td>None</td></tr>'
          '<tr><th>claim</th><td>PUMA beats unified full fine-tun...</td></tr></table>'
          '<p>R@1 changes by <span class="pasted-text">–</span> and <span class="pasted-text">nan</span>.</p>')
    found = _book.check_html(tmp_path, layout=False)
    assert {f["page"] for f in found} == {"book/bad.html"}
    kinds = sorted(f["defect"] for f in found)
    assert kinds == ["NaN or None in a table", "empty glued value", "empty glued value", "truncated cell text"]
    assert any("2 cell(s)" in f["excerpt"] and "PUMA" in f["excerpt"] for f in found)
    assert any("R@1 changes by" in f["excerpt"] for f in found)


def test_chapter_parameters_from_papermill_are_parsed_or_named():
    ns = {"PROFILE": "quick", "SEEDS": "[0, 1]", "TRAIN": "True", "OVERRIDES": [], "LOSSES": "None", "NAME": "x"}
    _book.check_parameters(ns)
    assert ns == {"PROFILE": "quick", "SEEDS": [0, 1], "TRAIN": True, "OVERRIDES": [], "LOSSES": None, "NAME": "x"}
    with pytest.raises(ValueError,
                       match=r"PROFILE = 'quik': choose one of quick, full \(papermill: -p PROFILE quick\)"):
        _book.check_parameters({"PROFILE": "quik"})
    with pytest.raises(ValueError, match=r"SEEDS = '\[0, 1' is not valid YAML .*-y \"SEEDS: \[0, 1\]\""):
        _book.check_parameters({"SEEDS": "[0, 1"})
    with pytest.raises(ValueError, match=r"ABLATION_SEEDS = \['a'\]: expected None or a list of integer seeds"):
        _book.check_parameters({"ABLATION_SEEDS": "['a']"})
    with pytest.raises(ValueError, match=r"RERUN = 'yes': expected True or False"):
        _book.check_parameters({"RERUN": "yes"})
    with pytest.raises(ValueError, match=r"OVERRIDES = \['data.root'\]: expected a list of key=value strings"):
        _book.check_parameters({"OVERRIDES": ["data.root"]})


def test_the_parameter_table_is_read_from_every_chapters_parameters_cell():
    """Trailing comments, comments above an assignment and multi-line values are read; every chapter's every
    parameter says what it does, and the page "Running the book" shows the generated table (so the two never
    disagree)."""
    from umlkit._book import chapter_parameters, parameters_of
    src = ('# quick or full\nPROFILE: str = "quick"\nSEEDS = [0,\n         1]  # seeds per cell\nX = 1\n'
           'ROOT: "str or None" = None  # a folder\nimport os  # not a parameter\n')
    assert parameters_of(src) == [
        {"parameter": "PROFILE", "type": "str", "default": '"quick"', "meaning": "quick or full"},
        {"parameter": "SEEDS", "type": None, "default": "[0,\n         1]", "meaning": "seeds per cell"},
        {"parameter": "X", "type": None, "default": "1", "meaning": ""},
        {"parameter": "ROOT", "type": "str or None", "default": "None", "meaning": "a folder"}]
    table = chapter_parameters()
    assert (table["meaning"] != "").all(), table[table["meaning"] == ""]
    from umlkit.experiments.tables.registry import papers
    chapters = {c for p in papers().values() for c in p.chapters}
    assert chapters and chapters <= set(table["chapter"])
    assert ("vptsp", "TRAIN") in set(zip(table["chapter"], table["parameter"]))
    running = (Path(__file__).resolve().parents[1] / "book" / "running.ipynb").read_text()
    assert "chapter_parameters()" in running
    assert "book/running" in (Path(__file__).resolve().parents[1] / "_toc.yml").read_text()


def test_papermill_lists_every_chapters_parameters_with_type_and_default_and_no_warning(caplog):
    """``papermill --help-notebook`` (papermill's own parser: one ``=`` per line, the type from the annotation)
    finds every parameter each chapter declares, with its type and default, and warns about no line; the command
    itself, as the Running page gives it, lists OVERRIDES for a paper chapter."""
    import logging
    import subprocess
    import sys

    import papermill

    from umlkit._book import notebook_parameters, toc_chapters
    root = Path(__file__).resolve().parents[1]
    caplog.set_level(logging.WARNING, logger="papermill")
    for path in toc_chapters(root):
        declared = notebook_parameters(path)
        found = papermill.inspect_notebook(str(path))
        assert list(found) == list(declared), path.name
        for name, p in found.items():
            assert p["inferred_type_name"] not in ("None", None), (path.name, name)
            assert p["default"] is not None, (path.name, name)
    assert not [r for r in caplog.records if "Unable to parse" in r.getMessage()], caplog.text
    done = subprocess.run([sys.executable, "-m", "papermill", "--help-notebook", str(root / "book" / "oodml.ipynb")],
                          capture_output=True, text=True, check=True)
    assert "OVERRIDES: list (default [])" in done.stdout and "TRAIN: bool (default False)" in done.stdout, done.stdout
    assert "Unable to parse" not in done.stderr


def test_a_corrupt_chapter_stops_the_sync_before_any_chapter_is_written(tmp_path):
    root = _copy_book(tmp_path)
    cfg = root / "_config.yml"
    cfg.write_text(cfg.read_text().replace("url: https://github.com/umlkit/umlkit", "url: https://github.com/lab/dml-book"))
    chapters = _book.toc_chapters(root)
    before = {p: p.read_bytes() for p in chapters}
    chapters[3].write_text('{"cells": [')                      # the fourth chapter is cut short
    with pytest.raises(ValueError, match=rf"{chapters[3].name}: cannot read the notebook .*no chapter was changed"):
        _book.sync_colab(root)
    assert all(p.read_bytes() == before[p] for p in chapters if p != chapters[3])


def test_a_name_the_chapter_does_not_declare_is_refused_naming_its_parameters():
    """`papermill -p SEED 0` for a chapter whose parameter is SEEDS ran the defaults and exited 0; the set-up cell's
    check now refuses it (the names come from the chapter's parameters cell, written by `umlkit book sync-colab`)."""
    declared = ("PROFILE", "SEEDS", "TRAIN")
    _book.check_parameters({"PROFILE": "quick", "SEEDS": [0], "TRAIN": False, "In": [], "_": None}, declared, "vptsp")
    with pytest.raises(ValueError, match=r"vptsp: unknown parameter\(s\) SEED; its parameters are PROFILE, SEEDS, "
                                         r"TRAIN \(papermill: -p NAME VALUE\)"):
        _book.check_parameters({"PROFILE": "quick", "SEEDS": [0], "SEED": 0}, declared, "vptsp")


def test_every_chapters_set_up_cell_names_its_own_parameters():
    import nbformat
    root = Path(__file__).resolve().parents[1]
    for path in _book.toc_chapters(root):
        nb = nbformat.read(path, as_version=4)
        setup = next(c.source for c in nb.cells if _book.SETUP_MARKER in c.source)
        names = _book.notebook_parameters(path)
        assert f"), {path.stem!r})" in setup and all(repr(n) in setup for n in names), path.name


def test_reproduce_refuses_a_parameter_no_chapter_declares():
    from umlkit.reproduce import reproduce
    with pytest.raises(ValueError, match=r"parameter\(s\) SEED are declared by none of the chapters \(vptsp\); "
                                         r"their parameters: .*SEEDS"):
        reproduce(chapters=["vptsp"], parameters={"SEED": 0})


@pytest.mark.skipif(__import__("umlkit._layout", fromlist=["chromium"]).chromium() is None, reason="needs chromium")
def test_check_html_lays_pages_out_and_finds_a_table_wider_than_its_box(tmp_path):
    """Issue 59 item 7: at 1400 px a table of 40 wide cells overflows the article; a narrow one does not."""
    wide = "<table class='dataframe'><tr>" + "".join(f"<td>cell-{i:02d}-with-long-text</td>" for i in range(40)) + \
        "</tr></table>"
    narrow = "<table class='dataframe'><tr><td>1</td><td>2</td></tr></table>"
    _page(tmp_path, "wide.html", f"<div class='cell_output'>{narrow}</div><div class='cell_output'>{wide}</div>")
    found = _book.check_html(tmp_path)
    assert [(f["page"], f["defect"]) for f in found] == [("book/wide.html", "table wider than its box")]
    assert found[0]["excerpt"].startswith("table 2: ") and "px too wide at 1400 px (cell-00-with-long-text" in \
        found[0]["excerpt"]
    assert sorted(p.name for p in (tmp_path / "book").iterdir()) == ["wide.html"]   # the measured copy is gone
