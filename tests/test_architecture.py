"""The architecture stays visible: umlkit.data -> models -> losses -> train -> metrics -> experiments, and a lower
layer never imports a higher one (docstrings may name them; imports, at module level or inside a function, may
not). The shared root modules (``umlkit._paths``, ``_hub``, ``results``, ...) are below every layer."""
import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "umlkit"
LAYERS = ["data", "models", "losses", "train", "metrics", "experiments"]
# imports the layer rule allows across it, each with its reason
ALLOWED: dict[tuple[str, str], str] = {
    ("train", "metrics"): "the engine evaluates every N epochs with the one retrieval engine (metrics imports no "
                          "train, losses or models code: test_metrics_stands_on_data_alone)",
}


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return {m for m in out if m.startswith("umlkit.")}


def _layer(module: str) -> str | None:
    part = module.split(".")[1]
    return part if part in LAYERS else None


@pytest.mark.parametrize("layer", LAYERS[:-1])
def test_a_layer_never_imports_a_higher_one(layer):
    higher = set(LAYERS[LAYERS.index(layer) + 1:])
    bad = []
    for path in sorted((SRC / layer).rglob("*.py")):
        for module in _imports(path):
            up = _layer(module)
            if up in higher and (layer, up) not in ALLOWED:
                bad.append(f"{path.relative_to(SRC)} imports {module}")
    assert not bad, "\n".join(sorted(set(bad)))


def test_the_root_modules_import_no_layer():
    """Root helpers (paths, hub probe, results I/O, registries, progress) sit below every layer; the entry points
    (cli, reproduce, the book tools, the package's own __init__) are above them all and excluded."""
    entry = {"cli.py", "reproduce.py", "_book.py", "__init__.py", "paper.py"}
    bad = [f"{p.name} imports {m}" for p in SRC.glob("*.py") if p.name not in entry for m in _imports(p)
           if _layer(m)]
    assert not bad, bad


def test_metrics_stands_on_data_alone():
    """The retrieval engine the training loop evaluates with imports nothing of models, losses or train."""
    bad = [f"{p.relative_to(SRC)} imports {m}" for p in sorted((SRC / "metrics").rglob("*.py"))
           for m in _imports(p) if _layer(m) in {"models", "losses", "train"}]
    assert not bad, bad
