"""The full profile's first run: every refusal at once, each with its fix (issue 60 item 8), on a tiny tree in the
real layouts with the hub unreachable."""
import pytest

from umlkit.experiments.ops.preflight import preflight
from umlkit.experiments.ops.table_runs import drop_absent, table_jobs, with_overrides


@pytest.fixture()
def first_run(tmp_path, monkeypatch):
    """VPTSP Table 2's CUB row of the VPT baseline, as a new user with a tiny CUB tree and no hub meets it."""
    from umlkit.data import make_mini
    from umlkit.models import backbones
    monkeypatch.setenv("UMLKIT_DATA", str(make_mini(tmp_path / "data", size="tiny", sources=["cub"])))
    monkeypatch.setenv("UMLKIT_RESULTS", str(tmp_path / "results"))
    monkeypatch.setattr(backbones, "hub_unreachable", lambda *a, **k: "no network in this test")
    monkeypatch.setattr(backbones, "in_hf_cache", lambda cfg: False)
    jobs, _ = drop_absent(table_jobs("vptsp", "Table 2", "full"))
    return [j for j in jobs if j[1] == "cub-VPT-Base-seed0"]


def test_batch_and_weights_are_refused_together_with_the_set_values_that_fit(first_run):
    assert len(first_run) == 1
    with pytest.raises(ValueError) as err:
        preflight(first_run, "full")
    text = str(err.value)
    assert text.startswith("2 problem(s) stop these runs before the first one trains")
    # one batch that fits both limits (24 images; 4 classes x 2 per class), not 24 and then 8
    assert "cub has only 24 training images in 4 classes" in text and "--set data.batch_size=8)" in text
    assert "vit_small_patch16_224.augreg_in21k" in text and "--set model.weights=" in text
    assert "--set model.pretrained=false" in text and "[1 run(s): cub-VPT-Base-seed0]" in text
    preflight(with_overrides(first_run, ["data.batch_size=8", "model.pretrained=false"]), "full")   # nothing left


def test_a_training_image_that_does_not_decode_is_named_before_the_first_run(first_run, tmp_path):
    """issue 82, item 5: the pre-flight decodes a sample of the training images; the tiny tree's first CUB image,
    overwritten, is named with the check that lists them all (and the run trains nothing)."""
    import os
    root = os.environ["UMLKIT_DATA"]
    first = sorted((tmp_path / "data" / "CUB_200_2011" / "images").rglob("*.jpg"))[0]
    assert str(first).startswith(root)
    first.write_bytes(b"\x00" * 10)
    with pytest.raises(ValueError) as err:
        preflight(with_overrides(first_run, ["data.batch_size=8", "model.pretrained=false"]), "full")
    text = str(err.value)
    assert text.startswith("1 problem(s)") and f"cannot read image {first}" in text
    assert "umlkit data check --verify-images" in text


def test_the_quick_profile_and_an_empty_list_are_not_checked(first_run):
    preflight([], "full")
    preflight(first_run, "quick")


def test_a_data_root_that_does_not_exist_is_named_not_listed_as_absent_datasets(monkeypatch, tmp_path):
    monkeypatch.setenv("UMLKIT_DATA", str(tmp_path / "typo"))
    with pytest.raises(FileNotFoundError, match=r"reads its datasets from .*typo .*which does not exist"):
        drop_absent(table_jobs("vptsp", "Table 2", "full"))
