"""The paper registry: every consumer reads one list, a name is registered once, and bad names are named."""
import ast
from pathlib import Path

import pytest

from umlkit._yaml import read_yaml
from umlkit.cli import main
from umlkit.experiments.tables.registry import Paper, get_paper, papers, register_paper

SRC = Path(__file__).resolve().parents[2] / "src" / "umlkit"


def test_the_registry_discovers_every_paper_package_in_the_books_order():
    """Every package under experiments/papers/ is registered (no list to keep), ordered by its first chapter's
    place in _toc.yml, the book's own experiments after the papers."""
    reg = papers()
    packages = sorted(p.name for p in (SRC / "experiments" / "papers").iterdir() if (p / "tables.yaml").is_file())
    assert sorted(reg) == packages
    toc = read_yaml(SRC.parents[1] / "_toc.yml")
    stems = [c["file"].split("/")[-1] for c in toc["chapters"]]
    place = [(p.own, stems.index(p.chapters[0])) for p in reg.values()]
    assert place == sorted(place) and reg["regime"].own and not reg["puma"].own
    assert reg["regime"].records_folder == "puma" and reg["oodml"].records_folder == "oodml"
    toc = (SRC.parents[1] / "_toc.yml").read_text()
    for paper in reg.values():   # every chapter a paper names is in the book
        assert paper.chapters and all(f"book/{c}" in toc for c in paper.chapters), paper.name


def test_a_taken_name_is_refused_and_an_unknown_one_named():
    with pytest.raises(ValueError, match="paper 'puma' is already registered"):
        register_paper(Paper(name="puma", claim_tables=lambda profile: {}))
    with pytest.raises(KeyError, match="unknown paper 'pumaa'; registered: puma, oodml"):
        get_paper("pumaa")
    with pytest.raises(KeyError, match="unknown oodml job list 'table'; "
                                       "choose one of lr_sweep, lr_sweep_cars, lr_sweep_sop, tables"):
        get_paper("oodml").job_list("table")


def test_the_cli_reads_the_registry(capsys):
    assert main(["records", "status", "pumaa", "tables"]) == 2
    assert f"unknown paper 'pumaa'; registered: {', '.join(papers())}" in capsys.readouterr().err
    assert main(["reproduce", "--paper", "oodml", "--chapters", "intro"]) == 2
    assert "give --paper or --chapters" in capsys.readouterr().err


PAPER_MODULES = set(papers())   # every registered paper package, from the registry


def _paper_imports(node) -> set[str]:
    names = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Import):
            names |= {a.name for a in n.names}
        elif isinstance(n, ast.ImportFrom):
            names |= {n.module or ""} | {f"{n.module}.{a.name}" for a in n.names}
    return {m for m in names if m.rsplit(".", 1)[-1] in PAPER_MODULES | {"importlib"}}


def test_the_cli_and_the_scoreboard_name_no_paper_module():
    """No importlib dispatch by module name and no hand-kept paper list outside the catalogue; the one paper module
    the CLI imports is ooDML's, for its own command (import-splits)."""
    for name in ("experiments/views/scoreboard.py", "reproduce.py"):
        assert not _paper_imports(ast.parse((SRC / name).read_text())), name
    cli = ast.parse((SRC / "cli.py").read_text())
    by_function = {f.name: _paper_imports(f) for f in cli.body if isinstance(f, ast.FunctionDef)}
    assert {k: v for k, v in by_function.items() if v} == {"_cmd_oodml_import": {"umlkit.experiments.papers.oodml"}}
    assert not _paper_imports(ast.Module(body=[n for n in cli.body if not isinstance(n, ast.FunctionDef)],
                                         type_ignores=[]))
