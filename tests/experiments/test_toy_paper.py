"""Adding a paper is a few places (the README's development section): a toy paper written into a temporary folder - its
package (a YAML table with one claim, a one-row config, the registering __init__), its paper-table CSV and a
two-cell chapter - is seen by ``umlkit reproduce --paper``, the scoreboard, ``umlkit records status`` and the book's
table of contents through ``UMLKIT_PAPERS`` alone, without a change to any file of ``src/``.

The checks run in a child process, so that the toy's registration never reaches the other tests' registry."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]

INIT = '''
"""A toy paper (registered from outside the source tree)."""
from umlkit.experiments.tables.registry import Paper, register_paper
from toy_paper import config

ENTRY = register_paper(Paper(name="toy_paper", title="Toy paper (Doe, 2026)", claim_tables=config.tables,
                             chapters=("toy_paper",), job_lists={"tables": config.table_jobs}))
'''

CONFIG = '''
"""The toy's genuine logic: how a declared row becomes a run configuration."""
import sys
from pathlib import Path

from umlkit.experiments.tables.declarations import load_declarations
from umlkit.experiments.tables.builder import build_tables
from umlkit.experiments.tables.table import Row, distinct_jobs
from umlkit.train.config import load_config

DECLARED = load_declarations(__file__)


def method_rows(names: dict) -> list[Row]:
    return [Row(method=name, spec={"lr": lr}, runner="train_analysis", label=name) for name, lr in names.items()]


def config_for(row: Row, seed: int, profile: str = "quick", overrides=()) -> dict:
    cfg = load_config(Path(__file__).with_name("toy.yaml"), profile,
                      [f"optimizer.lr={row.spec['lr']}", f"seed={seed}", *overrides])
    return {"config": cfg, "analysis": {"metrics": ["R@1"]}}


def tables(profile: str = "quick") -> dict:
    return build_tables("toy_paper", sys.modules[__name__], DECLARED, profile)


def table_jobs(profile: str = "quick") -> list:
    return distinct_jobs(tables(profile), profile, (0, 1, 2))
'''

TABLES_YAML = '''
tables:
  Table 1:
    rows: [{build: method_rows, names: {Fast: 1.0e-3, Slow: 1.0e-4}}]
    seeds: [0, 1, 2]
    params: false
    claims:
      cell: {dataset: CUB}
      list:
        - {text: Fast beats Slow (CUB), a: {method: Fast}, b: {method: Slow}}
'''

TOY_YAML = '''
name: toy
data: {datasets: [cub], sampler: m_per_class, samples_per_class: 2, batch_size: 16}
model: {method: full, embed_dim: 16}
objective: [{name: multisimilarity, weight: 1.0}]
optimizer: {name: adamw, lr: 1.0e-4}
train: {epochs: 1, eval_every: 1}
'''

CSV = "table,section,method,setting,dataset,metric,value,std,note\n" \
      "Table 1,,Fast,,CUB,R@1,60.0,,\nTable 1,,Slow,,CUB,R@1,55.0,,\n"

DRIVER = '''
import json, sys
from umlkit.cli import main
from umlkit.experiments.views.scoreboard import scoreboard
from umlkit._book import book_chapters, missing_toc_entries
out = {}
out["status"] = main(["records", "status", "toy_paper", "tables"])
out["dry_run"] = main(["reproduce", "--table", "toy_paper:Table 1", "--dry-run"])
out["reproduce"] = main(["reproduce", "--paper", "toy_paper"])
board = scoreboard("quick", papers=["toy_paper"])
out["board"] = board[["paper", "table", "claim", "verdict"]].to_dict("records")
out["chapters"] = list(book_chapters(sys.argv[1]))
out["toc_missing"] = missing_toc_entries(sys.argv[1])
print("RESULT" + json.dumps(out))
'''


def _write_toy(folder: Path) -> Path:
    pkg = folder / "toy_paper"
    pkg.mkdir(parents=True)
    for name, text in (("__init__.py", INIT), ("config.py", CONFIG), ("tables.yaml", TABLES_YAML),
                       ("toy.yaml", TOY_YAML), ("paper_table.csv", CSV)):
        (pkg / name).write_text(textwrap.dedent(text).lstrip())
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell('PROFILE = "quick"', metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell('from umlkit.experiments.tables.registry import get_paper\n'
                                          'print(get_paper("toy_paper").title)')]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, pkg / "toy_paper.ipynb")
    return pkg


def test_a_toy_paper_from_a_temporary_folder_reaches_every_consumer(tmp_path):
    src_before = {p: p.stat().st_mtime_ns for p in (ROOT / "src").rglob("*") if p.is_file()}
    _write_toy(tmp_path / "papers")
    env = {**os.environ, "UMLKIT_PAPERS": str(tmp_path / "papers"), "UMLKIT_RESULTS": str(tmp_path / "results"),
           "UMLKIT_PROGRESS": "0"}
    run = subprocess.run([sys.executable, "-c", DRIVER, str(ROOT)], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.split("RESULT", 1)[1])
    assert out["status"] == 0 and "toy_paper tables (quick): 0 of 6 records stored, 6 to train" in run.stdout
    assert out["dry_run"] == 0 and "toy_paper Table 1 (quick): 6 runs, 6 to train; nothing was run" in run.stdout
    assert out["reproduce"] == 0
    executed = nbformat.read(tmp_path / "results" / "quick" / "notebooks" / "toy_paper.ipynb", as_version=4)
    assert "Toy paper (Doe, 2026)" in executed.cells[-1].outputs[0]["text"]
    assert out["board"] == [{"paper": "toy_paper", "table": "Table 1", "claim": "Fast beats Slow (CUB)",
                             "verdict": "missing records"}]
    assert out["chapters"][-1] == "toy_paper" and "puma" in out["chapters"]
    assert out["toc_missing"] == [str(tmp_path.resolve() / "papers" / "toy_paper" / "toy_paper")]
    assert {p: p.stat().st_mtime_ns for p in (ROOT / "src").rglob("*") if p.is_file()} == src_before


def test_a_missing_papers_folder_is_named():
    env = {**os.environ, "UMLKIT_PAPERS": "/no/such/folder"}
    run = subprocess.run([sys.executable, "-c", "from umlkit.experiments.tables.registry import papers; papers()"],
                         env=env, capture_output=True, text=True, timeout=300)
    # refused at import, before the registry looks (umlkit._env), naming the variable and what it expects
    assert run.returncode != 0 and ("UMLKIT_PAPERS='/no/such/folder': expected existing folders of paper packages"
                                    in run.stderr)
