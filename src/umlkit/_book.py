"""The book's Colab wiring, generated from one place: the ``repository`` block of ``_config.yml``.

jupyter-book's launch buttons already read ``repository.url`` / ``branch`` / ``path_to_book``. Two more things in every
chapter need the same repository: the "Open in Colab" badge under the title (for readers of the notebook on GitHub)
and the Colab set-up cell (clone the repository, install umlkit into the kernel). Both are generated here from the
configuration and written into the notebooks by ``umlkit book sync-colab`` (run by ``make book``), so changing the
repository means editing ``_config.yml`` once. The set-up cell carries the ``remove-cell`` tag: it runs on Colab and
in a local execution (where it does nothing), and readers of the HTML never see it.

Nothing here is provided by jupyter-book or nbformat themselves (they have no notion of a per-chapter set-up cell),
hence this small module; notebooks are read and written with ``nbformat``.
"""
from __future__ import annotations

import re
from pathlib import Path

__all__ = ["repository", "badge", "setup_source", "sync_colab", "SETUP_MARKER"]

SETUP_MARKER = "# On Colab only: fetch the repository"
_BADGE = re.compile(r"\[!\[Open In Colab\]\(https://colab\.research\.google\.com/assets/colab-badge\.svg\)\]\([^)]*\)")


def repository(config: str | Path) -> dict:
    """``{"url", "branch", "path_to_book", "slug"}`` from the ``repository`` block of a jupyter-book ``_config.yml``;
    ``slug`` is ``owner/name`` of a GitHub URL."""
    import yaml
    path = Path(config)
    try:
        repo = (yaml.safe_load(path.read_text()) or {}).get("repository") or {}
    except (OSError, yaml.YAMLError) as e:
        raise ValueError(f"{path}: cannot read the book configuration ({e})") from e
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
    return (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
            f"(https://colab.research.google.com/github/{repo['slug']}/blob/{repo['branch']}/{rel})")


def setup_source(repo: dict, chapter_dir: str = "book") -> str:
    """The Colab set-up cell: clone the repository, install umlkit with the book extras, work from the chapters'
    folder. Outside Colab (``google.colab`` missing) it does nothing."""
    return "\n".join([
        f"{SETUP_MARKER} (chapters read its data/ folder) and install umlkit into this kernel",
        "try:",
        "    import google.colab  # noqa: F401",
        "    import sys",
        f"    !git clone -q --depth 1 --branch {repo['branch']} {repo['url']} /content/umlkit",
        '    %pip install -q -e "/content/umlkit[book,lang]"',
        '    sys.path.insert(0, "/content/umlkit/src")  # an editable install is only seen by a restarted kernel otherwise',
        f"    %cd /content/umlkit/{chapter_dir}",
        "except ImportError:",
        "    pass",
    ])


def sync_colab(root: str | Path = ".", check: bool = False) -> list[Path]:
    """Write the badge and the set-up cell of every chapter in the table of contents from ``_config.yml``; returns
    the notebooks that changed (``check=True``: that would change, nothing written). A chapter without a set-up cell
    gets one after its parameters cell (or first code cell); a chapter without a badge gets it under its title."""
    import nbformat
    import yaml
    root = Path(root)
    repo = repository(root / "_config.yml")
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files = [toc["root"], *[c["file"] for part in toc.get("parts", [{"chapters": toc.get("chapters", [])}])
                            for c in part.get("chapters", [])]]
    changed = []
    for name in files:
        path = root / (name if name.endswith(".ipynb") else f"{name}.ipynb")
        if not path.exists():
            continue
        nb = nbformat.read(path, as_version=4)
        before = nbformat.writes(nb)
        rel = path.relative_to(root).as_posix()
        _sync_badge(nb, badge(repo, rel), path)
        _sync_setup(nb, setup_source(repo, path.parent.relative_to(root).as_posix() or "."), nbformat)
        if nbformat.writes(nb) != before:
            changed.append(path)
            if not check:
                from umlkit.results import _atomic_write
                _atomic_write(path, nbformat.writes(nb) + "\n")
    return changed


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
