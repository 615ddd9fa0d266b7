"""The CRI bindings: generated code is current, and the wire format matches upstream CRI field numbers."""

from __future__ import annotations

import enum
import os
import subprocess
import sys
from pathlib import Path

import betterproto2
import pytest

from kubelet_trio.cri.gen.runtime import v1 as pb

REPO = Path(__file__).resolve().parent.parent
GEN_DIR = REPO / "kubelet_trio" / "cri" / "gen"
GEN_SCRIPT = REPO / "scripts" / "gen-proto"


# --- the committed code is what scripts/gen-proto produces -----------------------------------------


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_generated_code_is_up_to_date(tmp_path: Path) -> None:
    out = tmp_path / "gen"
    env = dict(os.environ)
    # protoc finds the betterproto2 plugin (and the compiler finds ruff) on PATH.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHON"] = sys.executable
    proc = subprocess.run(
        ["bash", str(GEN_SCRIPT), str(out)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, f"scripts/gen-proto failed:\n{proc.stdout}\n{proc.stderr}"

    fresh, committed = _tree(out), _tree(GEN_DIR)
    hint = "kubelet_trio/cri/gen is stale or hand-edited: run scripts/gen-proto and commit the result"
    assert sorted(fresh) == sorted(committed), hint
    changed = [name for name in fresh if fresh[name] != committed[name]]
    assert not changed, f"{hint} (differs: {', '.join(changed)})"


# --- round trips -----------------------------------------------------------------------------------


def _sandbox_config() -> pb.PodSandboxConfig:
    return pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name="web-0", uid="1234-abcd", namespace="default", attempt=2),
        hostname="web-0",
        log_directory="/var/log/pods/default_web-0_1234-abcd",
        dns_config=pb.DnsConfig(servers=["10.96.0.10"], searches=["svc.cluster.local"], options=["ndots:5"]),
        port_mappings=[pb.PortMapping(protocol=pb.Protocol.UDP, container_port=53, host_port=5353)],
        labels={"io.kubernetes.pod.name": "web-0", "app": "web"},
        annotations={"kubernetes.io/config.source": "api", "empty": ""},
        linux=pb.LinuxPodSandboxConfig(
            cgroup_parent="/kubepods/burstable/pod1234-abcd",
            sysctls={"net.ipv4.ip_forward": "1"},
            security_context=pb.LinuxSandboxSecurityContext(
                namespace_options=pb.NamespaceOption(network=pb.NamespaceMode.NODE, pid=pb.NamespaceMode.POD),
                run_as_user=pb.Int64Value(value=0),
                seccomp=pb.SecurityProfile(profile_type=pb.SecurityProfileProfileType.RuntimeDefault),
            ),
            resources=pb.LinuxContainerResources(cpu_shares=1024, memory_limit_in_bytes=-1),
        ),
    )


def _container_config() -> pb.ContainerConfig:
    return pb.ContainerConfig(
        metadata=pb.ContainerMetadata(name="nginx", attempt=3),
        image=pb.ImageSpec(image="docker.io/library/nginx:1.27", user_specified_image="nginx:1.27"),
        command=["/docker-entrypoint.sh"],
        args=["nginx", "-g", "daemon off;"],
        working_dir="/",
        envs=[pb.KeyValue(key="A", value="1"), pb.KeyValue(key="B", value="")],
        mounts=[
            pb.Mount(
                container_path="/data",
                host_path="/var/lib/kubelet/pods/x/volumes/data",
                readonly=True,
                propagation=pb.MountPropagation.PROPAGATION_HOST_TO_CONTAINER,
            )
        ],
        devices=[pb.Device(container_path="/dev/fuse", host_path="/dev/fuse", permissions="rwm")],
        labels={"io.kubernetes.container.name": "nginx"},
        annotations={"io.kubernetes.container.restartCount": "3", "io.kubernetes.container.hash": "abc"},
        log_path="nginx/3.log",
        stdin=True,
        tty=True,
        linux=pb.LinuxContainerConfig(
            resources=pb.LinuxContainerResources(
                cpu_period=100_000,
                cpu_quota=50_000,
                cpu_shares=512,
                memory_limit_in_bytes=256 * 2**20,
                oom_score_adj=-997,
                hugepage_limits=[pb.HugepageLimit(page_size="2MB", limit=2**30)],
                unified={"memory.high": "200000000"},
            ),
            security_context=pb.LinuxContainerSecurityContext(
                capabilities=pb.Capability(add_capabilities=["NET_ADMIN"], drop_capabilities=["ALL"]),
                run_as_user=pb.Int64Value(value=1000),
                run_as_group=pb.Int64Value(value=1000),
                supplemental_groups=[1, 2, 3],
                masked_paths=["/proc/kcore"],
                no_new_privs=True,
            ),
        ),
    )


