"""What, besides its configuration, decides a run's numbers: the data, the backbone weights and the training code.

A run record (:mod:`umlkit.experiments.runs.records`) is keyed by its resolved configuration, but two runs with the same
configuration can still differ when UML-Mini's generator, the shipped weights or the engine change. Each record
therefore stores a *fingerprint*:

* ``data``: for UML-Mini, the generator version and seed (``umlkit.data.mini.GENERATOR_VERSION``; a test pins the
  bytes of version 1 so that a change of the images without a version bump fails); for a real dataset root, a hash
  of the annotation files of the datasets the configuration uses (images are not read: hashing ~200k JPEGs would
  take longer than the evaluation it protects).
* ``weights``: the sha256 of the weights file (the shipped tiny ViT, or ``model.weights=PATH``), ``hub:<timm name>``
  for hub weights, ``random-init`` without pretraining, and the recipe string for weights that a recipe of the
  library produces (their identity is the recipe + the code + the data, all of which are fingerprinted).
* ``code``: a hash of the library code that training and evaluation run through (``umlkit.data``, ``models``,
  ``metrics``, ``train``, the experiment runners, and of ``losses`` the shared parts and the losses this run reaches:
  :mod:`umlkit.experiments.runs.code_reach`), computed on the token stream with comments, blank lines and docstrings
  removed, so that documentation edits do not invalidate records while any change of a statement does, and a new or
  changed loss stales only the records that use it. The UML-Mini generator is covered by the data fingerprint
  instead.

A record whose stored fingerprint differs from the current one is *stale* (:func:`stale_parts`). Written by hand:
no library fingerprints "the code a run depends on"; the hash is over this package's own files.
"""
from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from umlkit._source_tokens import normalised_tokens
from umlkit.results import file_sha256

__all__ = ["code_hash", "data_fingerprint", "weights_fingerprint", "fingerprint", "stale_parts", "CODE_PARTS",
           "file_sha256", "cached_sha256", "normalised_tokens"]

_PKG = Path(__file__).resolve().parents[2]  # src/umlkit
# the code a training run and its evaluation go through (relative to src/umlkit)
CODE_PARTS = ("data", "models", "losses", "metrics", "train", "experiments/runs/runners.py")
# generator: versioned in the data fingerprint; check: diagnostics only; language: its output reaches a run only as an
# embeddings file whose sha256 is part of the record key
_NOT_CODE = {"data/mini.py", "data/check.py", "data/language.py"}


def _code_files(pkg: Path = _PKG) -> list[Path]:
    """The shared training path's files: :data:`CODE_PARTS` less the loss modules and ``losses/__init__.py``, which
    :mod:`umlkit.experiments.runs.code_reach` hashes per loss."""
    from umlkit.experiments.runs.code_reach import SHARED_LOSS_FILES
    files = []
    for part in CODE_PARTS:
        p = pkg / part
        files += [p] if p.suffix == ".py" else sorted(p.rglob("*.py"))
    rel = [f.relative_to(pkg).as_posix() for f in files]
    return [f for f, r in zip(files, rel) if r not in _NOT_CODE and (not r.startswith("losses/") or
                                                                      r in SHARED_LOSS_FILES)]


