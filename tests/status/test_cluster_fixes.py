"""Status generation against what a real cluster showed: the active deadline's reason survives the
containers' own exit, a finished pod keeps its podIP, and ephemeral containers get statuses."""

from __future__ import annotations

from kubelet_trio.api.container import EphemeralContainer
from kubelet_trio.api.status import PodIP, PodStatus
from kubelet_trio.container.types import ContainerState as RS
from kubelet_trio.container.types import PodStatus as RuntimePod
from kubelet_trio.container.types import SandboxStatus
from kubelet_trio.status import DEADLINE_EXCEEDED_MESSAGE
from tests.status.test_generate import (
    NOW,
    T0,
    by_name,
    ctr,
    generate,
    instance,
    make_pod,
    runtime,
)

DEADLINE = ("Failed", "DeadlineExceeded", DEADLINE_EXCEEDED_MESSAGE)
STOPPED_SANDBOX = SandboxStatus(id="sb1", attempt=0, ready=False, created_at=T0 - 10**9)


def outcome(status: PodStatus) -> tuple[str | None, str | None, str | None]:
    return status.phase, status.reason, status.message


# --- activeDeadlineSeconds ---------------------------------------------------------------------------


def test_deadline_reason_survives_a_clean_exit_on_sigterm() -> None:
    """The pod failed for its deadline; its container then exits 0 when stopped. The terminal status
    computed from the stopped containers (Succeeded) must not replace Failed/DeadlineExceeded."""
    pod = make_pod(ctr("app"), active_deadline_seconds=5)
    failed = PodStatus(
        phase="Failed",
        reason="DeadlineExceeded",
        message=DEADLINE_EXCEEDED_MESSAGE,
        start_time="2024-05-01T12:04:00Z",
    )
    stopped = runtime(instance("app", RS.EXITED, "c1", exit_code=0), sandboxes=(STOPPED_SANDBOX,))
    assert outcome(generate(pod, stopped, old_status=failed, pod_is_terminal=True)) == DEADLINE


def test_deadline_reason_survives_a_kill() -> None:
    pod = make_pod(ctr("app"), active_deadline_seconds=5)
    failed = PodStatus(
        phase="Failed",
        reason="DeadlineExceeded",
        message=DEADLINE_EXCEEDED_MESSAGE,
        start_time="2024-05-01T12:04:00Z",
    )
    killed = runtime(instance("app", RS.EXITED, "c1", exit_code=137), sandboxes=(STOPPED_SANDBOX,))
    assert outcome(generate(pod, killed, old_status=failed, pod_is_terminal=True)) == DEADLINE


def test_deadline_overrides_a_computed_terminal_phase() -> None:
    """Go's active deadline handler wins over whatever phase the containers give, Succeeded included,
    as long as the pod was not terminal before."""
    pod = make_pod(ctr("app"), active_deadline_seconds=5, policy="Never")
    running = PodStatus(phase="Running", start_time="2024-05-01T12:04:00Z")
    done = runtime(instance("app", RS.EXITED, "c1", exit_code=0))
    assert outcome(generate(pod, done, old_status=running)) == DEADLINE
    # A pod that had already succeeded stays Succeeded when its deadline passes later.
    succeeded = PodStatus(phase="Succeeded", start_time="2024-05-01T12:04:00Z")
    assert outcome(generate(pod, done, old_status=succeeded)) == ("Succeeded", None, None)


def test_deadline_lowered_below_the_elapsed_time() -> None:
    """activeDeadlineSeconds patched from 3600 to 5 on a pod running for a minute: Failed at once."""
    running = PodStatus(phase="Running", start_time="2024-05-01T12:04:00Z")
    rt = runtime(instance("app", RS.RUNNING, "c1"))
    assert generate(make_pod(ctr("app"), active_deadline_seconds=3600), rt, old_status=running).phase == (
        "Running"
    )
    assert outcome(generate(make_pod(ctr("app"), active_deadline_seconds=5), rt, old_status=running)) == (
        DEADLINE
    )


# --- pod IPs -----------------------------------------------------------------------------------------


