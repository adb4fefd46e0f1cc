"""umlkit.experiments.runs.fingerprint: normalised code hash, data and weights fingerprints, staleness."""
from __future__ import annotations

import hashlib

import pytest

from umlkit.experiments.papers.puma import run_config
from umlkit.experiments.runs import fingerprint as fp

SRC = '''"""Module doc."""
# a comment
import math


def f(x):
    """Function doc."""
    return math.sqrt(x)  # trailing comment
'''


def test_normalised_tokens_ignore_docs_comments_and_layout_but_not_code():
    base = fp.normalised_tokens(SRC)
    reworded = SRC.replace("Module doc.", "Another text,\nover two lines.").replace("# a comment", "# other")
    assert fp.normalised_tokens(reworded) == base
    assert fp.normalised_tokens(SRC.replace("\n\n\ndef", "\n\n\n\n\ndef")) == base      # blank lines
    assert fp.normalised_tokens(SRC.replace("sqrt(x)", "sqrt(x + 0)")) != base          # a statement changed
    assert fp.normalised_tokens(SRC.replace("return math.sqrt(x)", "return 'doc'")) != base  # a string that is code


def test_code_hash_covers_the_training_path_only():
    files = {f.relative_to(fp._PKG).as_posix() for f in fp._code_files()}
    assert {"train/engine.py", "losses/_registry.py", "models/_factory.py", "metrics/retrieval.py",
            "experiments/runs/runners.py", "data/datasets.py"} <= files
    assert not files & {"data/mini.py", "experiments/tables/table.py", "cli.py", "experiments/papers/puma/config.py",
                        "losses/__init__.py", "losses/hyperbolic.py"}    # per loss: test_code_reach.py
    assert len(fp.code_hash()) == 12 and fp.code_hash() == fp.code_hash()


def test_weights_fingerprints(tmp_path):
    cfg = run_config("quick", method="puma")
    shipped = fp.weights_fingerprint(cfg)
    sums = dict(line.split()[::-1] for line in (fp._PKG / "models" / "weights" / "SHA256SUMS").read_text().splitlines())
    assert shipped == "sha256:" + sums["vit_tiny_uml_patch8_32.safetensors"]
    cfg["model"]["pretrained"] = False
    assert fp.weights_fingerprint(cfg) == "random-init"
    cfg["model"]["weights"] = "recipe:pretrain_epochs=2"
    assert fp.weights_fingerprint(cfg) == "recipe:pretrain_epochs=2"
    f = tmp_path / "w.safetensors"
    f.write_bytes(b"abc")
    cfg["model"]["weights"] = str(f)
    assert fp.weights_fingerprint(cfg) == "sha256:" + hashlib.sha256(b"abc").hexdigest()
    cfg["model"]["weights"] = str(tmp_path / "gone.safetensors")
    assert fp.weights_fingerprint(cfg).startswith("missing:")


def test_data_fingerprints(tmp_path, mini_root):
    cfg = run_config("quick", method="puma")
    from umlkit.data.mini import GENERATOR_VERSION
    assert fp.data_fingerprint(cfg) == f"uml_mini:v{GENERATOR_VERSION}:seed0"
    cfg["data"]["root"] = str(mini_root)
    assert fp.data_fingerprint(cfg) == f"uml_mini:v{GENERATOR_VERSION}:seed0"   # read from the tree's manifest
    large = tmp_path / "large"
    large.mkdir()
    (large / "UML_MINI.json").write_text('{"version": 2, "seed": 0, "variant": "large", "datasets": {}}')
    cfg["data"]["root"] = str(large)
    assert fp.data_fingerprint(cfg) == "uml_mini:v2:large:seed0"                 # the variant is part of it
    # a real dataset root: the annotation files decide, so an edited file changes the fingerprint
    root = tmp_path / "real"
    (root / "CUB_200_2011").mkdir(parents=True)
    ann = root / "CUB_200_2011" / "images.txt"
    ann.write_text("1 001.A/a.jpg\n")
    cfg.update(profile="full")
    cfg["data"].update(root=str(root), datasets=["cub"])
    first = fp.data_fingerprint(cfg)
    assert first.startswith("root:")
    ann.write_text("1 001.A/b.jpg\n")
    assert fp.data_fingerprint(cfg) != first


