"""UML-Mini: determinism, real loaders reading it back with the manifest's counts, sizes, design properties."""
import hashlib
import json
import shutil

import numpy as np
import pytest

from umlkit.data import SOURCES, load_dataset, load_unified, make_mini, mini_table, pretraining_set
from umlkit.data.mini import PRETRAIN_HEADS


def _digest(root):
    h = hashlib.sha256()
    for p in sorted(q for q in root.rglob("*") if q.is_file() and q.name != "UML_MINI.json"):
        h.update(str(p.relative_to(root)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()


@pytest.mark.slow
def test_same_seed_same_bytes_other_seed_differs(tmp_path):
    a = make_mini(tmp_path / "a", seed=3, sources=["cub", "cars", "inshop"], size="tiny")
    b = make_mini(tmp_path / "b", seed=3, sources=["cub", "cars", "inshop"], size="tiny")
    c = make_mini(tmp_path / "c", seed=4, sources=["cub", "cars", "inshop"], size="tiny")
    assert _digest(a) == _digest(b) != _digest(c)


def test_real_loaders_read_back_expected_counts(mini_root):
    manifest = json.loads((mini_root / "UML_MINI.json").read_text())
    for name in SOURCES:
        for split, (n_img, n_cls) in manifest["datasets"][name]["counts"].items():
            ds = load_dataset(name, mini_root, split)  # expected="auto" -> the manifest's counts are checked
            assert (len(ds), ds.num_classes) == (n_img, n_cls)
    table = mini_table()
    assert table.loc["sop", "train images"] == 1600 and table.loc["inshop", "test images"] == 1200


def test_mini_is_small_and_imbalanced_like_puma(mini_root):
    size = sum(p.stat().st_size for p in mini_root.rglob("*") if p.is_file())
    assert size < 100e6
    train = load_unified(mini_root, "train")
    per_source = np.bincount(train.sources)
    dominant = per_source[[train.source_names.index("sop"), train.source_names.index("inshop")]].sum()
    assert dominant / len(train) > 0.5  # SOP-/In-shop-like dominate the images ...
    classes = {d.name: d.num_classes for d in train.datasets}
    assert (classes["sop"] + classes["inshop"]) / train.num_classes > 0.65  # ... and the classes
    assert per_source[train.source_names.index("flowers")] == per_source.min()


def test_discrete_sources_draw_each_class_combination_once():
    # the discrete sources draw each class's attribute combination once: same rendering rule, new combos at test
    from umlkit.data.mini import _class_attrs
    rng = np.random.default_rng(0)
    for name in ("cars", "sop", "inshop", "dogs", "aircraft"):
        combos = [tuple(sorted(c.items())) for c in _class_attrs(name, 60, rng)]
        assert len(set(combos)) == len(combos)


def test_pretraining_set_targets_are_consistent():
    imgs, t, names = pretraining_set(64, seed=5)
    assert imgs.shape == (64, 32, 32, 3) and imgs.dtype == np.uint8
    assert set(PRETRAIN_HEADS) <= set(t) and len(names) == 320
    assert all(0 <= t[k].min() and t[k].max() < n for k, n in PRETRAIN_HEADS.items())
    assert np.array_equal(t["class"], (t["hue"] * 5 + t["texture"]) * 8 + t["shape"])
    assert names[t["class"][0]].split()[0] in ("red", "orange", "lime", "green", "cyan", "blue", "violet", "pink")
    again, _, _ = pretraining_set(64, seed=5)
    assert np.array_equal(imgs, again)


def test_large_variant_has_more_classes_in_the_same_formats(tmp_path):
    from umlkit.data.mini import LARGE, source_sizes
    root = make_mini(tmp_path / "large", size="large", sources=["cars", "flowers"])
    info = json.loads((root / "UML_MINI.json").read_text())
    assert info["variant"] == "large"
    for name in ("cars", "flowers"):
        (tr, te) = LARGE[name]
        train, test = load_dataset(name, root, "train"), load_dataset(name, root, "test")
        assert (train.num_classes, test.num_classes) == (tr[0], te[0]) and len(train) == tr[0] * tr[1]
        names = train.class_names + test.class_names
        assert len(set(names)) == len(names)
        assert train.num_classes > SOURCES[name].train[0]
    assert make_mini(root, size="large", sources=["cars"]) == root      # kept: same seed, version and variant
    with pytest.raises(ValueError, match="size must be one of"):
        source_sizes("cars", "huge")


def test_make_mini_never_replaces_what_it_did_not_write(tmp_path):
    # a real dataset already under the root: refused, nothing touched
    real = tmp_path / "real"
    (real / "CUB_200_2011").mkdir(parents=True)
    mine = real / "CUB_200_2011" / "my_annotations.txt"
    mine.write_text("keep me")
    with pytest.raises(FileExistsError, match="not a UML-Mini tree"):
        make_mini(real, sources=["cub"])
    assert mine.read_text() == "keep me" and sorted(p.name for p in real.iterdir()) == ["CUB_200_2011"]
    # a UML-Mini tree with a foreign dataset folder added later: that folder is not replaced either
    tree = make_mini(tmp_path / "tree", sources=["cub"])
    (tree / "cars196").mkdir()
    (tree / "cars196" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="did not write"):
        make_mini(tree, sources=["cub", "cars"], overwrite=True)
    assert (tree / "cars196" / "notes.txt").read_text() == "mine"
    # its own folders are regenerated, and an interrupted run (manifest marked incomplete) can be redone
    info = json.loads((tree / "UML_MINI.json").read_text())
    (tree / "UML_MINI.json").write_text(json.dumps({**info, "complete": False}))
    assert make_mini(tree, sources=["cub"]) == tree
    assert json.loads((tree / "UML_MINI.json").read_text())["complete"] is True


def test_make_mini_keeps_a_users_files_inside_its_own_folders(tmp_path):
    """A file added inside a UML-Mini dataset folder (notes, a real image) is not deleted by a regeneration of
    another seed or by ``overwrite``: refused before anything is touched, the file named."""
    tree = make_mini(tmp_path / "t", sources=["cub", "flowers"])
    notes = tree / "CUB_200_2011" / "my_notes.txt"
    notes.write_text("keep me")
    photo = tree / "flowers" / "jpg" / "my_photo.jpg"
    photo.write_bytes(b"not generated")
    before = json.loads((tree / "UML_MINI.json").read_text())
    for kw in ({"seed": 1, "sources": ["cub"]}, {"overwrite": True, "sources": ["cub", "flowers"]}):
        # (another seed regenerates every source of the tree)
        with pytest.raises(FileExistsError, match="did not write: .*my_notes.txt.*my_photo.jpg") as err:
            make_mini(tree, **kw)
        assert "2 file(s)" in str(err.value)
        assert notes.read_text() == "keep me" and photo.read_bytes() == b"not generated"
        assert json.loads((tree / "UML_MINI.json").read_text()) == before
    notes.unlink()
    photo.unlink()
    assert make_mini(tree, sources=["cub"], overwrite=True) == tree   # once moved away, it regenerates
    # a folder without its image list (an interrupted generation) cannot tell its images from a user's: an image
    # of theirs put there was deleted; now the folder is named and nothing is touched
    (tree / "CUB_200_2011" / "uml_mini_text.tsv").unlink()
    mine = tree / "CUB_200_2011" / "images" / "my_bird.jpg"
    mine.write_bytes(b"a real photo")
    with pytest.raises(FileExistsError, match=r"1001 file\(s\) UML-Mini did not write.*CUB_200_2011 lack\(s\) "
                                              r"uml_mini_text.tsv.*delete it"):
        make_mini(tree, sources=["cub"], overwrite=True)
    assert mine.read_bytes() == b"a real photo"
    shutil.rmtree(tree / "CUB_200_2011")            # the user removes the interrupted folder: it regenerates
    make_mini(tree, sources=["cub"], overwrite=True)
    assert load_dataset("cub", tree, "train").class_names


def test_a_manifest_that_is_not_an_object_is_named(tmp_path):
    (tmp_path / "UML_MINI.json").write_text("[]")
    with pytest.raises(ValueError, match=r"UML_MINI.json is not a UML-Mini manifest: expected a JSON object, found a "
                                         r"list"):
        make_mini(tmp_path, sources=["cub"])
    assert (tmp_path / "UML_MINI.json").read_text() == "[]"
    for bad, message in (('{"version": "2"}', r"its 'version' is '2', expected an integer"),
                         ('{"version": 2, "created": 5}', r"its 'created' is 5, expected a list")):
        (tmp_path / "UML_MINI.json").write_text(bad)     # raw TypeErrors ("'<' not supported", "not iterable")
        with pytest.raises(ValueError, match=message):
            make_mini(tmp_path, sources=["cub"])
        assert (tmp_path / "UML_MINI.json").read_text() == bad


def test_a_source_does_not_depend_on_the_others_generated_with_it(tmp_path):
    alone = make_mini(tmp_path / "alone", sources=["cars"], size="tiny")
    together = make_mini(tmp_path / "together", sources=["cub", "cars"], size="tiny")
    a, b = load_dataset("cars", alone, "train"), load_dataset("cars", together, "train")
    assert a.class_names == b.class_names and all(p.read_bytes() == q.read_bytes()
                                                  for p, q in zip(a.paths[:20], b.paths[:20]))


def test_partial_regeneration_keeps_the_manifest_of_the_other_sources(tmp_path):
    tree = make_mini(tmp_path / "t", sources=["cub", "flowers"])
    make_mini(tree, sources=["cub"], overwrite=True)
    info = json.loads((tree / "UML_MINI.json").read_text())
    assert set(info["datasets"]) == {"cub", "flowers"}
    load_dataset("flowers", tree, "train")                  # its counts are still checked against the manifest
    make_mini(tree, sources=["cub"], seed=1)                 # another seed: every source of the tree is redone
    info = json.loads((tree / "UML_MINI.json").read_text())
    assert info["seed"] == 1 and set(info["datasets"]) == {"cub", "flowers"}
    # a real dataset copied over a UML-Mini folder (no marker inside) is not deleted
    import shutil
    shutil.rmtree(tree / "flowers")
    (tree / "flowers").mkdir()
    (tree / "flowers" / "imagelabels.mat").write_text("real")
    with pytest.raises(FileExistsError, match="marker"):
        make_mini(tree, sources=["flowers"], overwrite=True)
    assert (tree / "flowers" / "imagelabels.mat").read_text() == "real"


def test_two_processes_generating_one_tree_take_turns(tmp_path):
    """Two record workers started together on a fresh clone both ask for UML-Mini: one generates, the other waits
    for it and finds the tree complete (before the lock, one stopped with 'Directory not empty' and the other found
    annotated images missing). The result is the tree one process writes alone."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    src = str(Path(__file__).resolve().parents[2] / "src")
    code = ("import sys, time\nimport umlkit.data.mini as m\ngen = m._generate\n"
            "def counted(*a, **k):\n    print('generated')\n    return gen(*a, **k)\n"
            "m._generate = counted\nt = float(sys.argv[2]); time.sleep(max(0, t - time.time()))\n"
            "m.make_mini(sys.argv[1], sources=['cub', 'flowers']); print('ok')")
    start = str(__import__("time").time() + 3)   # both start at the same instant, after their imports
    env = dict(os.environ, PYTHONPATH=src)
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "shared"), start], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    assert sorted(o[0].split() for o in outs) == [["generated", "ok"], ["ok"]]   # one generated, the other waited
    alone = make_mini(tmp_path / "alone", sources=["cub", "flowers"])
    assert _digest(tmp_path / "shared") == _digest(alone)
    manifest = json.loads((tmp_path / "shared" / "UML_MINI.json").read_text())
    assert manifest["complete"] and set(manifest["datasets"]) == {"cub", "flowers"}


def test_the_hard_variant_keeps_the_larger_worlds_classes_and_turns_up_the_nuisance():
    """``size="hard"`` (the ceiling probe's world): the same class definitions and counts as the larger world, in
    the same order, so ooDML's class splits apply; only the per-image draws change (jitter, hue jitter, a nuisance
    disc, twice the pixel noise), and the default world is untouched by it."""
    import numpy as np

    from umlkit.data import mini
    assert mini.source_sizes("cars", "hard") == mini.source_sizes("cars", "large")
    assert mini.mini_alias("uml_mini:hard") == "hard"
    large = mini._generate_source("cars", mini._source_rng("cars", 0), "large")
    hard = mini._generate_source("cars", mini._source_rng("cars", 0), "hard")
    assert hard["classes"] == large["classes"] and (hard["train"][1] == large["train"][1]).all()
    assert not np.array_equal(hard["train"][0], large["train"][0])
    jitter = [abs(a["jx"]) for a in hard["attrs"]["train"]]
    assert max(jitter) == mini.HARD_JITTER and max(abs(a["jx"]) for a in large["attrs"]["train"]) == 2
    discs = np.mean([a["disc_pos"] != "none" for a in hard["attrs"]["train"]])
    assert 0.35 < discs < 0.65   # half the images carry the nuisance disc (the class defines none)
    # pixel noise: the same attributes rendered with each noise level differ from the noiseless image by ~sigma
    a = dict(hard["attrs"]["train"][0])
    clean = mini.render(a, np.random.default_rng(1), noise=0.0).astype(float)
    for sigma in (0.03, mini.HARD_NOISE):
        noisy = mini.render(a, np.random.default_rng(1), noise=sigma).astype(float)
        assert abs((noisy - clean).std() / 255 - sigma) < 0.01
