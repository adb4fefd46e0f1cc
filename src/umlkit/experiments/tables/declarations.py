"""A paper's declarations as data: ``experiments/papers/<paper>/tables.yaml`` read into the objects of
:mod:`umlkit.experiments.tables.table`.

What a paper *declares* - the rows of its tables, the claims it makes about them, why a cell cannot be measured,
the grids it tunes over - is data and lives in its ``tables.yaml``; what it *does* (turn a row into a run
configuration, a record into table cells) is code in its ``config.py``. This module reads the YAML once per process
and expands the two conveniences the files use:

* ``for: {k: [1, 2], d: [Unified, Harmonic]}`` on a claim entry repeats it for every combination, the
  first key outermost, with ``{k}`` / ``{d}`` filled into every string of the entry; a list written ``$methods``
  is one the paper's config.py computes (from methods.yaml or the splits) and passes in with other values
  (``{hardest}``: the setting cell of a source's hardest split); ``each: [...]`` emits several entries per
  combination, in that order;
* a claim group's ``cell`` gives the defaults of every cell (``section``, ``method``, ``setting``, ``dataset``) and
  ``aliases`` short names for long cell values (``section: b`` for PUMA's "(b) Unified metric learning ...").

Written by hand: the schema is the book's own (PyYAML parses, this fills in the book's defaults).
"""
from __future__ import annotations

import itertools
from functools import lru_cache
from pathlib import Path

from umlkit._yaml import read_yaml
from umlkit.experiments.tables.table import Claim

__all__ = ["load_declarations", "expand", "claims_of"]

CELL_FIELDS = ("section", "method", "setting", "dataset")


@lru_cache(maxsize=16)
def _read(path: str) -> dict:
    return read_yaml(path, {})


def load_declarations(package_file: str) -> dict:
    """The ``tables.yaml`` beside a paper package's module (pass ``__file__``), parsed once per process."""
    path = Path(package_file).resolve().parent / "tables.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: every paper package declares its tables there")
    return _read(str(path))


def _fill(value, env: dict):
    if isinstance(value, str):
        return value.format_map(env) if "{" in value and (env or isinstance(env, _Partial)) else value
    if isinstance(value, list):
        return [_fill(v, env) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, env) for k, v in value.items()}
    return value


def _loop_values(values, env: dict, where: str) -> list:
    """A ``for`` list as written, or ``$name``: the list ``env[name]`` the caller computed (e.g. the methods of
    methods.yaml, the splits of a source)."""
    if isinstance(values, str) and values.startswith("$"):
        if values[1:] not in env:
            raise KeyError(f"{where}: the loop list {values} is not one the caller provides ({sorted(env)})")
        return list(env[values[1:]])
    return list(values)


def expand(entries: list[dict], env: dict | None = None) -> list[dict]:
    """Every entry once, or once per combination of its ``for`` lists (first key outermost), with the loop variables
    and ``env`` filled into every string. An entry with ``each: [...]`` emits each of those sub-entries (merged over
    its other keys) per combination, so that claims made together stay together; a sub-entry may loop again
    (``for`` inside ``each``, the outer variables already filled) and may be left out for some values
    (``unless: {var: $list}``: not where the variable's value is in that list)."""
    env = env or {}
    out = []
    for entry in entries:
        where = str(entry.get("text", entry))
        loops = {k: _loop_values(v, env, where) for k, v in (entry.get("for") or {}).items()}
        body = {k: v for k, v in entry.items() if k not in ("for", "each")}
        parts = [{**body, **sub} for sub in entry["each"]] if "each" in entry else [body]
        for values in itertools.product(*loops.values()):
            scope = {**env, **dict(zip(loops, values))}
            for part in parts:
                unless = part.get("unless") or {}
                if any(scope.get(k) in _loop_values(v, env, where) for k, v in unless.items()):
                    continue
                part = {k: v for k, v in part.items() if k != "unless"}
                if "for" in part:   # an inner loop: fill what is known, keep its own variables for later
                    inner = {k: v for k, v in part.items() if k != "for"}
                    outer = _Partial({k: v for k, v in scope.items() if k not in part["for"]})
                    out += expand([{"for": part["for"], **_fill(inner, outer)}], env)
                else:
                    out.append(_fill(part, scope))
    return out


class _Partial(dict):
    """A scope that leaves a placeholder it does not know as it is (``{shots}`` for an inner loop to fill)."""
    def __missing__(self, key):
        return "{" + key + "}"


def _cell(spec, defaults: dict, aliases: dict, where: str, entry: dict, ctx: dict) -> dict:
    """One claim cell: ``spec`` (a mapping of cell fields, or a method name with the entry's own ``dataset`` /
    ``setting`` / ``section``) over the group's defaults. A setting ``$paper`` is the paper's setting cell of the
    method (``ctx["setting_of"]``), ``$NAME`` a ``{method: setting}`` mapping of ``env`` (the paper's where it
    lacks the method; a section ``$NAME`` likewise, else ""); a default ``metric: $claim`` carries the claim's metric
    into the cell."""
    if isinstance(spec, str):
        spec = {"method": spec, **{f: entry[f] for f in ("section", "setting", "dataset") if f in entry}}
    unknown = set(spec) - set(CELL_FIELDS)
    if unknown:
        raise ValueError(f"{where}: unknown cell field(s) {sorted(unknown)}; a cell has {list(CELL_FIELDS)}")
    cell = {f: spec.get(f, defaults.get(f, "")) for f in CELL_FIELDS}
    for f in ("section", "setting"):   # a field looked up by the cell's method
        value = str(cell[f])
        if value.startswith("$"):
            given = ctx["env"].get(value[1:], {}) if value != "$paper" else {}
            cell[f] = given.get(cell["method"]) or (ctx["setting_of"](cell["method"]) if f == "setting" else "")
    for f, names in (aliases or {}).items():
        cell[f] = names.get(cell[f], cell[f])
    out = {f: str(v) for f, v in cell.items()}
    if defaults.get("metric") == "$claim":
        out["metric"] = str(entry.get("metric", "R@1"))
    return out


def claims_of(group: dict, where: str = "claims", env: dict | None = None, setting_of=None) -> list[Claim]:
    """The :class:`Claim` list of one claim group ``{cell: defaults, aliases: ..., text: template, list: [...]}``;
    ``env`` gives the values and ``$lists`` its placeholders refer to. An entry without ``text`` takes the group's
    ``text`` template filled with its fields (``{a}``, ``{b}``, ``{dataset}``, ``{metric}``, ``{what}``, ...;
    a missing field reads as the cell default, or "")."""
    defaults, aliases = group.get("cell") or {}, group.get("aliases") or {}
    ctx = {"env": env or {}, "setting_of": setting_of or (lambda method: "")}
    out = []
    for i, c in enumerate(expand(group.get("list") or [], env)):
        text = c.get("text")
        if text is None:
            fields = {"what": "", "metric": "R@1", **{k: v for k, v in defaults.items()
                                                      if isinstance(v, str) and not v.startswith("$")}, **c}
            text = str(group["text"]).format_map(fields)
        at = f"{where}[{i}] ({text!r})"
        extra = {k: c[k] for k in ("metric", "paired", "margin") if k in c}
        if "margin" in extra:   # written "{margin}" to share the paper's one margin: a number once filled
            extra["margin"] = float(extra["margin"])
        out.append(Claim(str(text), _cell(c["a"], defaults, aliases, at, c, ctx),
                         _cell(c["b"], defaults, aliases, at, c, ctx), **extra))
    return out

