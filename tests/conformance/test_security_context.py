"""Security contexts and sysctls (upstream: test/e2e/common/node/security_context.go, sysctl.go)."""

from __future__ import annotations

from typing import Any

from tests.conformance._helpers_f import gather, output_of, run_to_completion, terminated_state, waiting_is
from tests.conformance.conftest import Namespace, after, container_status

ADD_LINK = "ip link add dummy1 type dummy 2>&1; echo rc=$?"  # CAP_NET_ADMIN
MOUNT_TMPFS = "mkdir /tmp/m; mount -t tmpfs tmpfs /tmp/m 2>&1; echo rc=$?"  # CAP_SYS_ADMIN


async def test_users_groups_root_filesystem_privileges(ns: Namespace) -> None:
    """runAsUser/runAsGroup (pod level, overridden per container), readOnlyRootFilesystem,
    privileged: false, allowPrivilegeEscalation: false (no_new_privs), as the container sees them."""
    ids = "echo uid=$(id -u) gid=$(id -g) groups=$(id -G)"
    no_new_privs = "grep NoNewPrivs /proc/self/status"
    cases: dict[str, tuple[dict[str, Any], dict[str, Any], str]] = {
        # name: (container fields, pod spec fields, expected output)
        "run-as-user": ({"securityContext": {"runAsUser": 65534}}, {}, "uid=65534 gid=65534 groups=65534\n"),
        "pod-user-and-group": (
            {},
            {"securityContext": {"runAsUser": 1001, "runAsGroup": 2002, "supplementalGroups": [3003]}},
            "uid=1001 gid=2002 groups=2002 3003\n",
        ),
        "container-overrides-pod": (
            {"securityContext": {"runAsUser": 1002, "runAsGroup": 2003}},
            {"securityContext": {"runAsUser": 1001, "runAsGroup": 2002}},
            "uid=1002 gid=2003 groups=2003\n",
        ),
    }
    deadline = after(90)
    outputs = await gather(
        *(
            lambda name=name, fields=fields, spec=spec: output_of(
                ns, ns.pod(name, containers=[ns.container("c", ids, **fields)], **spec), deadline=deadline
            )
            for name, (fields, spec, _) in cases.items()
        ),
        lambda: run_to_completion(
            ns,
            ns.pod(
                "read-only-root",
                containers=[
                    ns.container(
                        "c",
                        "touch /checkfile && echo written",
                        securityContext={"readOnlyRootFilesystem": True},
                    )
                ],
            ),
            deadline=deadline,
        ),
        lambda: output_of(
            ns,
            ns.pod(
                "writable-root",
                containers=[
                    ns.container(
                        "c",
                        "touch /checkfile && echo written",
                        securityContext={"readOnlyRootFilesystem": False},
                    )
                ],
            ),
            deadline=deadline,
        ),
        lambda: output_of(
            ns,
            ns.pod(
                "unprivileged",
                containers=[
                    ns.container(
                        "c",
                        ADD_LINK + "; " + MOUNT_TMPFS,
                        securityContext={"privileged": False},
                    )
                ],
            ),
            deadline=deadline,
        ),
        lambda: output_of(
            ns,
            ns.pod(
                "privileged",
                containers=[
                    ns.container(
                        "c",
                        MOUNT_TMPFS,
                        securityContext={"privileged": True},
                    )
                ],
            ),
            deadline=deadline,
        ),
        lambda: output_of(
            ns,
            ns.pod(
                "no-escalation",
                containers=[
                    ns.container(
                        "c",
                        no_new_privs,
                        securityContext={"runAsUser": 1000, "allowPrivilegeEscalation": False},
                    )
                ],
            ),
            deadline=deadline,
        ),
        lambda: output_of(
            ns,
            ns.pod(
                "escalation-allowed",
                containers=[ns.container("c", no_new_privs, securityContext={"runAsUser": 1000})],
            ),
            deadline=deadline,
        ),
    )
    by_name = dict(zip(cases, outputs, strict=False))
    assert by_name == {name: expected for name, (_, _, expected) in cases.items()}
    (read_only_pod, read_only_log), writable, unprivileged, privileged, no_escalation, escalation = outputs[
        len(cases) :
    ]
    assert read_only_pod["status"]["phase"] == "Failed"
    assert terminated_state(read_only_pod, "c")["exitCode"] == 1
    assert read_only_log == "touch: /checkfile: Read-only file system\n"
    assert writable == "written\n"
    assert unprivileged == (
        "ip: RTNETLINK answers: Operation not permitted\nrc=2\n"
        "mount: permission denied (are you root?)\nrc=1\n"
    )
    assert privileged == "rc=0\n"
    assert no_escalation == "NoNewPrivs:\t1\n"
    assert escalation == "NoNewPrivs:\t0\n"


async def test_run_as_non_root(ns: Namespace) -> None:
    """runAsNonRoot: an explicit non-root user runs; an explicit root user, or an image that runs as
    root with no user given, is a CreateContainerConfigError naming the pod and container."""
    deadline = after(60)

    def pod(name: str, context: dict[str, Any]) -> dict[str, Any]:
        return ns.pod(name, containers=[ns.container("c", "id -u", securityContext=context)])

    await ns.create_pod(pod("explicit-root", {"runAsNonRoot": True, "runAsUser": 0}))
    await ns.create_pod(pod("image-root", {"runAsNonRoot": True}))
    non_root, explicit_root, image_root = await gather(
        lambda: output_of(ns, pod("non-root", {"runAsNonRoot": True, "runAsUser": 1234}), deadline=deadline),
        lambda: ns.wait_pod(
            "explicit-root", waiting_is("c", "CreateContainerConfigError"), deadline=deadline
        ),
        lambda: ns.wait_pod("image-root", waiting_is("c", "CreateContainerConfigError"), deadline=deadline),
    )
    assert non_root == "1234\n"
    assert container_status(explicit_root, "c")["state"]["waiting"]["message"] == (
        f"container's runAsUser breaks non-root policy (pod: \"explicit-root_{ns.name}("
        f'{explicit_root["metadata"]["uid"]})", container: c)'
    )
    assert container_status(image_root, "c")["state"]["waiting"]["message"] == (
        f'container has runAsNonRoot and image will run as root (pod: "image-root_{ns.name}('
        f'{image_root["metadata"]["uid"]})", container: c)'
    )


async def test_sysctls(ns: Namespace) -> None:
    """A safe sysctl is set in the pod's namespaces; an unsafe one that the node does not allow fails
    the pod at admission (reason SysctlForbidden) and starts nothing."""
    deadline = after(60)
    safe = ns.pod(
        "safe",
        containers=[ns.container("c", "sysctl kernel.shm_rmid_forced")],
        securityContext={"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}]},
    )
    unsafe = ns.pod(
        "unsafe",
        containers=[ns.container("c", "sysctl kernel.msgmax")],
        securityContext={"sysctls": [{"name": "kernel.msgmax", "value": "10000000000"}]},
        restartPolicy="Never",
    )
    await ns.create_pod(unsafe)
    safe_log, rejected = await gather(
        lambda: output_of(ns, safe, deadline=deadline),
        lambda: ns.wait_pod(
            "unsafe", lambda p: p.get("status", {}).get("phase") == "Failed", deadline=deadline
        ),
    )
    assert safe_log == "kernel.shm_rmid_forced = 1\n"
    assert rejected["status"]["reason"] == "SysctlForbidden"
    assert rejected["status"]["message"].endswith('forbidden sysctl: "kernel.msgmax" not allowlisted')
    assert not rejected["status"].get("containerStatuses")
