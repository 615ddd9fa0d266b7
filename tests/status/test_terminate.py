"""The status manager's last word on a finished pod (Go ``TerminatePod``, v1.33 rules).

Containers without a terminated state become ``ContainerStatusUnknown`` (exit 137), except where the pod
shows no sign of having initialized: then its regular containers keep waiting (the failed init container
already explains the failure), and only the init containers that were ever started are overridden.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubelet_trio.api.container import Container
from kubelet_trio.api.meta import ObjectMeta
from kubelet_trio.api.pod import Pod, PodSpec
from kubelet_trio.api.status import (
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    PodStatus,
)
from kubelet_trio.status.manager import StatusManager, has_pod_initialized, initialized_init_containers

UNKNOWN = ContainerState(
    terminated=ContainerStateTerminated(
        exit_code=137,
        reason="ContainerStatusUnknown",
        message="The container could not be located when the pod was terminated",
    )
)
PENDING_INIT = ContainerState(waiting=ContainerStateWaiting(reason="PodInitializing"))


def waiting(name: str, reason: str = "PodInitializing", *, last_exit: int | None = None) -> ContainerStatus:
    last = ContainerState()
    if last_exit is not None:
        reason = "Completed" if last_exit == 0 else "Error"
        last = ContainerState(terminated=ContainerStateTerminated(exit_code=last_exit, reason=reason))
    return ContainerStatus(
        name=name,
        state=ContainerState(waiting=ContainerStateWaiting(reason=reason)),
        last_state=last,
        ready=False,
        restart_count=0,
    )


def exited(name: str, code: int) -> ContainerStatus:
    reason = "Completed" if code == 0 else "Error"
    terminated = ContainerStateTerminated(
        exit_code=code,
        reason=reason,
        started_at="2024-05-01T12:00:01Z",
        finished_at="2024-05-01T12:00:02Z",
        container_id=f"containerd://{name}",
    )
    return ContainerStatus(
        name=name,
        state=ContainerState(terminated=terminated),
        last_state=ContainerState(),
        ready=code == 0,
        restart_count=0,
        container_id=f"containerd://{name}",
    )


def running(name: str, *, started: bool = True) -> ContainerStatus:
    return ContainerStatus(
        name=name,
        state=ContainerState(running=ContainerStateRunning(started_at="2024-05-01T12:00:03Z")),
        last_state=ContainerState(),
        ready=True,
        restart_count=0,
        started=started,
    )


def make_pod(
    *apps: str,
    init: tuple[Container, ...] = (),
    status: PodStatus | None = None,
    annotations: dict[str, str] | None = None,
) -> Pod:
    return Pod(
        metadata=ObjectMeta(name="web", namespace="default", uid="uid-1", annotations=annotations),
        spec=PodSpec(
            containers=tuple(Container(name=a, image="img") for a in apps),
            init_containers=init or None,
            restart_policy="Never",
        ),
        status=status,
    )


def inits(*names: str, **kwargs: Any) -> tuple[Container, ...]:
    return tuple(Container(name=n, image="img", **kwargs) for n in names)


def terminate(pod: Pod, cached: PodStatus) -> PodStatus:
    manager = StatusManager()
    manager.set_pod_status(pod, cached)
    manager.terminate_pod(pod)
    final = manager.get(pod.uid)
    assert final is not None
    return final


def by_name(statuses: tuple[ContainerStatus, ...] | None, name: str) -> ContainerStatus:
    return next(s for s in statuses or () if s.name == name)


# --- the pod that never initialized --------------------------------------------------------------------


def test_app_containers_of_a_pod_whose_init_container_failed_keep_waiting() -> None:
    """restartPolicy Never, the only init container exits 1: the app container never ran."""
    pod = make_pod("app", "side", init=inits("setup"))
    failed_init = exited("setup", 1)
    cached = PodStatus(
        phase="Failed",
        init_container_statuses=(failed_init,),
        container_statuses=(waiting("app"), waiting("side")),
    )
    final = terminate(pod, cached)
    assert final.phase == "Failed"
    assert final.init_container_statuses == (failed_init,)
    assert [s.state for s in final.container_statuses or ()] == [PENDING_INIT, PENDING_INIT]
    assert final == cached  # nothing to override


def test_the_api_copy_of_a_failed_initialization_is_no_evidence_either() -> None:
    """The pod's own status (what the API showed the worker) decides, here with the failure in it too."""
    api = PodStatus(
        phase="Pending",
        init_container_statuses=(exited("setup", 1),),
        container_statuses=(waiting("app"),),
    )
    pod = make_pod("app", init=inits("setup"), status=api)
    final = terminate(pod, PodStatus(phase="Failed", **_statuses(api)))
    assert by_name(final.container_statuses, "app").state == PENDING_INIT


