"""Which backbone file a paper's runs train from (issue 60, item 6): PUMA and VPTSP both say "ViT-S/16" but mean
different checkpoints, and a hub name can come to point at another file. Before a full-profile run trains, the
weights file it will load (``model.weights``, or the Hugging Face cache's copy of the timm model's weights) is
hashed (SHA-256) and compared with what is expected of that backbone:

* a pin in ``configs/weights.yaml`` (``pins: {timm name: sha256}``), which a maintainer with hub access writes once;
* otherwise the hash seen the first time this results folder trained from that backbone
  (``results/<profile>/weights_seen.json``, trust on first use, as SSH does with host keys).

A file whose hash differs is refused, naming both hashes, the file and the papers whose runs expect it. A backbone
without a file yet (the hub downloads it when the model is built) is checked from its next run on.

Why by hand: the hash is the records' own (:func:`umlkit.experiments.runs.fingerprint.cached_sha256`); the pins and
the ledger are this book's bookkeeping.
"""
from __future__ import annotations

import json
from pathlib import Path

from umlkit._yaml import read_yaml

__all__ = ["PINS_FILE", "SEEN_FILE", "weights_file", "sha256_of", "expected", "mismatches", "remember",
           "weights_report"]

PINS_FILE = "weights.yaml"          # under configs/
SEEN_FILE = "weights_seen.json"     # under results/<profile>/


def weights_file(cfg: dict) -> tuple[str, Path] | None:
    """(backbone name, the file a run of ``cfg`` loads its pretrained weights from), or None (random init, a shipped
    recipe, or hub weights not downloaded yet)."""
    import timm

    from umlkit.models.backbones import resolve_backbone_name
    m = cfg["model"]
    name = resolve_backbone_name(m["backbone"])
    w = m.get("weights")
    if isinstance(w, str) and w and not w.startswith("recipe:"):
        path = Path(w).expanduser()
        return (name, path) if path.is_file() else None
    if not m.get("pretrained") or w:
        return None
    pc = timm.models.get_pretrained_cfg(name)
    if pc is None or not pc.hf_hub_id:
        return None
    from huggingface_hub import try_to_load_from_cache
    for filename in ([pc.hf_hub_filename] if pc.hf_hub_filename else ["model.safetensors", "pytorch_model.bin"]):
        found = try_to_load_from_cache(pc.hf_hub_id, filename)
        if isinstance(found, str):
            return name, Path(found)
    return None


def sha256_of(path: Path) -> str:
    """The file's SHA-256 (hex), computed once per file version (the records' weights fingerprint's hash)."""
    from umlkit.experiments.runs.fingerprint import cached_sha256
    return cached_sha256(path)


def _pins() -> dict[str, str]:

    from umlkit._paths import repo_folder
    path = repo_folder("configs", what="the weights pins") / PINS_FILE
    data = read_yaml(path, {}) if path.is_file() else {}
    pins = data.get("pins") or {}
    if not isinstance(pins, dict) or not all(isinstance(v, str) and len(v) == 64 for v in pins.values()):
        raise ValueError(f"{path}: expected 'pins: {{timm model name: sha256 (64 hex digits)}}'")
    return pins


def _seen_path(profile: str) -> Path:
    from umlkit._paths import results_root
    return results_root(profile) / SEEN_FILE


def _seen(profile: str) -> dict[str, str]:
    path = _seen_path(profile)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def expected(name: str, profile: str) -> tuple[str, str] | None:
    """(sha256, where it comes from) that backbone ``name``'s file must have, or None when nothing is known yet."""
    pins = _pins()
    if name in pins:
        return pins[name], f"pinned in configs/{PINS_FILE}"
    seen = _seen(profile).get(name)
    return (seen, f"first seen by this results folder ({_seen_path(profile)})") if seen else None


def mismatches(files: dict[tuple[str, Path], list[str]], profile: str) -> dict[tuple[str, Path], str]:
    """(backbone, file) -> message, for each weights file whose hash is not the expected one; ``files``:
    (backbone, file) -> the papers whose runs load it."""
    out = {}
    for (name, path), papers in files.items():
        want = expected(name, profile)
        have = sha256_of(path)
        if want is not None and want[0] != have:
            out[(name, path)] = (f"the weights file {path} of {name} has sha256 {have}, but "
                                 f"{', '.join(sorted(papers))} expect(s) {want[0]} ({want[1]}): the checkpoint "
                                 f"changed; restore the expected file, or point model.weights at it")
    return out


def remember(files: dict[tuple[str, Path], list[str]], profile: str) -> None:
    """Record the hash of every backbone nothing is known of yet (trust on first use), atomically."""
    from umlkit.results import atomic_write, file_lock
    new = {name: sha256_of(path) for name, path in files if expected(name, profile) is None}
    if not new:
        return
    path = _seen_path(profile)
    with file_lock(path.with_name(path.name + ".lock")):   # two workers starting at once: both entries kept
        seen = _seen(profile)
        atomic_write(path, json.dumps({**{k: v for k, v in new.items() if k not in seen}, **seen}, indent=1,
                                      sort_keys=True))


def _status(name: str, found, profile: str) -> tuple[str, str, str]:
    """(file, sha256 prefix, status) of one backbone's weights."""
    import timm

    from umlkit.models.backbones import hub_source
    if found is None:
        return "", "", f"not downloaded (timm fetches {hub_source(timm.models.get_pretrained_cfg(name))})"
    path, have, want = found[1], sha256_of(found[1]), expected(name, profile)
    if want is None:
        return str(path), have[:16], "present, not pinned (its first run pins it)"
    return str(path), have[:16], ("ok, " if want[0] == have else "MISMATCH with ") + want[1].split(" (")[0]


def weights_report(profile: str = "full") -> tuple:
    """The pretrained weights every registered paper's ``tables`` job list trains from in ``profile``: one line per
    backbone (the papers, how many runs, the file, its sha256 prefix and whether it is present, pinned or seen
    before) as a DataFrame, and a note per paper whose job list cannot be built here (e.g. split files not imported
    yet)."""
    import pandas as pd

    from umlkit.experiments.ops.table_runs import configs_of
    from umlkit.experiments.tables.registry import papers
    from umlkit.models.backbones import resolve_backbone_name
    lines: dict[str, dict] = {}
    notes = []
    for paper_name, paper in papers().items():
        if paper.own:
            continue
        try:
            jobs = paper.job_list("tables", profile)
        except (FileNotFoundError, ValueError, KeyError) as err:
            notes.append(f"{paper_name}: its runs cannot be listed here ({' '.join(str(err).split())[:200]})")
            continue
        for job in jobs:
            for cfg in configs_of(job[2]):
                if not cfg["model"].get("pretrained") and not cfg["model"].get("weights"):
                    continue
                name = resolve_backbone_name(cfg["model"]["backbone"])
                line = lines.setdefault(name, {"backbone": name, "papers": [], "runs": 0, "found": weights_file(cfg)})
                line["runs"] += 1
                if paper_name not in line["papers"]:
                    line["papers"].append(paper_name)
    rows = []
    for name, line in sorted(lines.items()):
        file, digest, status = _status(name, line["found"], profile)
        rows.append({"backbone": name, "papers": ", ".join(line["papers"]), "runs": line["runs"], "file": file,
                     "sha256": digest, "status": status})
    return pd.DataFrame(rows, columns=["backbone", "papers", "runs", "file", "sha256", "status"]), notes

