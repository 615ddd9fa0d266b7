"""compute_pod_actions, one rule at a time (pure: no runtime, no Trio)."""

from __future__ import annotations

from typing import Any

import pytest

from kubelet_trio.api import Container, Pod
from kubelet_trio.container.hash import hash_container
from kubelet_trio.container.types import ContainerState, ContainerStatus, PodStatus, SandboxStatus
from kubelet_trio.kuberuntime import ContainerToKill, PodActions, compute_pod_actions
from kubelet_trio.kuberuntime.actions import should_container_be_restarted
from kubelet_trio.prober.results import ProbeKind, ProbeResult
from tests.kuberuntime.conftest import IMAGE, app, make_pod, spec_of

RUNNING, EXITED, CREATED, UNKNOWN = (
    ContainerState.RUNNING,
    ContainerState.EXITED,
    ContainerState.CREATED,
    ContainerState.UNKNOWN,
)


def sandbox(
    id: str = "sb0",
    *,
    ready: bool = True,
    attempt: int = 0,
    ip: str = "10.88.0.2",
    host_network: bool = False,
) -> SandboxStatus:
    return SandboxStatus(
        id=id, attempt=attempt, ready=ready, ip=ip, host_network=host_network, created_at=attempt
    )


def cs(
    name: str,
    state: ContainerState,
    *,
    exit_code: int = 0,
    id: str | None = None,
    image: str = IMAGE,
    restart_count: int = 0,
    created_at: int = 1,
    reason: str = "",
) -> ContainerStatus:
    return ContainerStatus(
        id=id or f"{name}-{restart_count}",
        name=name,
        state=state,
        exit_code=exit_code,
        hash=hash_container(Container(name=name, image=image)),
        restart_count=restart_count,
        created_at=created_at,
        reason=reason,
    )


def status(*containers: ContainerStatus, sandboxes: tuple[SandboxStatus, ...] = (sandbox(),)) -> PodStatus:
    ordered = sorted(containers, key=lambda c: c.created_at, reverse=True)
    return PodStatus(
        uid="uid-1",
        name="web",
        namespace="default",
        container_statuses=tuple(ordered),
        sandbox_statuses=sandboxes,
    )


def pod(*names: str, inits: tuple[str | dict[str, Any], ...] = (), **spec: Any) -> Pod:
    init_containers = [app(i) if isinstance(i, str) else i for i in inits]
    return make_pod([app(n) for n in names], init_containers=init_containers or None, **spec)


def actions(**fields: Any) -> PodActions:
    fields.setdefault("sandbox_id", "sb0")
    return PodActions(**fields)


# --- sandbox (re)creation ------------------------------------------------------------------------


def test_new_pod_creates_sandbox_and_starts_all_containers() -> None:
    got = compute_pod_actions(pod("a", "b"), status(sandboxes=()))
    assert got == PodActions(kill_pod=True, create_sandbox=True, attempt=0, containers_to_start=(0, 1))


def test_new_pod_with_init_containers_starts_only_the_first() -> None:
    got = compute_pod_actions(pod("a", inits=("i0", "i1")), status(sandboxes=()))
    assert got == PodActions(kill_pod=True, create_sandbox=True, next_init_container_to_start=0)


def test_new_pod_with_sidecar_uses_the_sidecar_path() -> None:
    sidecar = app("proxy", restartPolicy="Always")
    got = compute_pod_actions(pod("a", inits=(sidecar, "i1")), status(sandboxes=()))
    assert got == PodActions(kill_pod=True, create_sandbox=True, init_containers_to_start=(0,))


@pytest.mark.parametrize(
    ("sandboxes", "expected_id"),
    [
        ((sandbox("sb1", ready=False, attempt=1), sandbox("sb0")), "sb1"),  # newest not ready
        ((sandbox("sb1", attempt=1), sandbox("sb0")), "sb1"),  # two ready sandboxes
        ((sandbox("sb1", attempt=1, ip=""),), "sb1"),  # no IP
        ((sandbox("sb1", attempt=1, host_network=True),), ""),  # network mode changed
    ],
)
def test_sandbox_changed_recreates_with_next_attempt(
    sandboxes: tuple[SandboxStatus, ...], expected_id: str
) -> None:
    got = compute_pod_actions(pod("a"), status(cs("a", RUNNING), sandboxes=sandboxes))
    assert got == PodActions(
        kill_pod=True, create_sandbox=True, sandbox_id=expected_id, attempt=2, containers_to_start=(0,)
    )


