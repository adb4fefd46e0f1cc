"""Linear probes: how much of an attribute a frozen feature still holds (the book's forgetting measurement).

No paper of the book measures forgetting this way; the regime map (PUMA's premise: full fine-tuning forgets what
made the pretrained feature general, a frozen backbone with small modules keeps it) needs a number for it. The
probe is the standard one of representation learning: a multinomial logistic regression fitted on one half of a
labelled image set's features and scored (accuracy, percent) on the other half. The fit is scikit-learn's
``LogisticRegression`` (lbfgs) on standardised features (so a feature's scale does not matter; its width does, so
compare probes of features of one width, e.g. every model's backbone feature); nothing here is written by hand
but the split. Attributes differ in chance level (2 to 8 values), so compare models attribute by attribute, or
their means over the same attributes.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["linear_probe", "attribute_probes"]


def linear_probe(train_x, train_y, test_x, test_y, c: float = 1.0, max_iter: int = 2000) -> float:
    """Accuracy (percent) on ``test_x`` of a logistic regression fitted on ``train_x`` (features standardised with
    the training half's mean and deviation). A test label the training half never shows counts as an error."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    train_x, test_x = np.asarray(train_x, np.float64), np.asarray(test_x, np.float64)
    train_y, test_y = np.asarray(train_y), np.asarray(test_y)
    if train_x.ndim != 2 or test_x.ndim != 2 or train_x.shape[1] != test_x.shape[1]:
        raise ValueError(f"linear_probe needs (n, d) features of one width, got {train_x.shape} and {test_x.shape}")
    if len(train_x) != len(train_y) or len(test_x) != len(test_y):
        raise ValueError(f"features and labels differ in length: {len(train_x)}/{len(train_y)}, "
                         f"{len(test_x)}/{len(test_y)}")
    if len(np.unique(train_y)) < 2:
        raise ValueError(f"a probe needs at least 2 classes in its training half, got {np.unique(train_y).tolist()}")
    if not (np.isfinite(train_x).all() and np.isfinite(test_x).all()):
        raise ValueError("linear_probe: the features hold NaN or infinite values")
    model = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=max_iter))
    model.fit(train_x, train_y)
    return round(100.0 * float((model.predict(test_x) == test_y).mean()), 3)


def attribute_probes(features, targets: Mapping[str, Sequence[int]],
                     restrict: Mapping[str, Sequence[int]] | None = None, c: float = 1.0) -> dict[str, float]:
    """One probe per attribute: the first half of the items fits, the second half scores. ``targets`` maps an
    attribute to every item's value index; ``restrict`` maps an attribute to the values a second probe is limited
    to (the items showing one of them; reported as ``"<attribute> (held-out)"``), e.g. the shapes no training class
    of a split was defined by. Accuracies in percent."""
    x = np.asarray(features, np.float64)
    half = len(x) // 2
    out = {}
    for name, y in targets.items():
        y = np.asarray(y)
        if len(y) != len(x):
            raise ValueError(f"targets[{name!r}] has {len(y)} values for {len(x)} feature rows")
        out[name] = linear_probe(x[:half], y[:half], x[half:], y[half:], c=c)
    for name, values in (restrict or {}).items():
        if name not in targets:
            raise ValueError(f"restrict names attribute {name!r}, which has no targets ({sorted(targets)})")
        y = np.asarray(targets[name])
        keep = np.isin(y, np.asarray(list(values)))
        first, second = keep.copy(), keep.copy()
        first[half:], second[:half] = False, False
        out[f"{name} (held-out)"] = linear_probe(x[first], y[first], x[second], y[second], c=c)
    return out
