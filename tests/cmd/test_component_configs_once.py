"""``component_configs`` is called once per process: ``main`` derives the components' settings and hands
each part down, so no component re-derives (or re-reads) a setting of its own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kubelet_trio
from kubelet_trio.cmd import kubelet as cmd
from kubelet_trio.options import ComponentConfigs, KubeletOptions, component_configs

PACKAGE = Path(kubelet_trio.__file__).parent


def callers(name: str) -> list[str]:
    """``module:function`` of every call of ``name`` in the package (outside its own definition)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if not isinstance(node, ast.Call):
                    continue
                called = (
                    node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                )
                if called == name:
                    found.append(f"{path.relative_to(PACKAGE)}:{function.name}")
    return found


def test_only_main_derives_the_component_configurations() -> None:
    assert callers("component_configs") == ["cmd/kubelet.py:main"]


def test_a_run_once_derives_them_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    derived: list[KubeletOptions] = []

    def counting(options: KubeletOptions) -> ComponentConfigs:
        derived.append(options)
        return component_configs(options)

    monkeypatch.setattr(cmd, "component_configs", counting)
    (tmp_path / "pods").mkdir()
    status = cmd.main(
        [
            "--runonce",
            "--runtime=sim",
            f"--pod-manifest-path={tmp_path / 'pods'}",
            f"--root-dir={tmp_path / 'root'}",
            f"--pod-logs-dir={tmp_path / 'logs'}",
            "--node-ip=127.0.0.1",
            "--hostname-override=once",
        ]
    )
    assert status == 0
    assert len(derived) == 1