def test_host_network_pod_without_ip_keeps_its_sandbox() -> None:
    host_pod = pod("a", hostNetwork=True)
    got = compute_pod_actions(
        host_pod, status(cs("a", RUNNING), sandboxes=(sandbox(ip="", host_network=True),))
    )
    assert got == actions()


def test_never_pod_that_ran_is_only_killed_when_its_sandbox_dies() -> None:
    got = compute_pod_actions(
        pod("a", restartPolicy="Never"),
        status(cs("a", EXITED, exit_code=1), sandboxes=(sandbox(ready=False),)),
    )
    assert got == PodActions(kill_pod=True, create_sandbox=False, sandbox_id="sb0", attempt=1)


def test_never_pod_without_containers_retries_its_sandbox() -> None:
    got = compute_pod_actions(pod("a", restartPolicy="Never"), status(sandboxes=(sandbox(ready=False),)))
    assert got.create_sandbox and got.containers_to_start == (0,)


def test_on_failure_sandbox_change_skips_succeeded_containers() -> None:
    p = pod("a", "b", restartPolicy="OnFailure")
    got = compute_pod_actions(
        p, status(cs("a", EXITED), cs("b", EXITED, exit_code=1), sandboxes=(sandbox(ready=False),))
    )
    assert got.create_sandbox and got.containers_to_start == (1,)
    # All succeeded and the pod was initialized: no new sandbox, just kill.
    done = compute_pod_actions(p, status(cs("a", EXITED), cs("b", EXITED), sandboxes=(sandbox(ready=False),)))
    assert done == PodActions(kill_pod=True, sandbox_id="sb0", attempt=1)


# --- app containers ------------------------------------------------------------------------------


def test_running_container_is_kept() -> None:
    assert compute_pod_actions(pod("a"), status(cs("a", RUNNING))) == actions()


@pytest.mark.parametrize(
    ("policy", "exit_code", "restarted"),
    [
        ("Always", 0, True),
        ("Always", 1, True),
        ("OnFailure", 0, False),
        ("OnFailure", 1, True),
        ("Never", 0, False),
        ("Never", 1, False),
    ],
)
def test_exited_container_restart_policy(policy: str, exit_code: int, restarted: bool) -> None:
    got = compute_pod_actions(pod("a", restartPolicy=policy), status(cs("a", EXITED, exit_code=exit_code)))
    if restarted:
        assert got == actions(containers_to_start=(0,))
    else:  # nothing kept, nothing to start: the pod is done
        assert got == actions(kill_pod=True)


def test_one_exited_container_next_to_a_running_one_does_not_kill_the_pod() -> None:
    got = compute_pod_actions(pod("a", "b", restartPolicy="Never"), status(cs("a", EXITED), cs("b", RUNNING)))
    assert got == actions()


def test_created_and_unknown_containers_are_restarted_even_under_never() -> None:
    got = compute_pod_actions(
        pod("a", "b", restartPolicy="Never"), status(cs("a", CREATED), cs("b", UNKNOWN))
    )
    assert got == actions(
        containers_to_start=(0, 1),
        containers_to_kill={
            "b-0": ContainerToKill(
                "b", "Unknown", 'Container is in "unknown" state, try killing it before restart'
            )
        },
    )


def test_missing_container_is_started() -> None:
    assert compute_pod_actions(pod("a", "b"), status(cs("a", RUNNING))) == actions(containers_to_start=(1,))


def test_hash_change_kills_and_restarts_regardless_of_policy() -> None:
    got = compute_pod_actions(pod("a", restartPolicy="Never"), status(cs("a", RUNNING, image="old:1")))
    assert got == actions(
        containers_to_start=(0,),
        containers_to_kill={
            "a-0": ContainerToKill("a", "", "Container a definition changed, will be restarted")
        },
    )


