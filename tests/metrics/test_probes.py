"""Linear probes (umlkit.metrics.probes): separable, uninformative and restricted cases computed by hand."""
import numpy as np
import pytest

from umlkit.metrics import attribute_probes, linear_probe


def _blobs(n_per=40, classes=4, d=6, spread=0.05, seed=0):
    rng = np.random.default_rng(seed)
    centres = np.eye(classes, d) * 5.0
    y = np.repeat(np.arange(classes), n_per)
    x = centres[y] + rng.normal(0, spread, (len(y), d))
    order = rng.permutation(len(y))
    return x[order], y[order]


def test_a_separable_attribute_is_read_perfectly_and_noise_at_chance():
    x, y = _blobs()
    assert linear_probe(x[:80], y[:80], x[80:], y[80:]) == 100.0
    rng = np.random.default_rng(1)
    noise = rng.normal(size=(4000, 6))
    labels = rng.integers(0, 4, 4000)
    acc = linear_probe(noise[:2000], labels[:2000], noise[2000:], labels[2000:])
    assert 20.0 < acc < 30.0     # chance is 25 %


def test_a_label_the_fitting_half_never_shows_counts_as_wrong():
    x, y = _blobs(classes=3)
    fit = y != 2
    test = np.arange(len(y)) % 2 == 0
    acc = linear_probe(x[fit], y[fit], x[test], y[test])
    expected = 100.0 * float((y[test] != 2).mean())   # every class-2 item is an error, the rest is separable
    assert acc == pytest.approx(expected, abs=1e-3)


def test_attribute_probes_split_halves_and_restrict_to_the_listed_values():
    x, y = _blobs(n_per=50, classes=4)
    other = (y % 2)     # a second attribute the features also separate
    out = attribute_probes(x, {"a": y, "b": other}, restrict={"a": [2, 3]})
    assert out == {"a": 100.0, "b": 100.0, "a (held-out)": 100.0}
    # the restricted probe sees only items of values 2 and 3: shuffle the features of those items against their
    # labels and only it drops to chance, while the full probe still reads values 0 and 1
    x2 = x.copy()
    idx = np.flatnonzero(np.isin(y, [2, 3]))
    x2[idx] = np.random.default_rng(0).normal(0, 1, (len(idx), x.shape[1]))
    out2 = attribute_probes(x2, {"a": y}, restrict={"a": [2, 3]})
    assert out2["a (held-out)"] < 75.0 and out2["a"] > out2["a (held-out)"]


def test_probe_errors_name_the_input():
    x, y = _blobs()
    with pytest.raises(ValueError, match="at least 2 classes"):
        linear_probe(x, np.zeros(len(x)), x, y)
    with pytest.raises(ValueError, match="one width"):
        linear_probe(x, y, x[:, :3], y)
    with pytest.raises(ValueError, match=r"targets\['a'\] has 3 values"):
        attribute_probes(x, {"a": y[:3]})
    with pytest.raises(ValueError, match="restrict names attribute 'z'"):
        attribute_probes(x, {"a": y}, restrict={"z": [1]})
    bad = x.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        linear_probe(bad, y, x, y)
