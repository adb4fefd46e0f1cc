"""The book's sources and its built pages: Colab wiring generated from ``_config.yml``, and a check of the HTML.

**Colab, from one place: the ``repository`` block of ``_config.yml``.**

jupyter-book's launch buttons already read ``repository.url`` / ``branch`` / ``path_to_book``. Two more things in every
chapter need the same repository: the "Open in Colab" badge under the title (for readers of the notebook on GitHub)
and the Colab set-up cell (clone the repository, install umlkit into the kernel). Both are generated here from the
configuration and written into the notebooks by ``umlkit book sync-colab`` (run by ``make book``), so changing the
repository means editing ``_config.yml`` once. The set-up cell carries the ``remove-cell`` tag: it runs on Colab and
in a local execution (where it does nothing), and readers of the HTML never see it.

**The built pages** (:func:`check_html`, ``umlkit book check-html``, run at the end of ``make book``): what a reader
must never see: pandas' truncated tables ("78 rows × 10 columns" and a row of "…"), warnings and tracebacks in cell
outputs, the build machine's paths, progress-bar fragments, and images that are not there.

Nothing here is provided by jupyter-book or nbformat themselves (they have no notion of a per-chapter set-up cell or
of a reader-facing page check), hence this small module; notebooks are read and written with ``nbformat`` and pages
parsed with BeautifulSoup.
"""
from __future__ import annotations

import re
from pathlib import Path

from umlkit._yaml import read_yaml, safe_load_unique

__all__ = ["repository", "badge", "setup_source", "sync_colab", "toc_chapters", "book_chapters", "missing_toc_entries",
           "notebook_parameters", "check_parameter_value",
           "parameters_of", "chapter_parameters", "SETUP_MARKER", "check_html"]

SETUP_MARKER = "# On Colab only: fetch the repository"
# the badge image is the book's own (``_static/colab-badge.svg``), so that it shows offline; the pattern also finds the
# hosted image earlier notebooks linked
BADGE_IMAGE = "../_static/colab-badge.svg"
_BADGE = re.compile(r"\[!\[Open In Colab\]\([^)]*colab-badge\.svg\)\]\([^)]*\)")


def repository(config: str | Path) -> dict:
    """``{"url", "branch", "path_to_book", "slug"}`` from the ``repository`` block of a jupyter-book ``_config.yml``;
    ``slug`` is ``owner/name`` of a GitHub URL."""
    import yaml
    path = Path(config)
    try:
        config = read_yaml(path, {})
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise ValueError(f"{path}: cannot read the book configuration ({' '.join(str(e).split())})") from e
    if not isinstance(config, dict):
        raise ValueError(f"{path}: expected a mapping (jupyter-book's _config.yml), found a {type(config).__name__}")
    repo = config.get("repository") or {}
    url = str(repo.get("url", "")).rstrip("/")
    m = re.fullmatch(r"https://github\.com/([\w.-]+/[\w.-]+?)(?:\.git)?", url)
    if not m:
        raise ValueError(f"{path}: repository.url must be a https://github.com/OWNER/NAME URL (Colab opens GitHub "
                         f"notebooks), got {url!r}")
    return {"url": url, "branch": str(repo.get("branch", "main")), "slug": m.group(1),
            "path_to_book": str(repo.get("path_to_book", ".")).strip("/") or "."}


def badge(repo: dict, notebook: str) -> str:
    """The "Open in Colab" badge of a notebook (its path relative to the book root, e.g. ``book/puma.ipynb``)."""
    rel = notebook if repo["path_to_book"] == "." else f"{repo['path_to_book']}/{notebook}"
    return (f"[![Open In Colab]({BADGE_IMAGE})]"
            f"(https://colab.research.google.com/github/{repo['slug']}/blob/{repo['branch']}/{rel})")