@pytest.mark.parametrize("build", [_sandbox_config, _container_config])
def test_round_trip(build) -> None:
    msg = build()
    data = bytes(msg)
    back = type(msg).parse(data)
    assert back == msg
    assert bytes(back) == data
    assert back.to_dict() == msg.to_dict()


def test_round_trip_details() -> None:
    sandbox = pb.PodSandboxConfig.parse(bytes(_sandbox_config()))
    assert sandbox.labels == {"io.kubernetes.pod.name": "web-0", "app": "web"}
    assert sandbox.annotations["empty"] == ""
    assert sandbox.metadata is not None and sandbox.metadata.attempt == 2
    assert sandbox.linux is not None and sandbox.linux.security_context is not None
    assert sandbox.linux.security_context.namespace_options is not None
    assert sandbox.linux.security_context.namespace_options.network is pb.NamespaceMode.NODE
    # A wrapper message with a zero value is still present (uid 0 is not "unset").
    assert sandbox.linux.security_context.run_as_user == pb.Int64Value(value=0)

    container = pb.ContainerConfig.parse(bytes(_container_config()))
    assert container.linux is not None and container.linux.resources is not None
    assert container.linux.resources.oom_score_adj == -997
    assert container.linux.resources.memory_limit_in_bytes == 256 * 2**20
    assert container.linux.resources.unified == {"memory.high": "200000000"}
    assert container.envs[1] == pb.KeyValue(key="B", value="")
    assert container.mounts[0].propagation is pb.MountPropagation.PROPAGATION_HOST_TO_CONTAINER


# --- field numbers against upstream k8s.io/cri-api (pkg/apis/runtime/v1/api.proto) ----------------


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return result, pos


def _wire_fields(data: bytes) -> list[tuple[int, int]]:
    """(field number, wire type) of each top-level record of an encoded message."""
    out = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            _, pos = _varint(data, pos)
        elif wire_type == 1:
            pos += 8
        elif wire_type == 2:
            length, pos = _varint(data, pos)
            pos += length
        elif wire_type == 5:
            pos += 4
        else:
            raise AssertionError(f"unexpected wire type {wire_type}")
        out.append((number, wire_type))
    return out


LEN, VARINT = 2, 0

