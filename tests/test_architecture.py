"""The layout's rules, read from the code with `ast` (docs/architecture.md,
"Rooms and rules").

* ctindex/reconciler/ and ctindex/backends/ know nothing of the rest of ctindex: they
  import only the standard library, third-party packages and their own room;
* nothing imports the bare names `reconciler` or `backends` (they are
  ctindex.reconciler and ctindex.backends: docs/decisions/packaging.md);
* every folder's path is its import path: each package folder has its
  `__init__.py` (pyproject.toml finds packages that way) and pyproject.toml
  maps no folder elsewhere;
* the read side (search, the store's reader, the query client) never imports
  the write side (the indexer, the store's writer);
* imports form no cycle, lazy ones (inside functions) included: a loop is a
  loop in the design even when it does not break at import time (names
  imported only for annotations, under `if TYPE_CHECKING:`, do not count);
* inside ctindex/, imports point down the layers of LAYERS (the order
  docs/architecture.md draws), lazy imports included; two rooms of one layer
  that must not know each other are in APART;
* every test file in a room names the module it tests
  (tests/<package path>/test_<module>[_<aspect>].py), and every module
  has such a test file or a reason in UNTESTED_BY_NAME.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "ctindex"  # the folder is the package: its path is the import path
INNER_ROOMS = ("ctindex.reconciler", "ctindex.backends")
WRITE_SIDE = (
    "ctindex.indexing.transaction",
    "ctindex.store.writer",
    "ctindex.store.gc",
    "ctindex.indexing.analyse",
    "ctindex.store.segment_build",
    "ctindex.store.invert",
)
READ_SIDE = (
    "ctindex.search",
    "ctindex.store.snapshot",
    "ctindex.store.segment",
    "ctindex.store.segment_read",
    "ctindex.fast_entry",
    "ctindex.daemon.query",
)

# Inside the package, top to bottom (docs/architecture.md, "Layers"): a module
# imports only its own layer or the ones below. The longest prefix decides, so
# `ctindex.daemon.__main__` (an entry point) sits above the rest of its room;
# the package itself (`ctindex`, whose names load lazily) is matched exactly.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("ctindex", "ctindex.__main__", "ctindex.fast_entry", "ctindex.cli", "ctindex.daemon.__main__"),
    ("ctindex.commands",),
    # `ctindex mcp` serves it; it answers through the API, in its own documents
    ("ctindex.mcp_server", "ctindex.mcp_documents"),
    ("ctindex.api",),
    ("ctindex.service",),
    ("ctindex.query", "ctindex.audit"),
    ("ctindex.client", "ctindex.daemon"),
    ("ctindex.indexing",),
    ("ctindex.search", "ctindex.store"),
    ("ctindex.ipc", "ctindex.policy", "ctindex.providers", "ctindex.schemas"),
    ("ctindex.base", "ctindex.errors"),
    INNER_ROOMS,
)
# Rooms of one layer that must not import each other, in either direction or
# only in the one given: the daemon is spawned by module name, never imported
# by its client; the store never reaches up into the search that reads it.
APART: tuple[tuple[str, str], ...] = (
    ("ctindex.client", "ctindex.daemon"),
    ("ctindex.daemon", "ctindex.client"),
    ("ctindex.store", "ctindex.search"),
)


def layer_of(module: str) -> int | None:
    """The index in LAYERS of `module`'s layer (0 is the top), by longest prefix."""
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for number, rooms in enumerate(LAYERS):
        for room in rooms:
            inside = module == room or (room != "ctindex" and module.startswith(room + "."))
            if inside and (best is None or len(room) > best[0]):
                best = (len(room), number)
    return None if best is None else best[1]


# `from ctindex import Index` loads ctindex.api (ctindex/__init__.py, _WHERE).
LAZY_NAMES: dict[str, str] = dict(importlib.import_module("ctindex")._WHERE)


