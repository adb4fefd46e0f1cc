"""Guards for the committed artefacts that tests recompute from scratch (the ooDML quick splits, ...): the heavy
recomputation runs in ``make test-all`` (marker ``recompute``); ``make test`` runs a fast test that compares a hash of
the recomputation's inputs - the code it runs (normalised tokens: comments and docstrings do not count), the
configuration files it reads, the data generator's version and the backbone weights - with the hash stored in
``tests/artefact_inputs.json`` when the recomputation last passed. When the inputs change, the fast test fails
and says to run ``make test-all``, whose passing recomputation stores the new hash (``UMLKIT_RECORD_INPUTS=1``)."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STORE = Path(__file__).resolve().parent / "artefact_inputs.json"

# artefact -> the files its recomputation reads (repository-relative); the generator version and the backbone
# weights are added to every hash
# (a ``path.py:f,g`` entry hashes only those top-level functions of a module that also holds unrelated code)
ARTEFACTS = {
    "oodml_quick_splits": ["src/umlkit/experiments/papers/oodml/split_making.py:make_splits,source_class_means,"
                           "fid_progression,_jsonable", "src/umlkit/experiments/recipes/source.py:methods_config",
                           "src/umlkit/experiments/splits/features.py", "src/umlkit/metrics/distribution.py",
                           "src/umlkit/train/evaluate.py",
                           "configs/oodml/methods.yaml:splits"],   # make_splits reads the splits block only
}


def _text(entry: str) -> str:
    """A file's text, the source of the named top-level functions of a Python module (in the order named), or the
    named top-level blocks of a YAML file (``methods.yaml:splits``: a learning rate entered beside them is no input)."""
    import ast
    rel, _, names = entry.partition(":")
    text = (ROOT / rel).read_text()
    if not names:
        return text
    if rel.endswith((".yaml", ".yml")):
        import yaml
        data = yaml.safe_load(text)
        missing = [n for n in names.split(",") if n not in data]
        if missing:
            raise KeyError(f"{rel} has no top-level block(s) {missing} (update tests/_artefacts.py)")
        return yaml.safe_dump({n: data[n] for n in names.split(",")}, sort_keys=True)
    defs = {n.name: n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)}
    missing = [n for n in names.split(",") if n not in defs]
    if missing:
        raise KeyError(f"{rel} has no top-level function(s) {missing} (update tests/_artefacts.py)")
    return "\n".join(ast.get_source_segment(text, defs[n]) for n in names.split(","))


def _normalised(rel: str, text: str) -> str:
    """What of a file counts: a module's tokens (no comments or docstrings), a YAML file's parsed content (its
    comments do not count), any other file's text."""
    from umlkit.experiments.runs.fingerprint import normalised_tokens
    if rel.endswith(".py"):
        return normalised_tokens(text)
    if rel.endswith((".yaml", ".yml")):
        import yaml
        return json.dumps(yaml.safe_load(text), sort_keys=True)
    return text


def inputs_hash(name: str) -> str:
    """16 hex digits over the artefact's input files, UML-Mini's generator version and the shipped v2 weights."""
    from umlkit.data.mini import GENERATOR_VERSION
    from umlkit.models.pretrain import weight_files
    from umlkit.results import file_sha256
    h = hashlib.sha256(f"uml_mini:v{GENERATOR_VERSION}".encode())
    for entry in ARTEFACTS[name]:
        text = _text(entry)
        h.update(entry.encode())
        h.update(_normalised(entry.split(":")[0], text).encode())
    for part in ("weights", "heads"):
        h.update(file_sha256(weight_files("v2")[part]).encode())
    return h.hexdigest()[:16]


def stored_hash(name: str) -> str | None:
    return json.loads(STORE.read_text()).get(name) if STORE.is_file() else None


def certify(name: str) -> None:
    """After a passing recomputation: store the current inputs hash when ``UMLKIT_RECORD_INPUTS=1`` (make test-all)."""
    if os.environ.get("UMLKIT_RECORD_INPUTS") != "1":
        return
    store = json.loads(STORE.read_text()) if STORE.is_file() else {}
    current = inputs_hash(name)
    if store.get(name) != current:
        store[name] = current
        from umlkit.results import atomic_write  # test processes (pytest-xdist) may read it meanwhile
        atomic_write(STORE, json.dumps(dict(sorted(store.items())), indent=1) + "\n")
