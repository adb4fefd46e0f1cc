"""Run records: the measured outcome of one run (or one group of runs), stored under its configuration hash.

A record is a JSON file ``results/<profile>/records/<paper>/<table>/<label>-<hash>.json`` holding

* ``key``: the fully resolved configuration (or ``{name: configuration}`` for a group such as eight specialists)
  and ``key_hash``, its 12-digit hash: the record's identity;
* ``runner``: the name of the function that produced it (:mod:`umlkit.experiments.runs.runners`), so the record can be
  recomputed from itself;
* ``fingerprint``: data, weights and code (:mod:`umlkit.experiments.runs.fingerprint`). When the current fingerprint of
  the key differs, the record is *stale*: it is still read (a chapter shows it and says so beside the table), and
  ``umlkit reproduce --stale`` retrains exactly those records;
* ``result``: what was measured; ``seconds``, ``created``, ``software``.

A chapter asks for a row; a record with the same configuration hash is read (under any paper or table: one run
serves every table that needs the same configuration), otherwise the runner is called and the record written
atomically. ``rerun=True`` computes again and replaces the record - only files of this layout, which umlkit wrote.

Why: the tables of the four papers need hundreds of quick-profile runs (hours on 2 CPU cores), while a chapter
must execute in a minute. The quick profile's records are committed with the repository; a test fails when one of
them is stale, and another retrains one from its stored key and checks that the same numbers come back.
"""
from __future__ import annotations

import json
import os
import platform
import re
import time
from collections.abc import Callable
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import torch

from umlkit._numerics import mode as numerics_mode
from umlkit._paths import results_root
from umlkit.experiments.runs.fingerprint import fingerprint, stale_parts
from umlkit.results import atomic_write, config_hash, owner_lock

__all__ = ["record_path", "load_record", "cached_record", "find_record", "list_records", "records_summary",
           "stale_records", "predecessor", "stored_or_previous", "stored_record", "without_options", "recompute",
           "restamp", "RecordError", "MissingSideFile", "normalise_key", "read_only", "is_read_only", "DamagedRecord",
           "damaged_records", "set_aside", "resumable_folder"]


class RecordError(RuntimeError):
    """A stored record is unreadable or does not belong to the configuration that names it."""


class DamagedRecord(RecordError):
    """A stored record file that must not be used: unreadable (truncated, not JSON, fields missing, edited) or holding
    another run than the one its file name promises (a copy or a move under the wrong name). Shown by ``umlkit
    records verify`` and the status commands, never read as a result, never overwritten in place."""


class MissingSideFile(RecordError):
    """Reading (:func:`read_only`) needed a side file a record key names (e.g. a language file) that is not stored:
    the rows whose keys need it count as missing records; nothing is computed."""


_READ_ONLY: ContextVar[bool] = ContextVar("umlkit_read_only", default=False)


_FIX = ("it is never used; `umlkit records train ... --replace-damaged` trains its run again and keeps the bad file "
        "beside it (.damaged)")


@contextmanager
def read_only():
    """Within this block, building a record key never computes or writes a side file (it raises
    :class:`MissingSideFile` instead) and :func:`cached_record` never trains: reading the book, the scoreboard or a
    chapter with ``TRAIN=False`` leaves the repository as it was."""
    token = _READ_ONLY.set(True)
    try:
        yield
    finally:
        _READ_ONLY.reset(token)


def is_read_only() -> bool:
    """Whether the caller is inside :func:`read_only`."""
    return _READ_ONLY.get()


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", label).strip("_") or "run"


def normalise_key(key: dict) -> dict:
    """The JSON form of a key, without settings that cannot change a number (``train.progress``)."""
    key = json.loads(json.dumps(key, default=str))
    for cfg in ([key] if "train" in key else [v for v in key.values() if isinstance(v, dict) and "train" in v]):
        cfg["train"].pop("progress", None)
    return key


def _records_root(profile: str) -> Path:
    return results_root(profile) / "records"


