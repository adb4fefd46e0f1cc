"""A full-profile world for tests: the datasets in their real layouts (UML-Mini's tiny variant: 4 classes of 6 images on
each side of every source), ooDML's split files in the published pickle format imported as a user imports them,
and the hub's language models replaced by seeded random encoders (their weights cannot be fetched here; the image
backbones run at their real architectures with random-init weights instead). :func:`covering_jobs` picks the few
jobs that reach every code path of the job lists, :func:`small_inputs` shrinks the inputs (not the architectures)
so that they fit ``make test``, and :func:`step_each` trains them one step each in worker processes."""
from __future__ import annotations

import copy
import dataclasses
import pickle
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pytest

from umlkit.experiments.ops.table_runs import configs_of
from umlkit.experiments.runs.code_reach import _option_strings

QUICK_ONLY = ("quick profile's", "is the quick profile")   # job lists that exist in the quick profile only


def _published_pickles(data: Path, folder: Path) -> None:
    """ooDML's ``datasplits/*_splits.pkl`` for the tiny tree, with every key of the official files: three splits per
    source (CUB's default is split 3, Cars' and SOP's split 1), each with ``split_train``/``split_val`` and, for CUB
    and Cars, ``test_episodes`` (2 episodes of 2 and 5 shots, keyed by episode index: {class name: [support file
    names]})."""
    from umlkit.data import load_dataset
    from umlkit.experiments.papers.oodml import split_making
    for src, name in split_making.PUBLISHED_FILES.items():
        names, files = {}, {}
        for part in ("train", "test"):
            ds = load_dataset(src, data, part, cache=False)
            names.update(split_making._published_names(src, ds))
            for path, label in zip(ds.paths, ds.labels):
                files.setdefault(ds.class_keys[int(label)], []).append(Path(path).name)
        order = sorted(names, key=lambda n: str(names[n]))
        raw = {}
        for sid in (1, 2, 3):   # each split moves one more class from training to test
            train, test = order[:4], order[4:]
            train, test = train[sid - 1:] + test[:sid - 1], test[sid - 1:] + train[:sid - 1]
            raw[sid] = {"train": train, "test": test, "fid": 10.0 * sid, "split_train": train[:-1],
                        "split_val": train[-1:]}
            if src in ("cub", "cars"):
                # as the official create_dataset_splits.py writes them: {shots: {episode index: {class: files}}}
                raw[sid]["test_episodes"] = {k: {e: {c: files[names[c]][e:e + k] for c in test} for e in range(2)}
                                             for k in (2, 5)}
        (folder / name).write_bytes(pickle.dumps(raw))


def _published_few_shot(data: Path) -> None:
    """PUMA's ``few_shot/dataset_{DS}_shot_{k}.pkl`` (``ys``, ``I``, ``im_paths``, ``ds_ID``) for the tiny tree:
    the first k training images of each class, stored under the authors' path prefix."""
    from umlkit.data import load_dataset
    from umlkit.data.few_shot import PUBLISHED_NAMES
    folder = data / "few_shot"
    folder.mkdir()
    for src, ds_name in PUBLISHED_NAMES.items():
        ds = load_dataset(src, data, "train", cache=False)
        for k in (1, 2, 4, 8, 16):
            idx = [i for c in range(ds.num_classes) for i in np.flatnonzero(ds.labels == c)[:k]]
            paths = [f"/home/author/data/{Path(ds.paths[i]).relative_to(data).as_posix()}" for i in idx]
            raw = {"ys": ds.labels[idx], "I": idx, "im_paths": paths, "ds_ID": np.zeros(len(idx), dtype=np.int64)}
            (folder / f"dataset_{ds_name}_shot_{k}.pkl").write_bytes(pickle.dumps(raw))


def _random_encoder(name: str):
    def encode(texts):
        rng = np.random.default_rng([zlib.crc32(name.encode()), len(texts)])   # str hash() varies per process
        return rng.standard_normal((len(texts), 64)).astype(np.float32)
    return encode