# Upstream numbers, typed in from the upstream proto. Python names are betterproto2's (upstream
# `uidMappings` -> `uid_mappings`; `CDI_devices` stays as is). Every field the generated class has
# must be listed, so a field added to proto/ without checking upstream fails here.
UPSTREAM: dict[str, dict[str, int]] = {
    "PodSandboxMetadata": {"name": 1, "uid": 2, "namespace": 3, "attempt": 4},
    "PodSandboxConfig": {
        "metadata": 1, "hostname": 2, "log_directory": 3, "dns_config": 4, "port_mappings": 5,
        "labels": 6, "annotations": 7, "linux": 8,
    },
    "RunPodSandboxRequest": {"config": 1, "runtime_handler": 2},
    "LinuxPodSandboxConfig": {
        "cgroup_parent": 1, "security_context": 2, "sysctls": 3, "overhead": 4, "resources": 5,
    },
    "LinuxSandboxSecurityContext": {
        "namespace_options": 1, "selinux_options": 2, "run_as_user": 3, "readonly_rootfs": 4,
        "supplemental_groups": 5, "privileged": 6, "seccomp_profile_path": 7, "run_as_group": 8,
        "seccomp": 9, "apparmor": 10, "supplemental_groups_policy": 11,
    },
    "NamespaceOption": {"network": 1, "pid": 2, "ipc": 3, "target_id": 4, "userns_options": 5},
    "PortMapping": {"protocol": 1, "container_port": 2, "host_port": 3, "host_ip": 4},
    "PodSandbox": {
        "id": 1, "metadata": 2, "state": 3, "created_at": 4, "labels": 5, "annotations": 6,
        "runtime_handler": 7,
    },
    "PodSandboxStatus": {
        "id": 1, "metadata": 2, "state": 3, "created_at": 4, "network": 5, "linux": 6, "labels": 7,
        "annotations": 8, "runtime_handler": 9,
    },
    "PodSandboxStatusResponse": {"status": 1, "info": 2, "containers_statuses": 3, "timestamp": 4},
    "PodSandboxFilter": {"id": 1, "state": 2, "label_selector": 3},
    "Namespace": {"options": 2},
    "ContainerMetadata": {"name": 1, "attempt": 2},
    "ContainerConfig": {
        "metadata": 1, "image": 2, "command": 3, "args": 4, "working_dir": 5, "envs": 6, "mounts": 7,
        "devices": 8, "labels": 9, "annotations": 10, "log_path": 11, "stdin": 12, "stdin_once": 13,
        "tty": 14, "linux": 15, "CDI_devices": 17,
    },
    "CreateContainerRequest": {"pod_sandbox_id": 1, "config": 2, "sandbox_config": 3},
    "Mount": {
        "container_path": 1, "host_path": 2, "readonly": 3, "selinux_relabel": 4, "propagation": 5,
        "uid_mappings": 6, "gid_mappings": 7, "recursive_read_only": 8, "image": 9,
    },
    "LinuxContainerResources": {
        "cpu_period": 1, "cpu_quota": 2, "cpu_shares": 3, "memory_limit_in_bytes": 4,
        "oom_score_adj": 5, "cpuset_cpus": 6, "cpuset_mems": 7, "hugepage_limits": 8, "unified": 9,
        "memory_swap_limit_in_bytes": 10,
    },
    "LinuxContainerSecurityContext": {
        "capabilities": 1, "privileged": 2, "namespace_options": 3, "selinux_options": 4,
        "run_as_user": 5, "run_as_username": 6, "readonly_rootfs": 7, "supplemental_groups": 8,
        "apparmor_profile": 9, "seccomp_profile_path": 10, "no_new_privs": 11, "run_as_group": 12,
        "masked_paths": 13, "readonly_paths": 14, "seccomp": 15, "apparmor": 16,
        "supplemental_groups_policy": 17,
    },
    "ImageSpec": {"image": 1, "annotations": 2, "user_specified_image": 18, "runtime_handler": 19},
    "StopContainerRequest": {"container_id": 1, "timeout": 2},
    "ContainerFilter": {"id": 1, "state": 2, "pod_sandbox_id": 3, "label_selector": 4},
    "Container": {
        "id": 1, "pod_sandbox_id": 2, "metadata": 3, "image": 4, "image_ref": 5, "state": 6,
        "created_at": 7, "labels": 8, "annotations": 9, "image_id": 10,
    },
    "ContainerStatus": {
        "id": 1, "metadata": 2, "state": 3, "created_at": 4, "started_at": 5, "finished_at": 6,
        "exit_code": 7, "image": 8, "image_ref": 9, "reason": 10, "message": 11, "labels": 12,
        "annotations": 13, "mounts": 14, "log_path": 15, "resources": 16, "image_id": 17, "user": 18,
        "image_source": 19,
    },
    "ExecSyncRequest": {"container_id": 1, "cmd": 2, "timeout": 3},
    "ExecSyncResponse": {"stdout": 1, "stderr": 2, "exit_code": 3},
    "ContainerStats": {"attributes": 1, "cpu": 2, "memory": 3, "writable_layer": 4, "swap": 5},
    "MemoryUsage": {
        "timestamp": 1, "working_set_bytes": 2, "available_bytes": 3, "usage_bytes": 4, "rss_bytes": 5,
        "page_faults": 6, "major_page_faults": 7,
    },
    "FilesystemUsage": {"timestamp": 1, "fs_id": 2, "used_bytes": 3, "inodes_used": 4},
    "Image": {
        "id": 1, "repo_tags": 2, "repo_digests": 3, "size": 4, "uid": 5, "username": 6, "spec": 7,
        "pinned": 8, "image_source": 9,
    },
    "PullImageRequest": {"image": 1, "auth": 2, "sandbox_config": 3},
    "AuthConfig": {
        "username": 1, "password": 2, "auth": 3, "server_address": 4, "identity_token": 5,
        "registry_token": 6,
    },
    "StatusResponse": {"status": 1, "info": 2, "runtime_handlers": 3, "features": 4},
    "VersionResponse": {"version": 1, "runtime_name": 2, "runtime_version": 3, "runtime_api_version": 4},
}  # fmt: skip