def _file_tokens(path: Path) -> str:
    """:func:`normalised_tokens` of a file, tokenised once per version of it (every loss set hashes the same shared
    files)."""
    st = path.stat()
    return _tokens_of(str(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=512)
def _tokens_of(path: str, mtime_ns: int, size: int) -> str:
    return normalised_tokens(Path(path).read_text())


@functools.lru_cache(maxsize=4)
def _shared_names(pkg: Path) -> tuple[str, ...]:
    """:func:`_code_files` relative to the package, listed once per process (a chapter fingerprints thousands of
    records)."""
    return tuple(f.relative_to(pkg).as_posix() for f in _code_files(pkg))


@functools.lru_cache(maxsize=64)
def code_hash(losses: tuple[str, ...] = (), pkg: Path = _PKG) -> str:
    """12-hex-digit hash of the normalised code a run reaches: the shared training path, the loss modules it
    imports, and the registration and modules of each loss in ``losses`` and of those shared code creates by name
    (:mod:`umlkit.experiments.runs.code_reach`; see the module docstring)."""
    from umlkit.experiments.runs.code_reach import loss_code, reached_losses
    shared = [pkg / rel for rel in _shared_names(pkg)]
    code = loss_code(pkg, _shared_names(pkg))
    losses = reached_losses([[{"name": n} for n in losses]], code)
    h = hashlib.sha256()
    for f in shared:
        h.update(f.relative_to(pkg).as_posix().encode())
        h.update(_file_tokens(f).encode())
    h.update("".join(normalised_tokens(text) for text in code.common).encode())
    for rel in sorted(code.shared_modules.union(*(code.modules[n] for n in losses))):
        h.update(rel.encode())
        h.update(_file_tokens(pkg / rel).encode())
    for name in losses:
        h.update(name.encode())
        h.update("".join(normalised_tokens(text) for text in code.registration[name]).encode())
    return h.hexdigest()[:12]


def _annotation_hash(root: Path, datasets) -> str:
    """Hash of each dataset folder's annotation files (.txt/.mat/.csv/.json up to two levels deep)."""
    from umlkit.data.datasets import DATASETS
    h = hashlib.sha256()
    for name in sorted(datasets):
        folder = root / DATASETS[name].folder
        files = [p for pattern in ("*", "*/*") for p in folder.glob(pattern)
                 if p.is_file() and p.suffix in (".txt", ".mat", ".csv", ".json")]
        for f in sorted(files):
            h.update(f.relative_to(root).as_posix().encode())
            h.update(file_sha256(f).encode())
    return h.hexdigest()[:12]


def data_fingerprint(cfg: dict) -> str:
    """``uml_mini:v<version>:seed<seed>`` for UML-Mini, else ``root:<hash of the annotation files>``."""
    from umlkit.data.mini import GENERATOR_VERSION, MINI_MANIFEST
    root = cfg["data"]["root"]
    if root is None:
        if cfg["profile"] == "quick":
            return f"uml_mini:v{GENERATOR_VERSION}:seed0"
        from umlkit._paths import data_root
        root = data_root()    # the full profile's default: UMLKIT_DATA (as umlkit.train.engine.data_root_of)
        if not root.is_dir():
            return "unset"
    from umlkit.data.mini import mini_alias
    size = mini_alias(root)
    if size:
        return f"uml_mini:v{GENERATOR_VERSION}:{'' if size == 'default' else size + ':'}seed0"
    root = Path(root)
    manifest = root / MINI_MANIFEST
    if manifest.is_file():
        info = json.loads(manifest.read_text())
        variant = info.get("variant", "default")
        tag = "" if variant == "default" else f"{variant}:"
        return f"uml_mini:v{info.get('version')}:{tag}seed{info.get('seed')}"
    if not root.is_dir():
        return f"missing:{root}"
    return "root:" + _annotation_hash(root, cfg["data"]["datasets"])


@functools.lru_cache(maxsize=64)
def _sha256_of(path: str, mtime_ns: int, size: int) -> str:
    """A weights file's sha256, computed once per (path, modification time, size): a chapter fingerprints the same
    shipped file for hundreds of records."""
    return file_sha256(path)


def cached_sha256(path: Path) -> str:
    """``path``'s sha256 (hex), hashed once per version of the file (:func:`_sha256_of`)."""
    st = path.stat()
    return _sha256_of(str(path.resolve()), st.st_mtime_ns, st.st_size)


def _file_fingerprint(path: Path) -> str:
    """``sha256:<hex>`` of a weights file, checked against the ``SHA256SUMS`` beside it where one lists it (the
    shipped tiny ViTs; a pretraining recipe's output): a damaged file is named (:mod:`umlkit._shipped`)."""
    from umlkit._shipped import check_sha
    restore = (f"`git checkout -- {path}` (or reinstall umlkit) for a shipped file; else pretrain it again with "
               f"`umlkit data pretrain-mini --overwrite` (with its --recipe and --out)")
    return f"sha256:{check_sha(path, cached_sha256(path), restore)}"


def weights_fingerprint(cfg: dict) -> str:
    from umlkit.models.backbones import WEIGHTS_DIR, resolve_backbone_name
    m = cfg["model"]
    w = m.get("weights")
    if isinstance(w, str) and w.startswith("recipe:"):
        return w
    if w:
        path = Path(w).expanduser()
        return _file_fingerprint(path) if path.is_file() else f"missing:{path}"
    if not m.get("pretrained"):
        return "random-init"
    name = resolve_backbone_name(m["backbone"])
    shipped = WEIGHTS_DIR / f"{name}.safetensors"
    if shipped.is_file():
        return _file_fingerprint(shipped)
    return f"hub:{name}"


def _configs(key: dict) -> list[dict]:
    """The run configurations inside a record key: the key itself, or the values of a ``{source: config}`` map."""
    if "model" in key and "data" in key:
        return [key]
    return [v for v in key.values() if isinstance(v, dict) and "model" in v]


def fingerprint(key: dict) -> dict:
    """``{"data", "weights", "code"}`` of a record key (for a group of runs: of each distinct value, joined)."""
    cfgs = _configs(key)
    if not cfgs:
        raise ValueError("a record key must be a resolved configuration or a mapping of names to configurations")
    from umlkit.experiments.runs.code_reach import loss_code, reached_losses
    data = sorted({data_fingerprint(c) for c in cfgs})
    weights = sorted({weights_fingerprint(c) for c in cfgs})
    code = loss_code(_PKG, _shared_names(_PKG))
    losses = tuple(reached_losses([c.get("objective") for c in cfgs], code))
    return {"data": "+".join(data), "weights": "+".join(weights), "code": code_hash(losses)}


def stale_parts(stored: dict | None, current: dict) -> list[str]:
    """Which fingerprint parts differ (all three when the record has no fingerprint)."""
    if not stored:
        return sorted(current)
    return [k for k in sorted(current) if stored.get(k) != current[k]]