class _StandInClassifier:
    """PLG's ImageNet classifier stands in as a fixed random projection of each image's mean colour to 1,000
    logits: the pseudolabel path (its 299-pixel transform, class-averaged logits, ImageNet names) runs whole, without
    a ResNet-50 forward pass per image."""

    def __init__(self):
        import torch
        self.w = torch.randn(3, 1000, generator=torch.Generator().manual_seed(0))

    def __call__(self, x):
        return x.mean(dim=(2, 3)) @ self.w


def make_world(base: Path, mp: pytest.MonkeyPatch) -> Path:
    """Write the world under ``base`` and enter it (:func:`enter_world`, undone with ``mp``)."""
    from umlkit.data import make_mini
    from umlkit.experiments.papers.oodml import split_making
    tiny = make_mini(base / "tiny", size="tiny")
    data = base / "data"
    data.mkdir()
    for p in tiny.iterdir():     # the dataset folders (and the manifest, which holds the tiny counts)
        (data / p.name).symlink_to(p)
    enter_world(data, mp)
    pickles = base / "datasplits"
    pickles.mkdir()
    _published_pickles(data, pickles)
    split_making.import_published_splits(pickles, data)
    _published_few_shot(data)
    return data


def enter_world(data: Path, mp: pytest.MonkeyPatch) -> None:
    """Point UMLKIT_DATA at ``data`` and UMLKIT_RESULTS beside it, and stand in for the hub's language models and
    PLG's ImageNet classifier (undone with ``mp``; a worker process enters a world its parent wrote)."""
    from umlkit.data import language
    from umlkit.experiments.papers.language_guidance import language_store
    from umlkit.experiments.splits import committed as class_splits
    mp.setenv("UMLKIT_DATA", str(data))
    mp.setenv("UMLKIT_RESULTS", str(data.parent / "results"))
    class_splits.load_splits.cache_clear()
    mp.setattr(language_store, "imagenet_classifier", lambda model, weights=None: _StandInClassifier())
    for name, lm in list(language.LANGUAGE_MODELS.items()):
        if lm.profile == "full":
            mp.setitem(language.LANGUAGE_MODELS, name, dataclasses.replace(lm, encode=_random_encoder(name)))


def full_jobs() -> list[tuple[str, str, tuple]]:
    """(paper, job list, job) of every job of every registered paper's full-profile job lists (the quick-only
    lists are left out; they say so)."""
    from umlkit.experiments.tables.registry import papers
    out = []
    for name, paper in papers().items():
        for jl in paper.job_list_names:
            try:
                jobs = paper.job_list(jl, "full")
            except ValueError as err:
                if any(q in str(err) for q in QUICK_ONLY):
                    continue
                raise
            out += [(name, jl, job) for job in jobs]
    return out


def small_inputs(mp: pytest.MonkeyPatch, size: int = 16) -> None:
    """Run the real architectures on small inputs (undone with ``mp``): every ViT is built for ``size`` pixels, or
    one patch where its patches are larger (the same depth, width, heads and PEFT modules; at 16 pixels a ViT-S/16
    sees one patch instead of 196), and every transform resizes to what its backbone takes. A step then costs a
    fraction, so every code path of the job lists fits ``make test``; the 224-pixel runs stay in ``make test-all``.
    Not resized: PLG's ImageNet transform (299 pixels; its classifier is a stand-in here) and the FID features of
    split making (the world's splits are imported, not made)."""
    import re

    import timm

    from umlkit.models import _factory, backbones
    from umlkit.train import engine
    create = timm.create_model

    def pixels(name: str) -> int:
        patch = re.search(r"patch(\d+)", backbones.resolve_backbone_name(name))
        return max(size, int(patch.group(1))) if patch else size

    built: dict[str, object] = {}   # the last few models built (a ViT-B at its real width holds 0.35 GB)

    def create_small(name, *args, **kwargs):
        """timm's model at ``size`` pixels, built once per (name, arguments) in this process and copied after:
        random initialisation of a ViT-B at its real width took 0.5-0.8 s of each one-step run on a Zen 3 (about
        35 of the 221 s the covering jobs took), the copy a few hundredths. The copies start from the same weights;
        the one-step runs check code paths, not numbers."""
        if "patch" in name:
            kwargs.setdefault("img_size", pixels(name))
        ident = repr((name, args, sorted(kwargs.items())))
        if ident not in built:
            while len(built) >= 4:
                built.pop(next(iter(built)))
            built[ident] = create(name, *args, **kwargs)
        return copy.deepcopy(built[ident])

    def by_name(fn):
        return lambda name: {**fn(name), "input_size": (3, pixels(name), pixels(name))}

    def by_model(fn):
        def resized(model):
            px = model.patch_embed.img_size[0] if hasattr(model, "patch_embed") else size
            return {**fn(model), "input_size": (3, px, px)}
        return resized
    mp.setattr(backbones.timm, "create_model", create_small)
    mp.setattr(backbones, "backbone_data_config", by_name(backbones.backbone_data_config))
    mp.setattr(engine, "backbone_data_config", by_name(engine.backbone_data_config))
    mp.setattr(backbones, "data_config", by_model(backbones.data_config))
    mp.setattr(_factory, "data_config", by_model(_factory.data_config))


