"""Shipped files checked where they are read (umlkit._shipped; issue 83, rule 3): the SHA256SUMS beside the tiny ViTs'
weights and the language files, in coreutils' format, and a cut-short file named with how to restore it, never used
or made again."""
import json
import shutil
import subprocess

import numpy as np
import pytest

from umlkit import _shipped
from umlkit._paths import results_root
from umlkit._shipped import DamagedShippedFile
from umlkit.results import file_sha256


def _cut(path, keep: int = 100) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:keep])


def test_sums_are_sha256sums_format_and_a_changed_file_is_named(tmp_path):
    a, b = tmp_path / "a.bin", tmp_path / "b.bin"
    a.write_bytes(b"alpha" * 100)
    b.write_bytes(b"beta")
    for p in (b, a):
        _shipped.add_sum(p, file_sha256(p))
    lines = (tmp_path / "SHA256SUMS").read_text().splitlines()
    assert lines == [f"{file_sha256(a)}  a.bin", f"{file_sha256(b)}  b.bin"]          # sorted, one per file
    if shutil.which("sha256sum"):                                                   # the tool checks it as written
        ok = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=tmp_path, capture_output=True, text=True)
        assert ok.returncode == 0 and ok.stdout.count(": OK") == 2
    assert _shipped.check_sha(a, file_sha256(a), "x") == file_sha256(a)
    assert _shipped.check_sha(tmp_path / "unlisted.bin", "0" * 64, "x") == "0" * 64  # nothing listed: nothing to check
    _cut(a, 7)
    with pytest.raises(DamagedShippedFile, match=r"a\.bin is damaged or was changed: its sha256 is [0-9a-f]{12}…, "
                                                 r".*SHA256SUMS lists [0-9a-f]{12}… \(7 bytes now\).*Restore it: do X"):
        _shipped.check_sha(a, file_sha256(a), "do X")
    (tmp_path / "SHA256SUMS").write_text(f"{file_sha256(b)}  b.bin\nnot a line\n")
    with pytest.raises(ValueError, match=r"SHA256SUMS, line 2: expected '<sha256>  <file name>'"):
        _shipped.read_sums(tmp_path)


def test_every_committed_language_file_is_listed_with_its_content():
    folder = results_root("quick") / "language"
    sums = _shipped.read_sums(folder)
    files = sorted(p.name for p in folder.glob("*.npz"))
    assert files and sorted(sums) == files
    assert all(file_sha256(folder / n) == sums[n] for n in files)


def test_a_cut_short_language_file_is_named_by_the_store_and_by_the_writer(tmp_path, monkeypatch):
    from umlkit.data.language import embeddings_file
    from umlkit.experiments.papers.language_guidance.language_store import language_ref
    from umlkit.experiments.runs.records import MissingSideFile, read_only
    src = results_root("quick") / "language"
    with read_only():
        ref = language_ref("cub", "ELG", "quick")
    name = ref["file"].rsplit("/", 1)[-1]
    dst = tmp_path / "results" / "quick" / "language"
    dst.mkdir(parents=True)
    for n in (name, "index.json", "SHA256SUMS"):
        shutil.copy(src / n, dst / n)
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path / "results"))
    monkeypatch.setattr("umlkit.experiments.papers.language_guidance.language_store._REFS", {})
    with read_only():
        assert language_ref("cub", "ELG", "quick")["sha256"] == ref["sha256"]      # the intact copy reads as before
    _cut(dst / name)
    monkeypatch.setattr("umlkit.experiments.papers.language_guidance.language_store._REFS", {})
    with read_only(), pytest.raises(MissingSideFile, match=rf"language file for cub / ELG is unusable: .*{name} is "
                                                           rf"damaged.*git checkout --"):
        language_ref("cub", "ELG", "quick")
    before = {p.name: p.read_bytes() for p in dst.iterdir()}
    with pytest.raises(DamagedShippedFile, match=rf"{name} is damaged"):             # writing: refused, not remade
        language_ref("cub", "ELG", "quick")
    assert {p.name: p.read_bytes() for p in dst.iterdir() if p.name in before} == before
    # the writer lists what it writes, so the same check covers files made later
    made = embeddings_file(["a", "b"], np.eye(2, dtype=np.float32), tmp_path / "own" / "x.npz")
    assert _shipped.read_sums(tmp_path / "own") == {"x.npz": made["sha256"]}


def test_a_cut_short_shipped_weights_file_is_named_before_any_run(tmp_path, monkeypatch):
    from umlkit.experiments.runs import fingerprint as fp
    from umlkit.models import backbones
    shipped = backbones.WEIGHTS_DIR
    for n in ("vit_tiny_uml_patch8_32.safetensors", "SHA256SUMS"):
        shutil.copy(shipped / n, tmp_path / n)
    cfg = {"model": {"backbone": "vit_tiny_uml", "pretrained": True, "weights": None}}
    want = fp.weights_fingerprint(cfg)
    monkeypatch.setattr(backbones, "WEIGHTS_DIR", tmp_path)
    copy = tmp_path / "vit_tiny_uml_patch8_32.safetensors"
    assert fp.weights_fingerprint(cfg) == want == f"sha256:{file_sha256(copy)}"
    _cut(tmp_path / "vit_tiny_uml_patch8_32.safetensors", 5000)
    with pytest.raises(DamagedShippedFile, match=r"vit_tiny_uml_patch8_32\.safetensors is damaged.*\(5,000 bytes "
                                                 r"now\).*git checkout --"):
        fp.weights_fingerprint(cfg)
    assert json.loads(json.dumps(cfg)) == cfg   # the configuration was not touched


def test_create_backbone_refuses_a_listed_weights_file_that_was_changed(tmp_path):
    """models.backbones.check_listed_weights, before timm reads a file: a weights file whose folder's SHA256SUMS
    lists another hash is refused by create_backbone (the shipped tiny ViT copied, then cut short); the intact copy
    and a file no SHA256SUMS lists load."""
    import torch

    from umlkit.models.backbones import create_backbone
    from umlkit.models.recipes import weight_files
    shipped = weight_files("v1")["weights"]
    good = tmp_path / shipped.name
    shutil.copyfile(shipped, good)
    _shipped.add_sum(good, file_sha256(good))
    assert isinstance(create_backbone("vit_tiny_uml", weights=good), torch.nn.Module)
    _cut(good, 1000)
    with pytest.raises(DamagedShippedFile, match=rf"{good.name} is damaged or was changed.*\(1,000 bytes now\)"):
        create_backbone("vit_tiny_uml", weights=good)
    (tmp_path / "SHA256SUMS").unlink()   # unlisted: timm reads it, and names the file it cannot load
    with pytest.raises(ValueError, match=r"cannot be loaded into"):
        create_backbone("vit_tiny_uml", weights=good)
