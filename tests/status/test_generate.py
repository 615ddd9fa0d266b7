"""Status generation: phase table, conditions, container statuses, deadline, QoS."""

from __future__ import annotations

import datetime as dt
from typing import Any

import attrs
import pytest

from kubelet_trio.api.container import Container, Probe, ResourceRequirements
from kubelet_trio.api.meta import ObjectMeta
from kubelet_trio.api.pod import Pod, PodReadinessGate, PodSpec
from kubelet_trio.api.quantity import Quantity
from kubelet_trio.api.status import (
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    PodCondition,
    PodStatus,
)
from kubelet_trio.container.types import ContainerState as RS
from kubelet_trio.container.types import ContainerStatus as RuntimeContainer
from kubelet_trio.container.types import PodStatus as RuntimePod
from kubelet_trio.container.types import SandboxStatus
from kubelet_trio.status import (
    DEADLINE_EXCEEDED_MESSAGE,
    active_deadline_exceeded,
    compute_pod_qos,
    generate_api_pod_status,
    get_phase,
    pod_qos,
    rfc3339,
)
from kubelet_trio.status.timefmt import format_time

T0 = 1_714_564_800 * 10**9  # 2024-05-01T12:00:00Z in CRI nanoseconds
T0_TEXT = "2024-05-01T12:00:00Z"
NOW = dt.datetime(2024, 5, 1, 12, 5, 0, tzinfo=dt.UTC)
NOW_TEXT = "2024-05-01T12:05:00Z"
EARLIER = "2024-05-01T11:00:00Z"
NODE_IPS = ("192.168.1.10",)
SEC = 10**9
MSG_DELETED = "The container could not be located when the pod was deleted.  The container used to be Running"


# --- builders --------------------------------------------------------------------------------------


def ctr(name: str, **kwargs: Any) -> Container:
    return Container(name=name, image=f"registry.local/{name}:1", **kwargs)


def sidecar(name: str, **kwargs: Any) -> Container:
    return ctr(name, restart_policy="Always", **kwargs)


def make_pod(
    *containers: Container,
    init: tuple[Container, ...] = (),
    policy: str = "Always",
    status: PodStatus | None = None,
    **spec: Any,
) -> Pod:
    return Pod(
        metadata=ObjectMeta(name="web", namespace="default", uid="uid-1"),
        spec=PodSpec(containers=containers, init_containers=init or None, restart_policy=policy, **spec),
        status=status,
    )


def instance(name: str, state: RS, cid: str, created: int = 0, **kwargs: Any) -> RuntimeContainer:
    return RuntimeContainer(
        id=cid,
        name=name,
        state=state,
        created_at=T0 + created * SEC,
        started_at=T0 + (created + 1) * SEC if state is not RS.CREATED else 0,
        finished_at=T0 + (created + 5) * SEC if state is RS.EXITED else 0,
        image=f"registry.local/{name}:1",
        image_ref=f"sha256:{name}",
        **kwargs,
    )


READY_SANDBOX = SandboxStatus(id="sb1", attempt=0, ready=True, created_at=T0 - SEC, ip="10.1.0.5")


def runtime(
    *containers: RuntimeContainer, sandboxes: tuple[SandboxStatus, ...] = (READY_SANDBOX,)
) -> RuntimePod:
    ips = tuple(s.ip for s in sandboxes[:1] if s.ready and s.ip)
    return RuntimePod(uid="uid-1", ips=ips, container_statuses=containers, sandbox_statuses=sandboxes)


def generate(pod: Pod, rt: RuntimePod, **kwargs: Any) -> PodStatus:
    kwargs.setdefault("old_status", None)
    kwargs.setdefault("now", NOW)
    kwargs.setdefault("node_ips", NODE_IPS)
    return generate_api_pod_status(pod, rt, **kwargs)


def cond(status: PodStatus, type_: str) -> PodCondition:
    found = [c for c in status.conditions or () if c.type == type_]
    assert len(found) == 1, status.conditions
    return found[0]


def by_name(statuses: tuple[ContainerStatus, ...] | None, name: str) -> ContainerStatus:
    return next(s for s in statuses or () if s.name == name)


# --- phase table (7.1) -----------------------------------------------------------------------------


def running(name: str, started: bool | None = True) -> ContainerStatus:
    return ContainerStatus(name=name, state=ContainerState(running=ContainerStateRunning()), started=started)


def exited(name: str, code: int) -> ContainerStatus:
    return ContainerStatus(
        name=name, state=ContainerState(terminated=ContainerStateTerminated(exit_code=code))
    )


def waiting(name: str, last_exit: int | None = None) -> ContainerStatus:
    last = (
        ContainerState(terminated=ContainerStateTerminated(exit_code=last_exit))
        if last_exit is not None
        else None
    )
    return ContainerStatus(
        name=name,
        state=ContainerState(waiting=ContainerStateWaiting(reason="X")),
        last_state=last or ContainerState(),
    )


def no_state(name: str) -> ContainerStatus:
    return ContainerStatus(name=name, state=ContainerState())


A, B = ctr("a"), ctr("b")
INIT = ctr("init")
SIDE = sidecar("side")

