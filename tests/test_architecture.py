"""The architecture stays visible: umlkit.data -> models -> losses -> train -> metrics -> experiments, and a lower
layer never imports a higher one (docstrings may name them; imports, at module level or inside a function, may
not). The shared root modules (``umlkit._paths``, ``_hub``, ``results``, ...) are below every layer."""
import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "umlkit"
LAYERS = ["data", "models", "losses", "train", "metrics", "experiments"]
# imports the layer rule allows across it, each with its reason
ALLOWED: dict[tuple[str, str], str] = {
    ("train", "metrics"): "the engine evaluates every N epochs with the one retrieval engine (metrics imports no "
                          "train, losses or models code: test_metrics_stands_on_data_alone)",
}


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return {m for m in out if m.startswith("umlkit.")}


def _layer(module: str) -> str | None:
    part = module.split(".")[1]
    return part if part in LAYERS else None


@pytest.mark.parametrize("layer", LAYERS[:-1])
def test_a_layer_never_imports_a_higher_one(layer):
    higher = set(LAYERS[LAYERS.index(layer) + 1:])
    bad = []
    for path in sorted((SRC / layer).rglob("*.py")):
        for module in _imports(path):
            up = _layer(module)
            if up in higher and (layer, up) not in ALLOWED:
                bad.append(f"{path.relative_to(SRC)} imports {module}")
    assert not bad, "\n".join(sorted(set(bad)))


def test_the_root_modules_import_no_layer():
    """Root helpers (paths, hub probe, results I/O, registries, progress) sit below every layer; the entry points
    (cli and its cluster side, reproduce, the book tools, the package's own __init__) are above them all and
    excluded."""
    entry = {"cli.py", "cli_cluster.py", "reproduce.py", "_book.py", "__init__.py"}
    bad = [f"{p.name} imports {m}" for p in SRC.glob("*.py") if p.name not in entry for m in _imports(p)
           if _layer(m)]
    assert not bad, bad


def test_metrics_stands_on_data_alone():
    """The retrieval engine the training loop evaluates with imports nothing of models, losses or train."""
    bad = [f"{p.relative_to(SRC)} imports {m}" for p in sorted((SRC / "metrics").rglob("*.py"))
           for m in _imports(p) if _layer(m) in {"models", "losses", "train"}]
    assert not bad, bad


PAPERS = SRC / "experiments" / "papers"
PAPER_FILES = {"__init__.py", "config.py", "chapter.py", "tables.yaml"}


def _paper_packages() -> list[Path]:
    return sorted(p for p in PAPERS.iterdir() if p.is_dir() and not p.name.startswith("_"))


# the packages that hold a module beyond the fixed shape, and why (the regime map's second and third editions are
# further tables of the book's own experiment, sharing the first edition's helpers; language guidance's
# language files are its alone; ooDML's split making is its own protocol, the splits it writes are shared)
EXTRA_MODULES = {"regime": {"edition2.py", "edition3.py", "edition3_views.py"},
                 "oodml": {"split_making.py"},
                 "language_guidance": {"language_store.py", "ceiling_probe.py", "wordnet_names.py"}}


def test_every_paper_is_a_package_of_the_fixed_shape():
    """``experiments/papers/<paper>/`` holds exactly tables.yaml, config.py, chapter.py and the registering
    __init__.py (plus the listed exceptions, each imported by its __init__); the registry discovers every package
    and each registers itself."""
    from umlkit.experiments.tables.registry import papers
    found = {p.name: {f.name for f in p.iterdir() if not f.name.startswith((".", "__pycache__"))}
             for p in _paper_packages()}
    assert found and all(files == PAPER_FILES | EXTRA_MODULES.get(name, set()) for name, files in found.items()), found
    for name, extra in EXTRA_MODULES.items():
        init = _imports(PAPERS / name / "__init__.py")
        assert all(any(m.endswith(f"{name}.{x.removesuffix('.py')}") or m == f"umlkit.experiments.papers.{name}"
                       for m in init) for x in extra), init
    assert set(papers()) >= set(found)   # every package found is registered under its folder's name
    for p in _paper_packages():   # each package registers itself: register_paper(...) in its __init__
        assert "register_paper(Paper(" in (p / "__init__.py").read_text(), p.name


