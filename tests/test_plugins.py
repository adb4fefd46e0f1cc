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
