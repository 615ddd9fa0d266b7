"""Only ``kubelet.py`` and the builder reach into a :class:`~kubelet_trio.kubelet.Kubelet`; everything else
asks it through :class:`~kubelet_trio.server.host.HostInterface` verbs.

The Kubelet's attribute names (fields, properties, methods, private or not) are read from its class body,
the verbs from the protocol's, so neither list is kept by hand. A module then may not read
``<kubelet>.<attribute>`` for any attribute that is not a verb, where ``<kubelet>`` is

- anything named ``kubelet`` or ``_kubelet`` (``kubelet``, ``self.kubelet``, ``node.kubelet``), or
- a name or ``self`` field annotated with ``Kubelet`` or ``HostInterface`` (``host: HostInterface``).

A protocol that the Kubelet satisfies by exposing a field (every member is a Kubelet attribute and some
member is one of its fields) is a way round the check, so such protocols are reported too. The verbs
themselves are methods returning values, never a Kubelet field under another name.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "kubelet_trio"

#: The modules that may read the Kubelet's fields: the class itself, its mixins (the parts of it that
#: mirror Go's ``kubelet_pods.go`` and the HostInterface verbs) and the composition root.
INSIDE = frozenset({"kubelet.py", "kubelet_pods.py", "kubelet_host.py", "kubelet_builder.py"})
#: Where the Kubelet's members are declared: the class and its mixins (module, class).
KUBELET_CLASSES = (
    ("kubelet.py", "Kubelet"),
    ("kubelet_pods.py", "PodsMixin"),
    ("kubelet_host.py", "HostInterfaceMixin"),
)
KUBELET_TYPES = frozenset({"Kubelet", "HostInterface"})
RECEIVER_NAMES = frozenset({"kubelet", "_kubelet"})

# Reads tolerated for now, as (module, attribute), each to be replaced by a verb. The test fails on an entry
# that no longer occurs.
KNOWN_READS: frozenset[tuple[str, str]] = frozenset()
# Protocols the Kubelet satisfies through its fields, as (module, protocol, member): the build restructure
# gives these components the parts themselves instead of the Kubelet. Same rule.
KNOWN_FIELD_PROTOCOLS: frozenset[tuple[str, str, str]] = frozenset(
    {
        ("kubelet_trio/nodestatus/manager.py", "NodeHost", "clock"),
        ("kubelet_trio/nodestatus/manager.py", "NodeHost", "runtime"),
    }
)


def _class(path: Path, name: str) -> ast.ClassDef:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise AssertionError(f"no class {name} in {path}")


def _members(cls: ast.ClassDef) -> tuple[set[str], set[str]]:
    """(fields: annotated names and properties, methods) of a class body."""
    fields: set[str] = set()
    methods: set[str] = set()
    for item in cls.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            fields.add(item.target.id)
        elif isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and not item.name.startswith("__"):
            decorators = {d.id if isinstance(d, ast.Name) else "" for d in item.decorator_list}
            (fields if "property" in decorators else methods).add(item.name)
    return fields, methods


def kubelet_attributes(root: Path = PACKAGE) -> tuple[set[str], set[str]]:
    """(fields, methods) of the Kubelet and its mixins (attrs keeps a private field's underscore on the
    attribute)."""
    fields: set[str] = set()
    methods: set[str] = set()
    for module, name in KUBELET_CLASSES:
        more_fields, more_methods = _members(_class(root / module, name))
        fields |= more_fields
        methods |= more_methods
    return fields, methods


def host_verbs(root: Path = PACKAGE) -> set[str]:
    fields, methods = _members(_class(root / "server" / "host.py", "HostInterface"))
    return fields | methods


def _mentions_kubelet_type(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return False
    return any(
        (isinstance(n, ast.Name) and n.id in KUBELET_TYPES)
        or (isinstance(n, ast.Attribute) and n.attr in KUBELET_TYPES)
        for n in ast.walk(annotation)
    )


def _typed_receivers(tree: ast.Module) -> tuple[set[str], set[str]]:
    """Names (parameters, variables) and ``self`` fields annotated with a Kubelet type in the module."""
    names: set[str] = set()
    self_fields: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and _mentions_kubelet_type(node.annotation):
            names.add(node.arg)
        elif isinstance(node, ast.AnnAssign) and _mentions_kubelet_type(node.annotation):
            if isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif isinstance(node.target, ast.Attribute):
                self_fields.add(node.target.attr)
        elif isinstance(node, ast.ClassDef):  # attrs fields: ``kubelet: Kubelet`` in the class body
            for item in node.body:
                if (
                    isinstance(item, ast.AnnAssign)
                    and isinstance(item.target, ast.Name)
                    and _mentions_kubelet_type(item.annotation)
                ):
                    self_fields.add(item.target.id)
    return names, self_fields


def _is_receiver(node: ast.expr, names: set[str], self_fields: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in RECEIVER_NAMES or node.id in names
    if isinstance(node, ast.Attribute):
        if node.attr in RECEIVER_NAMES:
            return True
        return isinstance(node.value, ast.Name) and node.value.id == "self" and node.attr in self_fields
    return False


def field_reads(root: Path = PACKAGE) -> Iterator[tuple[str, int, str]]:
    """``(module, line, attribute)`` for every read of a Kubelet attribute that is not a verb."""
    fields, methods = kubelet_attributes(root)
    forbidden = (fields | methods) - host_verbs(root)
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if str(relative) in INSIDE or "gen" in relative.parts:
            continue
        tree = ast.parse(path.read_text(), str(path))
        names, self_fields = _typed_receivers(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in forbidden
                and _is_receiver(node.value, names, self_fields)
            ):
                yield f"{root.name}/{relative}", node.lineno, node.attr


def field_protocols(root: Path = PACKAGE) -> Iterator[tuple[str, str, str]]:
    """``(module, protocol, member)``: protocols the Kubelet satisfies with a field."""
    fields, methods = kubelet_attributes(root)
    verbs = host_verbs(root)
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if str(relative) in INSIDE or "gen" in relative.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ClassDef) or node.name == "HostInterface":
                continue
            if not any(isinstance(b, ast.Name) and b.id == "Protocol" for b in node.bases):
                continue
            own_fields, own_methods = _members(node)
            members = own_fields | own_methods
            if members and members <= fields | methods:
                for member in sorted(members & fields - verbs):
                    yield f"{root.name}/{relative}", node.name, member


def scan(root: Path = PACKAGE) -> tuple[set[tuple[str, int, str]], set[tuple[str, str, str]]]:
    """(:func:`field_reads`, :func:`field_protocols`) computed in a new interpreter: CPython 3.11's
    ``ast.parse`` can fail with "AST constructor recursion depth mismatch" late in a long test session."""
    out = subprocess.run(
        [sys.executable, __file__, str(root)], check=True, capture_output=True, text=True, timeout=120
    ).stdout
    reads, protocols = json.loads(out)
    return {tuple(r) for r in reads}, {tuple(p) for p in protocols}


def test_no_module_reads_a_kubelet_field() -> None:
    found = sorted(scan()[0])
    unexpected = [
        f"{module}:{line}: .{attr}" for module, line, attr in found if (module, attr) not in KNOWN_READS
    ]
    assert unexpected == [], "read through a HostInterface verb instead:\n" + "\n".join(unexpected)
    assert KNOWN_READS - {(module, attr) for module, _, attr in found} == set(), (
        "fixed: remove from KNOWN_READS"
    )


def test_no_protocol_is_satisfied_by_a_kubelet_field() -> None:
    found = scan()[1]
    assert sorted(found - KNOWN_FIELD_PROTOCOLS) == [], (
        "ask for a value (a verb), not the Kubelet's component"
    )
    assert KNOWN_FIELD_PROTOCOLS - found == set(), "fixed: remove from KNOWN_FIELD_PROTOCOLS"


def test_the_host_interface_is_verbs() -> None:
    """Methods only, none of them a Kubelet field under the same name."""
    fields, _ = _members(_class(PACKAGE / "server" / "host.py", "HostInterface"))
    kubelet_fields, _ = kubelet_attributes()
    assert fields == set(), "properties or attributes in HostInterface: make them verbs"
    assert host_verbs() & kubelet_fields == set()


def test_an_introduced_field_read_is_reported(tmp_path: Path) -> None:
    """The check is not vacuous: a copy of the package that reads the Kubelet's parts fails it."""
    fields = sorted(kubelet_attributes()[0] - host_verbs())  # a private field and a public one, today's
    private = next(f for f in fields if f.startswith("_"))
    public = next(f for f in fields if not f.startswith("_"))
    copy = tmp_path / "kubelet_trio"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "gen"))
    pods = copy / "server" / "pods.py"
    pods.write_text(
        pods.read_text() + f"\n\ndef _peek(host: HostInterface) -> Any:\n    return host.{private}\n"
    )
    sync = copy / "status" / "sync.py"
    sync.write_text(sync.read_text() + f"\n\nclass _Peek(Protocol):\n    {public}: Any\n")
    runonce = copy / "runonce.py"
    runonce.write_text(
        runonce.read_text() + f"\n\ndef _peek(node: Any) -> Any:\n    return node.kubelet.{public}\n"
    )
    found_reads, found_protocols = scan(copy)
    reads = {(module, attr) for module, _, attr in found_reads}
    assert (
        reads == {("kubelet_trio/server/pods.py", private), ("kubelet_trio/runonce.py", public)} | KNOWN_READS
    )
    assert ("kubelet_trio/status/sync.py", "_Peek", public) in found_protocols


if __name__ == "__main__":
    ROOT = Path(sys.argv[1])
    print(json.dumps([sorted(set(field_reads(ROOT))), sorted(set(field_protocols(ROOT)))]))
