"""The README's Python examples, run as the README shows them (the blocks are read from README.md, so an
example that stops working, or starts using an internal name, fails here), and its links to the pages it
moved details to (docs/, bench/README.md)."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import trio
import trio.testing

import kubelet_trio
from kubelet_trio import SimRuntime

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", README.read_text(), flags=re.DOTALL | re.MULTILINE)


def load_block(function: str) -> dict[str, Any]:
    """Execute the one README block that defines ``function`` (not as ``__main__``); its namespace."""
    (source,) = [block for block in python_blocks() if f"def {function}(" in block]
    namespace: dict[str, Any] = {"__name__": "readme_example"}
    exec(compile(source, f"{README}:{function}", "exec"), namespace)
    return namespace


def slug(heading: str) -> str:
    """A heading's anchor, as GitHub makes it."""
    return re.sub(r"[^\w\- ]", "", heading.strip("# ").lower()).replace(" ", "-")


def test_links_between_the_readme_and_its_pages_resolve() -> None:
    pages = [
        p.resolve() for p in (README, ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md")))
    ]
    anchors = {
        page: {slug(line) for line in page.read_text().splitlines() if line.startswith("#")} for page in pages
    }
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if target.startswith(("http://", "https://")):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            assert linked.exists(), f"{page.name}: {target}"
            if anchor:
                assert anchor in anchors[linked], f"{page.name}: {target}"
    readme = README.read_text()
    assert "docs/configuration.md" in readme and "bench/README.md" in readme


def test_the_examples_import_only_the_public_api() -> None:
    blocks = python_blocks()
    assert len(blocks) >= 2
    for block in blocks:
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kubelet_trio"):
                assert node.module == "kubelet_trio", ast.unparse(node)
                assert {alias.name for alias in node.names} <= set(kubelet_trio.__all__), ast.unparse(node)
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("kubelet_trio.") for a in node.names), ast.unparse(node)


async def test_embedding_a_node_in_a_test_suite(autojump_clock: trio.testing.MockClock) -> None:
    test_crash_loop = load_block("test_crash_loop")["test_crash_loop"]
    await test_crash_loop(autojump_clock)
    # three runs of 5 s and backoffs of 0 + 10 + 20 s, then the third restart is reported one relist later
    assert 45 <= trio.current_time() <= 47


async def test_the_public_api_example_runs_a_manifest_to_completion() -> None:
    """On Trio's real clock: the example's node does its file operations in worker threads, and while
    they run an autojump clock would race ahead (past the pod's activeDeadlineSeconds)."""
    run_to_completion = load_block("run_to_completion")["run_to_completion"]
    with trio.fail_after(60):  # the container runs 2 s
        phases = await run_to_completion(SimRuntime(), str(ROOT / "examples" / "job-like.yaml"))
    assert phases == ["Succeeded"]
