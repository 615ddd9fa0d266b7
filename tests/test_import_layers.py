"""The package graph of ``kubelet_trio`` has no cycles and respects the layers.

A node of the graph is a subpackage (``kubelet_trio.kuberuntime``) or a top-level module
(``kubelet_trio.pod_workers``); an edge is any import between two nodes, including imports under
``TYPE_CHECKING`` (a type dependency is still a dependency). Cycles make the packages impossible to
read or test apart, so the check reports each strongly connected component with the imports that form it.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "kubelet_trio"

# Lowest first. A node may import only nodes of its own or a lower layer, and every node must be in one
# (test_every_package_and_module_is_in_a_layer): where a new package sits decides what it may import.
# Not nodes: the package's ``__init__`` (the public facade, which re-exports from every layer) and
# ``__main__`` (``python -m kubelet_trio``, which only calls ``cli``). Private modules (``_x.py``) are
# nodes like any other: a leading underscore says "not public API", not "outside the layers".
LAYERS: tuple[tuple[str, ...], ...] = (
    # base: leaf utilities with no kubelet concept; importable from anywhere
    (
        "logs",
        "clock",
        "fsio",
        "defaults",
        "version",
        "lazy",
        "boundary",
        "aiobridge",
        "cliflag",
        "flowcontrol",
        "netaddr",
        "promtext",
    ),
    # model: API types, the runtime-neutral view of pods and containers
    ("api", "objects", "container", "securitycontext", "envvars"),
    # clients and runtimes: API client, CRI (remote, simulated, a managed containerd), HTTP server layer,
    # registry credentials
    ("client", "httpserver", "cri", "sim", "containerd", "credentialprovider"),
    # node components: one concern each, on the clients; ``cm`` (what the node offers pods, device
    # plugins), ``apis`` (the pod resources API) and ``fieldpath`` (downward API values, which read node
    # allocatable) among them
    (
        "config",
        "pod",
        "pleg",
        "prober",
        "lifecycle",
        "status",
        "volumemanager",
        "pod_workers",
        "images",
        "network",
        "nodestatus",
        "nodelease",
        "events",
        "token",
        "apiobjects",
        "serviceinformer",
        "allocation",
        "certificate",
        "cm",
        "apis",
        "fieldpath",
        "pluginmanager",
        "volume",
    ),
    # the runtime manager: pod sync on the components
    ("kuberuntime",),
    # node managers over the runtime manager
    ("stats", "container_log_manager", "runtimeclass", "sysctl", "eviction", "nodeshutdown", "metrics"),
    # the kubelet: the class and the modules its methods are spread over, as Go's kubelet_*.go files
    ("kubelet", "kubelet_config", "kubelet_pods", "kubelet_host", "kubelet_node_status"),
    # servers and API mode: what sees the node from above
    ("server", "apimode"),
    # assembly and run modes: settings, building a node, run-once, the test harness
    ("options", "subcommands", "upstream_flags", "kubelet_builder", "runonce", "runonce_report", "testing"),
    # commands
    ("configz", "cmd", "cli"),
)

# Upward imports tolerated for now, as (importer, imported): each with the reason, to be removed when fixed.
# test_layers_only_import_downwards fails on an entry that no longer imports upward.
KNOWN_UPWARD_IMPORTS: frozenset[tuple[str, str]] = frozenset()

UNLAYERED = frozenset({"__init__", "__main__"})


def package_nodes(root: Path = PACKAGE) -> set[str]:
    """The subpackages (directories holding Python files) and top-level modules of ``root``."""
    modules = {p.stem for p in root.glob("*.py")}
    packages = {p.name for p in root.iterdir() if p.is_dir() and any(p.rglob("*.py"))}
    return (modules | packages) - UNLAYERED


def unplaced(root: Path = PACKAGE) -> list[str]:
    """Nodes of ``root`` that no layer names."""
    layered = {node for layer in LAYERS for node in layer}
    return sorted(package_nodes(root) - layered)


def _node(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "kubelet_trio" or len(parts) < 2:
        return None
    return parts[1]


def _module_name(path: Path, root: Path) -> str:
    relative = path.relative_to(root.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, root: Path) -> Iterator[tuple[str, int]]:
    """Absolute names of the modules ``path`` imports, with line numbers."""
    module = _module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield target, node.lineno
            for alias in node.names:  # ``from kubelet_trio import kubelet``
                yield f"{target}.{alias.name}", node.lineno


def import_graph(root: Path = PACKAGE) -> dict[str, dict[str, list[str]]]:
    """``graph[a][b]`` lists ``file:line`` of the imports by which node ``a`` imports node ``b``."""
    graph: dict[str, dict[str, list[str]]] = {}
    known = package_nodes(root)
    for path in sorted(root.rglob("*.py")):
        if "gen" in path.relative_to(root).parts:
            continue
        source = _node(_module_name(path, root))
        if source is None:
            continue
        for target, line in _imports(path, root):
            node = _node(target)
            if node is None or node == source or node not in known:
                continue
            where = f"{path.relative_to(root.parent)}:{line}"
            places = graph.setdefault(source, {}).setdefault(node, [])
            if where not in places:
                places.append(where)
    return graph


def fresh_import_graph(root: Path = PACKAGE) -> dict[str, dict[str, list[str]]]:
    """:func:`import_graph` computed in a new interpreter: CPython 3.11's ``ast.parse`` can fail with
    "AST constructor recursion depth mismatch" late in a long test session."""
    out = subprocess.run(
        [sys.executable, __file__, str(root)], check=True, capture_output=True, text=True, timeout=120
    ).stdout
    graph: dict[str, dict[str, list[str]]] = json.loads(out)
    return graph


def cycles(graph: Mapping[str, Mapping[str, list[str]]]) -> list[list[str]]:
    """Strongly connected components with more than one node (``scripts/import_graph.py``'s Tarjan)."""
    spec = importlib.util.spec_from_file_location(
        "import_graph", PACKAGE.parent / "scripts" / "import_graph.py"
    )
    assert spec is not None and spec.loader is not None
    script = sys.modules.get(spec.name) or importlib.util.module_from_spec(spec)
    if spec.name not in sys.modules:
        sys.modules[spec.name] = script  # its dataclasses look their module up there
        spec.loader.exec_module(script)
    return [c for c in script.strongly_connected(graph) if len(c) > 1]


def _describe(graph: Mapping[str, Mapping[str, list[str]]], component: list[str]) -> str:
    lines = [" <-> ".join(component)]
    for source in component:
        for target, where in sorted(graph.get(source, {}).items()):
            if target in component:
                lines.append(f"  {source} -> {target}: {', '.join(where)}")
    return "\n".join(lines)


def upward_imports(graph: Mapping[str, Mapping[str, list[str]]]) -> set[tuple[str, str]]:
    rank = {node: level for level, nodes in enumerate(LAYERS) for node in nodes}
    return {
        (source, target)
        for source, targets in graph.items()
        for target in targets
        if source in rank and target in rank and rank[target] > rank[source]
    }


def layer_violations(graph: Mapping[str, Mapping[str, list[str]]]) -> list[str]:
    rank = {node: level for level, nodes in enumerate(LAYERS) for node in nodes}
    problems = []
    for source, target in sorted(upward_imports(graph) - KNOWN_UPWARD_IMPORTS):
        where = graph[source][target]
        problems.append(
            f"{source} (layer {rank[source]}) imports {target} (layer {rank[target]}): {where[0]}"
        )
    return problems


def test_no_import_cycles_between_packages() -> None:
    graph = fresh_import_graph()
    found = cycles(graph)
    assert not found, "import cycles between packages:\n" + "\n".join(_describe(graph, c) for c in found)


def test_layers_only_import_downwards() -> None:
    graph = fresh_import_graph()
    assert layer_violations(graph) == []
    assert KNOWN_UPWARD_IMPORTS - upward_imports(graph) == set(), "fixed: remove from KNOWN_UPWARD_IMPORTS"


def test_every_package_and_module_is_in_a_layer() -> None:
    """A new package or top-level module (a plugin manager, a device manager) is placed deliberately."""
    layered = [node for layer in LAYERS for node in layer]
    assert sorted(n for n in set(layered) if layered.count(n) > 1) == [], "in more than one layer"
    assert unplaced() == [], "not in any layer of LAYERS: place each where its imports allow"
    assert sorted(set(layered) - package_nodes()) == [], "in LAYERS but not in the package"


def test_an_unplaced_package_or_module_is_reported(tmp_path: Path) -> None:
    root = tmp_path / "kubelet_trio"
    for name in ("newmanager/__init__.py", "devicemanager.py", "_private.py", "__main__.py", "api/pod.py"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    (root / "__pycache__").mkdir()
    (root / "empty").mkdir()
    assert unplaced(root) == ["_private", "devicemanager", "newmanager"]


@pytest.mark.parametrize(
    ("low", "high"),
    [("api", "kubelet"), ("prober", "kuberuntime"), ("server", "cmd")],
)
def test_an_introduced_cycle_is_reported(tmp_path: Path, low: str, high: str) -> None:
    """The check is not vacuous: a copy of the package with one upward import fails it."""
    copy = tmp_path / "kubelet_trio"
    for path in PACKAGE.rglob("*.py"):
        target = copy / path.relative_to(PACKAGE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text())
    init = copy / low / "__init__.py" if (copy / low).is_dir() else copy / f"{low}.py"
    init.write_text(init.read_text() + f"\nimport kubelet_trio.{high}  # noqa\n")
    graph = fresh_import_graph(copy)
    assert any(low in c and high in c for c in cycles(graph))
    assert any(v.startswith(f"{low} ") for v in layer_violations(graph))


if __name__ == "__main__":
    print(json.dumps(import_graph(Path(sys.argv[1]))))
