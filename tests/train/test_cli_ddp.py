"""CLI train/eval on a tiny YAML config, and the same training under torchrun with 2 CPU processes (gloo)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.train.test_engine import tiny_cfg
from umlkit.cli import main
from umlkit.reproduce import book_chapters, reproduce
from umlkit.train import fit, read_log

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
SRC = Path(__file__).resolve().parents[2] / "src"


def _yaml(path, root):
    path.write_text(f"""name: cli
data: {{root: {root}, datasets: [flowers, aircraft], batch_size: 32}}
model: {{method: linear, pretrained: false, embed_dim: 8}}
loss: {{name: cosface}}
train: {{epochs: 1, progress: false}}
""")
    return path


def test_cli_train_then_eval(small_root, tmp_path, capsys):
    cfg = _yaml(tmp_path / "c.yaml", small_root)
    assert main(["train", str(cfg), "--set", "optimizer.lr=1e-3", "--run-dir", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "Unified" in out and "last epoch" in out
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["config"]["optimizer"]["lr"] == 1e-3 and len(saved["config_hash"]) == 12
    assert main(["eval", str(tmp_path / "run" / "latest.pt"), "--data", str(small_root)]) == 0
    assert "Harmonic" in capsys.readouterr().out
    # a crash truncated latest.pt: the error names previous.pt, and --resume takes that path
    run = tmp_path / "run"
    (run / "previous.pt").write_bytes((run / "latest.pt").read_bytes())
    (run / "latest.pt").write_bytes((run / "latest.pt").read_bytes()[:500])
    assert main(["train", str(cfg), "--set", "optimizer.lr=1e-3", "--run-dir", str(run), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "truncated or corrupt" in err and f"--resume {run / 'previous.pt'}" in err
    assert main(["train", str(cfg), "--set", "optimizer.lr=1e-3", "--run-dir", str(run),
                 "--resume", str(run / "previous.pt")]) == 0


def test_plot_history_draws_loss_and_metrics(small_root, tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    from umlkit.train import plot_history
    cfg = tiny_cfg(small_root, epochs=2)
    cfg["model"] = {"method": "linear", "pretrained": False, "embed_dim": 8}
    cfg["data"]["val_fraction"] = 0.2
    res = fit(cfg, run_dir=tmp_path)
    ax = plot_history(res)
    labels = [line.get_label() for a in ax.figure.axes for line in a.get_lines()]
    assert labels == ["training loss", "test Unified R@1", "test Harmonic R@1", "validation Unified R@1"]
    assert "Unified" in res.history[-1]["val"]


def test_reproduce_runs_a_chapter_and_reports_failures(tmp_path, monkeypatch):
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path))
    table = reproduce(chapters=["running"], progress=False)   # the lightest page (the front page runs elsewhere)
    assert table.loc["running", "status"] == "ok" and (tmp_path / "quick" / "notebooks" / "running.ipynb").is_file()


def test_cli_reproduce_passes_parameters(monkeypatch, capsys):
    import pandas as pd

    import umlkit.reproduce
    seen = {}

    def fake(profile, chapters, parameters):
        seen.update(profile=profile, chapters=chapters, parameters=parameters)
        return pd.DataFrame({"status": ["ok"]}, index=pd.Index(["puma"], name="chapter"))

    monkeypatch.setattr(umlkit.reproduce, "reproduce", fake)
    assert main(["reproduce", "--chapters", "puma", "-p", "RERUN=True", "-p", "SEEDS=[0, 1]"]) == 0
    assert seen == {"profile": "quick", "chapters": ["puma"], "parameters": {"RERUN": True, "SEEDS": [0, 1]}}
    assert main(["reproduce", "-p", "RERUN"]) == 2
    assert "NAME=VALUE" in capsys.readouterr().err


def test_reproduce_knows_the_book_chapters():
    chapters = book_chapters()
    assert chapters[0] == "intro" and "evaluation" in chapters
    with pytest.raises(ValueError, match="unknown chapter"):
        reproduce(chapters=["no_such_chapter"])


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_torchrun_two_processes_match_one(small_root, tmp_path):
    cfg = tiny_cfg(small_root, epochs=1)
    cfg["model"] = {"method": "linear", "pretrained": False, "embed_dim": 8}
    cfg["data"]["augment"] = False  # no per-rank random streams: the two runs must see identical batches
    single = fit(cfg, run_dir=tmp_path / "one")
    script = tmp_path / "ddp.py"
    script.write_text("import json, sys\nfrom umlkit.train import fit\n"
                      "fit(json.loads(sys.argv[1]), run_dir=sys.argv[2])\n")
    env = dict(os.environ, PYTHONPATH=str(SRC), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                           "--master_port", str(_free_port()), str(script), json.dumps(cfg), str(tmp_path / "two")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    two = read_log(tmp_path / "two")
    # the same global batches, the loss on all-gathered embeddings, gradients averaged: the same training
    assert two["loss"].iloc[0] == pytest.approx(single.history[0]["loss"], rel=1e-4)
    assert two["test.Unified.R@1"].iloc[0] == pytest.approx(single.history[0]["test"]["Unified"]["R@1"], abs=1.0)


def test_reproduce_keeps_the_last_complete_notebook_when_a_run_fails_or_is_interrupted(tmp_path, monkeypatch):
    import papermill
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path))
    out = tmp_path / "quick" / "notebooks"
    out.mkdir(parents=True)
    (out / "intro.ipynb").write_text("complete")

    def half(src, dst, **kw):   # papermill has written some cells, then the chapter stops
        open(dst, "w").write("half")
        raise what
    monkeypatch.setattr(papermill, "execute_notebook", half)
    what = RuntimeError("cell 3 failed")
    table = reproduce(chapters=["intro"], progress=False)
    assert table.loc["intro", "status"] == "failed" and "intro.failed.ipynb" in table.loc["intro", "output"]
    assert (out / "intro.ipynb").read_text() == "complete" and (out / "intro.failed.ipynb").read_text() == "half"
    what = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt):
        reproduce(chapters=["intro"], progress=False)
    assert (out / "intro.ipynb").read_text() == "complete" and (out / "intro.partial.ipynb").read_text() == "half"

    def whole(src, dst, **kw):
        open(dst, "w").write("new")
    monkeypatch.setattr(papermill, "execute_notebook", whole)
    assert reproduce(chapters=["intro"], progress=False).loc["intro", "status"] == "ok"
    assert (out / "intro.ipynb").read_text() == "new"