def setup_source(repo: dict, chapter_dir: str = "book", parameters: tuple[str, ...] | None = None,
                 chapter: str = "") -> str:
    """The Colab set-up cell: clone the repository, install umlkit with the book extras, work from the chapters'
    folder (outside Colab, where ``google.colab`` is missing, none of that), then the book's table display
    (:func:`umlkit.experiments.views.prose.book_display`) in every chapter."""
    return "\n".join([
        f"{SETUP_MARKER} (chapters read its data/ folder) and install umlkit into this kernel",
        "try:",   # imports in the order ruff's isort keeps (make test lints the chapters)
        "    import sys",
        "",
        "    import google.colab  # noqa: F401",
        f"    !git clone -q --depth 1 --branch {repo['branch']} {repo['url']} /content/umlkit",
        '    %pip install -q -e "/content/umlkit[book,lang]"',
        '    sys.path.insert(0, "/content/umlkit/src")  '
        '# an editable install is only seen by a restarted kernel otherwise',
        f"    %cd /content/umlkit/{chapter_dir}",
        "except ImportError:",
        "    pass",
        "from umlkit._book import check_parameters",
        "from umlkit.experiments.views.prose import book_display",
        "",
        (_check_call(parameters, chapter) if parameters is not None else
         "check_parameters(globals())  # papermill's values: a list or bool given as text is parsed, a bad value "
         "named"),
        "book_display()  # tables show every cell's whole text and '–' for a missing value",
    ])


def _check_call(parameters: tuple[str, ...], chapter: str) -> str:
    """The set-up cell's ``check_parameters`` call naming the chapter's parameters, wrapped under 100 characters."""
    import textwrap
    names = textwrap.wrap(", ".join(repr(p) for p in parameters) + ("," if len(parameters) == 1 else ""), 80)
    body = "\n".join(f"    {line}" for line in names)
    return (f"# papermill's values: a list or bool given as text is parsed, a bad value or an unknown name refused\n"
            f"check_parameters(globals(), (\n{body}\n), {chapter!r})")


PROFILES = ("quick", "full")
_YAML_TEXT = ("[", "{")
_YAML_WORDS = {"None", "none", "null", "True", "true", "False", "false"}


def check_parameters(namespace: dict, declared: tuple[str, ...] | None = None, chapter: str = "") -> None:
    """Check a chapter's parameters after papermill set them (the set-up cell calls this with ``globals()``, the
    names its parameters cell declares and the chapter's name).

    A name papermill set that the chapter does not declare (``-p SEED 0`` for ``SEEDS``) is refused, naming the
    chapter's parameters: it would otherwise run the defaults and end with exit 0.

    ``PROFILE`` must be a profile. Papermill's ``-p NAME VALUE`` passes text: a value that reads as a YAML list,
    mapping, boolean or None (``-p SEEDS '[0, 1]'``, ``-p TRAIN True``) is parsed and put back; text that starts
    like a list but is not valid YAML is refused, naming ``-y`` (papermill's YAML form). ``*SEEDS`` must then be
    None or a list of integers, ``TRAIN``/``RERUN`` booleans, ``OVERRIDES`` a list of ``key=value`` strings."""
    import yaml
    if declared is not None:   # the set-up cell follows the parameters cell and papermill's injected one only
        unknown = sorted(n for n in namespace if n.isupper() and not n.startswith("_") and n not in declared)
        if unknown:
            raise ValueError(f"{chapter or 'this chapter'}: unknown parameter(s) {', '.join(unknown)}; its parameters "
                             f"are {', '.join(declared)} (papermill: -p NAME VALUE)")
    profile = namespace.get("PROFILE", "quick")
    if profile not in PROFILES:
        raise ValueError(f"PROFILE = {profile!r}: choose one of {', '.join(PROFILES)} (papermill: -p PROFILE quick)")
    for name in [n for n in namespace if n.isupper() and not n.startswith("_")]:
        value = namespace[name]
        if isinstance(value, str) and (value.strip().startswith(_YAML_TEXT) or value.strip() in _YAML_WORDS):
            try:   # (YAML reads "None" as text; papermill users write Python's None)
                namespace[name] = value = None if value.strip() in ("None", "none") else safe_load_unique(value)
            except yaml.YAMLError as err:
                raise ValueError(f"parameter {name} = {value!r} is not valid YAML ({' '.join(str(err).split())[:80]}); "
                                 f"pass lists with papermill's -y, e.g. -y \"{name}: [0, 1]\"") from None
        check_parameter_value(name, value)


