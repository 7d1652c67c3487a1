"""The rooms of ``waggle/`` import one way: no module reaches, however indirectly, back to itself.

Every import counts, including those under ``if TYPE_CHECKING:`` and inside functions: a loop of names is a loop
of concepts even when Python never runs it. Generated code (``waggle/hms/gen/``) is left out. Beyond circles,
the packages stand on floors (:data:`FLOORS`): a package (a folder under ``waggle/``, or a module directly in it)
imports only packages on the floors below its own, so no two packages import each other. :data:`ONE_WAY` names
rooms within a package's stack that sit below others and may not import them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "waggle"


def _modules(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package outside generated code."""
    mods: dict[str, Path] = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent)
        if "gen" in rel.parts[:-1]:
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


def _imported(module: str, path: Path, mods: dict[str, Path]) -> Iterator[tuple[str, str]]:
    """(module of the package, name taken from it) for every import statement anywhere in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [(alias.name, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")
                if path.name != "__init__.py":
                    parts = parts[:-1]
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, base] if base else parts)
            targets = []
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                targets.append((sub if sub in mods else base, alias.name))
        else:
            continue
        for target, name in targets:
            while target and target not in mods:
                target = target.rpartition(".")[0]
            if target and target != module:
                yield target, name


def import_graph(package: Path = PACKAGE) -> dict[str, dict[str, set[str]]]:
    """module -> {module it imports -> names it takes from it}, within the package."""
    mods = _modules(package)
    graph: dict[str, dict[str, set[str]]] = {m: {} for m in mods}
    for module, path in mods.items():
        for target, name in _imported(module, path, mods):
            graph[module].setdefault(target, set()).add(name)
    return graph


def circles(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    work: list[tuple[str, Iterator[str]]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        work.append((v, iter(sorted(graph[v]))))

    for start in graph:
        if start in index:
            continue
        visit(start)
        while work:
            v, successors = work[-1]
            for w in successors:
                if w not in index:
                    visit(w)
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def _describe(graph: dict[str, dict[str, set[str]]], found: list[list[str]]) -> str:
    lines = [f"{len(found)} import circle(s) in waggle/:"]
    for component in found:
        lines.append("- " + ", ".join(component))
        members = set(component)
        for a in component:
            for b in sorted(members & graph[a].keys()):
                lines.append(f"    {a} -> {b}: {', '.join(sorted(graph[a][b]))}")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def graph() -> dict[str, dict[str, set[str]]]:
    return import_graph()


def test_no_import_circle_in_waggle(graph: dict[str, dict[str, set[str]]]) -> None:
    assert len(graph) > 50, "the package was not found"
    found = circles(graph)
    assert not found, _describe(graph, found)


#: (lower, upper): no module of the lower room imports one of the upper room, TYPE_CHECKING included. A room is
#: a module or a package (its modules too). With no circles, this keeps each stack in order.
#: what assembles and runs the rooms: the runtime and its collaborators (the routes snapshot and what keeps it
#: current, the metastores' side, serving and stopping, the loops), reload, the HTTP side, the process
TOP = ("waggle.runtime", "waggle.routes", "waggle.metastores", "waggle.lifecycle", "waggle.loops", "waggle.reload",
       "waggle.endpoint", "waggle.app")

ONE_WAY = [
    # the ground floor uses no room above it (configuration values aside)
    *[("waggle.common", upper)
      for upper in ("waggle.hms", "waggle.routing", "waggle.remotes", "waggle.call", "waggle.upstream",
                    "waggle.server", "waggle.workers", "waggle.security", "waggle.tunnel", "waggle.sync",
                    *TOP)],
    # hms/ (the method table, names, the wire codec) is what every room reads calls with: it knows none of them
    *[("waggle.hms", upper)
      for upper in ("waggle.routing", "waggle.remotes", "waggle.call", "waggle.upstream", "waggle.server",
                    "waggle.workers", "waggle.security", "waggle.sync", *TOP)],
    # the connections to metastores know nothing of who serves the clients
    *[("waggle.upstream", upper)
      for upper in ("waggle.server", "waggle.workers", "waggle.remotes", "waggle.sync", *TOP)],
    # the tunnel helper runs in a process of its own, with none of the proxy's rooms
    *[("waggle.tunnel", upper)
      for upper in ("waggle.upstream", "waggle.server", "waggle.workers", *TOP)],
    # the server runs alone or as one of several workers: the workers build on the server, not the other way
    ("waggle.server", "waggle.workers"),
    # upstream/ is a stack: what a metastore has, reaching it and proving who we are (the handshake, callers'
    # tokens) sit below the pool, as does the tools' blocking client; compatibility (bridges, probes), fan-out,
    # health and the primary's token store sit above it
    *[(lower, upper)
      for lower in ("waggle.upstream.capabilities", "waggle.upstream.client", "waggle.upstream.deadlines",
                    "waggle.upstream.tunnel", "waggle.upstream.handshake", "waggle.upstream.impersonation",
                    "waggle.upstream.blocking")
      for upper in ("waggle.upstream.pool", "waggle.upstream.compat", "waggle.upstream.fanout",
                    "waggle.upstream.health", "waggle.upstream.token_store")],
    *[("waggle.upstream.pool", upper)
      for upper in ("waggle.upstream.compat", "waggle.upstream.fanout", "waggle.upstream.health")],
    # a tunnel's description is plain data that the proxy process imports: it never loads paramiko's modules
    ("waggle.tunnel.spec", "waggle.tunnel.forward"),
    ("waggle.tunnel.spec", "waggle.tunnel.keys"),
]


def _in(module: str, room: str) -> bool:
    return module == room or module.startswith(room + ".")


def test_the_driver_is_narrow_and_knows_nothing_of_copies(graph: dict[str, dict[str, set[str]]]) -> None:
    driver = graph["waggle.server.driver"]
    assert len(driver) <= 13, sorted(driver)  # the codec counts twice: hms.wire and hms.headers
    assert not [m for m in driver if _in(m, "waggle.copies")]


def test_the_call_core_asks_copies_one_question(graph: dict[str, dict[str, set[str]]]) -> None:
    """The plan asks copies/planning once; the finish reads a copy's reply through the plan (its Served); no other
    module of the call core imports copies/ (a lane or a merge asks the routes' ``Copies`` value itself)."""
    others = {name: [m for m in imports if _in(m, "waggle.copies")] for name, imports in graph.items()
              if _in(name, "waggle.call") and name not in ("waggle.call.plan", "waggle.call.values")}
    assert not {name: found for name, found in others.items() if found}
    asked = {m: names for m, names in graph["waggle.call.plan"].items() if _in(m, "waggle.copies")}
    assert asked == {"waggle.copies.planning": {"planning"}, "waggle.copies.serve": {"Served"}}


@pytest.mark.parametrize(("lower", "upper"), ONE_WAY, ids=[f"{lo}-{up}" for lo, up in ONE_WAY])
def test_lower_room_does_not_import_upper(graph: dict[str, dict[str, set[str]]], lower: str, upper: str) -> None:
    assert any(_in(m, lower) for m in graph), f"{lower} is not in waggle/"
    assert any(_in(m, upper) for m in graph), f"{upper} is not in waggle/"
    wrong = sorted(f"{m} -> {target}: {', '.join(sorted(names))}" for m, targets in graph.items() if _in(m, lower)
                   for target, names in targets.items() if _in(target, upper))
    assert not wrong, "\n".join(wrong)


#: The floors of ``waggle/``, lowest first. A package imports only packages on floors below its own: never one on
#: its own floor (they know nothing of each other) nor above. Every package stands on exactly one floor.
FLOORS: list[tuple[str, ...]] = [
    # validated configuration values
    ("config",),
    # the ground floor (logging, metrics, limiter); the method table, names and wire codec; the tunnel helper's
    # process; serving and stopping as states
    ("common", "hms", "tunnel", "lifecycle"),
    # the front door and waggle's own credentials; database maps, access, links as values; what the sync leaves in
    # a metastore for the proxy to read; the background loops
    ("security", "routing", "synced", "loops"),
    # connections to metastores; the checks of files a configuration names
    ("upstream", "checks", "grants"),
    # remote databases (registry, planning); copies (catalog, planning); the metastores' side of the runtime;
    # the sync, a program of its own; the replies remembered and the readers of the logs that keep them true; the
    # federation's merged notification log
    ("remotes", "copies", "metastores", "sync", "cache", "events"),
    # the routes snapshot every call reads, and the services that keep it current
    ("routes",),
    # the call core: pure, planned from a snapshot
    ("call",),
    # the Thrift server and the per-connection driver, over a context of what is running
    ("server",),
    # the Iceberg REST door: HTTP requests made into the same calls, through the driver
    ("rest",),
    # what is running, assembled; then reload, the HTTP side, the workers, the process
    ("runtime",),
    ("reload",),
    ("endpoint",),
    ("workers",),
    ("app",),
    # local metastores for the demo and tests; the command line; the docs pages and ``python -m waggle``
    ("local",),
    ("cli",),
    ("__main__", "docs"),
]


def package_of(module: str) -> str | None:
    """The package a module of ``waggle/`` belongs to: its first name under ``waggle`` (a top-level module is a
    package of its own); None for ``waggle/__init__.py``, the building rather than a floor."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def package_graph(graph: dict[str, dict[str, set[str]]], files: dict[str, Path] | None = None
                  ) -> dict[str, dict[str, list[str]]]:
    """package -> {package it imports -> the imports that do it (``file -> module: names``; the importing
    module's name stands for its file when ``files`` does not have it)}."""
    files = files or {}
    packages: dict[str, dict[str, list[str]]] = {}
    for module, targets in graph.items():
        mine = package_of(module)
        if mine is None:
            continue
        edges = packages.setdefault(mine, {})
        for target, names in targets.items():
            theirs = package_of(target)
            if theirs is not None and theirs != mine:
                where = files[module].relative_to(ROOT) if module in files else module
                edges.setdefault(theirs, []).append(f"{where} -> {target}: {', '.join(sorted(names))}")
    return packages


def _floor_of() -> dict[str, int]:
    return {package: level for level, floor in enumerate(FLOORS) for package in floor}


def test_every_package_stands_on_one_floor(graph: dict[str, dict[str, set[str]]]) -> None:
    listed = [package for floor in FLOORS for package in floor]
    assert len(listed) == len(set(listed)), "a package is on two floors"
    packages = set(package_graph(graph))
    assert not packages - set(listed), f"packages on no floor: {sorted(packages - set(listed))}"
    assert not set(listed) - packages, f"floors name packages waggle/ does not have: {sorted(set(listed) - packages)}"


def test_no_two_packages_import_each_other(graph: dict[str, dict[str, set[str]]]) -> None:
    packages = package_graph(graph, _modules(PACKAGE))
    pairs = sorted({(a, b) for a in packages for b in packages[a] if a < b and a in packages.get(b, {})})
    lines = [f"{len(pairs)} pair(s) of packages import each other:"]
    for a, b in pairs:
        lines += [f"- {a} <-> {b}", *(f"    {edge}" for edge in sorted(packages[a][b] + packages[b][a]))]
    assert not pairs, "\n".join(lines)


def test_each_package_imports_only_the_floors_below(graph: dict[str, dict[str, set[str]]]) -> None:
    floor = _floor_of()
    packages = package_graph(graph, _modules(PACKAGE))
    wrong = sorted(f"{a} (floor {floor[a]}) imports {b} (floor {floor[b]}): {edge}"
                   for a, targets in packages.items() if a in floor
                   for b, edges in targets.items() if b in floor and floor[b] >= floor[a]
                   for edge in edges)
    assert not wrong, "\n".join(wrong)


def test_packages_are_found() -> None:
    graph: dict[str, dict[str, set[str]]] = {
        "waggle": {},
        "waggle.a": {"waggle.b.x": {"X"}},
        "waggle.b": {},
        "waggle.b.x": {"waggle.b": {"b"}, "waggle.c.y": {"Y"}},
        "waggle.c.y": {"waggle.a": {"a"}, "waggle": {"waggle.c.gen"}},
    }
    assert package_graph(graph) == {"a": {"b": ["waggle.a -> waggle.b.x: X"]},
                                     "b": {"c": ["waggle.b.x -> waggle.c.y: Y"]},
                                     "c": {"a": ["waggle.c.y -> waggle.a: a"]}}


def test_circles_are_found() -> None:
    graph: dict[str, dict[str, set[str]]] = {
        "a": {"b": {"x"}},
        "b": {"c": {"y"}},
        "c": {"a": {"z"}, "d": {"w"}},
        "d": {},
        "e": {"e2": {"v"}},
        "e2": {"e": {"u"}},
    }
    assert circles(graph) == [["a", "b", "c"], ["e", "e2"]]
    assert circles({"a": {"b": set()}, "b": {}}) == []


def test_every_kind_of_import_is_an_edge(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "gen").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from . import c\n")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n")
    (pkg / "b.py").write_text("def f():\n    from .sub.c import C\n    import pkg.gen.x\n")
    (pkg / "sub" / "c.py").write_text("from .. import a\nimport os\n")
    (pkg / "gen" / "x.py").write_text("import pkg.a\n")
    graph = import_graph(pkg)
    assert graph == {"pkg": {}, "pkg.a": {"pkg.b": {"B"}}, "pkg.b": {"pkg.sub.c": {"C"}, "pkg": {"pkg.gen.x"}},
                     "pkg.sub": {"pkg.sub.c": {"c"}}, "pkg.sub.c": {"pkg.a": {"a"}}}
    assert circles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"]]
