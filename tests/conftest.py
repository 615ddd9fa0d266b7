"""Shared fixtures: the runtime targets of the contract suite.

Targets: ``sim`` (SimRuntime in-process), ``sim-cri`` (SimRuntime served by ``kubelet-trio sim-cri`` in a
subprocess, reached with CriRuntime) and ``containerd`` (a private containerd provisioned for the run).
In CI (``CI=true``) the containerd tier must run: a missing prerequisite fails instead of skipping, and any
skipped ``containerd`` test fails the session. The same holds for the tiers on a real kube-apiserver
(``tests/envtest``, ``tests/conformance``) whenever their binaries are present
(``kubelet_trio.testing.envtest.assets``); without them they skip with the way to build them.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubelet_trio.testing.env import LocalCriEnvironment, missing_prerequisites
from kubelet_trio.testing.envtest import assets as envtest_assets

IN_CI = os.environ.get("CI") == "true"
_skipped_containerd: list[str] = []
_contract: dict[str, Counter[str]] = {}  # contract target -> outcome counts, for the closing summary
#: tiers on a real kube-apiserver: test directory -> tier name
API_SERVER_TIERS = {"tests/envtest/": "envtest", "tests/conformance/": "conformance"}
_tiers: dict[str, Counter[str]] = {}  # tier -> outcome counts
_skipped_api_server: list[str] = []
#: tests that need a binary beyond kube-apiserver and etcd (``BUILD_ALL=1``): their skip fails CI only when
#: that binary is present too
EXTRA_BINARIES = {
    "tests/envtest/test_tls_bootstrap.py": "kube-controller-manager",
    "tests/envtest/test_csi_registration.py": "csi-node-driver-registrar",
    "tests/envtest/test_csi_volumes.py": "csi-node-driver-registrar",
}


#: containerd-tier tests that also need binaries from ``build-node-parts.sh`` (or ``BUILD_ALL=1``): their skip
#: fails CI only when those binaries are present
NODE_PARTS = {
    "tests/storage/": (
        "csi-provisioner",
        "hostpathplugin",
        "csi-node-driver-registrar",
        "kube-controller-manager",
    ),
    "tests/devicemanager/test_containerd_devices.py": ("sample-device-plugin",),
}


def _node_part_missing(nodeid: str) -> bool:
    directory = envtest_assets()
    if "[kubelet-go" in nodeid and (directory is None or not (Path(directory) / "kubelet-go").exists()):
        return True  # a reference run without the Go kubelet (BUILD_ALL=1)
    for prefix, binaries in NODE_PARTS.items():
        if nodeid.startswith(prefix):
            return directory is None or not all((Path(directory) / b).exists() for b in binaries)
    return False


def _skip_fails_ci(nodeid: str) -> bool:
    directory = envtest_assets()
    if directory is None:
        return False
    extra = next((binary for prefix, binary in EXTRA_BINARIES.items() if nodeid.startswith(prefix)), None)
    return extra is None or (Path(directory) / extra).exists()


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """A test that runs a command's ``main`` in-process configures logging for a process (root handlers,
    ``kubelet_trio`` at the command's level); later tests' ``caplog`` must not inherit that."""
    root, ours = logging.getLogger(), logging.getLogger("kubelet_trio")
    saved = (root.handlers[:], root.level, ours.level)
    yield
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    ours.setLevel(saved[2])


@pytest.fixture(scope="session")
def cri_env() -> Iterator[LocalCriEnvironment]:
    """A private containerd + loopback registry with busybox images, for the whole run."""
    missing = missing_prerequisites()
    if missing:
        reason = "containerd tier unavailable: " + "; ".join(missing)
        if IN_CI:
            pytest.fail(reason + " (CI=true: the containerd tier must run)")
        pytest.skip(reason)
    env = LocalCriEnvironment().start()
    try:
        yield env
    finally:
        env.close()


@pytest.fixture(scope="session")
def sim_cri_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``kubelet-trio sim-cri`` serving on a private socket, as a separate process; answering as containerd
    1.6 does (``--containerd-1.6``), as the contract suite holds it to the containerd it runs beside."""
    sock = tmp_path_factory.mktemp("sim-cri") / "sim.sock"
    endpoint = f"unix://{sock}"
    log = sock.parent / "sim-cri.log"
    with log.open("wb") as out:  # the child keeps its own descriptor
        proc = subprocess.Popen(
            [sys.executable, "-m", "kubelet_trio", "sim-cri", "--listen", endpoint, "--containerd-1.6"],
            stdout=out,
            stderr=out,
        )
    try:
        deadline = time.monotonic() + 30
        while not sock.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"sim-cri did not start: {log.read_text()}")
            time.sleep(0.05)
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(10)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and "containerd" in report.keywords and not _node_part_missing(report.nodeid):
        _skipped_containerd.append(report.nodeid)
    if "tests/contract/" in report.nodeid and (report.when == "call" or report.outcome != "passed"):
        target = report.nodeid.rsplit("[", 1)[-1].rstrip("]")
        _contract.setdefault(target, Counter())[report.outcome] += 1
    for prefix, tier in API_SERVER_TIERS.items():
        if report.nodeid.startswith(prefix) and (report.when == "call" or report.outcome != "passed"):
            _tiers.setdefault(tier, Counter())[report.outcome] += 1
            if report.skipped and _skip_fails_ci(report.nodeid):
                _skipped_api_server.append(report.nodeid)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say, per runtime target, how the contract suite went (a skipped containerd tier is visible)."""
    if _contract:
        terminalreporter.write_sep("-", "runtime contract suite")
        for target in sorted(_contract):
            counts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(_contract[target].items()))
            terminalreporter.write_line(f"{target}: {counts}")
    if _tiers:
        line = "; ".join(
            f"{tier}: " + ", ".join(f"{n} {outcome}" for outcome, n in sorted(_tiers[tier].items()))
            for tier in sorted(_tiers)
        )
        terminalreporter.write_sep("-", f"real kube-apiserver tiers: {line}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if IN_CI and _skipped_containerd:
        print(f"\nCI=true but {len(_skipped_containerd)} containerd test(s) were skipped:", file=sys.stderr)
        for nodeid in _skipped_containerd:
            print(f"  {nodeid}", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if IN_CI and _skipped_api_server and envtest_assets() is not None:
        print(
            f"\nCI=true with kube-apiserver present but {len(_skipped_api_server)} envtest/conformance"
            " test(s) were skipped:",
            file=sys.stderr,
        )
        for nodeid in _skipped_api_server:
            print(f"  {nodeid}", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
