"""Hash, labels, configs, image references and the Backoff type on their own."""

from __future__ import annotations

import pytest
import trio
from trio.testing import MockClock

from kubelet_trio.api import Container
from kubelet_trio.clock import go_duration as format_duration
from kubelet_trio.container.hash import go_json_string
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.kuberuntime import (
    Backoff,
    generate_container_config,
    generate_pod_sandbox_config,
    hash_container,
)
from kubelet_trio.kuberuntime.container import termination_grace_period
from kubelet_trio.kuberuntime.images import (
    InvalidImageNameError,
    apply_default_image_tag,
    parse_image_name,
    should_pull_image,
)
from kubelet_trio.kuberuntime.labels import (
    NODE_LABEL,
    POD_NAME_LABEL,
    POD_NAMESPACE_LABEL,
    POD_UID_LABEL,
    container_annotations,
    container_labels,
    parse_container_annotations,
    parse_container_labels,
    pod_labels,
)
from tests.kuberuntime.conftest import app, make_pod, spec_of


def test_hash_matches_go() -> None:
    # kubernetes pkg/kubelet/container/helpers_test.go TestHashContainer (name + image only).
    assert hash_container(Container(name="test_container", image="foo/image:v1")) == "8e45cbd0"
    assert hash_container(Container(name="test_container", image="foo/image:v1", args=("x",))) == "8e45cbd0"
    assert hash_container(Container(name="test_container", image="foo/image:v2")) != "8e45cbd0"


def test_go_json_string_escapes_like_encoding_json() -> None:
    assert go_json_string('a"b\\c\n<&>\u2028\x01é') == '"a\\"b\\\\c\\n\\u003c\\u0026\\u003e\\u2028\\u0001é"'


def test_labels_and_annotations_round_trip() -> None:
    pod = make_pod(
        [
            app(
                ports=[{"containerPort": 80, "hostPort": 8080}],
                lifecycle={"preStop": {"exec": {"command": ["x"]}}},
            )
        ],
        labels={"tier": "web", NODE_LABEL: "spoofed"},
        metadata={"deletionGracePeriodSeconds": 5},
        terminationGracePeriodSeconds=20,
    )
    spec = spec_of(pod)
    assert pod_labels(pod, "node-a") == {  # the kubelet's labels override the pod's own
        "tier": "web",
        POD_NAME_LABEL: "web",
        POD_NAMESPACE_LABEL: "default",
        POD_UID_LABEL: "uid-1",
        NODE_LABEL: "node-a",
    }
    labels = parse_container_labels(container_labels(spec, pod, "node-a"))
    assert (labels.container_name, labels.node, labels.pod_uid) == ("app", "node-a", "uid-1")
    annotations = parse_container_annotations(container_annotations(spec, pod, 3))
    assert annotations.hash == hash_container(spec)
    assert annotations.restart_count == 3
    assert annotations.pod_deletion_grace_period == 5
    assert annotations.pod_termination_grace_period == 20
    assert spec.lifecycle is not None and annotations.pre_stop_handler == spec.lifecycle.pre_stop
    assert annotations.ports == spec.ports
    assert parse_container_annotations({"io.kubernetes.container.restartCount": "x"}).restart_count == 0


def test_sandbox_config() -> None:
    pod = make_pod(
        [app(ports=[{"containerPort": 80, "hostPort": 8080, "protocol": "UDP"}, {"containerPort": 81}])],
        hostname="h" * 70,
        hostPID=True,
    )
    config = generate_pod_sandbox_config(pod, 2, node_name="node-a", pod_logs_dir="/logs")
    assert config.metadata == pb.PodSandboxMetadata(name="web", namespace="default", uid="uid-1", attempt=2)
    assert config.hostname == "h" * 63
    assert config.log_directory == "/logs/default_web_uid-1"
    assert [(m.protocol, m.container_port, m.host_port) for m in config.port_mappings] == [
        (pb.Protocol.UDP, 80, 8080),
        (pb.Protocol.TCP, 81, 0),
    ]
    assert config.linux is not None and config.linux.cgroup_parent == ""
    assert config.linux.security_context is not None
    options = config.linux.security_context.namespace_options
    assert options == pb.NamespaceOption(
        network=pb.NamespaceMode.POD, pid=pb.NamespaceMode.NODE, ipc=pb.NamespaceMode.POD
    )

    assert config.linux.sysctls == {}

    host = make_pod([app()], hostNetwork=True, hostIPC=True)
    config = generate_pod_sandbox_config(host, 0, node_name="node-a", pod_logs_dir="/logs")
    assert config.hostname == ""  # the node's UTS namespace: runc cannot set a hostname there
    assert config.linux is not None and config.linux.security_context is not None
    options = config.linux.security_context.namespace_options
    assert options is not None
    assert (options.network, options.ipc, options.pid) == (
        pb.NamespaceMode.NODE,
        pb.NamespaceMode.NODE,
        pb.NamespaceMode.CONTAINER,
    )


