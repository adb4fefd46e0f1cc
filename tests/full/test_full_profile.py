"""The full profile before anyone spends GPU hours on it (issue 41): every job of every registered paper's
full-profile job lists builds its record key from the published split files, resolves its configuration and builds
its model at the real architecture (on PyTorch's meta device: shapes without memory); one job trains a step and
evaluates on the tiny real-layout world (``make test``), and the first job of every job list does (``make
test-all``, marked heavy: PUMA's unified runs take minutes on two cores)."""
import json

import pytest
import torch

from umlkit.experiments.table_runs import configs_of

from tests.full.world import full_jobs, make_world, one_step


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from umlkit.experiments import class_splits
    mp = pytest.MonkeyPatch()
    data = make_world(tmp_path_factory.mktemp("full_world"), mp)
    yield data
    mp.undo()
    class_splits.load_splits.cache_clear()


@pytest.fixture(scope="module")
def jobs(world):
    return full_jobs()


def test_every_full_profile_job_resolves_and_builds_at_its_real_architecture(world, jobs):
    from umlkit.experiments.registry import papers
    from umlkit.train.config import resolve_config
    from umlkit.train.engine import build_model
    lists = {(p, jl) for p, jl, _ in jobs}
    assert {p for p, _ in lists} == set(papers()) - {"regime"}     # the regime map is the quick profile's
    assert len(jobs) > 1000
    built = set()
    for paper, jl, job in jobs:
        cfgs = configs_of(job[2])
        assert cfgs and all(c["profile"] == "full" for c in cfgs), (paper, jl, job[1])
        for cfg in cfgs:
            if cfg["objective"]:           # a frozen backbone's evaluation has no objective to check
                resolve_config(cfg)
            m = cfg["model"]
            ident = json.dumps([m["backbone"], m["method"], m["embed_dim"], m["options"]], sort_keys=True)
            if ident not in built:
                built.add(ident)
                with torch.device("meta"):
                    build_model({**cfg, "model": {**m, "pretrained": False}}, num_classes=100)
    assert len(built) > 50
    assert not (world / "uml_mini").exists() and not (world / "uml_mini_large").exists()   # nothing fell back to it


def test_a_full_profile_job_trains_one_step_on_the_real_layouts(world, jobs):
    from umlkit.experiments.runners import run
    paper, jl, job = next(j for j in jobs if j[:2] == ("language_guidance", "semantic"))
    out = run(job[3] if len(job) > 3 else "train_analysis", one_step(job[2]))
    assert 0 <= out["test"]["R@1"]["CUB"] <= 100 and out["trainable_model"] > 20_000_000   # ResNet-50, all of it


@pytest.mark.heavy
def test_the_first_job_of_every_full_profile_job_list_trains_one_step(world, jobs):
    from umlkit.experiments.runners import run
    first = {}
    for paper, jl, job in jobs:
        first.setdefault((paper, jl), job)
    failed = []
    for (paper, jl), job in first.items():
        try:
            out = run(job[3] if len(job) > 3 else "train_analysis", one_step(job[2]))
            assert "test" in out or "specialists" in out, sorted(out)
        except Exception as err:   # collect them all: one broken list must not hide another
            failed.append(f"{paper} {jl} {job[1]}: {type(err).__name__}: {err}")
    assert not failed, "\n".join(failed)