def record_path(paper: str, table: str, label: str, key: dict, profile: str) -> Path:
    """Where the record of ``key`` lives when ``paper``/``table`` produce it."""
    return (_records_root(profile) / _slug(paper) / _slug(table)
            / f"{_slug(label)}-{config_hash(normalise_key(key))}.json")


_NAMED_HASH = re.compile(r"-([0-9a-f]{12})$")


def _named_hash(path: Path) -> str | None:
    """The key hash a record's file name promises (``<label>-<hash>.json``), or None for another name."""
    m = _NAMED_HASH.search(path.stem)
    return m.group(1) if m else None


def load_record(path: str | Path) -> dict:
    """Read and check a record; adds ``path``, ``stale`` (the fingerprint parts that changed) and ``cached``. A file
    that cannot be used (:class:`DamagedRecord`) is an error naming it: unreadable, edited, or holding another run
    than its name promises (the stored key's hash against the name's)."""
    path = Path(path)
    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError) as err:     # ValueError: JSON errors and bytes that are not UTF-8
        raise DamagedRecord(f"run record {path} cannot be read ({err}); {_FIX}") from err
    if not isinstance(rec, dict):
        raise DamagedRecord(f"run record {path} holds a JSON {type(rec).__name__}, not a record (an object with key, "
                            f"result, runner); {_FIX}")
    for field in ("key", "key_hash", "result", "runner"):
        if field not in rec:
            raise DamagedRecord(f"run record {path} has no {field!r} field; {_FIX}")
    if config_hash(rec["key"]) != rec["key_hash"]:
        raise DamagedRecord(f"run record {path}: its stored configuration hashes to {config_hash(rec['key'])}, "
                            f"not to the recorded {rec['key_hash']}; the file was edited; {_FIX}")
    promised = _named_hash(path)
    if promised is not None and promised != config_hash(normalise_key(rec["key"])):
        raise DamagedRecord(f"run record {path} is named for the run of key {promised} but holds the run of key "
                            f"{config_hash(normalise_key(rec['key']))} (label {rec.get('label', '?')!r}): a copy or "
                            f"a move under the wrong name; {_FIX}")
    rec["path"] = str(path)
    try:
        current = fingerprint(rec["key"])
    except (ValueError, TypeError, KeyError) as err:
        raise DamagedRecord(f"run record {path}: its key cannot be fingerprinted ({err}); it was not written by umlkit "
                            f"or was edited. Delete it (a chapter or `umlkit reproduce` then trains it again)") from err
    rec["stale"] = stale_parts(rec.get("fingerprint"), current)
    rec["cached"] = True
    return rec


_INDEX: dict = {}


def _record_index(profile: str) -> dict[str, Path]:
    """{key hash: first record path (sorted)} of a profile, rebuilt when a record folder changed (its mtime): a
    chapter looks up thousands of keys, and a glob over every folder per key costs more than the lookups. While
    reading only (:func:`read_only`: nothing is written by this process) the folders are looked at again at most
    once a second, which keeps a scoreboard's 17,000 look-ups from stat-ing every folder each time."""
    root = _records_root(profile)
    cached = _INDEX.get(profile)
    if (cached is not None and is_read_only() and cached[0][0] == str(root)
            and time.monotonic() - cached[2] < 1.0):
        return cached[1]
    folders = sorted(p for p in root.glob("*/*") if p.is_dir()) if root.is_dir() else []
    stamp = (str(root), tuple((str(p), p.stat().st_mtime_ns) for p in folders))
    if cached is not None and cached[0] == stamp:
        _INDEX[profile] = (stamp, cached[1], time.monotonic())
    else:
        index: dict[str, Path] = {}
        for path in sorted(f for d in folders for f in d.glob("*.json")):
            index.setdefault(path.stem.rsplit("-", 1)[-1], path)
        _INDEX[profile] = (stamp, index, time.monotonic())
    return _INDEX[profile][1]


