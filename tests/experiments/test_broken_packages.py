"""Issue 83: a paper package that fails to import, registers nothing, lacks tables.yaml or takes a registered paper's
name is named (folder and reason) by the commands that look for papers, and every other paper keeps working. Run in a
child process, so that the broken packages never reach the other tests' registry."""
import json
import os
import subprocess
import sys
from pathlib import Path

from umlkit.experiments.tables.registry import paper_packages, papers

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import json
from umlkit.experiments.tables.registry import BROKEN, get_paper, paper_packages, papers
names = list(papers())
try:
    get_paper("nosuch")
except KeyError as err:
    message = err.args[0]
print(json.dumps({"names": names, "broken": BROKEN, "message": message}))
"""


def test_broken_paper_packages_are_named_and_the_others_work(tmp_path):
    def package(name, init, tables=True):
        folder = tmp_path / name
        folder.mkdir()
        if init is not None:
            (folder / "__init__.py").write_text(init)
        if tables:
            (folder / "tables.yaml").write_text("tables: {}\n")
    package("fails_on_import", "import no_such_module_here\n")
    package("registers_nothing", "X = 1\n")
    package("no_tables", "X = 1\n", tables=False)
    package("takes_a_name", "from umlkit.experiments.tables.registry import Paper, register_paper\n"
                            "register_paper(Paper(name='puma', claim_tables=lambda profile: {}))\n")
    env = {**os.environ, "UMLKIT_PAPERS": str(tmp_path), "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    built_in = {folder.name for module, folder in paper_packages() if module.startswith("umlkit.experiments.papers.")}
    assert got["names"] == [n for n in papers() if n in built_in]    # the built-in ones work, in the book's order
    broken = got["broken"]
    assert set(broken) == {str(tmp_path / n) for n in ("fails_on_import", "registers_nothing", "no_tables",
                                                       "takes_a_name")}
    assert "ModuleNotFoundError: No module named 'no_such_module_here'" in broken[str(tmp_path / "fails_on_import")]
    assert "registers no paper" in broken[str(tmp_path / "registers_nothing")]
    assert "no tables.yaml" in broken[str(tmp_path / "no_tables")]
    assert "paper 'puma' is already registered" in broken[str(tmp_path / "takes_a_name")]
    assert "4 paper package(s) could not be used" in got["message"] and "fails_on_import" in got["message"]
