"""The full profile before anyone spends GPU hours on it (issue 41): every job of every registered paper's
full-profile job lists builds its record key from the published split files, resolves its configuration and builds
its model at the real architecture (on PyTorch's meta device: shapes without memory). Then the few jobs whose
one-step runs together reach every feature of all of them (:func:`tests.full.world.covering_jobs`) run one epoch of
a few steps (a frozen backbone's job evaluates only) on the tiny real-layout world: in ``make test`` on 16-pixel
inputs (one patch), in ``make test-all`` (marked heavy: 13.5 min on two cores) at the real 224 pixels."""
import json
import re

import pytest
import torch

from tests.full.world import covering_jobs, full_jobs, job_features, make_world, step_each
from umlkit.experiments.ops.table_runs import configs_of


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from umlkit.experiments.splits import committed as class_splits
    mp = pytest.MonkeyPatch()
    data = make_world(tmp_path_factory.mktemp("full_world"), mp)
    yield data
    mp.undo()
    class_splits.load_splits.cache_clear()


@pytest.fixture(scope="module")
def jobs(world):
    return full_jobs()


def test_every_full_profile_job_resolves_and_builds_at_its_real_architecture(world, jobs):
    from umlkit.experiments.tables.registry import papers
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


def test_every_code_path_of_the_full_job_lists_trains_one_step_on_the_real_layouts(world, jobs):
    """The covering jobs run at the real architectures on 16-pixel inputs (one patch), in two single-thread processes
    (about 50 s on two cores); each returns its scores and a finite loss."""
    cover = covering_jobs(jobs)
    every = set().union(*(job_features(*j) for j in jobs))
    assert set().union(*(job_features(*j) for j in cover)) == every and len(cover) < len(jobs) / 10
    assert {("dataset", "sop"), ("dataset", "inshop"), ("term", "language_guidance"), ("runner", "specialists"),
            ("few_shot", True), ("val", True), ("splits", True)} <= every
    assert {"specialists", "zero_shot", "train", "train_analysis"} <= {j[3] if len(j) > 3 else "train_analysis"
                                                                     for _, _, j in cover}
    failed = step_each(world, cover, size=16)
    assert not failed, "\n".join(failed)


@pytest.mark.heavy
def test_every_code_path_of_the_full_job_lists_trains_one_step_at_224_pixels(world, jobs):
    """The same jobs at the real input size, as a GPU run sees them (minutes on two cores)."""
    failed = step_each(world, covering_jobs(jobs), size=224)
    assert not failed, "\n".join(failed)


def _published_papers() -> list[str]:
    from umlkit.experiments.tables.registry import papers
    return [name for name, p in papers().items() if not p.own]   # the book's own regime map has no Slurm plan


@pytest.mark.parametrize("paper", _published_papers())
def test_every_paper_plans_and_dry_runs_its_slurm_array_with_gpu_hours(world, capsys, paper):
    """Issue 60's acceptance: ``plan`` and ``reproduce --executor slurm --dry-run`` print each paper's array and
    GPU-hours (on the tiny tree the real batch sizes do not fit, so the dry run first shows the refusal with its
    fix, then passes with the values it names)."""
    from umlkit.cli import main
    assert main(["plan", "--paper", paper]) == 0
    out = capsys.readouterr().out
    assert f"{paper} tables (full):" in out and "GPU-hours:" in out and "wall time on 1 H200(s)" in out
    dry = ["reproduce", "--paper", paper, "--profile", "full", "--executor", "slurm", "--dry-run"]
    assert main(dry) == 1
    out = capsys.readouterr().out
    assert "in a Slurm array of" in out and "the submission would be refused" in out
    fixes = {}
    for key, value in re.findall(r"--set ([\w.]+)=(\S+?)\)", out):
        fixes[key] = min(fixes.get(key, value), value, key=lambda v: int(v) if v.isdigit() else 0)
    assert "data.batch_size" in fixes, out
    sets = [arg for key, value in fixes.items() for arg in ("--set", f"{key}={value}")]
    assert main([*dry, *sets, "--set", "model.pretrained=false"]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "GPU-hours" in out and "nothing was submitted (--dry-run)" in out