def check_parameter_value(name: str, value) -> None:
    """Refuse a chapter parameter of the wrong type (``*SEEDS``, ``TRAIN``/``RERUN``, ``OVERRIDES``), naming it, its
    value and the expected form; ``reproduce`` calls it before any chapter runs, the set-up cell after papermill."""
    if name.endswith("SEEDS") and value is not None and not (
            isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
        raise ValueError(f"parameter {name} = {value!r}: expected None or a list of integer seeds, e.g. "
                         f"-y \"{name}: [0, 1, 2]\"")
    if name in ("TRAIN", "RERUN") and not isinstance(value, bool):
        raise ValueError(f"parameter {name} = {value!r}: expected True or False, e.g. -p {name} True")
    if name == "OVERRIDES" and not (isinstance(value, (list, tuple)) and all(isinstance(v, str) and "=" in v
                                                                            for v in value)):
        raise ValueError(f"parameter OVERRIDES = {value!r}: expected a list of key=value strings, e.g. "
                         f"-y \"OVERRIDES: [data.root=/data/dml]\"")


def sync_colab(root: str | Path = ".", check: bool = False) -> list[Path]:
    """Write the badge and the set-up cell of every chapter in the table of contents from ``_config.yml``; returns
    the notebooks that changed (``check=True``: that would change, nothing written). A chapter without a set-up cell
    gets one after its parameters cell (or first code cell); a chapter without a badge gets it under its title."""
    import nbformat
    root = Path(root)
    repo = repository(root / "_config.yml")
    paths = toc_chapters(root)
    updated = {}   # every chapter is read and synced first: a notebook that cannot be read stops before any write
    for path in paths:
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception as err:   # nbformat's NotJSONError, a validation or decoding error
            raise ValueError(f"{path}: cannot read the notebook ({type(err).__name__}: "
                             f"{' '.join(str(err).split())[:200]}); no chapter was changed") from err
        before = nbformat.writes(nb)
        rel = path.relative_to(root).as_posix()
        _sync_badge(nb, badge(repo, rel), path)
        names = tuple(p["parameter"] for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])
                      for p in parameters_of(c.source))
        _sync_setup(nb, setup_source(repo, path.parent.relative_to(root).as_posix() or ".", names, path.stem),
                    nbformat)
        if nbformat.writes(nb) != before:
            updated[path] = nbformat.writes(nb) + "\n"
    if not check:
        from umlkit.results import atomic_write
        for path, text in updated.items():
            atomic_write(path, text)
    return list(updated)


def _toc_files(root: Path) -> tuple[dict, list[str]]:
    """``(_toc.yml parsed, its root and chapter file entries)``; a missing or unreadable table of contents is an
    error naming the file and what jupyter-book expects in it."""
    import yaml
    toc_path = root / "_toc.yml"
    try:
        toc = read_yaml(toc_path)
        files = [toc["root"], *[c["file"] for part in toc.get("parts", [{"chapters": toc.get("chapters", [])}])
                                for c in part.get("chapters", [])]]
    except (OSError, UnicodeDecodeError, yaml.YAMLError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"{toc_path}: cannot read the table of contents ({' '.join(str(e).split())}); expected "
                         f"jupyter-book's root: and chapters: (or parts:) with file: entries") from e
    return toc, files


def toc_chapters(root: str | Path = ".") -> list[Path]:
    """The notebooks of ``_toc.yml`` under ``root``, in the book's order (markdown pages left out); a missing
    chapter or an unreadable table of contents is an error naming the file."""
    root = Path(root)
    toc_path = root / "_toc.yml"
    _, files = _toc_files(root)
    # a chapter is a notebook; a markdown page (FILE.md) has no badge to sync; anything else is missing
    paths = [root / (n if n.endswith(".ipynb") else f"{n}.ipynb") for n in files
             if not (root / f"{n}.md").is_file() and not n.endswith(".md")]
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"{toc_path} lists {len(missing)} chapter(s) that do not exist: "
                                f"{', '.join(str(p) for p in missing[:5])}")
    return paths


