"""One table builder for every paper: a :class:`~umlkit.experiments.tables.table.Table` from its declaration in the
paper's ``tables.yaml`` (``tables: {<name>: {...}}``), so that a paper's ``config.py`` keeps only what is genuinely
its own (how a declared row becomes a run configuration, how a record becomes cells) and never builds a table or a
claim itself.

A declaration names, by key (every key optional: a table of quoted cells only has no ``rows``)::

    tables:
      Table 1:
        rows:                                   # row groups, in order; each one of config.py's row builders
          - {build: floor_rows, sources: [cub]} # called with the other keys as keyword arguments
          - {build: rows, names: $TABLE1}
        seeds: $SEEDS                           # a list, or $NAME of config.py
        config: config_for                      # config.py's key builder (the default)
        scores: scores                          # config.py's record -> cells function (default: none)
        claims: {...}                           # a claim group (declarations.claims_of), or a list of groups
        floor: {frozen: Zero-shot (frozen backbone), per_setting: false}
        unmeasured: {quick: {"*": $REASONS.table1_quick}}
        params: true
        params_dataset: CUB
        columns: [CUB, Cars]
        profiles: [quick]                       # the profiles that have the table (default: every one)
        by_profile: {full: {claims: null}}      # keys that differ in a profile, over the others

A function of config.py the declaration names (row builders, claim environments, ``$NAME``) gets the table's name,
the profile and the caller's ``context`` for the parameters it has of those names (``table``, ``profile``, ...).

A string ``$NAME`` (``$NAME.key.key``) anywhere in a declaration is config.py's attribute ``NAME`` (called without
arguments when it is a function, e.g. one that reads the paper's configuration; then the keys into it);
``$declared.section.key`` reads the paper's own ``tables.yaml``; ``$$`` escapes a literal ``$``. A claim
group's cells may say ``setting: $paper``: the paper's setting cell of that method in that table
(``data/paper_tables``), for tables whose methods the paper prints with one setting each.

Written by hand: the declaration schema is the book's own; PyYAML parses it and this module fills it in.
"""
from __future__ import annotations

import inspect
from collections.abc import Mapping
from functools import lru_cache, partial
from types import ModuleType

from umlkit.experiments.tables.declarations import claims_of
from umlkit.experiments.tables.table import Floor, Table

__all__ = ["build_tables", "build_table", "resolve_refs", "TABLE_KEYS"]

TABLE_KEYS = {"rows", "seeds", "config", "scores", "claims", "floor", "unmeasured", "params", "params_dataset",
              "columns", "metric", "derive", "in_progress", "profiles", "claims_env", "by_profile"}


def resolve_refs(value, config: ModuleType, declared: Mapping, where: str, context: Mapping | None = None):
    """``value`` with every ``$NAME[.key...]`` string replaced by what it names (see the module docstring); a function
    named is called with the entries of ``context`` (table, profile, ...) it takes."""
    if isinstance(value, str) and value.startswith("$"):
        if value.startswith("$$"):
            return value[1:]
        head, *keys = value[1:].split(".")
        if head == "declared":
            obj = declared
        elif hasattr(config, head):
            obj = getattr(config, head)
        else:
            raise KeyError(f"{where}: {value} names nothing in {config.__name__} (no attribute {head!r})")
        if callable(obj):   # a function of config.py that reads its configuration
            obj = _call(obj, {}, context or {})
        for k in keys:
            if not isinstance(obj, Mapping) or k not in obj:
                raise KeyError(f"{where}: {value}: no key {k!r}")
            obj = obj[k]
        return obj
    if isinstance(value, list):
        return [resolve_refs(v, config, declared, where, context) for v in value]
    if isinstance(value, dict):
        return {k: resolve_refs(v, config, declared, where, context) for k, v in value.items()}
    return value


def _function(config: ModuleType, name: str, where: str):
    fn = getattr(config, name, None)
    if not callable(fn):
        raise KeyError(f"{where}: {config.__name__} has no function {name!r}")
    return fn


def _no_runs(*args, **kwargs) -> dict:
    """The key builder of a table without rows of its own (derived, or quoted cells only): no run has a key."""
    return {}


def _taken(fn, context: Mapping) -> dict:
    """The entries of ``context`` that ``fn`` takes as parameters."""
    params = inspect.signature(fn).parameters
    return {k: v for k, v in context.items() if k in params}


def _call(fn, args: dict, context: Mapping):
    """``fn(**args)``, plus the entries of ``context`` (table, profile, ...) it takes that ``args`` does not give."""
    return fn(**args, **{k: v for k, v in _taken(fn, context).items() if k not in args})