def _statuses(status: PodStatus) -> dict[str, Any]:
    return {
        "init_container_statuses": status.init_container_statuses,
        "container_statuses": status.container_statuses,
    }


def test_only_init_containers_that_were_started_are_overridden() -> None:
    """init1 done, init2 started but lost, init3 and init4 never started: only init2 becomes Unknown."""
    pod = make_pod("app", init=inits("init1", "init2", "init3", "init4"))
    cached = PodStatus(
        phase="Pending",
        init_container_statuses=(exited("init1", 0), running("init2"), waiting("init3"), waiting("init4")),
        container_statuses=(waiting("app"),),
    )
    final = terminate(pod, cached)
    init1, init2, init3, init4 = final.init_container_statuses or ()
    assert init1 == exited("init1", 0)
    assert init2.state == UNKNOWN
    assert (init3.state, init4.state) == (PENDING_INIT, PENDING_INIT)
    assert by_name(final.container_statuses, "app").state == PENDING_INIT
    assert final.phase == "Failed"  # not static: a finished pod gets a terminal phase


def test_a_waiting_init_container_that_had_exited_before_counts_as_started() -> None:
    """OnFailure-style retries: waiting (CrashLoopBackOff) with a terminated lastState was started."""
    pod = make_pod("app", init=inits("init1", "init2", "init3"))
    cached = PodStatus(
        phase="Pending",
        init_container_statuses=(
            exited("init1", 0),
            waiting("init2", "CrashLoopBackOff", last_exit=1),
            waiting("init3"),
        ),
        container_statuses=(waiting("app"),),
    )
    _, init2, init3 = terminate(pod, cached).init_container_statuses or ()
    assert init2.state == UNKNOWN
    assert init2.last_state == ContainerState(
        terminated=ContainerStateTerminated(exit_code=1, reason="Error")
    )
    assert init3.state == PENDING_INIT


def test_with_every_init_container_waiting_the_first_one_is_overridden() -> None:
    pod = make_pod("app", init=inits("init1", "init2"))
    cached = PodStatus(
        phase="Pending",
        init_container_statuses=(waiting("init1", "ErrImagePull"), waiting("init2")),
        container_statuses=(waiting("app"),),
    )
    final = terminate(pod, cached)
    init1, init2 = final.init_container_statuses or ()
    assert (init1.state, init2.state) == (UNKNOWN, PENDING_INIT)
    assert by_name(final.container_statuses, "app").state == PENDING_INIT


# --- pods that had initialized -------------------------------------------------------------------------


def test_containers_of_a_pod_without_init_containers_become_unknown() -> None:
    pod = make_pod("app", "other")
    cached = PodStatus(
        phase="Running",
        container_statuses=(waiting("app", "ContainerCreating"), exited("other", 0)),
    )
    final = terminate(pod, cached)
    assert by_name(final.container_statuses, "app").state == UNKNOWN
    assert by_name(final.container_statuses, "other") == exited("other", 0)  # terminated: kept as it was
    assert final.phase == "Failed"


def test_a_container_that_had_been_running_still_becomes_unknown() -> None:
    """The API shows the app container running; the runtime lost it before it could be seen exiting."""
    api = PodStatus(
        phase="Running",
        init_container_statuses=(exited("setup", 0),),
        container_statuses=(running("app"),),
    )
    pod = make_pod("app", "never-started", init=inits("setup"), status=api)
    cached = PodStatus(
        phase="Running",
        init_container_statuses=(exited("setup", 0),),
        container_statuses=(running("app"), waiting("never-started", "ErrImagePull")),
    )
    final = terminate(pod, cached)
    app = by_name(final.container_statuses, "app")
    assert app.state == UNKNOWN
    assert app.ready is True  # Go changes the state only
    # once initialized, even a regular container that never started is reported as gone
    assert by_name(final.container_statuses, "never-started").state == UNKNOWN
    assert final.init_container_statuses == (exited("setup", 0),)


