"""make install checks that torch and torchvision belong together (issue 62, item 5), with fake pairs."""
import subprocess
import sys

import pytest

from umlkit._install_check import mismatch


@pytest.mark.parametrize("torch_v, vision_v", [("2.14.1+cu130", "0.29.1+cu130"), ("2.5.1+cpu", "0.20.1+cpu"),
                                               ("2.3.0", "0.18.0"), ("2.14.0rc1+cu130", "0.29.0+cu130")])
def test_pairs_of_one_release_and_build_agree(torch_v, vision_v):
    assert mismatch(torch_v, vision_v) is None


def test_a_mismatch_names_both_versions_and_the_fix():
    why = mismatch("2.14.1+cpu", "0.29.1+cu130")   # a CPU torch beside a CUDA torchvision
    assert "torch 2.14.1+cpu" in why and "torchvision 0.29.1+cu130" in why and "cpu against cu130" in why
    assert "--index-url https://download.pytorch.org/whl/cpu" in why
    why = mismatch("2.14.1", "0.28.0")            # two releases
    assert "goes with torchvision 0.29" in why and "0.28.0" in why
    assert "no compiled operators" in mismatch("2.14.1", "0.29.1", has_nms=False)


def test_the_check_passes_on_this_installation():
    out = subprocess.run([sys.executable, "-m", "umlkit._install_check"], capture_output=True, text=True)
    assert out.returncode == 0 and "agree" in out.stdout


@pytest.mark.parametrize("package", ["torchvision", "timm"])
def test_an_import_that_fails_with_runtime_error_prints_the_versions_and_the_fix(tmp_path, package):
    """A CPU torch beside PyPI's CUDA torchvision fails at import with RuntimeError (not ImportError); the check
    names the package, the error, the installed versions and the fix in three lines, no traceback. Simulated by a
    package of that name earlier on the path that raises what the real mismatch raised."""
    fake = tmp_path / package
    fake.mkdir()
    (fake / "__init__.py").write_text('raise RuntimeError("operator torchvision::nms does not exist")\n')
    env = {**__import__("os").environ, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "umlkit._install_check"], capture_output=True, text=True, env=env)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 3, out.stderr
    assert f"import {package} failed: RuntimeError: operator torchvision::nms does not exist" in lines[0]
    from importlib.metadata import version
    assert f"torch {version('torch')}, torchvision {version('torchvision')}" in lines[1]
    assert "--force-reinstall torch torchvision" in lines[2]
