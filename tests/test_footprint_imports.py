"""The daemon loads a stack only when its configuration uses it.

Each case runs the real daemon entry (``kubelet_trio.cmd.kubelet.main``) in a subprocess on the simulated
runtime; once its node is up, the process records which top-level packages it has imported and stops
itself with SIGTERM (a clean exit, status 0). A node with every HTTP server off and no API server must
not import the TLS, metrics, HTTP-server, API-client or gRPC stacks; turning a server on, or giving
``--kubeconfig``, loads exactly what that needs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubelet_trio.testing.registry import free_port

#: Run in the subprocess: the daemon's own entry, with ``open_kubelet`` wrapped to report and stop.
DRIVER = """
import contextlib, json, os, signal, sys
from kubelet_trio.cmd import kubelet as cmd

opened = cmd.open_kubelet

@contextlib.asynccontextmanager
async def open_and_report(config, deps):
    async with opened(config, deps) as node:
        loaded = sorted({name.split(".")[0] for name in sys.modules})
        own = sorted(name for name in sys.modules if name.startswith("kubelet_trio."))
        print(json.dumps({"packages": loaded, "modules": own}), flush=True)
        os.kill(os.getpid(), signal.SIGTERM)
        yield node

cmd.open_kubelet = open_and_report
sys.exit(cmd.main(sys.argv[1:]))
"""

#: Outside packages and kubelet_trio modules that only some configurations need.
TLS = ("kubelet_trio.certificate", "kubelet_trio.server.tls", "kubelet_trio.server.auth")
METRICS = ("kubelet_trio.promtext",)
HTTP_SERVER = ("h11", "kubelet_trio.httpserver.http11", "kubelet_trio.server.serve")
READ_ONLY = ("kubelet_trio.server.app", "kubelet_trio.stats.resource_metrics")
API_MODE = (
    "kubelet_trio.apiobjects",
    "kubelet_trio.client.reflector",
    "kubelet_trio.events",
    "kubelet_trio.nodelease",
    "kubelet_trio.status.sync",
)
#: The CRI client: only a CRI runtime needs it (these nodes run the simulated one).
CRI_CLIENT = ("kubelet_trio.cri.remote", "kubelet_trio.cri.gen.runtime.v1.services")
#: gRPC itself: the daemon listens on the device plugin Registration and pod resources sockets as Go
#: does, but loads the gRPC stack (and starts its asyncio thread) only when a peer connects.
GRPC = ("grpclib", "asyncio", "h2")
DEVICE_PLUGINS = ("kubelet_trio.cm.devicemanager",)
PYDANTIC = ("pydantic", "pydantic_core")  # betterproto2 imports it when installed; the bindings hide it
#: Never loaded by a node: the self-signed serving pair is made by a child process (cryptography), the
#: exposition format is written by kubelet_trio.promtext (prometheus_client), betterproto2's version is
#: read without importlib.metadata (which loads email), and YAML is parsed only when a manifest or config
#: file is YAML (no manifest here).
NEVER = ("cryptography", "prometheus_client", "importlib.metadata", "email", "yaml")


def run_node(tmp_path: Path, *flags: str) -> set[str]:
    """Outside top-level packages and kubelet_trio modules the daemon had imported once its node was up."""
    manifests = tmp_path / "manifests"
    manifests.mkdir(exist_ok=True)
    argv = [
        "--runtime", "sim",
        "--pod-manifest-path", str(manifests),
        "--root-dir", str(tmp_path / "root"),
        "--pod-logs-dir", str(tmp_path / "logs"),
        "--fail-swap-on=false",
        "--hostname-override", "footprint",
        "--address", "127.0.0.1",
        "--healthz-port", "0", "--port", "0", "--read-only-port", "0",
        *flags,
    ]  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, *argv], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.splitlines()[-1])
    return {*report["packages"], *report["modules"]}


def loaded(names: set[str], wanted: tuple[str, ...]) -> set[str]:
    return {w for w in wanted if any(n == w or n.startswith(w + ".") for n in names)}


@pytest.fixture(scope="module")
def fake_kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A kubeconfig for ``kubelet-trio fake-apiserver`` (its own process, over loopback)."""
    kubeconfig = tmp_path_factory.mktemp("fake-api") / "kubeconfig"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubelet_trio", "fake-apiserver", "--kubeconfig-out", str(kubeconfig)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    with proc, proc.stdout:
        try:
            assert proc.stdout.readline().decode().startswith("http"), "fake API server did not start"
            yield kubeconfig
        finally:
            proc.terminate()


def test_every_server_off_loads_no_optional_stack(tmp_path: Path) -> None:
    names = run_node(tmp_path)
    assert "kubelet_trio.kubelet" in names and "kubelet_trio.sim.runtime" in names
    for stack in (
        TLS,
        METRICS,
        HTTP_SERVER,
        READ_ONLY,
        API_MODE,
        CRI_CLIENT,
        PYDANTIC,
        GRPC,
        NEVER,
        ("httpx",),
    ):
        assert loaded(names, stack) == set()
    assert loaded(names, DEVICE_PLUGINS) == set(DEVICE_PLUGINS)  # listening on the device plugin socket


def test_healthz_alone_loads_the_http_server_only(tmp_path: Path) -> None:
    names = run_node(tmp_path, "--healthz-port", str(free_port()))
    assert loaded(names, HTTP_SERVER) == set(HTTP_SERVER)
    for stack in (TLS, METRICS, READ_ONLY, API_MODE, CRI_CLIENT):
        assert loaded(names, stack) == set()


def test_read_only_port_loads_metrics_and_its_handlers(tmp_path: Path) -> None:
    names = run_node(tmp_path, "--read-only-port", str(free_port()))
    assert loaded(names, (*METRICS, *HTTP_SERVER, *READ_ONLY)) == {*METRICS, *HTTP_SERVER, *READ_ONLY}
    assert loaded(names, TLS) == set()


def test_kubelet_api_port_loads_tls_and_metrics(tmp_path: Path) -> None:
    names = run_node(tmp_path, "--port", str(free_port()))
    assert loaded(names, (*TLS, *METRICS, *HTTP_SERVER)) == {*TLS, *METRICS, *HTTP_SERVER}
    assert loaded(names, (*GRPC, *NEVER)) == set()
    assert (tmp_path / "root" / "pki" / "kubelet.key").exists()  # made by the child


def test_kubeconfig_loads_the_api_client(tmp_path: Path, fake_kubeconfig: Path) -> None:
    names = run_node(tmp_path, "--kubeconfig", str(fake_kubeconfig))
    assert loaded(names, API_MODE) == set(API_MODE)
    assert loaded(names, (*TLS, *METRICS, "httpx")) == set()  # no server serves them; h11, not httpx