def find_record(key: dict, profile: str) -> Path | None:
    """The stored record of ``key`` under any paper and table, or None. With ``UMLKIT_READ_LOG`` set, each found
    path is appended to that file: the records a book build reads (``tools/archive_records.py`` moves the others
    to the archive)."""
    path = _record_index(profile).get(config_hash(normalise_key(key)))
    found = path if path is not None and path.is_file() else None
    if found is not None and os.environ.get("UMLKIT_READ_LOG"):
        with open(os.environ["UMLKIT_READ_LOG"], "a", encoding="utf-8") as log:   # one short line: an atomic append
            log.write(f"{found}\n")
    return found


def without_options(key):
    """``key`` with every objective term's ``options`` emptied, the model's ``variant`` option dropped (whose
    official code a method follows) and the analysis's ``fixed_classes`` (the class count of the fixed-class recall,
    which follows the committed splits: ooDML's fewest test classes of a source): what two editions of one run have
    in common when only its losses' settings, its method's variant or that count changed."""
    if isinstance(key, dict):
        out = {k: ([{**t, "options": {}} for t in v] if k == "objective" and isinstance(v, list)
                   else without_options(v)) for k, v in key.items()}
        model = out.get("model")
        if isinstance(model, dict) and isinstance(model.get("options"), dict) and "variant" in model["options"]:
            out["model"] = {**model, "options": {k: v for k, v in model["options"].items() if k != "variant"}}
        if isinstance(out.get("analysis"), dict) and "fixed_classes" in out["analysis"]:
            out["analysis"] = {k: v for k, v in out["analysis"].items() if k != "fixed_classes"}
        return out
    return key


_PREVIOUS: dict = {}


def predecessor(key: dict, profile: str) -> Path | None:
    """The stored record of the run ``key`` replaces: the same configuration except its losses' options and its
    method's variant (:func:`without_options`), e.g. a run whose loss now follows its paper's official code; where
    several stored runs differ only in their options (a sweep over a loss option), none is its predecessor. A reader
    shows it marked stale (part ``options``) until the new run is trained; training never uses it. None when there is
    none. (The first call reads every stored key once: about 2 s for 3,500 records.)"""
    index = _record_index(profile)
    stamp = _INDEX[profile][0]   # the folders' state the index was built from
    if _PREVIOUS.get(profile, (None,))[0] != stamp:
        previous: dict[str, Path | None] = {}
        for path in sorted(index.values()):
            try:
                stored = json.loads(path.read_text())["key"]
            except (OSError, ValueError, KeyError, TypeError):
                continue   # a damaged record is no predecessor (load_record names it where it is read)
            h = config_hash(without_options(normalise_key(stored)))
            previous[h] = None if h in previous else path   # two candidates (runs that differ only in options): none
        _PREVIOUS[profile] = (stamp, previous)
    found = _PREVIOUS[profile][1].get(config_hash(without_options(normalise_key(key))))
    return found if found is not None and found.is_file() else None


def stored_or_previous(key: dict, profile: str) -> Path | None:
    """The stored record of ``key``, else its :func:`predecessor`, else None."""
    found = find_record(key, profile)
    return found if found is not None else predecessor(key, profile)


def stored_record(key: dict, profile: str) -> dict | None:
    """What a reader shows for ``key``: its stored record, else its :func:`predecessor` marked stale in part
    ``options``, else None. Trains nothing."""
    found = find_record(normalise_key(key), profile)
    if found is not None:
        return load_record(found)
    prev = predecessor(key, profile)
    if prev is None:
        return None
    rec = load_record(prev)
    rec["stale"] = sorted({*rec["stale"], "options"})
    return rec


def _usable(path: Path | None, rerun: bool | str) -> dict | None:
    """The stored record at ``path`` when it answers the request: always without ``rerun``, only when current with
    ``rerun="stale"``. A damaged file answers nothing where training is allowed (it is trained again and kept beside
    as ``.damaged``); a reader (read-only) gets the :class:`DamagedRecord` naming it."""
    if path is None or rerun is True:
        return None
    try:
        rec = load_record(path)
    except DamagedRecord:
        if is_read_only():
            raise
        return None
    return None if rerun == "stale" and rec["stale"] else rec