def modules() -> dict[str, Path]:
    """Installed module name -> source file, for every module of the package."""
    found: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(REPO).with_suffix("")
        found[".".join(p for p in rel.parts if p != "__init__")] = path
    return found


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def imports(
    module: str, path: Path, *, top_level_only: bool, typing: bool = True
) -> Iterator[tuple[int, str]]:
    """(line, imported module) of every import; relative imports resolved.
    `top_level_only` skips imports inside functions and under `if
    TYPE_CHECKING:` (neither runs when the module is imported); `typing=False`
    skips only the latter."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    base = module.split(".") if is_package else module.split(".")[:-1]

    def walk(nodes: list[ast.stmt]) -> Iterator[ast.stmt]:
        for node in nodes:
            yield node
            if isinstance(node, ast.If):
                test = node.test
                typing_only = (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
                    isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
                )
                if not (typing_only and (top_level_only or not typing)):
                    yield from walk(node.body)
                yield from walk(node.orelse)
                continue
            if top_level_only and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue  # runs when called, not when the module is imported
            # Every other statement's blocks: with, for, while, try (and
            # try*), match cases, class bodies and, unless skipped above,
            # function bodies.
            for block in _blocks(node):
                yield from walk(block)

    for node in walk(tree.body):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - node.level + 1]
                target = ".".join([*anchor, node.module] if node.module else anchor)
            else:
                target = node.module or ""
            yield node.lineno, target
            for alias in node.names:  # `from ctindex.store import writer` imports a module
                yield node.lineno, f"{target}.{alias.name}"
                if target == "ctindex" and alias.name in LAZY_NAMES:
                    # the package's names load their module on first use
                    yield node.lineno, LAZY_NAMES[alias.name]


def _blocks(node: ast.stmt) -> Iterator[list[ast.stmt]]:
    for field in ("body", "orelse", "finalbody"):
        block = getattr(node, field, None)
        if isinstance(block, list):
            yield block
    for handler in getattr(node, "handlers", ()):
        yield handler.body
    for case in getattr(node, "cases", ()):
        yield case.body


def _known(name: str, mods: dict[str, Path]) -> str | None:
    """The longest module of ours that `name` is, or is inside."""
    while name:
        if name in mods:
            return name
        name = name.rpartition(".")[0]
    return None


def test_inner_rooms_import_nothing_of_ctindex() -> None:
    mods = modules()
    bad = []
    for module, path in mods.items():
        room = next((r for r in INNER_ROOMS if _within(module, (r,))), None)
        if room is None:
            continue
        for line, target in imports(module, path, top_level_only=False):
            if _within(target, ("ctindex",)) and not _within(target, (room,)):
                bad.append(f"{path.relative_to(REPO)}:{line} imports {target}")
    assert not bad, "\n".join(bad)


def test_no_bare_room_names() -> None:
    bad = []
    files = [*modules().values(), *sorted((REPO / "tests").rglob("*.py"))]
    files += sorted((REPO / "bench").rglob("*.py"))
    for path in files:
        for line, target in imports("x", path, top_level_only=False):
            if _within(target, ("reconciler", "backends")):
                bad.append(f"{path.relative_to(REPO)}:{line} imports {target}")
    assert not bad, "\n".join(bad)


def test_read_side_never_imports_write_side() -> None:
    mods = modules()
    bad = []
    for module, path in mods.items():
        if not _within(module, READ_SIDE):
            continue
        for line, target in imports(module, path, top_level_only=False):
            if _within(target, WRITE_SIDE):
                bad.append(f"{path.relative_to(REPO)}:{line} imports {target}")
    assert not bad, "\n".join(bad)


def test_imports_have_no_cycle() -> None:
    mods = modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for module, path in mods.items():
        for _line, target in imports(module, path, top_level_only=False, typing=False):
            known = _known(target, mods)
            if known and known != module and not _within(module, (known,)):
                graph[module].add(known)
            # importing a.b.c runs a/__init__ and a/b/__init__ first (the
            # root `ctindex` imports nothing eagerly: its names load lazily)
            parent = known.rpartition(".")[0] if known else ""
            while parent and parent in mods and parent not in (module, "ctindex"):
                if not _within(module, (parent,)):
                    graph[module].add(parent)
                parent = parent.rpartition(".")[0]
    cycles = _cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_room_tests_name_their_module() -> None:
    """tests/<package path>/test_<module>[_<aspect>].py: the tests of
    ctindex/reconciler/walk.py are in tests/ctindex/reconciler/test_walk*.py,
    those of ctindex/store/segment_read.py in
    tests/ctindex/store/test_segment_read*.py. Tests of whole-tool behaviour
    across rooms live in tests/e2e/."""
    bad = []
    for test in sorted((REPO / "tests" / "ctindex").rglob("test_*.py")):
        package = REPO / test.parent.relative_to(REPO / "tests")
        words = test.stem.removeprefix("test_").split("_")
        names = ["_".join(words[:n]) for n in range(len(words), 0, -1)]
        if not any(
            (package / f"{n}.py").is_file() or (package / n / "__init__.py").is_file()
            for n in names
        ):
            bad.append(f"{test.relative_to(REPO)}: no module {package.relative_to(REPO)}/…")
    assert not bad, "\n".join(bad)


def test_every_module_has_a_layer() -> None:
    unplaced = [m for m in modules() if layer_of(m) is None]
    assert not unplaced, f"modules in no layer of LAYERS: {unplaced}"


def _room(module: str) -> str:
    """The room of LAYERS or APART that `module` is in, by longest prefix."""
    rooms = [r for layer in LAYERS for r in layer] + [a for pair in APART for a in pair]
    return max((r for r in rooms if _within(module, (r,))), key=len, default=module)


def test_imports_point_down_the_layers() -> None:
    mods = modules()
    bad: dict[str, None] = {}  # ordered, once per line and target
    for module, path in mods.items():
        mine = layer_of(module)
        for line, target in imports(module, path, top_level_only=False, typing=False):
            known = _known(target, mods)
            if known is None or known == "ctindex" or mine is None:
                continue  # not ours, or the package root (its names load lazily)
            theirs = layer_of(known)
            where = f"{path.relative_to(REPO)}:{line} imports {known}"
            if theirs is not None and theirs < mine:
                bad[f"{where} (up: {LAYERS[theirs][0]} is above {LAYERS[mine][0]})"] = None
            elif (_room(module), _room(known)) in APART:
                bad[f"{where} (rooms kept apart)"] = None
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_layer_rule_sees_an_upward_import() -> None:
    assert layer_of("ctindex.store.writer") is not None
    assert layer_of("ctindex.cli") is not None
    assert layer_of("ctindex.cli") < layer_of("ctindex.store.writer")  # type: ignore[operator]
    assert layer_of("ctindex.daemon.__main__") == 0
    assert layer_of("ctindex.daemon.server") == layer_of("ctindex.client")


# Modules without a test file of their own name, each with where it is
# tested instead (or why it needs none). A module added without either
# fails test_every_module_has_tests_found_by_its_name.
UNTESTED_BY_NAME: dict[str, str] = {
    "ctindex/__main__.py": "`python -m ctindex`: every subprocess test in tests/e2e/ runs it",
    "ctindex/daemon/__main__.py": "the daemon process: tests/daemon_support.py starts it",
    "ctindex/audit/verify.py": "driven by `verify`: tests/ctindex/commands/test_verify*.py",
    "ctindex/base/jsontypes.py": "type aliases only, checked by mypy",
    "ctindex/base/native_modules.py": "loading the C twins: tests/ctindex/*/test_*_native.py,"
    " run with and without CTINDEX_PURE",
    "ctindex/client/control.py": "status/stop of a live daemon: tests/ctindex/daemon/test_server.py"
    " and test_status.py",
    "ctindex/client/daemon_requests.py": "requests to a live daemon:"
    " tests/ctindex/daemon/test_server.py, test_lifecycle_triggers.py; the exchange itself:"
    " tests/ctindex/ipc/test_protocol.py",
    "ctindex/commands/init.py": "tests/e2e/test_first_run.py and tests/ctindex/test_schemas.py",
    "ctindex/commands/rebuild.py": "tests/e2e/test_differential.py, test_full_stdout.py and the"
    " acceptance tests",
    "ctindex/commands/show.py": "tests/ctindex/test_api.py (Index.get) and"
    " tests/e2e/test_unrepresentable_input.py",
    "ctindex/daemon/filewatch.py": "tests/ctindex/daemon/test_reconcile.py, test_watching.py and"
    " tests/e2e/test_fresh_links_mounts.py",
    "ctindex/daemon/layers.py": "tests/ctindex/daemon/test_reconcile.py and"
    " tests/e2e/test_fresh_links_mounts.py",
    "ctindex/daemon/links.py": "tests/ctindex/daemon/test_reconcile.py and"
    " tests/e2e/test_fresh_links_mounts.py",
    "ctindex/ipc/build_id.py": "tests/e2e/test_daemon_build_mismatch.py",
    "ctindex/policy/decide.py": "tests/ctindex/policy/test_plan.py (Plan.decide) and"
    " tests/ctindex/commands/test_why*.py",
    "ctindex/providers/fields.py": "the term layout: tests/ctindex/search/test_query_fields.py and"
    " tests/ctindex/indexing/test_analyse.py",
    "ctindex/search/index_partition.py": "tests/ctindex/search/test_matcher_cost.py",
    "ctindex/search/native_rank.py": "the C twin's loader: tests/ctindex/search/"
    "test_matcher_native.py",
    "ctindex/store/invert.py": "the pure inverter, compared with its C twin:"
    " tests/ctindex/store/test_segment_build_native.py",
    "ctindex/store/native_invert.py": "tests/ctindex/store/test_segment_build_native.py",
    "ctindex/store/snapshot.py": "the reader under every search: tests/ctindex/search/ and"
    " tests/e2e/test_robust_storage.py",
    "ctindex/reconciler/platform_features.py": "the simulated-platform stages of .ci/run"
    " (CTINDEX_SIMULATE) and tests/ctindex/reconciler/test_path_folders.py",
    "ctindex/backends/base.py": "the Batch/Watcher interface:"
    " tests/ctindex/backends/test_inotify.py, test_poll.py",
    "ctindex/backends/choose.py": "tests/ctindex/backends/test_poll.py and test_volumes.py",
    "ctindex/backends/inotify_c.py": "the raw binding: tests/ctindex/backends/test_inotify.py",
    "ctindex/backends/platform_features.py": "tests/ctindex/backends/test_mounts_no_table.py"
    " and the simulated stages of .ci/run",
}


def test_every_module_has_tests_found_by_its_name() -> None:
    untested = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__init__.py":
            continue
        tests = REPO / "tests" / path.parent.relative_to(REPO)
        named = [*tests.glob(f"test_{path.stem}.py"), *tests.glob(f"test_{path.stem}_*.py")]
        key = path.relative_to(REPO).as_posix()
        if not named and key not in UNTESTED_BY_NAME:
            untested.append(key)
    assert not untested, f"no tests/…/test_<module>*.py and no UNTESTED_BY_NAME entry: {untested}"


def test_every_exception_names_a_module_that_exists() -> None:
    assert [k for k in UNTESTED_BY_NAME if not (REPO / k).is_file()] == []


def test_every_folder_is_its_package() -> None:
    """The checkout is the installed package: pyproject.toml finds packages by
    their `__init__.py` and maps no folder elsewhere, so a folder of modules
    without one would install nowhere, and a mapping would part the import
    path from the folder again (docs/decisions/packaging.md)."""
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    setuptools = config["tool"]["setuptools"]
    assert setuptools["package-dir"] == {"": "."}  # the root is the root, nothing mapped
    assert setuptools["packages"]["find"]["include"] == ["ctindex*"]
    folders = {p.parent for p in PACKAGE.rglob("*.py")}
    assert sorted(f for f in folders if not (f / "__init__.py").is_file()) == []


def test_imports_sees_lazy_package_names_and_every_block(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text(
        "def f():\n"
        "    while True:\n"
        "        from ctindex import Index\n"
        "    match 1:\n"
        "        case 1:\n"
        "            import ctindex.cli\n"
    )
    found = {t for _line, t in imports("ctindex.store.probe", source, top_level_only=False)}
    assert {"ctindex.api", "ctindex.cli"} <= found


def test_the_layer_list_in_the_docs_is_the_one_enforced() -> None:
    """docs/architecture.md draws the layers this test enforces, whole and
    in order: one group of lines per layer, each line's first word a room."""
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    start = text.index("The list, top to bottom")
    opened = text.index("```\n", start) + 4
    block = text[opened : text.index("\n```", opened)]
    drawn: list[set[str]] = [set()]
    for line in block.splitlines():
        if not line.strip():
            if drawn[-1]:
                drawn.append(set())
            continue
        if not line.startswith("ctindex/"):
            continue  # a description's continuation
        path = line.split()[0].removesuffix("/").removesuffix(".py")
        drawn[-1].add(path.removesuffix("/__init__").replace("/", "."))
    drawn = [group for group in drawn if group]
    assert drawn == [set(layer) for layer in LAYERS]