def test_container_config() -> None:
    pod = make_pod(
        [
            app(
                command=["sh", "-c"],
                args=["echo $(X)"],
                workingDir="/w",
                env=[
                    {"name": "X", "value": "1"},
                    {"name": "Y", "valueFrom": {"fieldRef": {"fieldPath": "x"}}},
                ],
                tty=True,
                securityContext={"privileged": True, "runAsUser": 1000},
            )
        ]
    )
    spec = spec_of(pod)
    config = generate_container_config(pod, spec, 5, image_ref="sha256:abc", node_name="node-a")
    assert config.metadata == pb.ContainerMetadata(name="app", attempt=5)
    assert config.image == pb.ImageSpec(image="sha256:abc", user_specified_image=spec.image)
    assert (config.command, config.args, config.working_dir) == (["sh", "-c"], ["echo $(X)"], "/w")
    assert config.envs == [pb.KeyValue(key="X", value="1")]
    assert config.log_path == "app/5.log"
    assert config.tty and not config.stdin
    assert config.labels[NODE_LABEL] == "node-a"
    assert config.annotations["io.kubernetes.container.restartCount"] == "5"
    assert config.linux is not None
    security = config.linux.security_context
    assert security is not None and security.privileged and security.run_as_user == pb.Int64Value(value=1000)


def test_termination_grace_period_rules() -> None:
    probe = {"exec": {"command": ["x"]}, "terminationGracePeriodSeconds": 3}
    pod = make_pod([app(livenessProbe=probe)], terminationGracePeriodSeconds=40)
    spec = spec_of(pod)
    assert termination_grace_period(pod, spec, "") == 40
    assert termination_grace_period(pod, spec, "LivenessProbe") == 3
    assert termination_grace_period(pod, spec, "StartupProbe") == 40
    deleted = make_pod([app()], metadata={"deletionGracePeriodSeconds": 0})
    assert termination_grace_period(deleted, None, "") == 0


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("busybox", "busybox:latest"),
        ("busybox:1.36", "busybox:1.36"),
        ("localhost:5000/busybox", "localhost:5000/busybox:latest"),
        ("registry.sim/a/b@sha256:" + "a" * 64, "registry.sim/a/b@sha256:" + "a" * 64),
        ("Registry.Sim/a/b", "Registry.Sim/a/b:latest"),
    ],
)
def test_apply_default_image_tag(image: str, expected: str) -> None:
    assert apply_default_image_tag(image) == expected


@pytest.mark.parametrize("image", ["", "UPPER/case", "registry.sim/UPPER", "a:b:c", "a" * 64, "busybox:"])
def test_invalid_image_names(image: str) -> None:
    with pytest.raises(InvalidImageNameError):
        parse_image_name(image)


def test_should_pull_image() -> None:
    assert should_pull_image("Always", True)
    assert should_pull_image("IfNotPresent", False) and not should_pull_image("IfNotPresent", True)
    assert not should_pull_image("Never", False)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (0.5, "500ms"), (10, "10s"), (1.5, "1.5s"), (160, "2m40s"), (300, "5m0s"), (3600, "1h0m0s")],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


async def test_backoff(autojump_clock: MockClock) -> None:
    backoff = Backoff(10, 300)
    assert not backoff.is_in_backoff_since("k", 0) and backoff.expiry("k") is None
    backoff.next("k", 0)
    assert (backoff.get("k"), backoff.expiry("k")) == (10, 10)
    assert backoff.is_in_backoff_since("k", 0) and backoff.is_in_backoff_since_update("k", 9.9)
    await trio.sleep(10)
    assert not backoff.is_in_backoff_since("k", 0) and not backoff.is_in_backoff_since_update("k", 10)
    for expected in (20, 40, 80, 160, 300, 300):
        backoff.next("k", trio.current_time())
        assert backoff.get("k") == expected
    assert backoff.expiry("k", since=100) == 400
    # Expired after 2 x max without an update: starts over.
    await trio.sleep(601)
    assert not backoff.is_in_backoff_since("k", trio.current_time())
    backoff.next("k", trio.current_time())
    assert backoff.get("k") == 10
    await trio.sleep(601)
    backoff.gc()
    assert len(backoff) == 0
