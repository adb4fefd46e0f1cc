"""ooDML's official split files as published (issue 65 item 6): ``split_train``/``split_val`` are the full
profile's validation classes, ``test_episodes`` its few-shot support sets, and a malformed file is refused with the
key or class it gets wrong. The files are written in the official pickle format over a tiny tree in the real
layouts (``tests/full/world.py``)."""
import json
import pickle

import numpy as np
import pytest

from tests.full.world import make_world
from umlkit.experiments.papers.oodml import split_making
from umlkit.experiments.splits import committed as class_splits


@pytest.fixture()
def world(tmp_path, monkeypatch):
    data = make_world(tmp_path, monkeypatch)
    yield data
    class_splits.load_splits.cache_clear()


def _raw(data, src="cub"):
    return pickle.loads((data.parent / "datasplits" / split_making.PUBLISHED_FILES[src]).read_bytes())


def test_published_validation_classes_drive_the_tuning_runs(world):
    from umlkit.experiments.recipes.source import run_config
    split = class_splits.split_of("cub", 3, "full")
    raw = _raw(world)[3]
    assert len(split["val"]) == len(raw["split_val"]) == 1 and len(split["val_train"]) == len(raw["split_train"])
    cfg = run_config("full", method="Margin (D)", source="cub", split=3, validation=True)
    assert cfg["data"]["splits"]["cub"] == {"train": split["val_train"], "test": split["val"]}
    assert not set(split["val"]) & set(split["test"])   # never a test class


def test_published_episodes_are_the_support_sets_of_the_few_shot_analysis(world):
    from umlkit.data import load_dataset
    from umlkit.experiments.papers.oodml.config import analysis_for
    from umlkit.experiments.runs.runners import _published_supports
    ana = analysis_for("ArcFace", "cub", 3, "full")
    assert ana["few_shot"]["published"] == {"source": "cub", "split": 3}
    stored = json.loads(class_splits.episodes_path().read_text())
    assert set(stored) == {"cub", "cars"} and set(stored["cub"]["3"]) == {"2", "5"}
    test = type("T", (), {"datasets": [load_dataset("cub", world, "test", cache=False)]})()
    # the test set of this tiny tree is the dataset's test part; the published file's split 1 tests exactly it
    supports = _published_supports({"published": {"source": "cub", "split": 1}}, test)
    names = [p.name for p in test.datasets[0].paths]
    for k in (2, 5):
        want = [ep for _, ep in sorted(_raw(world)[1]["test_episodes"][k].items())]   # the official layout
        assert len(supports[k]) == len(want) == 2
        for idx, episode in zip(supports[k], want):
            assert sorted(names[i] for i in idx) == sorted(f for files in episode.values() for f in files)
            assert len(idx) == k * len(episode)


def _write(data, tmp_path, raw, src="cub"):
    folder = tmp_path / "bad"
    folder.mkdir(exist_ok=True)
    (folder / split_making.PUBLISHED_FILES[src]).write_bytes(pickle.dumps(raw))
    return folder / split_making.PUBLISHED_FILES[src]


def test_a_split_without_a_key_names_it(world, tmp_path):
    raw = _raw(world)
    del raw[3]["test"]
    with pytest.raises(ValueError, match=r"split 3 lacks the key\(s\) \['test'\]"):
        split_making.read_published_splits(_write(world, tmp_path, raw), "cub", world)


def test_a_test_class_among_the_validation_classes_is_refused(world, tmp_path):
    raw = _raw(world)
    raw[3]["split_val"] = [raw[3]["test"][0]]
    with pytest.raises(ValueError, match=r"split 3 split_val lists 1 class\(es\) that are test classes"):
        split_making.read_published_splits(_write(world, tmp_path, raw), "cub", world)


def test_an_episode_file_that_is_not_there_is_named(world, tmp_path):
    raw = _raw(world)
    cls = raw[3]["test"][0]
    raw[3]["test_episodes"][2][0][cls] = ["no_such_image.jpg"]
    with pytest.raises(FileNotFoundError, match=r"split 3 2-shot episode 0, class .*'no_such_image.jpg' is not under"):
        split_making.read_published_episodes(_write(world, tmp_path, raw), "cub", world)


def test_episodes_as_a_list_read_the_same_and_a_wrong_layout_is_named(world, tmp_path):
    """Issue 79: the official files key each shot count's episodes by index; a list of episodes reads the same, and
    anything else is refused with the split, the shot count and the expected layout."""
    raw = _raw(world)
    official = split_making.read_published_episodes(_write(world, tmp_path, raw), "cub", world)
    for sid in raw:
        for k, eps in raw[sid].get("test_episodes", {}).items():
            raw[sid]["test_episodes"][k] = [ep for _, ep in sorted(eps.items())]
    assert split_making.read_published_episodes(_write(world, tmp_path, raw), "cub", world) == official
    raw[3]["test_episodes"][2] = {0: ["a.jpg"]}
    with pytest.raises(ValueError, match=r"split 3 2-shot test_episodes: expected \{episode index: \{class name"):
        split_making.read_published_episodes(_write(world, tmp_path, raw), "cub", world)


def test_few_shot_adaptation_uses_given_supports_not_drawn_ones():
    import torch

    from umlkit.models.embedding import EmbeddingModel
    from umlkit.train.adapt import few_shot_adaptation
    torch.manual_seed(0)
    model = EmbeddingModel(torch.nn.Identity(), torch.nn.Linear(8, 4), "full", "toy", 4).eval()
    feat = torch.randn(12, 8)
    labels = np.repeat(np.arange(3), 4)
    given = {2: [np.array([0, 1, 4, 5, 8, 9])]}
    out = few_shot_adaptation(model, feat, labels, shots=(2,), episodes=1, lr=1e-3, iterations=2, batch_size=4,
                              m=2, metrics=("R@1",), supports=given)
    assert len(out["2"]["few"]["R@1"]) == 1
    with pytest.raises(KeyError, match=r"hold \[2\] shots, not 5"):
        few_shot_adaptation(model, feat, labels, shots=(5,), episodes=1, lr=1e-3, iterations=2, batch_size=4,
                            m=2, metrics=("R@1",), supports=given)