PHASE_TABLE = [
    # (id, containers, init containers, policy, init statuses, statuses, kwargs, expected)
    ("no statuses", (A,), (), "Always", [], [], {}, "Pending"),
    ("all running", (A, B), (), "Always", [], [running("a"), running("b")], {}, "Running"),
    ("running + unknown", (A, B), (), "Always", [], [running("a")], {}, "Pending"),
    ("running + no state", (A, B), (), "Always", [], [running("a"), no_state("b")], {}, "Pending"),
    ("running + waiting", (A, B), (), "Always", [], [running("a"), waiting("b")], {}, "Pending"),
    ("running + exited", (A, B), (), "Never", [], [running("a"), exited("b", 1)], {}, "Running"),
    (
        "Always all exited -> Running",
        (A, B),
        (),
        "Always",
        [],
        [exited("a", 0), exited("b", 1)],
        {},
        "Running",
    ),
    ("Always all exit 0 -> Running", (A,), (), "Always", [], [exited("a", 0)], {}, "Running"),
    (
        "OnFailure exit 0 -> Succeeded",
        (A, B),
        (),
        "OnFailure",
        [],
        [exited("a", 0), exited("b", 0)],
        {},
        "Succeeded",
    ),
    (
        "OnFailure exit 1 -> Running",
        (A, B),
        (),
        "OnFailure",
        [],
        [exited("a", 0), exited("b", 1)],
        {},
        "Running",
    ),
    ("Never exit 1 -> Failed", (A,), (), "Never", [], [exited("a", 1)], {}, "Failed"),
    ("Never exit 0 -> Succeeded", (A,), (), "Never", [], [exited("a", 0)], {}, "Succeeded"),
    ("waiting after a crash is stopped", (A,), (), "Always", [], [waiting("a", last_exit=2)], {}, "Running"),
    (
        "waiting after a crash, OnFailure",
        (A,),
        (),
        "OnFailure",
        [],
        [waiting("a", last_exit=2)],
        {},
        "Running",
    ),
    # a waiting container with a last termination is stopped but never "succeeded", whatever its code
    ("waiting after success, Never", (A,), (), "Never", [], [waiting("a", last_exit=0)], {}, "Failed"),
    ("waiting, never ran", (A,), (), "Always", [], [waiting("a")], {}, "Pending"),
    # terminal pods: containers will not restart whatever the policy
    (
        "terminal, failure",
        (A, B),
        (),
        "Always",
        [],
        [exited("a", 0), exited("b", 1)],
        {"term": True},
        "Failed",
    ),
    ("terminal, success", (A,), (), "Always", [], [exited("a", 0)], {"term": True}, "Succeeded"),
    (
        "terminal static pod",
        (A,),
        (),
        "Always",
        [],
        [exited("a", 1)],
        {"term": True, "static": True},
        "Running",
    ),
    (
        "terminal static OnFailure",
        (A,),
        (),
        "OnFailure",
        [],
        [exited("a", 0)],
        {"term": True, "static": True},
        "Succeeded",
    ),
    # regular init containers
    ("init no status", (A,), (INIT,), "Always", [], [waiting("a")], {}, "Pending"),
    ("init running", (A,), (INIT,), "Always", [running("init")], [waiting("a")], {}, "Pending"),
    ("init waiting", (A,), (INIT,), "Always", [waiting("init")], [waiting("a")], {}, "Pending"),
    ("init no state", (A,), (INIT,), "Always", [no_state("init")], [running("a")], {}, "Pending"),
    ("init done", (A,), (INIT,), "Always", [exited("init", 0)], [running("a")], {}, "Running"),
    (
        "init failed, Never -> Failed",
        (A,),
        (INIT,),
        "Never",
        [exited("init", 1)],
        [waiting("a")],
        {},
        "Failed",
    ),
    (
        "init crashed, Never -> Failed",
        (A,),
        (INIT,),
        "Never",
        [waiting("init", 1)],
        [waiting("a")],
        {},
        "Failed",
    ),
    (
        "init failed, OnFailure",
        (A,),
        (INIT,),
        "OnFailure",
        [exited("init", 1)],
        [waiting("a")],
        {},
        "Pending",
    ),
    ("init failed, Always", (A,), (INIT,), "Always", [waiting("init", 1)], [waiting("a")], {}, "Pending"),
    # sidecars (restartable init containers)
    ("sidecar started", (A,), (SIDE,), "Always", [running("side")], [running("a")], {}, "Running"),
    (
        "sidecar not started",
        (A,),
        (SIDE,),
        "Always",
        [running("side", started=False)],
        [waiting("a")],
        {},
        "Pending",
    ),
    (
        "sidecar restarting, initialized",
        (A,),
        (SIDE,),
        "Always",
        [running("side", started=False)],
        [running("a")],
        {"init": True},
        "Running",
    ),
    (
        "sidecar restarting, not initialized",
        (A,),
        (SIDE,),
        "Always",
        [running("side", started=False)],
        [running("a")],
        {},
        "Pending",
    ),
    ("sidecar no status", (A,), (SIDE,), "Always", [], [running("a")], {}, "Pending"),
    (
        "sidecar waiting",
        (A,),
        (SIDE,),
        "Always",
        [waiting("side")],
        [running("a")],
        {"init": True},
        "Pending",
    ),
    (
        "sidecar crashed is ignored",
        (A,),
        (SIDE,),
        "Always",
        [waiting("side", 1)],
        [running("a")],
        {},
        "Running",
    ),
    (
        "sidecar running keeps pod Running",
        (A,),
        (SIDE,),
        "Never",
        [running("side")],
        [exited("a", 0)],
        {},
        "Running",
    ),
    (
        "stopped sidecar is ignored",
        (A,),
        (SIDE,),
        "Never",
        [exited("side", 137)],
        [exited("a", 0)],
        {},
        "Succeeded",
    ),
    (
        "stopped sidecar, main failed",
        (A,),
        (SIDE,),
        "Never",
        [exited("side", 0)],
        [exited("a", 3)],
        {},
        "Failed",
    ),
    (
        "sidecar + init",
        (A,),
        (SIDE, INIT),
        "Always",
        [running("side"), running("init")],
        [waiting("a")],
        {},
        "Pending",
    ),
]


