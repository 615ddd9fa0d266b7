"""No default of :mod:`kubelet_trio.defaults` is repeated as a literal elsewhere in the package.

A literal default (a parameter's default, a class field's default, a module or class constant) whose
value equals a constant of ``defaults.py`` and whose name says it is that setting must refer to the
constant instead, so changing a default changes it everywhere. "Says it is that setting": the name's
words are the constant's (``resolv_conf`` / ``RESOLV_CONF``), or all but one of them are among at least
two of the constant's (``authorized_ttl`` / ``AUTHORIZATION_WEBHOOK_CACHE_AUTHORIZED_TTL``), or the name
is one of :data:`ALIASES`. Zero values (``""``, ``0``, ``False``) say "off" or "none" everywhere and are
not compared.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kubelet_trio
from kubelet_trio import defaults

PACKAGE = Path(kubelet_trio.__file__).parent
SETTINGS_TABLE = PACKAGE / "options" / "settings.py"

#: Names that hold a default of defaults.py under another spelling -> the constants they may mean.
ALIASES: dict[str, tuple[str, ...]] = {
    "object_strategy": ("CONFIG_MAP_AND_SECRET_CHANGE_DETECTION_STRATEGY",),
    "qps": ("KUBE_API_QPS", "EVENT_RECORD_QPS", "REGISTRY_PULL_QPS"),
    "burst": ("KUBE_API_BURST", "EVENT_BURST", "REGISTRY_BURST"),
    "serialize_pulls": ("SERIALIZE_IMAGE_PULLS",),
    "pull_burst": ("REGISTRY_BURST",),
}
#: (module, name) that match by name and value but are another component's setting: why.
NOT_THE_SETTING: dict[tuple[str, str], str] = {
    ("testing/envtest.py", "authorization_mode"): "kube-apiserver's --authorization-mode, not the kubelet's",
}
NOISE = {"default", "defaults"}


def _words(name: str) -> frozenset[str]:
    return frozenset(name.lower().strip("_").split("_")) - NOISE - {""}


def _constants() -> dict[str, Any]:
    return {
        name: value
        for name, value in vars(defaults).items()
        if name.isupper() and isinstance(value, int | float | str) and value
    }


def _literal(node: ast.expr) -> tuple[bool, Any]:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str):
        return True, node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and isinstance(node.operand.value, int | float)
    ):
        return True, -node.operand.value
    return False, None


def _defaults_of(tree: ast.Module) -> Iterator[tuple[str, ast.expr]]:
    """(name, default expression) of parameters, class fields (``attrs.field(default=...)`` too) and
    module and class constants."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            args = node.args
            positional = args.posonlyargs + args.args
            yield from ((a.arg, d) for a, d in zip(positional[::-1], args.defaults[::-1], strict=False))
            yield from ((a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d)
        elif isinstance(node, ast.Module | ast.ClassDef):
            for statement in node.body:
                if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                    target, value = statement.targets[0], statement.value
                elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
                    target, value = statement.target, statement.value
                else:
                    continue
                if not isinstance(target, ast.Name):
                    continue
                if isinstance(value, ast.Call):
                    yield from ((target.id, k.value) for k in value.keywords if k.arg == "default")
                else:
                    yield target.id, value


def names_the_constant(name: str, constant: str) -> bool:
    if constant in ALIASES.get("_".join(w for w in name.lower().split("_") if w not in NOISE), ()):
        return True
    words, setting = _words(name), _words(constant)
    return bool(words) and (words == setting or (len(words & setting) >= 2 and len(words - setting) <= 1))


def repeated_defaults(source: str, module: str) -> list[str]:
    """``module:line: name = value (defaults.CONSTANT)`` for each literal default repeating a constant."""
    constants = _constants()
    found = []
    for name, expression in _defaults_of(ast.parse(source)):
        is_literal, value = _literal(expression)
        if not is_literal or not value or (module, name) in NOT_THE_SETTING:
            continue
        for constant, default in constants.items():
            if type(value) is type(default) and value == default and names_the_constant(name, constant):
                found.append(f"{module}:{expression.lineno}: {name} = {value!r} (defaults.{constant})")
    return found


def test_no_literal_repeats_a_default() -> None:
    offenders = [
        line
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "defaults.py" and "gen" not in path.relative_to(PACKAGE).parts
        for line in repeated_defaults(path.read_text(), str(path.relative_to(PACKAGE)))
    ]
    assert offenders == []


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ('RESOLV_CONF = "/etc/resolv.conf"\n', ["RESOLV_CONF"]),
        ("def f(*, authorized_ttl: float = 300.0) -> None: ...\n", ["authorized_ttl"]),
        ("class C:\n    resolv_conf: str = attrs.field(default='/etc/resolv.conf')\n", ["resolv_conf"]),
        ("class C:\n    object_strategy: str = 'Watch'\n", ["object_strategy"]),
        ("def f(max_pods=110): ...\n", ["max_pods"]),
        ("DEFAULT_QPS = 50.0\nLEASE_DURATION_SECONDS = 40\n", ["DEFAULT_QPS", "LEASE_DURATION_SECONDS"]),
        ("def f(timeout: float = 300.0, retries: int = 110) -> None: ...\n", []),  # other meanings
        ("class C:\n    resolv_conf: str = ''\n", []),  # none
        ("class C:\n    resolv_conf: str = defaults.RESOLV_CONF\n", []),
    ],
)
def test_the_check_finds_a_repeated_default(source: str, found: list[str]) -> None:
    assert [line.split(": ")[1].split(" =")[0] for line in repeated_defaults(source, "m.py")] == found


def test_the_settings_table_takes_every_default_from_defaults_py() -> None:
    """A setting's default is a constant of defaults.py, or empty (``""``, ``()``, ``{}``, ``False``,
    ``None``: nothing, off, unset)."""
    literals = []
    for node in ast.walk(ast.parse(SETTINGS_TABLE.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setting":
            assert not node.args, "settings are declared with keywords"
            for keyword in node.keywords:
                if keyword.arg not in ("default", "file_default"):
                    continue
                value = keyword.value
                if isinstance(value, ast.Attribute) and getattr(value.value, "id", None) == "defaults":
                    assert hasattr(defaults, value.attr), value.attr
                    continue
                empty = isinstance(value, ast.Tuple | ast.Dict) and not (
                    getattr(value, "elts", None) or getattr(value, "keys", None)
                )
                if not empty and not (isinstance(value, ast.Constant) and not value.value):
                    literals.append(f"line {value.lineno}: {ast.unparse(value)}")
    assert literals == []