@lru_cache(maxsize=None)
def _paper_setting(paper: str, table: str, method: str) -> str:
    """The paper's setting cell of ``method`` in ``table`` when it prints one, else ""."""
    from umlkit.experiments.tables.paper_cells import paper_table
    p = paper_table(paper, table, missing_ok=True)
    settings = p.loc[p["method"] == method, "setting"].fillna("").unique() if not p.empty else []
    return str(settings[0]) if len(settings) == 1 else ""


def _claims(paper: str, table: str, groups, env: Mapping, where: str) -> list:
    if groups is None:
        return []
    out = []
    for i, group in enumerate(groups if isinstance(groups, list) else [groups]):
        if not group:
            continue
        out += claims_of(group, f"{where} claims[{i}]", env,
                         setting_of=lambda method: _paper_setting(paper, table, method))
    return out


def _refuse_repeated_seeds(where: str, seeds, rows) -> None:
    """A seed listed twice would train or count one run twice: refused, naming the table, the group or row, the seed."""
    lists = ({f"seeds[{g!r}]": v for g, v in seeds.items()} if isinstance(seeds, Mapping) else {"seeds": seeds})
    lists.update({f"row {r.title!r} seeds": r.spec["seeds"] for r in rows if "seeds" in (r.spec or {})})
    for name, values in lists.items():
        values = list(values)
        twice = sorted({s for s in values if values.count(s) > 1})
        if twice:
            raise ValueError(f"{where}: {name} lists seed(s) {twice} more than once ({values}); give each seed once")


def build_table(paper: str, name: str, decl: Mapping, config: ModuleType, declared: Mapping,
                profile: str = "quick", context: Mapping | None = None) -> Table:
    """The :class:`Table` ``name`` of ``paper`` from its declaration ``decl`` (keys: :data:`TABLE_KEYS`). ``context``:
    more named values the paper's functions may take (e.g. PUMA's pass, ``stage``), beside ``table`` and
    ``profile``; the key builder and ``derive`` get theirs bound."""
    where = f"{paper} tables.yaml: tables[{name!r}]"
    unknown = set(decl) - TABLE_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {sorted(unknown)}; a table declares {sorted(TABLE_KEYS)}")
    ctx = {"table": name, "profile": profile, **(context or {})}
    d = {k: resolve_refs(v, config, declared, where, ctx) for k, v in decl.items()
         if k not in ("claims", "claims_env")}
    rows = []
    for i, group in enumerate(d.get("rows") or []):
        build = _function(config, group["build"], f"{where} rows[{i}]")
        rows += list(_call(build, {k: v for k, v in group.items() if k != "build"}, ctx))
    env = resolve_refs(decl.get("claims_env") or {}, config, declared, where, ctx)
    if "build" in env:   # an environment config.py computes (e.g. a source's default and hardest split)
        env = _call(_function(config, env["build"], f"{where} claims_env"),
                    {k: v for k, v in env.items() if k != "build"}, ctx)
    kwargs = {k: d[k] for k in ("unmeasured", "params", "params_dataset", "columns", "metric", "in_progress")
              if k in d}
    if "floor" in d:
        kwargs["floor"] = Floor(**d["floor"])
    if "scores" in d:   # scores(result, row), with the table's name and profile bound where it takes them
        scores = _function(config, d["scores"], where)
        bound = _taken(scores, ctx)
        kwargs["scores"] = partial(scores, **bound) if bound else scores
    if "derive" in d:   # a table computed from other records or files: derive(profile, train)
        derive = _function(config, d["derive"], where)
        bound = {k: v for k, v in _taken(derive, ctx).items() if k != "profile"}
        kwargs["derive"] = partial(derive, **bound) if bound else derive
    key = (_function(config, d["config"], where) if "config" in d
           else getattr(config, "config_for", None) if rows else None) or _no_runs
    bound = {k: v for k, v in _taken(key, ctx).items() if k not in ("profile", "table")}
    seeds = d.get("seeds", (0,))
    _refuse_repeated_seeds(where, seeds, rows)
    return Table(paper, name, rows, partial(key, **bound) if bound else key,
                 seeds=tuple(seeds) if isinstance(seeds, list) else seeds,
                 claims=_claims(paper, name, decl.get("claims"), env, where), **kwargs)


def build_tables(paper: str, config: ModuleType, declared: Mapping, profile: str = "quick",
                 names=None, context: Mapping | None = None) -> dict[str, Table]:
    """Every table ``declared["tables"]`` lists for ``profile`` (or those in ``names``), in declaration order."""
    out = {}
    for name, decl in (declared.get("tables") or {}).items():
        if names is not None and name not in names:
            continue
        if profile not in decl.get("profiles", [profile]):
            continue
        own = {**{k: v for k, v in decl.items() if k not in ("profiles", "by_profile")},
               **((decl.get("by_profile") or {}).get(profile) or {})}
        out[name] = build_table(paper, name, own, config, declared, profile, context)
    return out