@pytest.mark.parametrize(
    ("containers", "init", "policy", "init_statuses", "statuses", "kwargs", "expected"),
    [pytest.param(*row[1:], id=row[0]) for row in PHASE_TABLE],
)
def test_phase_table(
    containers: tuple[Container, ...],
    init: tuple[Container, ...],
    policy: str,
    init_statuses: list[ContainerStatus],
    statuses: list[ContainerStatus],
    kwargs: dict[str, bool],
    expected: str,
) -> None:
    spec = PodSpec(containers=containers, init_containers=init, restart_policy=policy)
    phase = get_phase(
        spec,
        init_statuses,
        statuses,
        pod_is_terminal=kwargs.get("term", False),
        pod_has_initialized=kwargs.get("init", False),
        is_static=kwargs.get("static", False),
    )
    assert phase == expected


def test_phase_defaults_to_always() -> None:
    spec = PodSpec(containers=(A,))
    assert get_phase(
        spec, [], [exited("a", 1)], pod_is_terminal=False, pod_has_initialized=False, is_static=False
    ) == ("Running")


# --- a whole status --------------------------------------------------------------------------------


def test_pending_pod_without_sandbox() -> None:
    pod = make_pod(ctr("app"))
    status = generate(pod, RuntimePod(uid="uid-1"))
    assert status.to_dict() == {
        "phase": "Pending",
        "conditions": [
            {"type": "PodReadyToStartContainers", "status": "False", "lastTransitionTime": NOW_TEXT},
            {"type": "Initialized", "status": "True", "lastTransitionTime": NOW_TEXT},
            {
                "type": "Ready",
                "status": "False",
                "reason": "ContainersNotReady",
                "message": "containers with unready status: [app]",
                "lastTransitionTime": NOW_TEXT,
            },
            {
                "type": "ContainersReady",
                "status": "False",
                "reason": "ContainersNotReady",
                "message": "containers with unready status: [app]",
                "lastTransitionTime": NOW_TEXT,
            },
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": NOW_TEXT},
        ],
        "hostIP": "192.168.1.10",
        "hostIPs": [{"ip": "192.168.1.10"}],
        "startTime": NOW_TEXT,
        "containerStatuses": [
            {
                "name": "app",
                "state": {"waiting": {"reason": "ContainerCreating"}},
                "lastState": {},
                "ready": False,
                "restartCount": 0,
                "image": "registry.local/app:1",
                "imageID": "",
                "started": False,
            }
        ],
        "qosClass": "BestEffort",
    }


def test_running_ready_pod() -> None:
    pod = make_pod(ctr("app"))
    status = generate(pod, runtime(instance("app", RS.RUNNING, "c1")))
    assert status.phase == "Running"
    assert {c.type: c.status for c in status.conditions or ()} == {
        "PodReadyToStartContainers": "True",
        "Initialized": "True",
        "Ready": "True",
        "ContainersReady": "True",
        "PodScheduled": "True",
    }
    assert status.pod_ip == "10.1.0.5"
    assert [ip.ip for ip in status.pod_ips or ()] == ["10.1.0.5"]
    assert by_name(status.container_statuses, "app").to_dict() == {
        "name": "app",
        "state": {"running": {"startedAt": "2024-05-01T12:00:01Z"}},
        "lastState": {},
        "ready": True,
        "restartCount": 0,
        "image": "registry.local/app:1",
        "imageID": "sha256:app",
        "containerID": "containerd://c1",
        "started": True,
    }


def test_terminated_state_fields() -> None:
    pod = make_pod(ctr("app"), policy="Never")
    rt = runtime(instance("app", RS.EXITED, "c1", exit_code=3, reason="Error", message="boom"))
    status = generate(pod, rt)
    assert status.phase == "Failed"
    app = by_name(status.container_statuses, "app")
    assert app.state == ContainerState(
        terminated=ContainerStateTerminated(
            exit_code=3,
            reason="Error",
            message="boom",
            started_at="2024-05-01T12:00:01Z",
            finished_at="2024-05-01T12:00:05Z",
            container_id="containerd://c1",
        )
    )
    assert app.ready is False and app.started is False
    assert cond(status, "ContainersReady").reason == "PodFailed"
    assert cond(status, "Ready").reason == "PodFailed"


@pytest.mark.parametrize(("code", "reason"), [(0, "Completed"), (1, "Error")])
def test_terminated_reason_defaults(code: int, reason: str) -> None:
    status = generate(
        make_pod(ctr("app"), policy="Never"), runtime(instance("app", RS.EXITED, "c1", exit_code=code))
    )
    terminated = by_name(status.container_statuses, "app").state.terminated  # type: ignore[union-attr]
    assert terminated is not None and terminated.reason == reason