def book_chapters(root: str | Path = ".") -> dict[str, Path]:
    """``{chapter stem: notebook}`` of the whole book in order: ``_toc.yml``'s root and chapters, then every chapter a
    registered paper names that the table of contents lacks (its notebook in ``book/``, else in the paper's package
    folder: a paper outside the source tree, ``UMLKIT_PAPERS``)."""
    from umlkit.experiments.tables.registry import paper_packages, papers
    root = Path(root)
    _, files = _toc_files(root)
    out = {Path(f).name: root / (f if f.endswith(".ipynb") else f"{f}.ipynb") for f in files}
    folders = [root / "book", *(folder for _, folder in paper_packages())]
    for paper in papers().values():
        for stem in paper.chapters:
            if stem not in out:
                found = [f / f"{stem}.ipynb" for f in folders if (f / f"{stem}.ipynb").is_file()]
                if not found:
                    raise FileNotFoundError(f"paper {paper.name!r} names chapter {stem!r}, but no {stem}.ipynb is in "
                                            f"book/ or in its package folder")
                out[stem] = found[0]
    return out


def missing_toc_entries(root: str | Path = ".") -> list[str]:
    """The ``file:`` entries (relative to ``root`` where possible) of registered papers' chapters that ``_toc.yml``
    lacks, for ``umlkit book toc``."""
    root = Path(root).resolve()
    _, files = _toc_files(root)
    listed = {Path(f).name for f in files}
    out = []
    for stem, path in book_chapters(root).items():
        if stem not in listed:
            path = path.resolve()
            out.append(str(path.relative_to(root).with_suffix("")) if path.is_relative_to(root)
                       else str(path.with_suffix("")))
    return out


def notebook_parameters(path: str | Path) -> tuple[str, ...]:
    """The names a chapter's parameters cell (tagged ``parameters``) declares."""
    import nbformat
    nb = nbformat.read(Path(path), as_version=4)
    return tuple(p["parameter"] for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])
                 for p in parameters_of(c.source))


def parameters_of(source: str) -> list[dict]:
    """The assignments of a parameters cell: name, type (its annotation's text, ``NAME: int = 2``: what
    ``papermill --help-notebook`` shows), default (its source text) and meaning (the comment after it on the same
    line, else the comment lines right above it)."""
    import ast
    import io
    import tokenize
    comments = {tok.start[0]: tok.string.lstrip("#").strip()
                for tok in tokenize.generate_tokens(io.StringIO(source).readline) if tok.type == tokenize.COMMENT}
    lines = source.splitlines()
    out = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            name, kind = node.target.id, ast.get_source_segment(source, node.annotation).strip("\"'")
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, kind = node.targets[0].id, None
        else:
            continue
        after = [comments[n] for n in range(node.lineno, node.end_lineno + 1) if n in comments]
        above, n = [], node.lineno - 1
        while n >= 1 and lines[n - 1].lstrip().startswith("#"):
            above.insert(0, comments[n])
            n -= 1
        out.append({"parameter": name, "type": kind, "default": ast.get_source_segment(source, node.value),
                    "meaning": " ".join(after or above)})
    return out


def chapter_parameters(root: str | Path | None = None):
    """One line per parameter of every chapter (the cell tagged ``parameters``, what papermill replaces): chapter,
    parameter, type, default and meaning, in the book's order - the table of the page "Running the book", generated so
    that it never disagrees with the notebooks."""
    import nbformat
    import pandas as pd

    from umlkit._paths import repo_root
    root = Path(root) if root is not None else repo_root()
    rows = []
    for path in toc_chapters(root):
        cells = [c for c in nbformat.read(path, as_version=4).cells
                 if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]
        for cell in cells[:1]:
            rows += [{"chapter": path.stem, **p} for p in parameters_of(cell.source)]
    return pd.DataFrame(rows, columns=["chapter", "parameter", "type", "default", "meaning"])


