"""The library's layers, from its source: every import of ``libs/`` (those inside functions
too) forms no circle, ``core`` imports no area, no area imports another, nothing imports the
deployment tooling, and building blocks never import a job's run layer."""

from __future__ import annotations

import ast
from pathlib import Path

LIBS = Path(__file__).resolve().parents[1] / "libs"
AREAS = {"geo", "nlp", "process", "text"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in LIBS.rglob("*.py"):
        parts = list(path.relative_to(LIBS).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            here = module.split(".")
            if MODULES[module].name != "__init__.py":
                here = here[:-1]
            here = here[:len(here) - node.level + 1]
            base = ".".join([*here, *([node.module] if node.module else [])])
        # ``from pkg import mod`` imports the module, ``from mod import name`` the module
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                 for a in node.names]
    out = []
    for name in names:
        while name not in MODULES and "." in name:
            name = name.rsplit(".", 1)[0]
        if name in MODULES and name != module:
            out.append(name)
    return out


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                graph[module].update(_targets(module, node))
    return graph


GRAPH = _graph()


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
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
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _area(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _is_run_layer(module: str) -> bool:
    """A job's run layer: an area's ``job`` or ``<name>_job`` module, or anything in
    ``process.jobs``."""
    return module.endswith((".job", "_job")) or module.startswith("sparkfield.process.jobs")


def test_the_walk_sees_imports_inside_functions():
    # core.session imports practices at module level, and failures imports inside functions
    assert "sparkfield.core.practices" in GRAPH["sparkfield.core.session"]
    inside = [m for m, path in MODULES.items()
              if any(isinstance(n, ast.ImportFrom) and n.col_offset > 0
                     for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))))]
    assert inside, "no import inside a function found: the walk would miss them"
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circles():
    assert _circles(GRAPH) == []


def test_core_imports_no_area_and_no_area_imports_another():
    wrong = sorted((m, t) for m, ts in GRAPH.items() for t in ts
                   if (_area(m) == "core" and _area(t) != "core")
                   or (_area(m) in AREAS and _area(t) in AREAS and _area(m) != _area(t)))
    assert wrong == []


def test_nothing_in_the_library_imports_the_deployment_tooling():
    wrong = sorted((m, t) for m, ts in GRAPH.items() for t in ts
                   if _area(t) == "deploy" and _area(m) != "deploy")
    assert wrong == []


def test_building_blocks_never_import_a_jobs_run_layer():
    entry = {"sparkfield", "sparkfield.__main__", "sparkfield.schemas",
             *(f"sparkfield.{a}" for a in AREAS)}  # the packages re-export the jobs' run
    wrong = sorted((m, t) for m, ts in GRAPH.items() for t in ts
                   if _is_run_layer(t) and not _is_run_layer(m) and m not in entry)
    assert wrong == []


def test_a_module_over_400_lines_says_why_it_is_one():
    long = {m: path for m, path in MODULES.items()
            if len(path.read_text(encoding="utf-8").splitlines()) > 400}
    silent = sorted(m for m, path in long.items()
                    if "Why one module:" not in (ast.get_docstring(
                        ast.parse(path.read_text(encoding="utf-8"))) or ""))
    assert silent == []
