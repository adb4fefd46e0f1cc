"""Registries refuse to be overwritten, and a plugin that fails or exits at import stops the command (issue 65,
item 3): a builder that only shares a built-in's qualified name is another builder."""
import json
import types

import pytest

from umlkit._registry import add_entry
from umlkit.cli import main


def _entry(module: str, qualname: str):
    def build():
        return None
    build.__module__, build.__qualname__ = module, qualname
    return types.SimpleNamespace(build=build)


def test_a_builder_from_another_module_cannot_take_a_registered_name():
    reg = {}
    add_entry(reg, "loss", "triplet", _entry("umlkit.losses.pml_backed", "triplet"))
    add_entry(reg, "loss", "triplet", _entry("umlkit.losses.pml_backed", "triplet"))   # the module imported again
    with pytest.raises(ValueError, match=r"loss 'triplet' is already registered \(by umlkit.losses.pml_backed"
                                         r".triplet\); umlkit_plugin_0_mine.triplet cannot take its name: "
                                         r"register it under another name, or pass override=True"):
        add_entry(reg, "loss", "triplet", _entry("umlkit_plugin_0_mine", "triplet"))


def test_a_plugin_that_exits_or_raises_at_import_stops_train_with_exit_2(tmp_path, capsys):
    for body, what in (("import sys\nsys.exit(0)\n", "SystemExit"), ("raise RuntimeError('boom')\n", "RuntimeError")):
        plugin = tmp_path / "bad_plugin.py"
        plugin.write_text(body)
        rc = main(["train", "configs/examples/plugin_loss.yaml", "--plugin", str(plugin),
                   "--run-dir", str(tmp_path / "run")])
        err = capsys.readouterr().err
        assert rc == 2 and f"--plugin {plugin} failed on import ({what}" in err and "nothing was run" in err
        assert not (tmp_path / "run").exists()


@pytest.fixture()
def restored_losses():
    """The loss registry and the override list as they were (a test that replaces a built-in must not leak it)."""
    import umlkit._registry as shared
    from umlkit.losses import _registry as losses
    tables = (losses._REGISTRY, losses.LOSSES, losses.TERMS, shared._OVERRIDES)
    saved = [dict(t) for t in tables]
    yield
    for table, before in zip(tables, saved):
        table.clear()
        table.update(before)


def test_override_true_replaces_a_built_in_and_the_run_records_it(tmp_path, capsys, restored_losses):
    plugin = tmp_path / "my_cosface.py"
    plugin.write_text("import torch\nfrom umlkit.losses import register_loss\n\n"
                      "class Mean(torch.nn.Module):\n    inputs = ('embeddings', 'labels')\n"
                      "    def forward(self, embeddings, labels):\n        return embeddings.pow(2).mean()\n\n"
                      "@register_loss('cosface', implementation='mine', source='a test', override=True)\n"
                      "def cosface(num_classes, embedding_size, **options):\n    return Mean()\n")
    run = tmp_path / "run"
    rc = main(["train", "configs/examples/plugin_loss.yaml", "--plugin", str(plugin), "--run-dir", str(run),
               "--set", "objective.0.name=cosface", "--set", "objective.0.options={}", "--set", "train.epochs=1",
               "--set", "data.datasets=[flowers]", "--set", "data.batch_size=32", "--set", "model.pretrained=false"])
    assert rc == 0, capsys.readouterr().err
    header = json.loads((run / "config.json").read_text())
    replaced = header["registry_overrides"]["loss:cosface"]
    assert replaced["replaced"].startswith("umlkit.losses.") and replaced["by"].endswith("my_cosface.cosface")