def test_fingerprint_of_groups_and_stale_parts():
    cfg = run_config("quick", method="full")
    group = {"cub": cfg, "cars": run_config("quick", method="full", datasets=["cars"])}
    assert fp.fingerprint(group) == fp.fingerprint(cfg)
    with pytest.raises(ValueError, match="resolved configuration"):
        fp.fingerprint({"a": 1})
    now = fp.fingerprint(cfg)
    assert fp.stale_parts(now, now) == []
    assert fp.stale_parts({**now, "code": "000000000000"}, now) == ["code"]
    assert fp.stale_parts(None, now) == ["code", "data", "weights"]


_FSTRINGS = '''def g(a, b):
    x = f"a{b}c" + f'{a!r:>{b}}' + rf"""\\d{a}
{{not a field}} {f"{b}"}"""
    return x
'''
# this file's normalised tokens on Python 3.10/3.11, where an f-string is one STRING token
_FSTRINGS_311 = ('def g ( a , b ) : \n      x = f"a{b}c" + f\'{a!r:>{b}}\' + rf"""\\d{a}\n{{not a field}} {f"{b}"}""" '
                 '\n return x \n ')

_HASH_PACKAGE = """
import hashlib, importlib.util, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("_source_tokens", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
pkg, h = Path(sys.argv[2]), hashlib.sha256()
for f in sorted(pkg.rglob("*.py")):
    h.update(f.relative_to(pkg).as_posix().encode())
    h.update(mod.normalised_tokens(f.read_text()).encode())
print(h.hexdigest())
"""


def _interpreters() -> dict[str, str]:
    """One interpreter per Python minor version 3.10-3.13 found on this machine (pyenv's versions, then PATH)."""
    import glob
    import shutil
    import subprocess
    import sys
    from pathlib import Path
    found = {f"{sys.version_info[0]}.{sys.version_info[1]}": sys.executable}
    candidates = sorted(glob.glob(str(Path.home() / ".pyenv" / "versions" / "3.1[0-3]*" / "bin" / "python")))
    candidates += [p for v in ("3.10", "3.11", "3.12", "3.13") if (p := shutil.which(f"python{v}"))]
    for exe in candidates:
        out = subprocess.run([exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True)
        if out.returncode == 0:
            found.setdefault(out.stdout.strip(), exe)
    return found


def test_fstrings_tokenise_as_one_string_on_every_python():
    """PEP 701 (3.12+) splits f-strings in tokenize; the stream re-joins them into 3.10/3.11's STRING tokens."""
    assert fp.normalised_tokens(_FSTRINGS) == _FSTRINGS_311
    assert fp.normalised_tokens(_FSTRINGS.replace('f"a{b}c"', 'f"a{b}d"')) != _FSTRINGS_311


def test_package_fingerprint_is_one_value_under_every_installed_python():
    """The whole package's normalised tokens hash the same under every Python 3.10-3.13 installed here (the records
    were fingerprinted under 3.11; Colab runs 3.13), and the same as in this process."""
    import hashlib
    import subprocess
    from pathlib import Path

    from umlkit import _source_tokens
    pkg = fp._PKG
    h = hashlib.sha256()
    for f in sorted(pkg.rglob("*.py")):
        h.update(f.relative_to(pkg).as_posix().encode())
        h.update(fp.normalised_tokens(f.read_text()).encode())
    here = h.hexdigest()
    values = {}
    for version, exe in _interpreters().items():
        done = subprocess.run([exe, "-c", _HASH_PACKAGE, str(Path(_source_tokens.__file__)), str(pkg)],
                              capture_output=True, text=True, check=True)
        values[version] = done.stdout.strip()
    assert set(values.values()) == {here}, values