def _module_graph() -> dict[str, set[str]]:
    """Every module of src/umlkit -> the modules of src/umlkit it imports (at module level or in a function): an
    import of a package's name resolves to its __init__, ``from pkg import sub`` to the submodule."""
    def name(p: Path) -> str:
        parts = list(p.relative_to(SRC.parent).with_suffix("").parts)
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    mods = {name(p): p for p in SRC.rglob("*.py")}

    def resolve(n: str) -> str | None:
        while n and n not in mods:
            n = n.rpartition(".")[0]
        return n or None
    graph = {}
    for m, p in mods.items():
        out = set()
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Import):
                out |= {resolve(a.name) for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                out |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods else resolve(node.module)
                        for a in node.names}
        graph[m] = {t for t in out if t and t != m}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while not comp or comp[-1] != v:
                comp.append(stack.pop())
                on.discard(comp[-1])
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_in_src():
    """No module of umlkit reaches itself through imports, lazy ones included (a lazy import that closes a circle
    hides a layering mistake: the registry once reached every paper from the tables service this way)."""
    assert _cycles(_module_graph()) == []


def test_the_cycle_check_sees_a_lazy_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_shared_module_imports_a_paper():
    """The shared layer (every module outside experiments/papers/, the CLI and the book tools above it excepted)
    never imports a paper package, lazily or not: papers register themselves and the registry discovers them."""
    above = {"umlkit.cli", "umlkit.reproduce", "umlkit._book"}
    bad = [f"{m} imports {t}" for m, targets in _module_graph().items()
           if not m.startswith("umlkit.experiments.papers") and m not in above
           for t in targets
           if t.startswith("umlkit.experiments.papers.") and t != "umlkit.experiments.papers._namespace"]
    assert not bad, bad


def test_no_paper_imports_another():
    """What two papers share (class splits, recipes, the language store) lives in umlkit.experiments; a paper
    package imports only itself and the shared services."""
    bad = []
    for pkg in _paper_packages():
        for path in sorted(pkg.glob("*.py")):
            for module in _imports(path):
                parts = module.split(".")
                if (parts[:3] == ["umlkit", "experiments", "papers"] and len(parts) > 3
                        and parts[3] not in (pkg.name, "_namespace")):
                    bad.append(f"{path.relative_to(SRC)} imports {module}")
    assert not bad, "\n".join(sorted(set(bad)))


def test_only_a_packages_namespace_reaches_its_chapter_module():
    """chapter.py is the chapter's: no library module imports one (the package namespace loads it on first use)."""
    bad = [f"{p.relative_to(SRC)} imports {m}" for p in sorted(SRC.rglob("*.py")) if p.parent.parent != PAPERS
           for m in _imports(p) if m.endswith(".chapter") and ".papers." in m]
    bad += [f"{p.relative_to(SRC)} imports {m}" for pkg in _paper_packages() for p in [pkg / "config.py"]
            for m in _imports(p) if m.endswith(".chapter")]
    assert not bad, bad


READS = {"open", "read_text", "read_bytes", "load", "loads", "safe_load", "read_csv", "read_json", "load_json"}