def test_liveness_failure_kills_and_restarts() -> None:
    probes = {(ProbeKind.LIVENESS, "a-0"): ProbeResult.FAILURE}
    got = compute_pod_actions(pod("a"), status(cs("a", RUNNING)), probes)
    assert got == actions(
        containers_to_start=(0,),
        containers_to_kill={
            "a-0": ContainerToKill(
                "a", "LivenessProbe", "Container a failed liveness probe, will be restarted"
            )
        },
    )
    assert (
        compute_pod_actions(
            pod("a"), status(cs("a", RUNNING)), {(ProbeKind.LIVENESS, "a-0"): ProbeResult.SUCCESS}
        )
        == actions()
    )


def test_liveness_failure_under_never_kills_without_restart() -> None:
    probes = {(ProbeKind.LIVENESS, "a-0"): ProbeResult.FAILURE}
    got = compute_pod_actions(pod("a", restartPolicy="Never"), status(cs("a", RUNNING)), probes)
    assert got == actions(
        kill_pod=True,
        containers_to_kill={
            "a-0": ContainerToKill("a", "LivenessProbe", "Container a failed liveness probe")
        },
    )


def test_startup_failure_kills_and_restarts() -> None:
    probes = {(ProbeKind.STARTUP, "a-0"): ProbeResult.FAILURE}
    got = compute_pod_actions(pod("a"), status(cs("a", RUNNING)), probes)
    assert got.containers_to_kill == {
        "a-0": ContainerToKill("a", "StartupProbe", "Container a failed startup probe, will be restarted")
    }
    assert got.containers_to_start == (0,)


def test_deleted_pod_does_not_restart_containers() -> None:
    deleted = make_pod([app("a")], metadata={"deletionTimestamp": "2024-01-01T00:00:00Z"})
    assert not should_container_be_restarted(spec_of(deleted), deleted, status(cs("a", EXITED, exit_code=1)))
    assert compute_pod_actions(deleted, status(cs("a", EXITED, exit_code=1))) == actions(kill_pod=True)


# --- legacy init path ----------------------------------------------------------------------------


def test_legacy_init_running_waits() -> None:
    got = compute_pod_actions(pod("a", inits=("i0", "i1")), status(cs("i0", RUNNING)))
    assert got == actions()


def test_legacy_init_next_after_success() -> None:
    got = compute_pod_actions(pod("a", inits=("i0", "i1")), status(cs("i0", EXITED)))
    assert got == actions(next_init_container_to_start=1)


def test_legacy_init_done_starts_app_containers() -> None:
    got = compute_pod_actions(pod("a", inits=("i0", "i1")), status(cs("i0", EXITED), cs("i1", EXITED)))
    assert got == actions(containers_to_start=(0,))


def test_legacy_init_not_rerun_once_app_runs() -> None:
    got = compute_pod_actions(pod("a", inits=("i0",)), status(cs("a", RUNNING)))
    assert got == actions()


def test_legacy_init_failure_is_retried_or_kills_under_never() -> None:
    failed = status(cs("i0", EXITED), cs("i1", EXITED, exit_code=1))
    assert compute_pod_actions(pod("a", inits=("i0", "i1")), failed) == actions(
        next_init_container_to_start=1
    )
    never = compute_pod_actions(pod("a", inits=("i0", "i1"), restartPolicy="Never"), failed)
    assert never == actions(kill_pod=True)


def test_legacy_oom_killed_init_counts_as_failed() -> None:
    got = compute_pod_actions(
        pod("a", inits=("i0",), restartPolicy="Never"), status(cs("i0", EXITED, reason="OOMKilled"))
    )
    assert got == actions(kill_pod=True)


def test_legacy_unknown_init_is_killed_then_restarted() -> None:
    got = compute_pod_actions(pod("a", inits=("i0",)), status(cs("i0", UNKNOWN)))
    assert got == actions(
        next_init_container_to_start=0,
        containers_to_kill={
            "i0-0": ContainerToKill(
                "i0", "Unknown", 'Init container is in "unknown" state, try killing it before restart'
            )
        },
    )


# --- sidecar path --------------------------------------------------------------------------------

SIDECAR = app("proxy", restartPolicy="Always")
SIDECAR_WITH_STARTUP = app("proxy", restartPolicy="Always", startupProbe={"exec": {"command": ["true"]}})


