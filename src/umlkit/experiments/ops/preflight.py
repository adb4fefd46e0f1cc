"""Before the first full-profile run: every reason the selected runs would be refused, at once, each with its fix.

A new user's first full-profile run used to meet its refusals one at a time (a batch the data cannot fill, then a
smaller batch that the class sampler still cannot fill, then pretrained weights that the hub cannot deliver), each
clear but each found only after the previous one was fixed. :func:`preflight` asks the same questions of every
distinct configuration of the runs about to train (or be submitted to Slurm) and raises one error listing every
problem, the runs it concerns and the ``--set`` that fixes it. The checks are the engine's own
(:func:`umlkit.train.runtime.check_batch` on the training set :func:`umlkit.train.engine.build_data` builds) and the
backbone loader's (``in_hf_cache`` and ``hub_unreachable`` of :mod:`umlkit.models.backbones`), run without
building a model. The quick profile is left to its own tests (its UML-Mini and shipped weights are always there).
"""
from __future__ import annotations

import json

__all__ = ["preflight", "problems_of"]


def _data_key(cfg: dict) -> str:
    d = cfg["data"]
    return json.dumps([d["datasets"], str(d["root"]), d.get("few_shot"), d["splits"], d["batch_size"],
                       d["samples_per_class"], d["sampler"], cfg["model"]["backbone"]], sort_keys=True, default=str)


def _batch_problem(cfg: dict) -> str | None:
    from umlkit.models.backbones import backbone_data_config
    from umlkit.train.engine import build_data
    from umlkit.train.runtime import check_batch
    d = cfg["data"]
    try:
        train_set = build_data(cfg, backbone_data_config(cfg["model"]["backbone"]))[0]
        check_batch(d["batch_size"], train_set, d["samples_per_class"], d["sampler"])
    except (ValueError, FileNotFoundError) as err:
        return str(err)
    return _unreadable_sample(train_set)


SAMPLE_IMAGES = 8   # images decoded per training set: a tree of unreadable files is caught before a worker dies on it


def _unreadable_sample(train_set) -> str | None:
    """Decode :data:`SAMPLE_IMAGES` images spread over the training set; the first that fails is named, with the
    check that decodes them all."""
    n = len(train_set)
    for i in sorted({int(k * (n - 1) / max(1, SAMPLE_IMAGES - 1)) for k in range(SAMPLE_IMAGES)} if n else ()):
        try:
            train_set[i]
        except OSError as err:
            return (f"{err}: a sample of the training images does not decode; `umlkit data check --verify-images` "
                    f"lists every unreadable one")
    return None


def _weights_problem(cfg: dict, hub: list) -> str | None:
    """Pretrained weights that are neither a local file nor in the Hugging Face cache, with the hub unreachable
    (asked once per call: ``hub`` memoises the answer)."""
    import timm

    from umlkit.models.backbones import hub_source, in_hf_cache, resolve_backbone_name
    m = cfg["model"]
    if not m["pretrained"] or m["weights"]:
        return None
    name = resolve_backbone_name(m["backbone"])
    shipped = timm.models.get_pretrained_cfg(name)
    if shipped is None or shipped.file or in_hf_cache(shipped):
        return None
    if not hub:
        from umlkit.models.backbones import hub_unreachable
        hub.append(hub_unreachable())
    if hub[0] is None:
        return None
    return (f"pretrained weights of {m['backbone']} ({name}) are not in the Hugging Face cache and the hub is "
            f"unreachable ({hub[0]}): download {hub_source(shipped)} where there is network and --set "
            f"model.weights=/path/to/it, or --set model.pretrained=false to run with random-init weights (this "
            f"checks the pipeline end to end; its numbers are not the paper's)")