def _config_calls(path: Path) -> list[str]:
    """Names of the calls in a config.py that build a table or a claim, or read a file."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in {"Claim", "Table"} | READS:
                out.append(f"{path.name}:{node.lineno} {name}(")
    return out


def test_a_papers_config_builds_no_table_or_claim_and_reads_no_file():
    """Tables and claims are declared in tables.yaml and built by umlkit.experiments.tables.builder; files are read by
    the shared services (paper_configs, splits, results). config.py keeps the genuine logic: row builders, record
    keys, scores."""
    bad = [c for pkg in _paper_packages() for c in _config_calls(pkg / "config.py")]
    assert not bad, bad


def test_the_config_check_sees_a_table_a_claim_and_a_read(tmp_path):
    f = tmp_path / "config.py"
    f.write_text("x = Table(1)\ny = Claim('a')\nz = json.loads(p.read_text())\n")
    assert sorted(c.split(" ")[1] for c in _config_calls(f)) == ["Claim(", "Table(", "loads(", "read_text("]


def test_no_private_name_is_imported_across_modules():
    """A name another module needs is public (no ``from umlkit.x import _name`` in src/)."""
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("umlkit"):
                bad += [f"{path.relative_to(SRC)}: {node.module}.{a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    assert not bad, bad


def test_a_long_module_says_why_at_its_top():
    """No file in src/ over 600 lines without a one-line reason ("# size: ...") as its first line."""
    bad = [f"{p.relative_to(SRC)} ({n} lines)" for p in sorted(SRC.rglob("*.py"))
           if (n := len(p.read_text().splitlines())) > 600 and not p.read_text().startswith("# size: ")]
    assert not bad, bad


def test_a_papers_config_and_chapter_define_no_name_twice():
    """A package's namespace gives config.py's name first: a chapter.py function of the same name would be hidden
    (and a chapter calling it would get the config's)."""
    def names(path: Path) -> set[str]:
        return {n.name for n in ast.parse(path.read_text()).body
                if isinstance(n, (ast.FunctionDef, ast.ClassDef))} | {
            t.id for n in ast.parse(path.read_text()).body if isinstance(n, ast.Assign)
            for t in n.targets if isinstance(t, ast.Name)}
    clash = {pkg.name: sorted(names(pkg / "config.py") & names(pkg / "chapter.py") - {"__all__"})
             for pkg in _paper_packages()}
    assert not any(clash.values()), clash


def test_no_function_is_longer_than_80_lines():
    """The guide's rule: a function of src/ fits in 80 lines (decorators excluded, docstring included)."""
    bad = [f"{p.relative_to(SRC)}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)"
           for p in sorted(SRC.rglob("*.py")) for n in ast.walk(ast.parse(p.read_text()))
           if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > 80]
    assert not bad, bad


EXPERIMENTS = SRC / "experiments"
ROOMS = sorted(p.name for p in EXPERIMENTS.iterdir() if (p / "__init__.py").is_file() and p.name != "papers")


def _may_import(room: str) -> tuple[str, ...]:
    """The ``MAY_IMPORT`` tuple a room's ``__init__.py`` declares (read from its source, not imported)."""
    for node in ast.parse((EXPERIMENTS / room / "__init__.py").read_text()).body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
            if getattr(target, "id", "") == "MAY_IMPORT":
                return tuple(ast.literal_eval(node.value))
    raise AssertionError(f"experiments/{room}/__init__.py declares no MAY_IMPORT")


def test_experiments_holds_rooms_and_papers_only():
    """No shared module lies loose in experiments/: each sits in a named room (a package that says what it may
    import), beside papers/."""
    loose = sorted(p.name for p in EXPERIMENTS.glob("*.py") if p.name != "__init__.py")
    assert not loose, loose
    assert {"splits", "runs", "recipes", "claims", "tables", "views", "ops", "pages"} <= set(ROOMS), ROOMS


@pytest.mark.parametrize("room", ROOMS)
def test_a_room_imports_only_the_rooms_it_declares(room):
    """Every import of a room's modules (module level or inside a function) into another room is one its
    ``MAY_IMPORT`` names; no room imports a paper (papers register themselves)."""
    allowed = set(_may_import(room)) | {room}
    assert set(_may_import(room)) <= set(ROOMS), _may_import(room)
    bad = []
    for path in sorted((EXPERIMENTS / room).rglob("*.py")):
        for module in _imports(path):
            parts = module.split(".")
            if parts[:2] == ["umlkit", "experiments"] and len(parts) > 2 and parts[2] not in allowed:
                bad.append(f"{path.relative_to(SRC)} imports {module}")
    assert not bad, "\n".join(sorted(set(bad)))


def test_the_room_rules_form_floors():
    """The declared rules have no circle, so the rooms stack in floors (splits at the bottom) and a new function
    goes to the lowest room whose imports it needs."""
    assert _cycles({r: set(_may_import(r)) for r in ROOMS}) == []
    assert _may_import("splits") == ()


def test_the_room_check_sees_a_forbidden_import(tmp_path):
    """The room rule reads imports as test_a_room_imports_only_the_rooms_it_declares does: a lazy import of views
    from claims would be caught."""
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from umlkit.experiments.views.prose import fmt\n")
    assert "umlkit.experiments.views.prose" in _imports(f)
    assert "views" not in _may_import("claims")
