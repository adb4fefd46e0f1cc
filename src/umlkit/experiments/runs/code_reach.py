"""Which of the library's loss code a run reaches, so that a new or changed loss stales only the records that use it.

The code part of a record's fingerprint (:mod:`umlkit.experiments.runs.fingerprint`) hashes the *shared* training path
once: every file of ``data``, ``models``, ``metrics``, ``train`` and ``experiments/runs/runners.py``, the loss registry
and checks (``losses/_registry.py``, ``losses/_checks.py``), the statements of ``losses/__init__.py`` that register
no loss, and every loss module the shared files import. Then, for each loss the run reaches, it adds that loss's
registration statement and the loss modules it names (through the helpers of ``losses/__init__.py`` it calls, and
through their own imports). A loss is reached when

* its name is a term of the run's objective, or a string among a reached term's options or in a reached loss's
  registration (a wrapper's ``base``: DiVA's default Margin), or
* shared code calls ``create_loss`` with its name (few-shot adaptation's Margin).

So adding a loss in a module of its own, with its import and registration in ``losses/__init__.py`` (and its name in
``__all__``), leaves every existing record's fingerprint as it was, and a change in one loss module stales exactly
the records whose runs reach it (issue 41). Static analysis with :mod:`ast`, written by hand: no library maps a
registry's names to the files behind them.
"""
from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["LossCode", "loss_code", "reached_losses"]

SHARED_LOSS_FILES = ("losses/_registry.py", "losses/_checks.py")


@dataclass
class LossCode:
    """``losses/__init__.py`` taken apart: per loss name its registration text, strings and loss modules; the rest."""
    common: list[str] = field(default_factory=list)          # statements that register nothing (source text)
    registration: dict[str, list[str]] = field(default_factory=dict)
    modules: dict[str, set[str]] = field(default_factory=dict)   # loss -> loss module files it reaches
    strings: dict[str, set[str]] = field(default_factory=dict)   # loss -> string constants of its registration
    shared_modules: set[str] = field(default_factory=set)       # loss modules the shared files import
    shared_losses: set[str] = field(default_factory=set)        # create_loss("name") in shared files


def _statement_text(lines: list[str], node: ast.stmt) -> str:
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return "\n".join(lines[first - 1:node.end_lineno])


def _registered_name(node: ast.stmt) -> str | None:
    """The loss a top-level statement registers: ``@register_loss("x", ...)`` or ``register_loss("x", ...)``."""
    calls = [d for d in getattr(node, "decorator_list", []) if isinstance(d, ast.Call)]
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        calls.append(node.value)
    for call in calls:
        if isinstance(call.func, ast.Name) and call.func.id == "register_loss" and call.args and \
                isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
            return call.args[0].value
    return None


def _loss_imports(tree: ast.Module) -> dict[str, str]:
    """``from umlkit.losses.x import A`` (or ``from .x``): {"A": "losses/x.py"}."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and (
                node.module.startswith("umlkit.losses.") or (node.level == 1 and "." not in node.module)):
            path = f"losses/{node.module.rsplit('.', 1)[-1]}.py"
            out.update({a.asname or a.name: path for a in node.names})
    return out


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _strings(node: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def _module_closure(pkg: Path, start: set[str]) -> set[str]:
    """Loss module files and the loss modules they import, transitively."""
    seen, todo = set(), list(start)
    while todo:
        path = todo.pop()
        if path in seen or not (pkg / path).is_file():
            continue
        seen.add(path)
        todo += _loss_imports(ast.parse((pkg / path).read_text())).values()
    return seen


@functools.lru_cache(maxsize=4)
def loss_code(pkg: Path, shared_files: tuple[str, ...]) -> LossCode:
    """``losses/__init__.py`` of package ``pkg`` taken apart, and what the ``shared_files`` reach of the losses."""
    source = (pkg / "losses" / "__init__.py").read_text()
    tree, lines = ast.parse(source), source.splitlines()
    imports = _loss_imports(tree)
    helpers = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and _registered_name(n) is None}
    out = LossCode()
    for node in tree.body:
        name = _registered_name(node)
        if name is None:
            exported = isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                                             for t in node.targets)
            if not (exported or (isinstance(node, ast.ImportFrom) and node.module in
                                 {f"umlkit.losses.{Path(p).stem}" for p in imports.values()})):
                out.common.append(_statement_text(lines, node))
            continue
        out.registration.setdefault(name, []).append(_statement_text(lines, node))
        refs, seen = _names(node), set()
        while refs - seen:                          # through the helpers it calls (``_margin_loss``, ``_wrapper``)
            ref = (refs - seen).pop()
            seen.add(ref)
            if ref in helpers:
                refs |= _names(helpers[ref])
        out.modules.setdefault(name, set()).update(imports[r] for r in seen if r in imports)
        out.strings.setdefault(name, set()).update(_strings(node))
    for name in out.modules:
        out.modules[name] = _module_closure(pkg, out.modules[name])
    for rel in shared_files:
        shared = ast.parse((pkg / rel).read_text())
        out.shared_modules |= set(_loss_imports(shared).values())
        out.shared_modules |= {imports[a.name] for n in ast.walk(shared) if isinstance(n, ast.ImportFrom)
                               and n.module == "umlkit.losses" for a in n.names if a.name in imports}
        out.shared_losses |= {c.args[0].value for c in ast.walk(shared) if isinstance(c, ast.Call)
                              and isinstance(c.func, ast.Name) and c.func.id == "create_loss" and c.args
                              and isinstance(c.args[0], ast.Constant) and isinstance(c.args[0].value, str)}
    out.shared_modules = _module_closure(pkg, out.shared_modules)
    return out


def _option_strings(value) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*map(_option_strings, value.values())) if value else set()
    if isinstance(value, (list, tuple)):
        return set().union(*map(_option_strings, value)) if value else set()
    return set()


def reached_losses(objectives: list[list[dict]], code: LossCode) -> list[str]:
    """The registered losses the runs with these objectives reach (sorted), shared code's own calls included."""
    start = set(code.shared_losses)
    for objective in objectives:
        for term in objective or []:
            start |= {term.get("name")} | _option_strings(term.get("options"))
    reached, todo = set(), [n for n in start if n in code.registration]
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo += [s for s in code.strings[name] if s in code.registration]
    return sorted(reached)