def _sync_badge(nb, text: str, path: Path) -> None:
    for cell in nb.cells:
        if cell.cell_type == "markdown" and _BADGE.search(cell.source):
            cell.source = _BADGE.sub(text, cell.source, count=1)
            return
    first = next((c for c in nb.cells if c.cell_type == "markdown" and c.source.lstrip().startswith("# ")), None)
    if first is None:
        raise ValueError(f"{path}: no markdown title cell to put the Colab badge under")
    title, _, rest = first.source.partition("\n")
    first.source = f"{title}\n\n{text}\n{rest}" if rest.strip() else f"{title}\n\n{text}"


def _sync_setup(nb, source: str, nbformat) -> None:
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source.startswith(SETUP_MARKER):
            cell.source = source
            tags = cell.metadata.setdefault("tags", [])
            if "remove-cell" not in tags:
                tags.append("remove-cell")
            return
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    params = [i for i in code if "parameters" in nb.cells[i].metadata.get("tags", [])]
    at = (params or code or [len(nb.cells) - 1])[0] + 1
    nb.cells.insert(at, nbformat.v4.new_code_cell(source, metadata={"tags": ["remove-cell"]}))


# what a reader must not see in a page's main text (outputs included); each pattern names the defect
_PAGE_DEFECTS = [
    ("truncated table", re.compile(r"\b\d+ rows × \d+ columns\b")),
    ("warning", re.compile(r"\b\w*(?:Warning|Error): |\bTraceback \(most recent call last\)")),
    ("machine path", re.compile(r"(?:(?<![\w.])/(?:work|home|tmp|root|Users|opt|usr|var)/\S+|/\.venv/|/site-packages/"
                                r"|\b[A-Z]:\\\S+)")),
    ("progress fragment", re.compile(r"\d+%\|[^|]*\||\bit/s\]|\ds/it\]|IProgress not found")),
]


_NO_VALUE = {"nan", "NaN", "None", "<NA>", "NaT"}
# characters of one line of code or text output that the article shows whole at 1400 px (a 110-character line of
# the floor note was cut by about three characters in headless Chromium); a longer line hides behind a scroll bar
_PRE_WIDTH = 105
# the article column of sphinx-book-theme at a 1400 px window (measured in Chromium); a figure wider than
# _ARTICLE_PX / _MIN_SCALE pixels is scaled below _MIN_SCALE of its natural size, so its ticks shrink with it
_ARTICLE_PX = 936
_MIN_SCALE = 0.8