def test_created_and_unknown_instances_are_waiting() -> None:
    pod = make_pod(ctr("a"), ctr("b"))
    status = generate(pod, runtime(instance("a", RS.CREATED, "c1"), instance("b", RS.UNKNOWN, "c2")))
    assert by_name(status.container_statuses, "a").state == ContainerState(waiting=ContainerStateWaiting())
    assert by_name(status.container_statuses, "b").state == ContainerState(waiting=ContainerStateWaiting())
    assert status.phase == "Pending"


# --- readiness and startup -------------------------------------------------------------------------


PROBE = Probe(period_seconds=10)


def test_readiness_probe_without_result_is_not_ready() -> None:
    pod = make_pod(ctr("app", readiness_probe=PROBE))
    status = generate(pod, runtime(instance("app", RS.RUNNING, "c1")))
    app = by_name(status.container_statuses, "app")
    assert (app.started, app.ready) == (True, False)
    assert status.phase == "Running"
    assert cond(status, "Ready").message == "containers with unready status: [app]"


@pytest.mark.parametrize("key", ["c1", "containerd://c1"])
def test_readiness_results_by_container_id(key: str) -> None:
    pod = make_pod(ctr("app", readiness_probe=PROBE))
    rt = runtime(instance("app", RS.RUNNING, "c1"))
    assert by_name(generate(pod, rt, readiness={key: True}).container_statuses, "app").ready is True
    assert by_name(generate(pod, rt, readiness={key: False}).container_statuses, "app").ready is False


def test_startup_probe_gates_started_and_ready() -> None:
    pod = make_pod(ctr("app", startup_probe=PROBE))
    rt = runtime(instance("app", RS.RUNNING, "c1"))
    app = by_name(generate(pod, rt).container_statuses, "app")
    assert (app.started, app.ready) == (False, False)
    app = by_name(generate(pod, rt, started={"c1": True}).container_statuses, "app")
    assert (app.started, app.ready) == (True, True)
    # Once reported started it stays started for the same container (the probe stops running).
    old = generate(pod, rt, started={"c1": True})
    app = by_name(generate(pod, rt, old_status=old).container_statuses, "app")
    assert (app.started, app.ready) == (True, True)
    # A new instance must pass its own startup probe.
    rt2 = runtime(instance("app", RS.RUNNING, "c2", created=10), instance("app", RS.EXITED, "c1"))
    app = by_name(generate(pod, rt2, old_status=old).container_statuses, "app")
    assert app.started is False


def test_sidecar_startup_gates_initialization() -> None:
    pod = make_pod(ctr("app"), init=(sidecar("proxy", startup_probe=PROBE),))
    rt = runtime(instance("proxy", RS.RUNNING, "s1"))
    status = generate(pod, rt)
    assert status.phase == "Pending"
    initialized = cond(status, "Initialized")
    assert (initialized.status, initialized.reason, initialized.message) == (
        "False",
        "ContainersNotInitialized",
        "containers with incomplete status: [proxy]",
    )
    assert by_name(status.container_statuses, "app").state == ContainerState(
        waiting=ContainerStateWaiting(reason="PodInitializing")
    )
    status = generate(pod, rt, started={"s1": True})
    assert cond(status, "Initialized").status == "True"
    proxy = by_name(status.init_container_statuses, "proxy")
    assert (proxy.started, proxy.ready) == (True, True)
    # The sidecar counts for ContainersReady.
    status = generate(
        pod, runtime(instance("proxy", RS.RUNNING, "s1"), instance("app", RS.RUNNING, "c1", created=5))
    )
    assert cond(status, "ContainersReady").message == "containers with unready status: [proxy]"
    assert cond(status, "Initialized").status == "True"  # a regular container has started
    assert status.phase == "Running"  # the sidecar is restarting after initialization


# --- init containers -------------------------------------------------------------------------------


def test_init_container_in_progress() -> None:
    pod = make_pod(ctr("app"), init=(ctr("setup"), ctr("migrate")))
    status = generate(pod, runtime(instance("setup", RS.RUNNING, "i1")))
    assert status.phase == "Pending"
    assert [s.name for s in status.init_container_statuses or ()] == ["setup", "migrate"]
    assert by_name(status.init_container_statuses, "migrate").state == ContainerState(
        waiting=ContainerStateWaiting(reason="PodInitializing")
    )
    initialized = cond(status, "Initialized")
    assert (initialized.status, initialized.reason, initialized.message) == (
        "False",
        "ContainersNotInitialized",
        "containers with incomplete status: [setup migrate]",
    )
    assert by_name(status.container_statuses, "app").state == ContainerState(
        waiting=ContainerStateWaiting(reason="PodInitializing")
    )


def test_init_containers_done() -> None:
    pod = make_pod(ctr("app"), init=(ctr("setup"),))
    rt = runtime(instance("setup", RS.EXITED, "i1"), instance("app", RS.RUNNING, "c1", created=10))
    status = generate(pod, rt)
    setup = by_name(status.init_container_statuses, "setup")
    assert setup.ready is True
    assert setup.state.terminated.reason == "Completed"  # type: ignore[union-attr]
    assert cond(status, "Initialized").status == "True"
    assert status.phase == "Running"


