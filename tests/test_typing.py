"""The API model is visible to type checkers: a user's model construction is checked by mypy.

``@model`` wraps ``attrs.frozen`` behind ``typing.dataclass_transform``; this runs mypy the way a user would
(no project plugin, the package only imported) on a small snippet and pins what it accepts and reports.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SNIPPET = textwrap.dedent(
    """\
    from kubelet_trio.api import Container, ObjectMeta, Pod, PodSpec

    spec = PodSpec(containers=(Container(name="a", image="busybox"),), host_pid=False)
    pod = Pod(metadata=ObjectMeta(name="p", namespace="default"), spec=spec, extra={"x-new": 1})
    reveal_type(pod.spec)
    reveal_type(Pod.from_dict({}))
    typo = PodSpec(containerz=())
    listed = PodSpec(containers=[Container(name="a")])
    wrong = Container(name=1)
    spec.restart_policy = "Always"
    """
)


def _mypy(tmp_path: Path, source: str) -> list[tuple[int, str, str]]:
    """(line, severity, message) for each mypy diagnostic on ``source``."""
    (tmp_path / "snippet.py").write_text(source)
    (tmp_path / "mypy.ini").write_text("[mypy]\n")  # not the project's configuration (and its plugin)
    # The package is installed in editable mode (an import hook mypy cannot follow): point mypy at the
    # checkout, and report errors only in the snippet, as for an installed package.
    env = {**os.environ, "MYPYPATH": str(REPO)}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file=mypy.ini",
            "--cache-dir=.mypy_cache",
            "--follow-imports=silent",
            "--no-error-summary",
            "--show-error-codes",
            "--no-pretty",
            "snippet.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode in (0, 1), result.stderr + result.stdout
    found = []
    for line in result.stdout.splitlines():
        match = re.match(r"snippet\.py:(\d+): (error|note): (.*)$", line)
        assert match, f"unexpected mypy output: {line!r}\n{result.stdout}{result.stderr}"
        found.append((int(match[1]), match[2], match[3]))
    return found


def test_model_construction_is_type_checked(tmp_path: Path) -> None:
    found = _mypy(tmp_path, SNIPPET)
    by_line: dict[int, list[str]] = {}
    for line, severity, message in found:
        by_line.setdefault(line, []).append(f"{severity}: {message}")

    # Lines 1-4 (imports, well-typed constructors, ``extra``) are accepted.
    assert not [line for line in by_line if line < 5], found
    assert by_line[5] == ['note: Revealed type is "kubelet_trio.api.pod.PodSpec | None"']
    assert by_line[6] == ['note: Revealed type is "kubelet_trio.api.pod.Pod"']
    # A misspelt field, a list where the model holds a tuple, a wrong field type, and assigning to a
    # frozen model are reported.
    assert len(by_line[7]) == 1
    assert 'Unexpected keyword argument "containerz" for "PodSpec"' in by_line[7][0]
    assert by_line[7][0].endswith("[call-arg]")
    assert len(by_line[8]) == 1
    assert 'Argument "containers" to "PodSpec" has incompatible type "list[Container]"' in by_line[8][0]
    assert len(by_line[9]) == 1
    assert 'Argument "name" to "Container" has incompatible type "int"' in by_line[9][0]
    assert len(by_line[10]) == 1
    assert 'Property "restart_policy" defined in "PodSpec" is read-only' in by_line[10][0]
    assert set(by_line) == {5, 6, 7, 8, 9, 10}, found


def test_a_well_typed_snippet_passes(tmp_path: Path) -> None:
    source = textwrap.dedent(
        """\
        from kubelet_trio.api import Container, ObjectMeta, Pod, PodSpec

        pod = Pod(
            metadata=ObjectMeta(name="p", namespace="default", labels={"app": "web"}),
            spec=PodSpec(containers=(Container(name="a", image="busybox"),)),
        )
        name: str | None = pod.metadata.name if pod.metadata else None
        """
    )
    assert _mypy(tmp_path, source) == []