@pytest.mark.parametrize(
    ("last_init", "expected"),
    [
        (exited("setup", 0), True),
        (waiting("setup", last_exit=0), True),  # it succeeded once, then the sandbox went
        (exited("setup", 2), False),
        (waiting("setup", "CrashLoopBackOff", last_exit=1), False),
        (running("setup"), False),
        (waiting("setup"), False),
    ],
)
def test_the_last_init_container_decides_initialization(last_init: ContainerStatus, expected: bool) -> None:
    api = PodStatus(
        init_container_statuses=(exited("first", 0), last_init), container_statuses=(waiting("app"),)
    )
    pod = make_pod("app", init=inits("first", "setup"), status=api)
    assert has_pod_initialized(pod) is expected


def test_any_regular_container_out_of_waiting_means_initialized() -> None:
    for app in (running("app"), exited("app", 1), waiting("app", "CrashLoopBackOff", last_exit=1)):
        api = PodStatus(init_container_statuses=(waiting("setup"),), container_statuses=(app,))
        assert has_pod_initialized(make_pod("app", init=inits("setup"), status=api))
    assert has_pod_initialized(make_pod("app"))  # no init containers: always
    assert not has_pod_initialized(make_pod("app", init=inits("setup")))  # no status at all: no evidence


@pytest.mark.parametrize(
    ("last_init", "expected"),
    [
        (running("sidecar", started=True), True),
        (running("sidecar", started=False), False),
        (exited("sidecar", 0), False),  # a sidecar counts only while it runs and has started
    ],
)
def test_a_sidecar_last_init_container_counts_once_started(
    last_init: ContainerStatus, expected: bool
) -> None:
    api = PodStatus(init_container_statuses=(last_init,), container_statuses=(waiting("app"),))
    pod = make_pod("app", init=inits("sidecar", restart_policy="Always"), status=api)
    assert has_pod_initialized(pod) is expected


def test_statuses_out_of_line_with_the_spec_are_no_evidence() -> None:
    api = PodStatus(init_container_statuses=(exited("renamed", 0),), container_statuses=(waiting("app"),))
    assert not has_pod_initialized(make_pod("app", init=inits("setup"), status=api))


def test_the_evidence_comes_from_the_pod_not_from_the_cache() -> None:
    """Go reads ``pod.Status`` (the copy the pod worker holds) for it, and overrides the cached status."""
    pod = make_pod("app", init=inits("setup"))
    cached = PodStatus(
        phase="Pending",
        init_container_statuses=(exited("setup", 0),),
        container_statuses=(waiting("app", "CreateContainerError"),),
    )
    app = by_name(terminate(pod, cached).container_statuses, "app")
    assert app.state == ContainerState(waiting=ContainerStateWaiting(reason="CreateContainerError"))
    initialized = make_pod(
        "app", init=inits("setup"), status=PodStatus(init_container_statuses=(exited("setup", 0),))
    )
    assert by_name(terminate(initialized, cached).container_statuses, "app").state == UNKNOWN


def test_initialized_init_containers() -> None:
    assert initialized_init_containers(()) == ()
    assert initialized_init_containers((waiting("a"), waiting("b"))) == (waiting("a"),)
    statuses = (exited("a", 0), waiting("b", last_exit=1), waiting("c"), waiting("d"))
    assert initialized_init_containers(statuses) == statuses[:2]
    assert initialized_init_containers((exited("a", 0), running("b"))) == (exited("a", 0), running("b"))


def test_a_static_pod_keeps_its_phase() -> None:
    pod = make_pod("app", annotations={"kubernetes.io/config.source": "file"})
    final = terminate(pod, PodStatus(phase="Running", container_statuses=(running("app"),)))
    assert final.phase == "Running"
    assert by_name(final.container_statuses, "app").state == UNKNOWN