def problems_of(jobs: list[tuple], profile: str = "full", files: tuple | None = None) -> dict[str, list[str]]:
    """Problem message -> labels of the runs it concerns, over every configuration of ``jobs``: batches the data
    cannot fill, weights the hub cannot deliver, and weights files whose SHA-256 is not the expected one
    (:mod:`umlkit.experiments.ops.weights_identity`; ``files``: :func:`weights_files` of ``jobs`` when known)."""
    from umlkit.experiments.ops.table_runs import configs_of
    from umlkit.experiments.ops.weights_identity import mismatches
    found: dict[str, list[str]] = {}
    batch: dict[str, str | None] = {}
    hub: list = []
    for job in jobs:
        for cfg in configs_of(job[2]):
            key = _data_key(cfg)
            if key not in batch:
                batch[key] = _batch_problem(cfg)
            for problem in (batch[key], _weights_problem(cfg, hub)):
                if problem and job[1] not in found.setdefault(problem, []):
                    found[problem].append(job[1])
    files, labels = files or weights_files(jobs)
    for file, problem in mismatches(files, profile).items():
        found[problem] = labels[file]
    return found


def weights_files(jobs: list[tuple]) -> tuple[dict[tuple, list[str]], dict[tuple, list[str]]]:
    """(backbone, weights file) -> the papers (record folders) whose runs load it, and -> those runs' labels."""
    from umlkit.experiments.ops.table_runs import configs_of
    from umlkit.experiments.ops.weights_identity import weights_file
    papers: dict[tuple, list[str]] = {}
    labels: dict[tuple, list[str]] = {}
    for job in jobs:
        paper = str(job[0]).split("/")[0]
        for cfg in configs_of(job[2]):
            found = weights_file(cfg)
            if found is None:
                continue
            if paper not in papers.setdefault(found, []):
                papers[found].append(paper)
            if job[1] not in labels.setdefault(found, []):
                labels[found].append(job[1])
    return papers, labels


def unreadable_weights(path) -> str:
    """Why a weights file cannot be loaded ("" when it can): a safetensors file's header and the byte ranges it
    declares against the file's size; a torch file (a zip archive) by its members' checksums; else torch's loader."""
    import struct
    import zipfile
    from pathlib import Path
    path = Path(path)
    try:
        if path.suffix == ".safetensors":
            with open(path, "rb") as fh:
                n = struct.unpack("<Q", fh.read(8))[0]
                header = json.loads(fh.read(n))
            end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
            size = path.stat().st_size
            return f"its header declares {8 + n + end:,} bytes, the file holds {size:,}" if 8 + n + end > size else ""
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                bad = z.testzip()
            return f"member {bad} is damaged" if bad else ""
        import torch
        torch.load(path, map_location="cpu", weights_only=True)
        return ""
    except Exception as err:   # any failure to open is the reason
        return f"{type(err).__name__}: {err}"


def preflight(jobs: list[tuple], profile: str, record: bool = True) -> None:
    """Raise one ValueError naming every problem of the full-profile runs ``jobs`` (none in the quick profile); when
    none, and with ``record``, remember the hash of each backbone file seen for the first time."""
    if profile != "full" or not jobs:
        return
    files = weights_files(jobs)
    found = problems_of(jobs, profile, files)
    for (name, path), labels in files[1].items():   # nothing is remembered of a file that does not load
        if path.is_file() and (why := unreadable_weights(path)):
            problem = (f"the weights file {path} for {name} cannot be read ({why}): it is cut short or not a "
                       f"checkpoint; download or copy it again (nothing was remembered of it)")
            found.setdefault(problem, []).extend(labels)
    if not found:
        if record:
            from umlkit.experiments.ops.weights_identity import remember
            remember(files[0], profile)
        return
    items = []
    for i, (problem, labels) in enumerate(found.items(), 1):
        runs = ", ".join(labels[:3]) + (f" and {len(labels) - 3} more" if len(labels) > 3 else "")
        items.append(f"({i}) {problem} [{len(labels)} run(s): {runs}]")
    raise ValueError(f"{len(found)} problem(s) stop these runs before the first one trains; fix them all, then run "
                     f"again: " + " ".join(items))