def test_init_failure_under_never_fails_the_pod() -> None:
    pod = make_pod(ctr("app"), init=(ctr("setup"),), policy="Never")
    status = generate(pod, runtime(instance("setup", RS.EXITED, "i1", exit_code=1)))
    assert status.phase == "Failed"
    assert cond(status, "ContainersReady").reason == "PodFailed"


def test_removed_init_container_of_an_initialized_pod_counts_as_completed() -> None:
    pod = make_pod(ctr("app"), init=(ctr("setup"),))
    status = generate(pod, runtime(instance("app", RS.RUNNING, "c1")))
    setup = by_name(status.init_container_statuses, "setup")
    assert setup.state.terminated.exit_code == 0  # type: ignore[union-attr]
    assert setup.ready is True
    assert status.phase == "Running"


def test_succeeded_init_container_is_not_flipped_to_waiting() -> None:
    pod = make_pod(ctr("app"), init=(ctr("setup"),))
    rt = runtime(instance("setup", RS.EXITED, "i1"))
    status = generate(pod, rt, reasons={"setup": ("CrashLoopBackOff", "nope")})
    assert by_name(status.init_container_statuses, "setup").state.terminated is not None  # type: ignore[union-attr]


# --- restarts, lastState, reasons ------------------------------------------------------------------


def test_newest_instance_is_state_second_is_last_state() -> None:
    pod = make_pod(ctr("app"))
    rt = runtime(
        instance("app", RS.EXITED, "c0", created=0, exit_code=2),
        instance("app", RS.RUNNING, "c2", created=20, restart_count=2),
        instance("app", RS.EXITED, "c1", created=10, exit_code=1, restart_count=1),
    )
    app = by_name(generate(pod, rt).container_statuses, "app")
    assert app.container_id == "containerd://c2"
    assert app.restart_count == 2
    assert app.state.running is not None  # type: ignore[union-attr]
    assert app.last_state == ContainerState(
        terminated=ContainerStateTerminated(
            exit_code=1,
            reason="Error",
            started_at="2024-05-01T12:00:11Z",
            finished_at="2024-05-01T12:00:15Z",
            container_id="containerd://c1",
        )
    )


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        ("CrashLoopBackOff", "back-off 20s restarting failed container=app pod=default/web"),
        ("CreateContainerError", "failed to create"),
    ],
)
def test_reason_cache_turns_an_exited_container_to_waiting(reason: str, message: str) -> None:
    pod = make_pod(ctr("app"))
    rt = runtime(instance("app", RS.EXITED, "c1", exit_code=1, restart_count=3))
    app = by_name(generate(pod, rt, reasons={"app": (reason, message)}).container_statuses, "app")
    assert app.state == ContainerState(waiting=ContainerStateWaiting(reason=reason, message=message))
    assert app.last_state is not None and app.last_state.terminated is not None
    assert app.last_state.terminated.exit_code == 1
    assert app.restart_count == 3
    assert app.container_id == "containerd://c1"


@pytest.mark.parametrize("reason", ["ErrImagePull", "ImagePullBackOff"])
def test_reason_for_a_container_that_never_ran(reason: str) -> None:
    pod = make_pod(ctr("app"))
    app = by_name(
        generate(pod, runtime(), reasons={"app": (reason, "pull failed")}).container_statuses, "app"
    )
    assert app.state == ContainerState(waiting=ContainerStateWaiting(reason=reason, message="pull failed"))
    assert app.last_state == ContainerState()


@pytest.mark.parametrize(("policy", "code"), [("Never", 1), ("OnFailure", 0)])
def test_no_waiting_reason_for_a_container_that_will_not_restart(policy: str, code: int) -> None:
    pod = make_pod(ctr("app"), policy=policy)
    rt = runtime(instance("app", RS.EXITED, "c1", exit_code=code))
    app = by_name(generate(pod, rt, reasons={"app": ("CrashLoopBackOff", "x")}).container_statuses, "app")
    assert app.state.terminated is not None  # type: ignore[union-attr]


def test_no_waiting_reason_when_the_pod_is_deleted() -> None:
    pod = make_pod(ctr("app"))
    pod = attrs.evolve(pod, metadata=attrs.evolve(pod.metadata, deletion_timestamp=T0_TEXT))
    rt = runtime(instance("app", RS.EXITED, "c1", exit_code=1))
    app = by_name(generate(pod, rt, reasons={"app": ("CrashLoopBackOff", "x")}).container_statuses, "app")
    assert app.state.terminated is not None  # type: ignore[union-attr]


def test_restart_count_kept_without_an_instance() -> None:
    pod = make_pod(ctr("app"))
    old = PodStatus(
        phase="Running",
        container_statuses=(
            ContainerStatus(
                name="app",
                state=ContainerState(waiting=ContainerStateWaiting(reason="CrashLoopBackOff")),
                last_state=ContainerState(terminated=ContainerStateTerminated(exit_code=1)),
                restart_count=4,
            ),
        ),
    )
    app = by_name(generate(pod, runtime(), old_status=old).container_statuses, "app")
    assert app.restart_count == 4
    assert app.last_state == ContainerState(terminated=ContainerStateTerminated(exit_code=1))
    assert app.state == ContainerState(waiting=ContainerStateWaiting(reason="ContainerCreating"))


