"""``kubelet-trio sim-cri`` answers a CRI client that shares no code with the project.

The client is generated in the test from ``proto/`` with grpcio-tools (Google's protobuf runtime and the
grpcio C-core client, not betterproto2/grpclib), and the server runs as the real command in a subprocess.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import grpc
import pytest
from grpc_tools import protoc

PROTO_ROOT = Path(__file__).resolve().parents[2] / "proto"


@pytest.fixture(scope="module")
def cri_pb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ModuleType, ModuleType]]:
    out = tmp_path_factory.mktemp("grpcio-cri")
    include = str(Path(protoc.__file__).parent / "_proto")
    rc = protoc.main(
        [
            "protoc",
            f"-I{PROTO_ROOT}",
            f"-I{include}",
            f"--python_out={out}",
            f"--grpc_python_out={out}",
            str(PROTO_ROOT / "runtime" / "v1" / "api.proto"),
        ]
    )
    assert rc == 0
    sys.path.insert(0, str(out))
    try:
        yield (
            importlib.import_module("runtime.v1.api_pb2"),
            importlib.import_module("runtime.v1.api_pb2_grpc"),
        )
    finally:
        sys.path.remove(str(out))
        for name in [m for m in sys.modules if m == "runtime" or m.startswith("runtime.")]:
            del sys.modules[name]


@pytest.fixture
def sim_cri_socket(tmp_path: Path) -> Iterator[str]:
    sock = tmp_path / "x.sock"
    with (tmp_path / "sim-cri.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kubelet_trio", "sim-cri", "--listen", f"unix://{sock}"],
            stdout=log,
            stderr=log,
        )
    try:
        deadline = time.monotonic() + 30
        while not sock.exists():
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "sim-cri.log").read_text()
            time.sleep(0.05)
        yield f"unix://{sock}"
    finally:
        proc.terminate()
        assert proc.wait(10) == 0


def test_independent_grpcio_client(cri_pb: tuple[ModuleType, ModuleType], sim_cri_socket: str) -> None:
    api, api_grpc = cri_pb
    with grpc.insecure_channel(sim_cri_socket) as channel:
        runtime = api_grpc.RuntimeServiceStub(channel)
        images = api_grpc.ImageServiceStub(channel)

        version = runtime.Version(api.VersionRequest(version="v1"), timeout=10)
        assert (version.runtime_name, version.runtime_api_version) == ("kubelet-trio-sim", "v1")

        sandbox_config = api.PodSandboxConfig(
            metadata=api.PodSandboxMetadata(name="web", namespace="default", uid="u-1", attempt=0),
            labels={"app": "web"},
            annotations={"sim.kubelet-trio.io/app": 'print "hi"; run'},
        )
        sandbox_id = runtime.RunPodSandbox(
            api.RunPodSandboxRequest(config=sandbox_config), timeout=10
        ).pod_sandbox_id
        assert len(sandbox_id) == 64

        image = api.ImageSpec(image="registry.sim/app:1")
        images.PullImage(api.PullImageRequest(image=image), timeout=10)
        container_config = api.ContainerConfig(
            metadata=api.ContainerMetadata(name="app", attempt=0), image=image, labels={"tier": "front"}
        )
        container_id = runtime.CreateContainer(
            api.CreateContainerRequest(
                pod_sandbox_id=sandbox_id, config=container_config, sandbox_config=sandbox_config
            ),
            timeout=10,
        ).container_id
        runtime.StartContainer(api.StartContainerRequest(container_id=container_id), timeout=10)

        listed = runtime.ListContainers(
            api.ListContainersRequest(filter=api.ContainerFilter(label_selector={"tier": "front"})),
            timeout=10,
        ).containers
        assert [(c.id, c.metadata.name, c.state) for c in listed] == [
            (container_id, "app", api.CONTAINER_RUNNING)
        ]
        status = runtime.ContainerStatus(
            api.ContainerStatusRequest(container_id=container_id), timeout=10
        ).status
        assert status.state == api.CONTAINER_RUNNING
        assert status.started_at >= status.created_at > 0
        assert status.labels["tier"] == "front"

        with pytest.raises(grpc.RpcError) as missing:
            runtime.ContainerStatus(api.ContainerStatusRequest(container_id="f" * 64), timeout=10)
        assert missing.value.code() is grpc.StatusCode.NOT_FOUND
