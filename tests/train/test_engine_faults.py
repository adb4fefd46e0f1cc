"""fit's run folder: training writes config.json, log.jsonl and checkpoints there, so it refuses, before anything is
built or written, a folder it would overwrite without having written it."""
import json

import pytest

from umlkit.train.engine import _check_run_dir


def _run_folder(path, *files):
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"config": {}, "config_hash": "abc"}))
    for f in files:
        (path / f).write_bytes(b"ckpt")
    return path


def _tree(path):
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_new_empty_and_unfinished_run_folders_are_accepted_and_left_as_they_are(tmp_path):
    assert _check_run_dir(tmp_path / "new", resume=False) is None
    assert not (tmp_path / "new").exists()   # the check creates nothing
    (tmp_path / "empty").mkdir()
    assert _check_run_dir(tmp_path / "empty", resume=False) is None
    # a run that wrote its config and log but no checkpoint yet (stopped in its first epoch), a leftover temp file
    started = _run_folder(tmp_path / "started", "log.jsonl", ".latest.pt.tmp")
    before = _tree(tmp_path)
    assert _check_run_dir(started, resume=False) is None
    assert _tree(tmp_path) == before and list((tmp_path / "empty").iterdir()) == []
    # the same folder with a checkpoint is refused: the acceptance above is the absence of a finished run
    (started / "latest.pt").write_bytes(b"ckpt")
    with pytest.raises(FileExistsError, match="already holds a run"):
        _check_run_dir(started, resume=False)


def test_a_finished_run_is_resumed_not_overwritten(tmp_path):
    done = _run_folder(tmp_path / "done", "latest.pt", "best.pt", "metrics.json", "log.jsonl")
    with pytest.raises(FileExistsError, match=r"already holds a run \(latest.pt, best.pt, metrics.json\).*--resume"):
        _check_run_dir(done, resume=False)
    _check_run_dir(done, resume=True)
    _check_run_dir(done, resume=str(done / "latest.pt"))


def test_a_users_folder_is_refused_even_with_resume(tmp_path):
    mine = _run_folder(tmp_path / "mine", "latest.pt")
    (mine / "notes.txt").write_text("keep")
    for resume in (False, True):
        with pytest.raises(FileExistsError, match=r"not a umlkit run folder \(files a run does not write \(notes.txt"):
            _check_run_dir(mine, resume=resume)
    own_config = tmp_path / "own"
    own_config.mkdir()
    (own_config / "config.json").write_text('{"lr": 0.1}')   # the user's config.json, not a run's
    with pytest.raises(FileExistsError, match="no config.json written by umlkit's training"):
        _check_run_dir(own_config, resume=False)
    assert (own_config / "config.json").read_text() == '{"lr": 0.1}'
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="is a file"):
        _check_run_dir(tmp_path / "file", resume=False)


class _Payload:
    """Something a checkpoint made by other code could pickle (and a crafted one could abuse on unpickling)."""


def test_a_checkpoint_with_python_objects_is_refused_without_advising_an_unsafe_load(tmp_path):
    import torch

    from umlkit.train.checkpoint import CheckpointError, load_checkpoint
    path = tmp_path / "latest.pt"
    torch.save({"model": {}, "extra": _Payload()}, path)
    with pytest.raises(CheckpointError, match=f"checkpoint {path} holds Python objects .* weights_only=True") as err:
        load_checkpoint(path)
    assert "weights_only=False" not in str(err.value) and "\n" not in str(err.value)
    path.write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(CheckpointError, match=f"checkpoint {path} is truncated or corrupt") as err:
        load_checkpoint(path)
    assert "\n" not in str(err.value)


def test_device_and_world_settings_are_named(monkeypatch):
    import torch

    from umlkit.train.engine import _world
    from umlkit.train.runtime import resolve_device
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    assert resolve_device("auto").type == "cpu"
    with pytest.raises(ValueError, match=r"config key device = 'cuda:1': torch sees 0 CUDA GPU\(s\) here"):
        resolve_device("cuda:1")     # torch's own message ("Found no NVIDIA driver") named no setting
    monkeypatch.setenv("WORLD_SIZE", "abc")
    with pytest.raises(ValueError, match="WORLD_SIZE='abc' / RANK=None: expected integers"):
        _world()
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "2")
    with pytest.raises(ValueError, match="WORLD_SIZE=2, RANK=2: expected 0 <= RANK < WORLD_SIZE"):
        _world()
    monkeypatch.setenv("RANK", "1")
    assert _world() == (2, 1)


def test_a_bad_search_dtype_variable_fails_before_training(monkeypatch, tmp_path):
    from umlkit.train import fit
    monkeypatch.setenv("UMLKIT_SEARCH_DTYPE", "fp16")
    with pytest.raises(ValueError, match="UMLKIT_SEARCH_DTYPE='fp16': expected 'bf16', 'fp32' or 'int8'"):
        fit({"data": {"root": str(tmp_path / "none")}, "train": {"progress": False}}, run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()       # before any data, model or file (the epoch ran first before)


def test_a_loss_option_error_names_the_objective_term():
    from types import SimpleNamespace

    from umlkit.train import resolve_config
    from umlkit.train.engine import build_objective
    cfg = resolve_config({"objective": [{"name": "multisimilarity"}, {"name": "curricularface",
                                                                         "options": {"margn": 0.3}}]})
    with pytest.raises(TypeError, match=r"config key objective.1 \(curricularface\): .*margn"):
        build_objective(cfg, SimpleNamespace(num_classes=5), embed_dim=8)