def test_vanished_running_container_is_inferred_terminated() -> None:
    pod = make_pod(ctr("app"))
    old = generate(pod, runtime(instance("app", RS.RUNNING, "c1", restart_count=1)))
    status = generate(pod, runtime(), old_status=old)
    app = by_name(status.container_statuses, "app")
    assert app.restart_count == 2
    assert app.last_state == ContainerState(
        terminated=ContainerStateTerminated(
            exit_code=137,
            reason="ContainerStatusUnknown",
            message=MSG_DELETED,
        )
    )
    assert status.phase == "Running"  # stopped, not waiting: the pod does not fall back to Pending


def test_unknown_instance_of_a_running_container() -> None:
    pod = make_pod(ctr("app"))
    old = generate(pod, runtime(instance("app", RS.RUNNING, "c1")))
    app = by_name(
        generate(pod, runtime(instance("app", RS.UNKNOWN, "c1")), old_status=old).container_statuses, "app"
    )
    assert app.state == ContainerState(
        terminated=ContainerStateTerminated(
            exit_code=137,
            reason="ContainerStatusUnknown",
            message="The container could not be located when the pod was terminated",
        )
    )
    assert app.restart_count == 1


def test_terminated_old_status_is_reused_when_the_runtime_forgot() -> None:
    pod = make_pod(ctr("app"), policy="Never")
    old = generate(pod, runtime(instance("app", RS.EXITED, "c1", exit_code=0)))
    status = generate(pod, runtime(), old_status=old)
    assert by_name(status.container_statuses, "app").state == by_name(old.container_statuses, "app").state
    assert status.phase == "Succeeded"


def test_statuses_are_ordered() -> None:
    pod = make_pod(ctr("b"), ctr("c"), ctr("a"), init=(ctr("z"), ctr("y")))
    status = generate(pod, runtime())
    assert [s.name for s in status.container_statuses or ()] == ["a", "b", "c"]
    assert [s.name for s in status.init_container_statuses or ()] == ["z", "y"]


def test_image_is_the_spec_image() -> None:
    pod = make_pod(Container(name="app", image="busybox"))
    rt = runtime(attrs.evolve(instance("app", RS.RUNNING, "c1"), image="docker.io/library/busybox:latest"))
    app = by_name(generate(pod, rt).container_statuses, "app")
    assert (app.image, app.image_id) == ("busybox", "sha256:app")


# --- conditions ------------------------------------------------------------------------------------


def test_last_transition_time_kept_while_status_unchanged() -> None:
    pod = make_pod(ctr("app"))
    rt = runtime(instance("app", RS.RUNNING, "c1"))
    old = generate(pod, rt, now=EARLIER)
    assert cond(old, "Ready").last_transition_time == EARLIER
    same = generate(pod, rt, old_status=old)
    assert all(c.last_transition_time == EARLIER for c in same.conditions or ())
    # The container exits: readiness flips, scheduling does not.
    exited_rt = runtime(instance("app", RS.EXITED, "c1", exit_code=1))
    changed = generate(pod, exited_rt, old_status=old)
    assert cond(changed, "Ready").last_transition_time == NOW_TEXT
    assert cond(changed, "ContainersReady").last_transition_time == NOW_TEXT
    assert cond(changed, "PodScheduled").last_transition_time == EARLIER
    assert cond(changed, "Initialized").last_transition_time == EARLIER
    assert changed.start_time == EARLIER


def test_scheduler_condition_time_is_kept_from_the_api() -> None:
    scheduled = PodCondition(type="PodScheduled", status="True", last_transition_time=EARLIER)
    pod = make_pod(ctr("app"), status=PodStatus(phase="Pending", conditions=(scheduled,)))
    assert cond(generate(pod, runtime()), "PodScheduled").last_transition_time == EARLIER


@pytest.mark.parametrize(
    ("api_conditions", "status", "reason", "message"),
    [
        (
            (),
            "False",
            "ReadinessGatesNotReady",
            'corresponding condition of pod readiness gate "lb/ready" does not exist.',
        ),
        (
            (PodCondition(type="lb/ready", status="False"),),
            "False",
            "ReadinessGatesNotReady",
            'the status of pod readiness gate "lb/ready" is not "True", but False',
        ),
        ((PodCondition(type="lb/ready", status="True"),), "True", None, None),
    ],
)
def test_readiness_gates(
    api_conditions: tuple[PodCondition, ...], status: str, reason: str | None, message: str | None
) -> None:
    pod = make_pod(
        ctr("app"),
        readiness_gates=(PodReadinessGate(condition_type="lb/ready"),),
        status=PodStatus(phase="Running", conditions=api_conditions),
    )
    result = generate(pod, runtime(instance("app", RS.RUNNING, "c1")))
    ready = cond(result, "Ready")
    assert (ready.status, ready.reason, ready.message) == (status, reason, message)
    assert cond(result, "ContainersReady").status == "True"
    assert [c.type for c in result.conditions or ()][: len(api_conditions)] == [
        c.type for c in api_conditions
    ]