def check_html(build_dir: str | Path, layout: bool = True) -> list[dict]:
    """Defects a reader would see on the pages of a built book (``_build/html``): one ``{"page", "defect",
    "excerpt"}`` per finding. Looks at each page's article text (outputs included), pandas tables (a row or column
    of "…" is a truncation, a cell ending in "..." a cut text, "nan"/"None" a missing value shown raw), glued values
    in the prose that came out empty ("–", "nan"), lines of code or text output too long for the article at 1400 px,
    stderr outputs (any text there is a warning), the local images every page links (an output figure wider
    than the article can show at 0.8 of its size, or one whose alt text is empty or a file name, is a defect), and
    scripts loaded from the network (the book must
    read offline); with ``layout``, tables wider than their box, laid out in headless Chromium."""
    from bs4 import BeautifulSoup
    root = Path(build_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no built book here (run `make book` first)")
    pages = sorted(p for p in root.rglob("*.html")
                   if not ({"_static", "_sources", "_images"} & set(p.relative_to(root).parts[:-1]))
                   and p.name not in {"genindex.html", "search.html"})
    if not pages:
        raise FileNotFoundError(f"{root}: no HTML pages found (expected a jupyter-book _build/html folder)")
    found = []
    for page in pages:
        rel = page.relative_to(root).as_posix()

        def add(defect, text, rel=rel):
            found.append({"page": rel, "defect": defect, "excerpt": " ".join(str(text).split())[:160]})
        try:
            soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        except UnicodeDecodeError as err:   # a page cut short or written in another encoding: named, the rest checked
            add("not UTF-8 (a half-written or foreign page)", f"{page}: {err}")
            continue
        main = soup.find("article") or soup.find("main") or soup.body or soup

        text = main.get_text(" ")
        for defect, pat in _PAGE_DEFECTS:
            for m in pat.finditer(text):
                add(defect, text[max(0, m.start() - 60):m.end() + 60])
        for table in main.find_all("table", class_="dataframe"):
            cells = [c.get_text(strip=True) for c in table.find_all(["td", "th"])]
            if any(c in ("…", "...") for c in cells):
                add("truncated table", " | ".join(cells[:12]))
            cut = [c for c in cells if len(c) > 3 and c.endswith(("...", "…"))]
            if cut:
                add("truncated cell text", cut[0])
            blank = [c for c in table.find_all("td") if c.get_text(strip=True) in _NO_VALUE]
            if blank:
                add("NaN or None in a table", f"{len(blank)} cell(s), e.g. in the row of "
                    f"{blank[0].find_parent('tr').get_text(' | ', strip=True)[:100]}")
        for span in main.select("span.pasted-text"):
            if span.get_text(strip=True) in _NO_VALUE | {"–", "-", ""}:
                parent = span.find_parent(["p", "li"]) or span.parent
                add("empty glued value", parent.get_text(" ") if parent else span.get_text())
        for pre in main.select("div.cell_input pre, div.cell_output pre"):
            wide = [line for line in pre.get_text().split("\n") if len(line) > _PRE_WIDTH]
            if wide:
                add("line wider than the page", f"{len(wide[0])} characters: {wide[0]}")
        for out in main.select(".stderr, .output.stderr, div.output_stderr"):
            if out.get_text(strip=True):
                add("warning", "stderr: " + out.get_text(" "))
        for img in main.find_all("img"):
            src = img.get("src", "")
            if not src or src.startswith(("http://", "https://", "data:")):
                continue
            path = page.parent / src.split("#")[0].split("?")[0]
            if not path.exists():
                add("missing image", src)
            elif img.find_parent(class_="cell_output") is not None:
                _check_scale(path, src, add)
                alt = img.get("alt", "").strip()
                if not alt or re.fullmatch(r"\S*\.(png|svg|jpe?g|gif)", alt):
                    add("figure without alt text", f"{src}: alt={alt!r} (set the cell's metadata mystnb.image.alt "
                        f"to what the figure shows)")
        for script in soup.find_all("script", src=True):
            if script["src"].startswith(("http://", "https://", "//")):
                add("loads from the network", f"script {script['src']} (the page breaks offline)")
    return found + (_layout_defects(root, pages) if layout else [])


def _layout_defects(root: Path, pages: list[Path]) -> list[dict]:
    """Tables wider than their box at 1400 px, measured in headless Chromium (:mod:`umlkit._layout`); nothing (and
    a line saying so) without a Chromium on the machine."""
    from umlkit._layout import WINDOW, chromium, wide_tables
    browser = chromium()
    if browser is None:
        print("check-html: no chromium on this machine, so table widths are not measured (apt install chromium)")
        return []
    found = []
    for page in pages:
        if "<table" not in page.read_text(encoding="utf-8", errors="replace"):   # nothing to measure
            continue
        for t in wide_tables(page, browser):
            found.append({"page": page.relative_to(root).as_posix(), "defect": "table wider than its box",
                          "excerpt": f"table {t['index'] + 1}: {t['over']} px too wide at {WINDOW[0]} px "
                                     f"({' '.join(t['head'].split())[:90]})"})
    return found


def _check_scale(path: Path, src: str, add) -> None:
    """A figure whose natural width exceeds the article's by more than 1 / :data:`_MIN_SCALE` is shown shrunk."""
    from PIL import Image
    try:
        with Image.open(path) as im:
            width = im.size[0]
    except OSError:
        return
    scale = _ARTICLE_PX / width
    if scale < _MIN_SCALE:
        add("figure shown below its natural size", f"{src}: {width} px wide in a {_ARTICLE_PX} px column, shown at "
            f"{scale:.2f} of its size (at most {int(_ARTICLE_PX / _MIN_SCALE)} px keeps {_MIN_SCALE:g})")
