"""The process-wide memo of cached datasets: the same pixels and tensors as decoding and transforming anew, a
rewritten file decoded again, a bounded size, and returned tensors that callers may modify."""
import os

import numpy as np
import torch
from PIL import Image

from umlkit.data import build_transforms
from umlkit.data import datasets as ds
from umlkit.data.datasets import ImageListDataset


def _write(path, seed, size=32):
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(path)


def _dataset(paths, transform=None, cache=True):
    return ImageListDataset(paths, list(range(len(paths))), [str(i) for i in range(len(paths))], "t", "test",
                            transform, cache=cache)


def test_memo_gives_what_decoding_and_transforming_give(tmp_path):
    paths = [tmp_path / f"{i}.png" for i in range(4)]
    for i, p in enumerate(paths):
        _write(p, i)
    tf = build_transforms("mini", {"input_size": (3, 32, 32)}, train=False)
    assert tf.deterministic and not build_transforms("mini", {"input_size": (3, 32, 32)}, train=True).deterministic
    first, second, plain = _dataset(paths, tf), _dataset(paths, tf), _dataset(paths, tf, cache=False)
    for i in range(4):
        assert second.image(i) is first.image(i)                      # decoded once in this process
        x, y = first[i], second[i]
        assert torch.equal(x[0], plain[i][0]) and torch.equal(y[0], plain[i][0]) and x[1] == plain[i][1]
    x = first[0][0]
    x.add_(1.0)                                                        # a caller's in-place change stays its own
    assert torch.equal(second[0][0], plain[0][0])
    sub = first.subset([2, 3])
    assert torch.equal(sub[0][0], plain[2][0])


def test_rewritten_file_is_decoded_again(tmp_path):
    path = tmp_path / "a.png"
    _write(path, 0)
    before = np.asarray(_dataset([path]).image(0))
    _write(path, 1)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))       # a new modification time, whatever the clock
    after = np.asarray(_dataset([path]).image(0))
    assert not np.array_equal(before, after)
    assert np.array_equal(after, np.asarray(Image.open(path).convert("RGB")))


def test_memo_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(ds, "MEMO_BYTES", 3 * 32 * 32 * 3)            # room for three 32 x 32 RGB images
    monkeypatch.setattr(ds, "_MEMO", type(ds._MEMO)())
    monkeypatch.setattr(ds, "_MEMO_SIZE", [0])
    paths = [tmp_path / f"{i}.png" for i in range(5)]
    for i, p in enumerate(paths):
        _write(p, i)
    _dataset(paths)
    assert len(ds._MEMO) == 3 and ds._MEMO_SIZE[0] == 3 * 32 * 32 * 3
    assert [k[0] for k in ds._MEMO] == [str(p.resolve()) for p in paths[2:]]
