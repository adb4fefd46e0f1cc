"""Issue 60 item 6: a full-profile run trains only from the backbone file its paper expects (a pin in
configs/weights.yaml, else the hash this results folder saw first); a changed file is refused with both hashes."""
import hashlib

import pytest

from umlkit.experiments.ops import preflight as pf
from umlkit.experiments.ops import weights_identity as wi


def _checkpoint(path, value: float) -> None:
    import torch
    from safetensors.torch import save_file
    save_file({"w": torch.full((4,), value)}, str(path))


@pytest.fixture
def weights(tmp_path, monkeypatch):
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path / "results"))
    monkeypatch.setattr(wi, "_pins", lambda: {})
    monkeypatch.setattr(pf, "_batch_problem", lambda cfg: None)      # the data side is tested in test_preflight
    path = tmp_path / "vit_s16.safetensors"
    _checkpoint(path, 0.0)   # the checkpoint PUMA trained from
    cfg = {"model": {"backbone": "vit_small_patch16_224", "weights": str(path), "pretrained": True},
           "data": {"datasets": ["cub"], "root": "x", "splits": "default", "batch_size": 8, "samples_per_class": 2,
                    "sampler": "class_random"}}
    jobs = [("puma/table2", "puma-seed0", cfg, "train"), ("puma/table2", "full-seed0", cfg, "train")]
    return path, cfg, jobs


def test_first_use_is_remembered_and_a_changed_file_refused_with_both_hashes(weights, tmp_path):
    path, cfg, jobs = weights
    first = hashlib.sha256(path.read_bytes()).hexdigest()
    assert wi.weights_file(cfg) == ("vit_small_patch16_224", path)
    pf.preflight(jobs, "full", record=False)                  # a dry run writes nothing
    assert not (tmp_path / "results" / "full" / wi.SEEN_FILE).exists()
    pf.preflight(jobs, "full")                                # the first real run: trust on first use
    assert wi.expected("vit_small_patch16_224", "full")[0] == first
    pf.preflight(jobs, "full")                                # the same file again: nothing to say
    _checkpoint(path, 1.0)   # what the hub name points to now
    second = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(ValueError, match="1 problem") as err:
        pf.preflight(jobs, "full")
    text = str(err.value)
    assert f"has sha256 {second}, but puma expect(s) {first} (first seen by this results folder" in text
    assert "[2 run(s): puma-seed0, full-seed0]" in text and str(path) in text


def test_a_pin_wins_over_what_was_seen_and_a_bad_pins_file_is_named(weights, tmp_path, monkeypatch):
    path, cfg, jobs = weights
    monkeypatch.setattr(wi, "_pins", lambda: {"vit_small_patch16_224": "0" * 64})
    found = pf.problems_of(jobs, "full")
    (message,) = found
    assert f"expect(s) {'0' * 64} (pinned in configs/weights.yaml)" in message
    monkeypatch.undo()
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path / "results"))
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / wi.PINS_FILE).write_text("pins: {vit_small_patch16_224: abc}\n")
    monkeypatch.setattr("umlkit._paths.repo_folder", lambda *a, **k: tmp_path / "configs")
    with pytest.raises(ValueError, match=r"weights.yaml: expected 'pins: \{timm model name: sha256"):
        wi.expected("vit_small_patch16_224", "full")


def test_random_init_and_quick_runs_are_not_checked(weights):
    path, cfg, jobs = weights
    assert wi.weights_file({**cfg, "model": {**cfg["model"], "weights": None, "pretrained": False}}) is None
    path.write_bytes(b"anything")
    pf.preflight(jobs, "quick")   # the quick profile's shipped weights are the records' own business


def test_data_check_lists_each_backbone_its_papers_file_and_state(weights, monkeypatch, capsys):
    """`umlkit data check --weights`: one line per backbone with the papers that train from it, present / pinned /
    seen, and a note for a paper whose runs cannot be listed; a changed file makes the check fail."""
    from umlkit.cli import main
    from umlkit.experiments.tables import registry
    path, cfg, jobs = weights
    hub = {**cfg, "model": {"backbone": "vit_tiny_patch16_224", "weights": None, "pretrained": True}}

    def broken(profile):
        raise FileNotFoundError("no split files here")
    toy = {"puma": registry.Paper("puma", lambda p: {}, job_lists={"tables": lambda p: jobs}),
           "vptsp": registry.Paper("vptsp", lambda p: {}, job_lists={"tables": lambda p: [("vptsp/t", "v", hub)]}),
           "oodml": registry.Paper("oodml", lambda p: {}, job_lists={"tables": broken})}
    monkeypatch.setattr(registry, "papers", lambda: toy)
    monkeypatch.setattr(wi, "weights_file", lambda c: ("vit_small_patch16_224", path) if c is cfg else None)
    report, notes = wi.weights_report("full")
    assert report["backbone"].tolist() == ["vit_small_patch16_224", "vit_tiny_patch16_224"]
    assert report["runs"].tolist() == [2, 1] and report["papers"].tolist() == ["puma", "vptsp"]
    assert report["status"].iloc[0] == "present, not pinned (its first run pins it)"
    assert report["status"].iloc[1].startswith("not downloaded (timm fetches ")
    assert notes == ["oodml: its runs cannot be listed here (no split files here)"]
    pf.preflight(jobs, "full")                                   # the first run pins it
    assert wi.weights_report("full")[0]["status"].iloc[0] == "ok, first seen by this results folder"
    path.write_bytes(b"changed")
    (path.parent / "data").mkdir()
    assert main(["data", "check", "--weights", "--datasets", "cub", "--root", str(path.parent / "data")]) == 1
    assert "MISMATCH with first seen by this results folder" in capsys.readouterr().out


def test_a_truncated_weights_file_is_refused_and_nothing_is_remembered_of_it(weights, tmp_path):
    """Issue 83: the hash of a file is kept only once the file loads; the complete file then trains."""
    path, cfg, jobs = weights
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) - 8])
    with pytest.raises(ValueError, match=r"the weights file .*vit_s16.safetensors for vit_small_patch16_224 cannot be "
                                         r"read \(its header declares .* bytes, the file holds .*\): it is cut short"):
        pf.preflight(jobs, "full")
    assert not (tmp_path / "results" / "full" / wi.SEEN_FILE).exists()
    path.write_bytes(whole)
    pf.preflight(jobs, "full")
    assert wi.expected("vit_small_patch16_224", "full")[0] == hashlib.sha256(whole).hexdigest()
