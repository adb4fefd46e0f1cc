"""Issue 73 item 2: a record's request is resolved once and built once. The paper's run configuration is resolved
when its key is made (the record key holds it) and handed to ``fit`` as it is; the runner's datasets and weights go
to training instead of being built again. Counted with wrappers around the real functions."""
import pytest

import umlkit.experiments.runs.runners as runners
import umlkit.train.config as train_config
import umlkit.train.engine as engine
from umlkit.experiments.runs.runners import run


@pytest.fixture
def counted(monkeypatch):
    calls = {"resolve_config": 0, "build_data": 0, "weights_for": 0}

    def wrap(module, name, counter=None):
        real = getattr(module, name)

        def counting(*a, **k):
            calls[counter or name] += 1
            return real(*a, **k)
        monkeypatch.setattr(module, name, counting)
    wrap(train_config, "resolve_config")
    wrap(engine, "resolve_config")          # the engine's own name for it
    wrap(engine, "build_data")
    wrap(runners, "weights_for")
    return calls


def _key(mini_root, **analysis):
    from umlkit.train.config import resolve_config
    cfg = resolve_config({"data": {"root": str(mini_root), "datasets": ["cub"], "batch_size": 16,
                                   "sampler": "m_per_class", "samples_per_class": 2,
                                   "splits": {"cub": {"train": list(range(1, 21)), "test": list(range(21, 41))}}},
                          "model": {"method": "full", "embed_dim": 16},
                          "objective": [{"name": "margin", "weight": 1.0, "options": {}}],
                          "train": {"epochs": 1, "progress": False}})
    return {"config": cfg, "analysis": {"metrics": ["R@1"], **analysis}}


def test_a_train_analysis_record_resolves_none_again_and_builds_its_data_once(mini_root, counted):
    key = _key(mini_root, structure=True)
    assert counted["resolve_config"] == 1       # the key's configuration: resolved once, when the key is made
    counted.update(dict.fromkeys(counted, 0))
    out = run("train_analysis", key)
    assert counted == {"resolve_config": 0, "build_data": 1, "weights_for": 1}, counted
    assert set(out["test"]) == {"R@1"} and out["curves"][-1]["epoch"] == 1


def test_the_same_record_with_the_data_built_twice_gives_the_same_numbers(mini_root, monkeypatch):
    """Handing the runner's datasets to training changes no number: the same key trained with fit building its own
    data again (the old path) gives identical scores and losses."""
    key = _key(mini_root, structure=True)
    once = run("train_analysis", key)
    real_fit = runners._fit
    monkeypatch.setattr(runners, "_fit", lambda cfg, data=None: real_fit(cfg))
    twice = run("train_analysis", key)
    for k in ("test", "loss", "structure", "curves"):
        assert once[k] == twice[k], k


def test_fit_refuses_a_partial_configuration_given_as_resolved():
    from umlkit.train import fit
    with pytest.raises(ValueError, match="resolved configuration"):
        fit({"model": {"method": "full"}}, resolved=True)


def _count_resolves(monkeypatch):
    """resolve_config counted under every name a umlkit module imported it as."""
    import sys
    real, calls = train_config.resolve_config, [0]

    def counting(*a, **k):
        calls[0] += 1
        return real(*a, **k)
    for name, mod in list(sys.modules.items()):
        if name.startswith("umlkit") and getattr(mod, "resolve_config", None) is real:
            monkeypatch.setattr(mod, "resolve_config", counting)
    return calls


def test_every_papers_record_key_resolves_each_of_its_configurations_once(monkeypatch):
    """The key of a claim table's first row, made as ``umlkit records train`` makes it: one resolve_config per
    configuration it holds (a specialists record holds one per source), counted after a first key warmed the
    per-process caches of the base configurations."""
    from umlkit.experiments.ops.table_runs import configs_of
    from umlkit.experiments.tables.registry import papers
    seen = 0
    for paper in papers().values():
        for spec in paper.claim_tables("quick").values():
            if not spec.rows:
                continue
            row = spec.rows[0]
            spec.config(row, 0, "quick", ())
            calls = _count_resolves(monkeypatch)
            key = spec.config(row, 1, "quick", ())
            monkeypatch.undo()
            assert calls[0] <= len(configs_of(key)), (paper.name, spec.table, calls[0], len(configs_of(key)))
            seen += 1
            break
    assert seen == len(papers())   # every registered paper was counted


def test_a_stored_keys_configuration_is_taken_as_given_with_its_progress_default():
    """A record key leaves out train.progress (records.normalise_key); anything else missing is refused."""
    from umlkit.experiments.runs.records import normalise_key
    from umlkit.train.config import DEFAULTS, resolve_config
    from umlkit.train.engine import _as_given
    stored = normalise_key(resolve_config({"model": {"method": "full"}}))
    assert "progress" not in stored["train"]
    given = _as_given(stored)
    assert given["train"]["progress"] == DEFAULTS["train"]["progress"] and "progress" not in stored["train"]
    del stored["optimizer"]["lr"]
    with pytest.raises(ValueError, match="optimizer.lr"):
        _as_given(stored)
