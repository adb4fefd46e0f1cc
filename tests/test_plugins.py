"""``umlkit train --plugin FILE.py``: a loss registered by a user's file trains from YAML (issue 41: extending
umlkit without editing it); a missing or failing plugin file is named."""
from pathlib import Path

import pytest

from umlkit import cli
from umlkit.losses import LOSSES

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "configs" / "examples"
SMALL = ["--set", "train.epochs=1", "--set", "data.datasets=[flowers]", "--set", "data.batch_size=32",
         "--set", "model.embed_dim=16"]


def test_a_loss_from_a_plugin_file_trains_from_yaml(mini_root, tmp_path, capsys):
    args = ["train", str(EXAMPLE / "plugin_loss.yaml"), "--set", f"data.root={mini_root}", *SMALL]
    if "norm_softmax_example" not in LOSSES:   # the name is unknown until the file is imported
        assert cli.main([*args, "--run-dir", str(tmp_path / "without")]) == 2
        assert "unknown loss 'norm_softmax_example'" in capsys.readouterr().err
        assert not (tmp_path / "without").exists()
    assert cli.main([*args, "--run-dir", str(tmp_path / "run"), "--plugin", str(EXAMPLE / "plugin_loss.py")]) == 0
    assert "run folder:" in capsys.readouterr().out and (tmp_path / "run" / "metrics.json").is_file()
    assert LOSSES["norm_softmax_example"][0].startswith("configs/examples/plugin_loss.py")


@pytest.mark.parametrize("content, match", [
    (None, r"--plugin .*missing\.py: expected an existing \.py file"),
    ("raise RuntimeError('no GPU here')", r"--plugin .*bad\.py failed on import \(RuntimeError: no GPU here\)"),
])
def test_a_missing_or_failing_plugin_is_named(tmp_path, capsys, content, match):
    import re
    path = tmp_path / ("missing.py" if content is None else "bad.py")
    if content is not None:
        path.write_text(content)
    assert cli.main(["train", str(EXAMPLE / "plugin_loss.yaml"), "--plugin", str(path)]) == 2
    assert re.search(match, capsys.readouterr().err)


def test_a_plugin_loss_whose_forward_fails_names_its_file_and_class(mini_root, tmp_path, capsys):
    """Issue 79: an error raised inside a plugin's loss reaches the user with the plugin file, line and class."""
    broken, config = tmp_path / "broken_loss.py", tmp_path / "broken.yaml"
    broken.write_text((EXAMPLE / "plugin_loss.py").read_text().replace(
        "cos = nn.functional.normalize(embeddings, dim=1)",
        "cos = nn.functional.normalize(embeddings[:, :3], dim=1)")    # a shape mistake of the user's
        .replace("norm_softmax_example", "broken_softmax_example"))
    config.write_text((EXAMPLE / "plugin_loss.yaml").read_text().replace("norm_softmax_example",
                                                                         "broken_softmax_example"))
    args = ["train", str(config), "--set", f"data.root={mini_root}", *SMALL,
            "--run-dir", str(tmp_path / "run"), "--plugin", str(broken)]
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert f"the plugin code at {broken}:" in err and "NormSoftmaxLoss.forward failed" in err