def _is_data(text: str) -> bool:
    """A file path or a checksum among a term's options: data it reads, not a code path (a mode or a base loss)."""
    return "/" in text or text.endswith((".npz", ".json")) or (len(text) >= 32 and all(c in "0123456789abcdef"
                                                                                    for c in text))


def job_features(paper: str, jl: str, job: tuple) -> set[tuple]:
    """What one job's one-step run (:func:`one_step`) reaches: its job list and runner, analyses, and per configuration
    the backbone, method and its options, objective terms and the strings of their options (a mode, a wrapper's base
    loss; not the files and checksums they name), optimizer, schedule, clipping, sampler, transform, augmentation,
    the datasets it trains on, and its data mode (unified, class splits, few-shot files, validation hold-out)."""
    key = one_step(job[2])
    feats = {("list", paper, jl), ("runner", job[3] if len(job) > 3 else "train_analysis")}
    feats |= {("analysis", a) for a in (key.get("analysis") or {})}
    for c in configs_of(key):
        m, d = c["model"], c["data"]
        feats |= {("backbone", m["backbone"]), ("method", m["method"]), ("sampler", d["sampler"]),
                  ("transform", d["transform"]), ("augment", bool(d["augment"])), ("unified", len(d["datasets"]) > 1),
                  ("splits", bool(d.get("splits"))), ("few_shot", bool(d.get("few_shot"))),
                  ("val", float(d["val_fraction"]) > 0), ("optimizer", c["optimizer"]["name"]),
                  ("schedule", c["schedule"]["name"]), ("clip", str(c["clip"].get("mode")))}
        feats |= {("dataset", name) for name in d["datasets"]}
        feats |= {("option", m["method"], o) for o in m["options"]}
        feats |= {("term", t["name"]) for t in c["objective"] or []}
        feats |= {("term option", s) for t in c["objective"] or [] for s in _option_strings(t.get("options"))
                  if not _is_data(s)}
    return feats


def covering_jobs(jobs: list[tuple[str, str, tuple]]) -> list[tuple[str, str, tuple]]:
    """A few jobs whose one-step runs together reach every feature (:func:`job_features`) of ``jobs``' one-step runs:
    a greedy set cover that takes, each time, the job adding the most features not yet reached (on a tie the one
    that is no specialists run, the costliest kind, then the first). The first-fit cover it replaced took 68 jobs
    for the 131 features of the 1,213 full-profile jobs, this one 45 (same features, asserted): the one-step runs
    are the slowest test of ``make test``. One-step runs train a unified run on its first two sources and a
    specialists run's first two models; every source's test split is still read (the unified test set)."""
    feats = [job_features(paper, jl, job) for paper, jl, job in jobs]
    costly = [job[3:4] == ("specialists",) for _, _, job in jobs]
    left, out = set().union(*feats) if feats else set(), []
    while left:
        best = max(range(len(jobs)), key=lambda i: (len(feats[i] & left), not costly[i], -i))
        left -= feats[best]
        out.append(jobs[best])
    return sorted(out, key=lambda j: j[2][3:4] == ("specialists",))   # the specialists runs last