def cached_record(paper: str, table: str, label: str, key: dict, runner: str | Callable[[dict], dict],
                  profile: str, rerun: bool | str = False, log: Callable[[str], None] | None = print) -> dict:
    """The record of ``key``: read from disk when present (and ``rerun`` is False), else computed now;
    ``rerun="stale"`` trains it again only when the stored one is stale (the second edition's retrain: a record
    another worker has just renewed is read, not trained twice).

    ``runner`` is a registered runner name (:data:`umlkit.experiments.runs.runners.RUNNERS`); a callable is accepted for
    experiments outside the registry, but its records cannot be recomputed by ``umlkit reproduce --stale``.
    """
    key = normalise_key(key)
    existing = find_record(key, profile)
    if (rec := _usable(existing, rerun)) is not None:
        return rec
    if is_read_only():
        if (rec := stored_record(key, profile)) is not None:
            return rec
        raise RecordError(f"{paper}/{table}/{label}: no stored record under {_records_root(profile)} and reading is "
                          f"read-only (train it with `umlkit records train` or a chapter with TRAIN=True)")
    if existing is not None:   # a rerun: a damaged file under this run's name is kept beside, not overwritten
        try:
            load_record(existing)
        except DamagedRecord:
            kept = set_aside(existing)
            if log is not None:
                log(f"kept the damaged {existing.name} beside as {kept.name}")
    path = existing or record_path(paper, table, label, key, profile)
    stamp = fingerprint(key)   # a key it cannot fingerprint fails here, before the run, not after it
    name = runner if isinstance(runner, str) else f"callable:{getattr(runner, '__qualname__', 'unknown')}"
    with owner_lock(results_root(profile) / ".locks" / f"{config_hash(key)}.lock",
                    f"the record {paper}/{table}/{label}"):
        if (done := _usable(find_record(key, profile), rerun)) is not None:   # another process finished it meanwhile
            return done
        return _train_and_write(paper, table, label, key, runner, profile, path, stamp, name,
                                "rerun" if existing else "no stored record", log)


def _train_and_write(paper, table, label, key, runner, profile, path, stamp, name, why, log) -> dict:
    """Run ``key`` and write its record to ``path`` (the caller holds the record's lock)."""
    from umlkit.experiments.runs import runners
    if log is not None:
        log(f"training {paper}/{table}/{label} ({why})")
    t0 = time.perf_counter()
    runs = resumable_folder(key, profile)
    with runners.resumable_runs(runs):
        result = runners.run(runner, key) if isinstance(runner, str) else runner(key)
    rec = {
        "paper": paper, "table": table, "label": label, "profile": profile, "runner": name,
        "key": key, "key_hash": config_hash(key), "fingerprint": stamp,
        "result": result, "seconds": round(time.perf_counter() - t0, 1),
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
        "software": {"torch": torch.__version__, "python": platform.python_version(),
                     "threads": torch.get_num_threads(), "machine": platform.machine(), "numerics": numerics_mode()},
    }
    atomic_write(path, json.dumps(rec, indent=1, sort_keys=True))
    if runs is not None:   # the record holds the result now; its checkpoints are not needed any more
        import shutil
        shutil.rmtree(runs, ignore_errors=True)
    rec.update(path=str(path), stale=[], cached=False)
    return rec


def resumable_folder(key: dict, profile: str) -> Path | None:
    """Where the runs of ``key``'s record keep checkpoints that a preempted task resumes from: under
    ``UMLKIT_CHECKPOINTS`` when it is set (the Slurm executor sets it to ``results/<profile>/checkpoints``; set it
    yourself to make interrupted local runs resume), one folder per record key (named by its hash); ``None`` when
    it is not set (temporary folders, removed with the run)."""
    root = os.environ.get("UMLKIT_CHECKPOINTS")
    if not root:
        return None
    return Path(root).expanduser() / config_hash(key)


def damaged_records(profile: str, paper: str | None = None) -> list[tuple[Path, str]]:
    """(path, why) of every stored record of ``profile`` (of ``paper``'s folder) that :func:`load_record` refuses."""
    out = []
    for path in list_records(profile, paper):
        try:
            load_record(path)
        except DamagedRecord as err:
            out.append((path, str(err)))
    return out


