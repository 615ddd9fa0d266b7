"""Model construction from Python, defaulting and serialisation details."""

from __future__ import annotations

import datetime as dt

import attrs
import pytest

from kubelet_trio.api import (
    Container,
    ContainerState,
    ContainerStateRunning,
    ContainerStateWaiting,
    ContainerStatus,
    DecodeError,
    ObjectMeta,
    Pod,
    PodCondition,
    PodIP,
    PodSpec,
    PodStatus,
    Probe,
    Quantity,
    ResourceRequirements,
    TCPSocketAction,
    default_image_pull_policy,
    default_pod,
    format_path,
    rfc3339,
    rfc3339_nano,
)


def test_status_is_constructible_and_serialisable() -> None:
    status = PodStatus(
        phase="Running",
        pod_ip="10.0.0.3",
        pod_ips=(PodIP(ip="10.0.0.3"),),
        conditions=(PodCondition(type="Ready", status="True"),),
        container_statuses=(
            ContainerStatus(
                name="app",
                ready=False,
                restart_count=0,
                image="busybox:1.36",
                image_id="sha256:abc",
                container_id="sim://1",
                state=ContainerState(waiting=ContainerStateWaiting(reason="ContainerCreating")),
            ),
        ),
        qos_class="BestEffort",
    )
    assert status.to_dict() == {
        "phase": "Running",
        "podIP": "10.0.0.3",
        "podIPs": [{"ip": "10.0.0.3"}],
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [
            {
                "name": "app",
                "ready": False,
                "restartCount": 0,
                "image": "busybox:1.36",
                "imageID": "sha256:abc",
                "containerID": "sim://1",
                "state": {"waiting": {"reason": "ContainerCreating"}},
            }
        ],
        "qosClass": "BestEffort",
    }
    assert PodStatus.from_dict(status.to_dict()) == status
    running = attrs.evolve(
        status.container_statuses[0],  # type: ignore[index]
        state=ContainerState(running=ContainerStateRunning(started_at="2024-01-01T00:00:00Z")),
    )
    assert running.to_dict()["state"] == {"running": {"startedAt": "2024-01-01T00:00:00Z"}}


def test_absent_empty_and_null_are_distinct() -> None:
    for meta in ({"name": "a"}, {"name": "a", "labels": {}}, {"name": "a", "labels": None}):
        assert ObjectMeta.from_dict(meta).to_dict() == meta
    assert ObjectMeta.from_dict({"labels": {}}) != ObjectMeta.from_dict({})


def test_decode_errors_carry_paths() -> None:
    with pytest.raises(DecodeError) as info:
        Pod.from_dict({"spec": {"containers": [{"name": "a"}, {"tty": "yes"}]}})
    assert format_path(info.value.path) == "spec.containers[1].tty"
    with pytest.raises(DecodeError):
        Pod.from_dict({"spec": {"containers": [{"ports": [{"containerPort": True}]}]}})
    with pytest.raises(DecodeError):
        Pod.from_dict({"spec": {"containers": [{"ports": [{"containerPort": 80.0}]}]}})
    with pytest.raises(DecodeError):
        Pod.from_dict([])


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("busybox", "Always"),
        ("busybox:latest", "Always"),
        ("busybox:1.36", "IfNotPresent"),
        ("localhost:5000/busybox", "Always"),
        ("localhost:5000/busybox:1.36", "IfNotPresent"),
        ("localhost:5000/busybox:latest", "Always"),
        ("busybox@sha256:" + "a" * 64, "IfNotPresent"),
        ("busybox:latest@sha256:" + "a" * 64, "IfNotPresent"),
        ("", "Always"),
    ],
)
def test_image_pull_policy_default(image: str, policy: str) -> None:
    assert default_image_pull_policy(image) == policy


def test_defaults() -> None:
    pod = Pod(
        metadata=ObjectMeta(name="p"),
        spec=PodSpec(
            host_network=True,
            containers=(
                Container(
                    name="c",
                    image="busybox:1.36",
                    liveness_probe=Probe(tcp_socket=TCPSocketAction(port=80), period_seconds=0),
                    resources=ResourceRequirements(limits={"cpu": Quantity("1"), "memory": Quantity("1Gi")}),
                ),
            ),
        ),
    )
    pod.to_dict()
    defaulted = default_pod(pod)
    spec = defaulted.spec
    assert spec is not None and spec.containers is not None
    c = spec.containers[0]
    assert (spec.restart_policy, spec.dns_policy, spec.termination_grace_period_seconds) == (
        "Always",
        "ClusterFirst",
        30,
    )
    assert (c.image_pull_policy, c.termination_message_path, c.termination_message_policy) == (
        "IfNotPresent",
        "/dev/termination-log",
        "File",
    )
    probe = c.liveness_probe
    assert probe is not None
    assert (
        probe.timeout_seconds,
        probe.period_seconds,
        probe.success_threshold,
        probe.failure_threshold,
    ) == (1, 10, 1, 3)
    assert c.resources is not None and c.resources.requests == {
        "cpu": Quantity("1"),
        "memory": Quantity("1Gi"),
    }
    assert pod.spec.restart_policy is None  # type: ignore[union-attr]  # the input is untouched


def test_time_formatting() -> None:
    moment = dt.datetime(2024, 5, 1, 12, 0, 0, 123400, tzinfo=dt.UTC)
    assert rfc3339(moment) == "2024-05-01T12:00:00Z"
    assert rfc3339_nano(moment) == "2024-05-01T12:00:00.1234Z"
    assert rfc3339_nano(moment.replace(microsecond=0)) == "2024-05-01T12:00:00Z"
    with pytest.raises(ValueError):
        rfc3339(dt.datetime(2024, 5, 1))


def test_image_pull_secrets_round_trip() -> None:
    from kubelet_trio.api import LocalObjectReference

    data = {
        "containers": [{"name": "a", "image": "i"}],
        "imagePullSecrets": [{"name": "regcred"}, {"name": ""}],
    }
    spec = PodSpec.from_dict(data)
    assert spec.image_pull_secrets == (LocalObjectReference(name="regcred"), LocalObjectReference(name=""))
    assert spec.to_dict() == data
    assert PodSpec.from_dict({"imagePullSecrets": []}).to_dict() == {"imagePullSecrets": []}
    with pytest.raises(DecodeError) as info:
        Pod.from_dict({"spec": {"imagePullSecrets": [{"name": 3}]}})
    assert format_path(info.value.path) == "spec.imagePullSecrets[0].name"