def test_sidecar_started_then_next_init() -> None:
    got = compute_pod_actions(pod("a", inits=(SIDECAR, "i1")), status(cs("proxy", RUNNING)))
    assert got == actions(init_containers_to_start=(1,))


def test_sidecar_waits_for_startup_probe() -> None:
    p = pod("a", inits=(SIDECAR_WITH_STARTUP, "i1"))
    st = status(cs("proxy", RUNNING))
    assert compute_pod_actions(p, st) == actions()
    assert compute_pod_actions(p, st, {(ProbeKind.STARTUP, "proxy-0"): ProbeResult.UNKNOWN}) == actions()
    assert compute_pod_actions(p, st, {(ProbeKind.STARTUP, "proxy-0"): ProbeResult.SUCCESS}) == actions(
        init_containers_to_start=(1,)
    )
    failed = compute_pod_actions(p, st, {(ProbeKind.STARTUP, "proxy-0"): ProbeResult.FAILURE})
    assert failed == actions(
        init_containers_to_start=(0,),
        containers_to_kill={
            "proxy-0": ContainerToKill("proxy", "StartupProbe", "Init container proxy failed startup probe")
        },
    )


def test_initialized_pod_with_sidecar_starts_app_containers() -> None:
    got = compute_pod_actions(pod("a", inits=(SIDECAR, "i1")), status(cs("proxy", RUNNING), cs("i1", EXITED)))
    assert got == actions(containers_to_start=(0,))


def test_exited_sidecar_is_restarted_whatever_the_policy() -> None:
    got = compute_pod_actions(
        pod("a", inits=(SIDECAR,), restartPolicy="Never"),
        status(cs("proxy", EXITED, exit_code=1), cs("a", RUNNING)),
    )
    assert got == actions(init_containers_to_start=(0,))


def test_sidecar_hash_change_and_liveness_failure_restart_it() -> None:
    p = pod("a", inits=(SIDECAR,))
    changed = compute_pod_actions(p, status(cs("proxy", RUNNING, image="old:1"), cs("a", RUNNING)))
    assert changed == actions(
        init_containers_to_start=(0,),
        containers_to_kill={
            "proxy-0": ContainerToKill("proxy", "", "Init container proxy definition changed")
        },
    )
    live = pod("a", inits=({**SIDECAR_WITH_STARTUP, "livenessProbe": {"exec": {"command": ["true"]}}},))
    probes = {
        (ProbeKind.STARTUP, "proxy-0"): ProbeResult.SUCCESS,
        (ProbeKind.LIVENESS, "proxy-0"): ProbeResult.FAILURE,
    }
    failed = compute_pod_actions(live, status(cs("proxy", RUNNING), cs("a", RUNNING)), probes)
    assert failed == actions(
        init_containers_to_start=(0,),
        containers_to_kill={
            "proxy-0": ContainerToKill("proxy", "LivenessProbe", "Init container proxy failed liveness probe")
        },
    )


def test_regular_init_failure_under_never_kills_pod_in_sidecar_path() -> None:
    got = compute_pod_actions(
        pod("a", inits=(SIDECAR, "i1"), restartPolicy="Never"),
        status(cs("proxy", RUNNING), cs("i1", EXITED, exit_code=1)),
    )
    assert got == actions(kill_pod=True)


def test_regular_init_failure_is_retried_in_sidecar_path() -> None:
    got = compute_pod_actions(
        pod("a", inits=(SIDECAR, "i1")), status(cs("proxy", RUNNING), cs("i1", EXITED, exit_code=1))
    )
    assert got == actions(init_containers_to_start=(1,))


def test_sidecars_do_not_keep_a_finished_pod_alive() -> None:
    p = pod("a", inits=(SIDECAR,), restartPolicy="Never")
    got = compute_pod_actions(p, status(cs("proxy", RUNNING), cs("a", EXITED)))
    assert got == actions(kill_pod=True)
    # Both exited (as after a reboot): exited app containers do not count as initialized, so the
    # sidecar is restarted first; the pod is killed once it runs (above).
    rebooted = compute_pod_actions(p, status(cs("proxy", EXITED), cs("a", EXITED)))
    assert rebooted == actions(init_containers_to_start=(0,))