def set_aside(path: str | Path) -> Path:
    """Move a damaged record out of the records' way, beside itself as ``<name>.damaged`` (``.damaged.1``, ... when
    taken), so that training its run again loses nothing; returns the new path."""
    path = Path(path)
    target, n = path.with_name(path.name + ".damaged"), 0
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.damaged.{n}")
    os.replace(path, target)
    return target


def list_records(profile: str, paper: str | None = None, table: str | None = None) -> list[Path]:
    pattern = f"{_slug(paper) if paper else '*'}/{_slug(table) if table else '*'}/*.json"
    return sorted(_records_root(profile).glob(pattern))


def stale_records(profile: str, paper: str | None = None) -> list[dict]:
    """Every stored record whose fingerprint differs from the current one (with ``stale`` naming the parts)."""
    return [rec for rec in map(load_record, list_records(profile, paper)) if rec["stale"]]


def recompute(rec: dict, log: Callable[[str], None] | None = print) -> dict:
    """Run a stored record's runner on its stored key again and replace the record (same path)."""
    if rec["runner"].startswith("callable:"):
        raise RecordError(f"record {rec['path']} was produced by {rec['runner']}, which is not a registered runner; "
                          "re-run the chapter that produced it with RERUN=True")
    profile = rec["profile"]
    return cached_record(rec["paper"], rec["table"], rec["label"], rec["key"], rec["runner"], profile, rerun=True,
                         log=log)


def restamp(profile: str, reason: str, paper: str | None = None, parts: tuple[str, ...] = ("code",),
            keep: Callable[[dict], bool] | None = None) -> list[Path]:
    """Give stale records the current fingerprint ``parts`` after a change shown not to move their numbers.

    For a refactoring of the training path (the code hash changes, the numbers do not): run the old and the new
    code on the same configurations first and check the results are identical, then restamp with a ``reason``
    that says what was compared. Each restamped record keeps the history (``restamped``: old and new fingerprint,
    reason, date). Records stale in any other part, and those ``keep(record)`` refuses, are left alone. Returns the
    paths changed.
    """
    if not reason.strip():
        raise ValueError("restamp needs a reason: what was compared to show the numbers did not change")
    changed = []
    for path in list_records(profile, paper):
        rec = load_record(path)
        if not rec["stale"] or not set(rec["stale"]) <= set(parts) or (keep is not None and not keep(rec)):
            continue
        stored = json.loads(path.read_text())
        current = fingerprint(stored["key"])
        new = dict(stored.get("fingerprint") or {})
        new.update({p: current[p] for p in parts})
        stored.setdefault("restamped", []).append({"from": stored.get("fingerprint"), "to": new, "reason": reason,
                                                   "date": time.strftime("%Y-%m-%d %H:%M:%S")})
        stored["fingerprint"] = new
        atomic_write(path, json.dumps(stored, indent=1, sort_keys=True))
        changed.append(path)
    return changed


def records_summary(profile: str, paper: str | None = None):
    """Stored records per paper and table: how many, how many stale, their total training time, the newest."""
    import pandas as pd
    rows = []
    for path in list_records(profile, paper):
        rec = load_record(path)
        rows.append({"paper": path.parent.parent.name, "table": path.parent.name, "seconds": rec.get("seconds", 0.0),
                     "stale": bool(rec["stale"]), "created": rec.get("created", "")})
    if not rows:
        return pd.DataFrame(columns=["records", "stale", "minutes", "newest"])
    df = pd.DataFrame(rows)
    out = df.groupby(["paper", "table"]).agg(records=("seconds", "size"), stale=("stale", "sum"),
                                             minutes=("seconds", "sum"), newest=("created", "max"))
    out["minutes"] = (out["minutes"] / 60).round(1)
    out.loc[("total", ""), :] = [out["records"].sum(), out["stale"].sum(), out["minutes"].sum().round(1),
                                 out["newest"].max()]
    out[["records", "stale"]] = out[["records", "stale"]].astype(int)
    return out
