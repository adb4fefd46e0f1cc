"""Registries refuse to be overwritten, and a plugin that fails or exits at import stops the command (issue 65,
item 3): a builder that only shares a built-in's qualified name is another builder."""
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
                                         r".triplet\); umlkit_plugin_0_mine.triplet cannot take its name"):
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