def test_finished_pod_keeps_its_ips() -> None:
    """Once the sandbox is stopped the runtime reports no IP: the last known ones stay."""
    pod = make_pod(ctr("app"), policy="Never")
    old = PodStatus(
        phase="Running",
        start_time="2024-05-01T12:04:00Z",
        pod_ip="10.1.0.5",
        pod_ips=(PodIP(ip="10.1.0.5"), PodIP(ip="fd00::5")),
    )
    stopped = runtime(instance("app", RS.EXITED, "c1", exit_code=0), sandboxes=(STOPPED_SANDBOX,))
    assert stopped.ips == ()
    status = generate(pod, stopped, old_status=old, pod_is_terminal=True)
    assert status.phase == "Succeeded"
    assert status.pod_ip == "10.1.0.5"
    assert [ip.ip for ip in status.pod_ips or ()] == ["10.1.0.5", "fd00::5"]


def test_a_ready_sandbox_reports_its_own_ips() -> None:
    old = PodStatus(phase="Running", pod_ip="10.1.0.9", pod_ips=(PodIP(ip="10.1.0.9"),))
    status = generate(make_pod(ctr("app")), runtime(instance("app", RS.RUNNING, "c1")), old_status=old)
    assert status.pod_ip == "10.1.0.5"  # the ready sandbox's, not the remembered one
    # A pod that never had an IP and has no ready sandbox has none.
    fresh = generate(make_pod(ctr("app")), RuntimePod(uid="uid-1", sandbox_statuses=(STOPPED_SANDBOX,)))
    assert fresh.pod_ip is None and fresh.pod_ips is None


# --- ephemeral containers ----------------------------------------------------------------------------


def debugger(name: str = "debugger", target: str | None = None) -> EphemeralContainer:
    return EphemeralContainer(name=name, image=f"registry.local/{name}:1", target_container_name=target)


def test_ephemeral_container_statuses() -> None:
    pod = make_pod(ctr("app"), ephemeral_containers=(debugger("dbg-b"), debugger("dbg-a", target="app")))
    rt = runtime(
        instance("app", RS.RUNNING, "c1"),
        instance("dbg-a", RS.RUNNING, "e1", created=30),
        instance("dbg-b", RS.EXITED, "e2", created=20, exit_code=0),
    )
    status = generate(pod, rt)
    ephemeral = status.ephemeral_container_statuses or ()
    assert [s.name for s in ephemeral] == ["dbg-a", "dbg-b"]  # sorted by name, as Go does
    a, b = ephemeral
    assert a.state is not None and a.state.running is not None
    assert (a.ready, a.restart_count, a.started, a.container_id) == (False, 0, None, "containerd://e1")
    assert b.state is not None and b.state.terminated is not None
    assert (b.state.terminated.exit_code, b.state.terminated.reason) == (0, "Completed")
    # Ephemeral containers do not count for readiness or the pod's phase.
    assert [s.name for s in status.container_statuses or ()] == ["app"]
    assert status.phase == "Running"
    assert by_name(status.container_statuses, "app").ready is True


def test_ephemeral_container_not_started_yet() -> None:
    pod = make_pod(ctr("app"), ephemeral_containers=(debugger(),))
    rt = runtime(instance("app", RS.RUNNING, "c1"))
    (waiting,) = generate(pod, rt).ephemeral_container_statuses or ()
    assert waiting.state is not None and waiting.state.waiting is not None
    assert waiting.state.waiting.reason == "ContainerCreating"
    (failed,) = (
        generate(
            pod, rt, reasons={"debugger": ("ErrImagePull", "no such image")}
        ).ephemeral_container_statuses
        or ()
    )
    assert failed.state is not None and failed.state.waiting is not None
    assert (failed.state.waiting.reason, failed.state.waiting.message) == ("ErrImagePull", "no such image")


def test_no_ephemeral_containers_no_field() -> None:
    status = generate(make_pod(ctr("app")), runtime(instance("app", RS.RUNNING, "c1")), now=NOW)
    assert status.ephemeral_container_statuses is None
    assert "ephemeralContainerStatuses" not in status.to_dict()
