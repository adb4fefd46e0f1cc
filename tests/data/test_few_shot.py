"""umlkit.data.few_shot: the official PUMA few-shot files read with the authors' prefix rewritten, the restricted
unpickler, the data.few_shot forms and the errors that name the file."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

from umlkit.data import load_dataset
from umlkit.data.few_shot import parse_few_shot, published_file, published_indices, read_published

AUTHOR = "/home/tjddus9597/Data/DML"


def _write_official(path, paths, labels):
    """A file shaped like the official ones: {ys, I, im_paths, ds_ID} (lists and numpy arrays)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"ys": np.asarray(labels), "I": list(range(len(paths))), "im_paths": list(paths),
            "ds_ID": np.zeros(len(paths), dtype=np.int64)}
    path.write_bytes(pickle.dumps(data))
    return path


def test_parse_few_shot_forms_and_errors():
    assert parse_few_shot(None) is None
    assert parse_few_shot(4) == (4, False) and parse_few_shot("published:16") == (16, True)
    for bad in (0, -1, True, "4", "published:", "published:0", "published:x", 2.0):
        with pytest.raises(ValueError, match="data.few_shot"):
            parse_few_shot(bad)


def test_published_paths_map_onto_the_local_copy_whatever_the_prefix(mini_root, tmp_path):
    ds = load_dataset("cub", mini_root, "train")
    rng = np.random.default_rng(0)
    chosen = rng.choice(len(ds.paths), 12, replace=True)          # with replacement: repeats stay
    chosen[1] = chosen[0]
    stored = [f"{AUTHOR}/{p.relative_to(mini_root).as_posix()}" for p in (ds.paths[i] for i in chosen)]
    f = _write_official(tmp_path / "few_shot" / "dataset_CUB_shot_2.pkl", stored, ds.labels[chosen])
    assert published_file(tmp_path, "cub", 2) == f
    idx = published_indices(ds.paths, f)
    assert idx.tolist() == chosen.tolist()
    # a Windows-style stored path and a different layout above the class folder still match
    other = [p.replace("/", "\\").replace(AUTHOR.replace("/", "\\"), "D:\\data\\elsewhere") for p in stored[:3]]
    f2 = _write_official(tmp_path / "x.pkl", other, ds.labels[chosen[:3]])
    assert published_indices(ds.paths, f2).tolist() == chosen[:3].tolist()


def test_published_errors_name_the_file_and_path(mini_root, tmp_path):
    ds = load_dataset("cub", mini_root, "train")
    f = _write_official(tmp_path / "a.pkl", [f"{AUTHOR}/CUB_200_2011/images/999.None/nothing.jpg"], [0])
    with pytest.raises(ValueError, match=r"a\.pkl.*nothing\.jpg.*matches no local training image"):
        published_indices(ds.paths, f)
    with pytest.raises(FileNotFoundError, match=r"dataset_Cars_shot_4\.pkl.*few_shot/ folder"):
        published_file(tmp_path, "cars", 4)
    with pytest.raises(ValueError, match="no published few-shot files"):
        published_file(tmp_path, "inat", 4)
    bad = tmp_path / "bad.pkl"
    bad.write_bytes(pickle.dumps({"ys": [1, 2], "im_paths": ["a"]}))
    with pytest.raises(ValueError, match=r"bad\.pkl: 1 im_paths but 2 ys"):
        read_published(bad)


class _Evil:
    def __reduce__(self):
        import os
        return (os.system, ("echo pwned",))


def test_a_pickle_that_would_run_code_is_refused(tmp_path):
    f = tmp_path / "evil.pkl"
    f.write_bytes(pickle.dumps({"ys": [0], "im_paths": [_Evil()]}))
    with pytest.raises(ValueError, match=r"evil\.pkl: not a readable PUMA few-shot file .*refusing to load"):
        read_published(f)


@pytest.mark.slow
def test_fit_trains_on_the_published_subset(mini_root, tmp_path):
    """data.few_shot="published:k" reads <root>/few_shot/ and trains on exactly those images."""
    import shutil

    from umlkit.train.config import resolve_config
    from umlkit.train.engine import build_data
    root = tmp_path / "root"
    shutil.copytree(mini_root, root)
    ds = load_dataset("flowers", root, "train")
    chosen = np.concatenate([np.flatnonzero(ds.labels == c)[:2] for c in range(ds.num_classes)])
    _write_official(root / "few_shot" / "dataset_Flowers_shot_2.pkl",
                    [f"{AUTHOR}/{ds.paths[i].relative_to(root).as_posix()}" for i in chosen], ds.labels[chosen])
    cfg = resolve_config({"data": {"root": str(root), "datasets": ["flowers"], "few_shot": "published:2"},
                          "model": {"backbone": "vit_tiny_uml"}})
    train, _, _ = build_data(cfg, {"input_size": (3, 32, 32), "mean": (0.5,) * 3, "std": (0.5,) * 3})
    assert sorted(str(p) for p in train.datasets[0].paths) == sorted(str(ds.paths[i]) for i in chosen)
    with pytest.raises(ValueError, match="data.few_shot"):
        resolve_config({"data": {"few_shot": "published:two"}})