_WORKER_MP = None
_SHM_FREE = 4 << 30   # the runs' checkpoints go to /dev/shm where it has this much room (a ViT-B's with its state)


def _enter_small_world(data: str, size: int) -> None:
    """A worker process's initializer: one thread, the parent's world, ``size``-pixel inputs."""
    import shutil

    import torch
    global _WORKER_MP
    torch.set_num_threads(1)
    _WORKER_MP = pytest.MonkeyPatch()   # kept for the process's life
    if Path("/dev/shm").is_dir() and shutil.disk_usage("/dev/shm").free > _SHM_FREE:   # fsync and unlink in memory
        _WORKER_MP.setattr(tempfile, "tempdir", "/dev/shm")
    enter_world(Path(data), _WORKER_MP)
    small_inputs(_WORKER_MP, size)


def _step_or_error(job: tuple) -> str | None:
    """None when the job's one-step run returns its scores and a finite loss, else what went wrong."""
    from umlkit.experiments.runs.runners import run
    try:
        out = run(job[3] if len(job) > 3 else "train_analysis", one_step(job[2]))
        assert "test" in out or "own" in out, f"no scores in the result: {sorted(out)}"
        losses = [v for v in out.get("loss", []) if v is not None]
        assert all(np.isfinite(losses)), f"loss {losses}"
    except Exception as err:   # collect them all: one broken job must not hide another
        return f"{job[1]}: {type(err).__name__}: {err}"
    return None


def step_each(data: Path, jobs: list[tuple[str, str, tuple]], size: int, workers: int = 2) -> list[str]:
    """Run ``jobs`` one step each at ``size``-pixel inputs in ``workers`` single-thread processes (spawned: each
    enters the world afresh; a worker that dies fails the call with ``BrokenProcessPool`` instead of hanging it);
    the failures, as "paper list label: error"."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    order = jobs[::-1]   # the costliest first
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_enter_small_world,
                             initargs=(str(data), size)) as pool:
        errors = list(pool.map(_step_or_error, [job for _, _, job in order]))
    return [f"{paper} {jl} {err}" for (paper, jl, _), err in zip(order, errors) if err]


def one_step(key: dict) -> dict:
    """The key with every configuration cut to one epoch on the CPU in fp32 (small batches; a unified run on its first
    two sources, a specialists run to its first two models), random-init weights and evaluation batches that fit a
    test, an analysis's recall ranks above 10 left out (the tiny world's galleries are smaller than R@20 asks); the
    architecture, method, objective, sampler and analyses stay."""
    key = copy.deepcopy(key)
    if "config" not in key and "model" not in key:   # specialists: one model per source; two keep every code path
        sources = [k for k, v in key.items() if isinstance(v, dict) and "model" in v]
        key = {k: v for k, v in key.items() if k not in sources[2:]}
    for cfg in configs_of(key):
        cfg["model"].update(pretrained=False, weights=None)
        cfg["train"].update(epochs=1, eval_every=1, warmup_epochs=0, eval_batch_size=256, progress=False)
        d = cfg["data"]
        per_class = int(d["samples_per_class"])
        # two classes' worth: a validation hold-out can leave a tiny source two training classes
        batch = 2 * per_class if d["sampler"] != "random" else 12
        d.update(num_workers=0, batch_size=min(int(d["batch_size"]), batch))
        cfg.update(device="cpu", precision="fp32")
        if len(d["datasets"]) > 2 and not d.get("splits"):   # a unified run: two sources keep its every code path
            d["datasets"] = d["datasets"][:2]
    ana = key.get("analysis") or {}
    if "few_shot" in ana:
        ana["few_shot"].update(episodes=1, iterations=1)
    if isinstance(ana.get("metrics"), list):   # the tiny In-shop gallery offers 12 neighbours per query: R@20 (VPTSP's
        ana["metrics"] = [m for m in ana["metrics"] if not _recall_above(m, 10)]   # In-shop column) is R@10's path
    return key


def _recall_above(metric: str, k: int) -> bool:
    return metric.startswith("R@") and metric[2:].isdigit() and int(metric[2:]) > k