def test_kubelet_conditions_from_the_api_are_regenerated_and_disruption_target_kept() -> None:
    stale_ready = PodCondition(type="Ready", status="True", last_transition_time=EARLIER)
    disruption = PodCondition(type="DisruptionTarget", status="True", reason="EvictionByEvictionAPI")
    pod = make_pod(ctr("app"), status=PodStatus(phase="Running", conditions=(stale_ready,)))
    old = PodStatus(phase="Running", conditions=(stale_ready, disruption))
    result = generate(pod, runtime(), old_status=old)
    types = [c.type for c in result.conditions or ()]
    assert types == [
        "DisruptionTarget",
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    assert cond(result, "Ready").status == "False"
    assert cond(result, "Ready").last_transition_time == NOW_TEXT


def test_succeeded_pod_conditions() -> None:
    pod = make_pod(ctr("app"), init=(ctr("setup"),), policy="Never")
    rt = runtime(instance("setup", RS.EXITED, "i1"), instance("app", RS.EXITED, "c1", created=10))
    status = generate(pod, rt)
    assert status.phase == "Succeeded"
    assert (cond(status, "Initialized").status, cond(status, "Initialized").reason) == (
        "True",
        "PodCompleted",
    )
    assert (cond(status, "ContainersReady").status, cond(status, "ContainersReady").reason) == (
        "False",
        "PodCompleted",
    )
    assert (cond(status, "Ready").status, cond(status, "Ready").reason) == ("False", "PodCompleted")


@pytest.mark.parametrize(
    ("sandboxes", "host_network", "expected"),
    [
        ((), False, "False"),
        ((READY_SANDBOX,), False, "True"),
        ((attrs.evolve(READY_SANDBOX, ip=""),), False, "False"),
        ((attrs.evolve(READY_SANDBOX, ready=False),), False, "False"),
        ((attrs.evolve(READY_SANDBOX, id="sb2", attempt=1), READY_SANDBOX), False, "False"),  # two ready
        ((attrs.evolve(READY_SANDBOX, ip="", host_network=True),), True, "True"),
        ((READY_SANDBOX,), True, "False"),  # network mode changed
        (
            (attrs.evolve(READY_SANDBOX, id="sb2", attempt=1), attrs.evolve(READY_SANDBOX, ready=False)),
            False,
            "True",
        ),
    ],
)
def test_pod_ready_to_start_containers(
    sandboxes: tuple[SandboxStatus, ...], host_network: bool, expected: str
) -> None:
    pod = make_pod(ctr("app"), host_network=host_network or None)
    status = generate(pod, RuntimePod(uid="uid-1", sandbox_statuses=sandboxes))
    assert cond(status, "PodReadyToStartContainers").status == expected


# --- phase post-processing -------------------------------------------------------------------------


def test_terminal_phase_is_never_left() -> None:
    pod = make_pod(ctr("app"), policy="Never")
    old = PodStatus(phase="Succeeded", reason="Done", message="all good", start_time=EARLIER)
    status = generate(pod, runtime(instance("app", RS.RUNNING, "c1")), old_status=old)
    assert (status.phase, status.reason, status.message) == ("Succeeded", "Done", "all good")


def test_terminal_api_phase_wins_over_the_cache() -> None:
    pod = make_pod(ctr("app"), status=PodStatus(phase="Failed", reason="Evicted"))
    old = PodStatus(phase="Running")
    status = generate(pod, runtime(instance("app", RS.RUNNING, "c1")), old_status=old)
    assert status.phase == "Failed"
    assert status.reason is None  # the phase changed relative to the cache: its reason is not carried


def test_reason_cleared_on_phase_change() -> None:
    pod = make_pod(ctr("app"))
    old = PodStatus(phase="Pending", reason="Something", message="m")
    status = generate(pod, runtime(instance("app", RS.RUNNING, "c1")), old_status=old)
    assert (status.phase, status.reason, status.message) == ("Running", None, None)


def test_pod_is_terminal_forces_terminal_phase() -> None:
    pod = make_pod(ctr("app"))
    rt = runtime(instance("app", RS.EXITED, "c1", exit_code=0))
    assert generate(pod, rt).phase == "Running"
    assert generate(pod, rt, pod_is_terminal=True).phase == "Succeeded"
    static = attrs.evolve(
        pod, metadata=attrs.evolve(pod.metadata, annotations={"kubernetes.io/config.source": "file"})
    )
    assert generate(static, rt, pod_is_terminal=True).phase == "Running"


# --- active deadline -------------------------------------------------------------------------------


def test_active_deadline_fails_the_pod() -> None:
    pod = make_pod(ctr("app"), active_deadline_seconds=60)
    rt = runtime(instance("app", RS.RUNNING, "c1"))
    old = PodStatus(phase="Running", start_time="2024-05-01T12:04:00Z")
    status = generate(pod, rt, old_status=old)  # exactly 60 s later
    assert (status.phase, status.reason, status.message) == (
        "Failed",
        "DeadlineExceeded",
        DEADLINE_EXCEEDED_MESSAGE,
    )
    assert cond(status, "Ready").reason == "PodFailed"
    old = PodStatus(phase="Running", start_time="2024-05-01T12:04:01Z")
    assert generate(pod, rt, old_status=old).phase == "Running"


def test_active_deadline_exceeded() -> None:
    pod = make_pod(ctr("app"), active_deadline_seconds=30)
    started = PodStatus(phase="Running", start_time=T0_TEXT)
    assert not active_deadline_exceeded(pod, started, T0 + 29 * SEC)
    assert active_deadline_exceeded(pod, started, T0 + 30 * SEC)
    assert active_deadline_exceeded(pod, started, "2024-05-01T12:01:00Z")
    assert not active_deadline_exceeded(pod, PodStatus(phase="Pending"), NOW)  # no start time
    assert not active_deadline_exceeded(make_pod(ctr("app")), started, NOW)  # no deadline
    assert active_deadline_exceeded(attrs.evolve(pod, status=started), None, NOW)  # pod.status fallback


# --- IPs, start time, QoS --------------------------------------------------------------------------


def test_host_network_pod_gets_node_ips() -> None:
    pod = make_pod(ctr("app"), host_network=True)
    sandbox = SandboxStatus(id="sb", attempt=0, ready=True, host_network=True)
    status = generate(
        pod, RuntimePod(uid="uid-1", sandbox_statuses=(sandbox,)), node_ips=("192.168.1.10", "fd00::10")
    )
    assert status.pod_ip == "192.168.1.10"
    assert [ip.ip for ip in status.pod_ips or ()] == ["192.168.1.10", "fd00::10"]
    assert [ip.ip for ip in status.host_ips or ()] == ["192.168.1.10", "fd00::10"]


@pytest.mark.parametrize(
    ("node_ips", "expected"),
    [
        (("192.168.1.10",), ["10.1.0.5", "fd00::5"]),
        (("fd00::10",), ["fd00::5", "10.1.0.5"]),
        ((), ["10.1.0.5", "fd00::5"]),
    ],
)
def test_pod_ips_one_per_family_node_family_first(node_ips: tuple[str, ...], expected: list[str]) -> None:
    rt = attrs.evolve(runtime(), ips=("fd00::5", "10.1.0.5", "10.1.0.6"))
    status = generate(make_pod(ctr("app")), rt, node_ips=node_ips)
    assert [ip.ip for ip in status.pod_ips or ()] == expected
    assert status.pod_ip == expected[0]


def test_no_node_ips_no_host_ip() -> None:
    status = generate(make_pod(ctr("app")), runtime(), node_ips=())
    assert status.host_ip is None and status.host_ips is None


def test_start_time_kept() -> None:
    pod = make_pod(ctr("app"), status=PodStatus(start_time=EARLIER))
    assert generate(pod, runtime()).start_time == EARLIER
    assert generate(make_pod(ctr("app")), runtime()).start_time == NOW_TEXT


def res(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None) -> ResourceRequirements:
    def q(d: dict[str, str] | None) -> dict[str, Quantity] | None:
        return {k: Quantity(v) for k, v in d.items()} if d is not None else None

    return ResourceRequirements(requests=q(requests), limits=q(limits))


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ([None], "BestEffort"),
        ([res(requests={"cpu": "0"})], "BestEffort"),
        ([res(requests={"ephemeral-storage": "1Gi"})], "BestEffort"),
        ([res(requests={"cpu": "100m"})], "Burstable"),
        ([res(limits={"cpu": "1", "memory": "1Gi"})], "Guaranteed"),  # requests default to limits
        (
            [res(requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "1000m", "memory": "1024Mi"})],
            "Guaranteed",
        ),
        ([res(requests={"cpu": "500m", "memory": "1Gi"}, limits={"cpu": "1", "memory": "1Gi"})], "Burstable"),
        ([res(limits={"cpu": "1"})], "Burstable"),
        ([res(limits={"cpu": "1", "memory": "1Gi"}), None], "Burstable"),
        (
            [res(limits={"cpu": "1", "memory": "1Gi"}), res(limits={"cpu": "2", "memory": "2Gi"})],
            "Guaranteed",
        ),
    ],
)
def test_qos(resources: list[ResourceRequirements | None], expected: str) -> None:
    containers = tuple(ctr(f"c{i}", resources=r) for i, r in enumerate(resources))
    spec = PodSpec(containers=containers[:1], init_containers=containers[1:])
    assert compute_pod_qos(spec) == expected
    assert generate(make_pod(*containers), runtime()).qos_class == expected