def _sample(msg_cls: type[betterproto2.Message], attr: str) -> object:
    """A non-default value for one field, so that it is written to the wire."""
    meta = msg_cls._betterproto.meta_by_field_name[attr]
    if meta.proto_type == "map":
        return {"k": "v"}
    cls = msg_cls._betterproto.cls_by_field[attr]
    if issubclass(cls, enum.Enum):
        value: object = cls(1)
    elif issubclass(cls, betterproto2.Message):
        value = cls()
    else:
        value = {str: "x", bytes: b"x", bool: True, int: 7}[cls]
    return [value] if meta.repeated else value


@pytest.mark.parametrize(
    ("message", "attr", "number"),
    [(m, a, n) for m, fields in UPSTREAM.items() for a, n in fields.items()],
)
def test_field_number(message: str, attr: str, number: int) -> None:
    cls = getattr(pb, message)
    msg = cls()
    setattr(msg, attr, _sample(cls, attr))  # after construction: no DeprecationWarning
    fields = _wire_fields(bytes(msg))
    assert {n for n, _ in fields} == {number}, f"{message}.{attr}: wire fields {fields}"


@pytest.mark.parametrize("message", sorted(UPSTREAM))
def test_field_table_is_complete(message: str) -> None:
    cls = getattr(pb, message)
    assert set(cls._betterproto.meta_by_field_name) == set(UPSTREAM[message])


def test_hand_built_wire_bytes() -> None:
    # ContainerFilter{state: {state: CONTAINER_EXITED}}: field 2 (len 2) holding field 1 = 2.
    f = pb.ContainerFilter(state=pb.ContainerStateValue(state=pb.ContainerState.CONTAINER_EXITED))
    assert bytes(f) == b"\x12\x02\x08\x02"
    # PodSandboxConfig.labels is field 6: one map entry {key(1)="a", value(2)="b"}.
    assert bytes(pb.PodSandboxConfig(labels={"a": "b"})) == b"\x32\x06\x0a\x01a\x12\x01b"
    # Container.state = CONTAINER_RUNNING is field 6 varint 1.
    assert bytes(pb.Container(state=pb.ContainerState.CONTAINER_RUNNING)) == b"\x30\x01"
    # ContainerStatus{exit_code(7)=137, reason(10)="OOMKilled"} decoded from hand-built bytes.
    status = pb.ContainerStatus.parse(b"\x38\x89\x01" + b"\x52\x09OOMKilled" + b"\x5a\x02hi")
    assert (status.exit_code, status.reason, status.message) == (137, "OOMKilled", "hi")
    # ContainerConfig.log_path is field 11.
    assert pb.ContainerConfig.parse(b"\x5a\x05a.log").log_path == "a.log"