def test_the_books_extending_page_trains_and_evaluates_the_plugin_loss(tmp_path, mini_root):
    """book/extending.ipynb, executed as the book build runs it (papermill, from book/), registers the example loss
    from its file, trains it one epoch from YAML and evaluates the checkpoint: both tables are in its output."""
    import json
    import os
    import subprocess
    import sys
    data = tmp_path / "data"
    data.mkdir()
    (data / "uml_mini").symlink_to(mini_root, target_is_directory=True)   # the session's UML-Mini, not a new one
    script = ("import sys, papermill as pm; pm.execute_notebook(sys.argv[1], sys.argv[2], cwd=sys.argv[3], "
              "kernel_name='python3', progress_bar=False, parameters={'EPOCHS': 1})")
    env = {**os.environ, "UMLKIT_DATA": str(data), "PYTHONPATH": str(ROOT / "src")}
    out = tmp_path / "extending.out.ipynb"
    proc = subprocess.run([sys.executable, "-c", script, str(ROOT / "book" / "extending.ipynb"), str(out),
                           str(ROOT / "book")], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = "".join("".join(o.get("text", "")) for c in json.loads(out.read_text())["cells"]
                   for o in c.get("outputs", []))
    assert "best on test (epoch 1)" in text          # the training's summary table
    assert "MAP@R" in text and "Harmonic" in text     # the evaluation's table


def _forget(monkeypatch, kind: str, name: str) -> None:
    """This process forgets a registered name (as a new ``umlkit eval`` process that was not given the plugin)."""
    from umlkit.losses import _registry as losses
    from umlkit.models import _factory
    if kind == "loss":
        monkeypatch.delitem(losses._REGISTRY, name)
        monkeypatch.delitem(losses.LOSSES, name)
    else:
        monkeypatch.delitem(_factory._METHODS, name)


def test_a_method_from_a_plugin_file_uses_the_public_builder_api_and_trains(mini_root, tmp_path, capsys,
                                                                             monkeypatch):
    """Issue 82, item 6: configs/examples/plugin_method.py registers partial fine-tuning with umlkit.models'
    public builder API only; the model trains exactly the last blocks, the final norm and the head; the method
    trains from YAML with --plugin, and eval without --plugin names the method and the file config.json records."""
    import ast
    import json

    import umlkit.models
    from umlkit.models import create_model
    plugin = EXAMPLE / "plugin_method.py"
    tree = ast.parse(plugin.read_text())
    imported = {(n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert imported and all(mod == "umlkit.models" and name in umlkit.models.__all__ for mod, name in imported)
    cli.load_plugins([str(plugin)])
    for blocks, trained in ((2, ("blocks.4.", "blocks.5.")), (1, ("blocks.5.",))):
        model = create_model("vit_tiny_uml", "partial_finetune_example", embed_dim=8, pretrained=False,
                             blocks=blocks)
        names = [n for n, _ in model.named_parameters()]
        expected = [n for n in names if n.startswith(tuple(f"backbone.vit.{t}" for t in (*trained, "norm.")))
                    or n.startswith("head.")]
        assert [n for n, p in model.named_parameters() if p.requires_grad] == expected
        assert model.method == "partial_finetune_example" and model.embed_dim == 8
    with pytest.raises(ValueError, match=r"model option blocks = 0: expected a whole number >= 1"):
        create_model("vit_tiny_uml", "partial_finetune_example", pretrained=False, blocks=0)
    with pytest.raises(ValueError, match=r"model option blocks = 7: vit_tiny_uml\S* has 6 blocks"):
        create_model("vit_tiny_uml", "partial_finetune_example", pretrained=False, blocks=7)
    with pytest.raises(TypeError, match=r"unexpected option\(s\) for method 'partial_finetune_example'"):
        create_model("vit_tiny_uml", "partial_finetune_example", pretrained=False, block=1)

    run = tmp_path / "run"
    args = ["train", str(EXAMPLE / "plugin_method.yaml"), "--set", f"data.root={mini_root}", *SMALL,
            "--run-dir", str(run), "--plugin", str(plugin)]
    assert cli.main(args) == 0
    assert "run folder:" in capsys.readouterr().out and (run / "metrics.json").is_file()
    saved = json.loads((run / "config.json").read_text())
    assert saved["plugins"] == {"method:partial_finetune_example": str(plugin.resolve())}
    _forget(monkeypatch, "method", "partial_finetune_example")
    assert cli.main(["eval", str(run / "best.pt"), "--data", str(mini_root)]) == 2
    err = capsys.readouterr().err
    assert "names the method 'partial_finetune_example', which is not registered: this run was trained with a " \
           "plugin; pass --plugin FILE" in err and f"--plugin {plugin.resolve()}" in err
    del saved["plugins"]   # a run folder written before config.json recorded its plugins
    (run / "config.json").write_text(json.dumps(saved, indent=1))
    assert cli.main(["eval", str(run / "best.pt"), "--data", str(mini_root)]) == 2
    assert "pass --plugin FILE, the file that registers it (its config.json does not record which file)" in \
        capsys.readouterr().err


def test_eval_of_a_plugin_loss_run_without_the_plugin_names_the_loss_and_the_file(mini_root, tmp_path, capsys,
                                                                                   monkeypatch):
    """Issue 82, item 6: ``umlkit eval`` on a run trained with the plugin loss example, without --plugin, says
    that the run was trained with a plugin and which file its config.json records, instead of "unknown loss"; with
    the file it evaluates."""
    run, plugin = tmp_path / "run", EXAMPLE / "plugin_loss.py"
    assert cli.main(["train", str(EXAMPLE / "plugin_loss.yaml"), "--set", f"data.root={mini_root}", *SMALL,
                     "--run-dir", str(run), "--plugin", str(plugin)]) == 0
    capsys.readouterr()
    _forget(monkeypatch, "loss", "norm_softmax_example")
    assert cli.main(["eval", str(run / "best.pt"), "--data", str(mini_root)]) == 2
    err = capsys.readouterr().err
    assert f"{run / 'config.json'} names the loss 'norm_softmax_example', which is not registered: this run was " \
           f"trained with a plugin; pass --plugin FILE, the file that registers it ({run / 'config.json'} records " \
           f"the file: --plugin {plugin.resolve()})" in err
    assert "unknown loss" not in err
    assert cli.main(["eval", str(run / "best.pt"), "--data", str(mini_root), "--metrics", "R@1",
                     "--plugin", str(plugin)]) == 0
    assert "Harmonic" in capsys.readouterr().out