def test_qos_kept_from_the_api() -> None:
    pod = make_pod(ctr("app"), status=PodStatus(qos_class="Guaranteed"))
    assert pod_qos(pod) == "Guaranteed"


# --- time formatting -------------------------------------------------------------------------------


def test_rfc3339() -> None:
    assert rfc3339(0) == "1970-01-01T00:00:00Z"
    assert rfc3339(T0) == T0_TEXT
    assert rfc3339(T0 + 999_999_999) == T0_TEXT  # truncated to the second, like metav1.Time
    assert format_time(NOW) == NOW_TEXT
    assert format_time(dt.datetime(2024, 5, 1, 14, 5, tzinfo=dt.timezone(dt.timedelta(hours=2)))) == NOW_TEXT
    assert format_time(T0) == T0_TEXT
    assert format_time("2030-01-01T00:00:00Z") == "2030-01-01T00:00:00Z"


@attrs.define
class FixedClock:
    moment: dt.datetime

    def now(self) -> dt.datetime:
        return self.moment


def test_now_from_a_provider_or_a_clock() -> None:
    pod = make_pod(ctr("app"))
    assert generate_api_pod_status(pod, runtime(), old_status=None, now=lambda: NOW).start_time == NOW_TEXT
    assert generate_api_pod_status(pod, runtime(), old_status=None, now=T0).start_time == T0_TEXT
    assert (
        generate_api_pod_status(pod, runtime(), old_status=None, clock=FixedClock(NOW)).start_time == NOW_TEXT
    )
    with pytest.raises(TypeError):
        generate_api_pod_status(pod, runtime(), old_status=None)
