"""subPath and subPathExpr mounts (upstream: test/e2e/common/node/expansion.go "VolumeSubpathEnvExpansion",
test/e2e/storage/testsuites/subpath.go): expansion from env and the downward API, writes visible
through the whole volume, paths escaping the volume refused with CreateContainerConfigError (and a pod
that recovers once the annotation its subPathExpr needs is set)."""

from __future__ import annotations

from typing import Any

from tests.conformance._helpers_f import gather, output_of, wait_log, waiting_is
from tests.conformance.conftest import Namespace, after, container_status

WORKDIR = {"name": "workdir", "emptyDir": {}}


def pod_name_env(value: str | None = None) -> dict[str, Any]:
    if value is not None:
        return {"name": "POD_NAME", "value": value}
    return {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}


async def test_subpath_expansion_and_escapes(ns: Namespace) -> None:
    await ns.client.create(
        ns.path("configmaps"), {"metadata": {"name": "cfg"}, "data": {"data-1": "value-1"}}
    )

    def expr_pod(name: str, value: str | None, script: str = "sleep 600") -> dict[str, Any]:
        mounts = [
            {"name": "workdir", "mountPath": "/logscontainer", "subPathExpr": "$(POD_NAME)"},
            {"name": "workdir", "mountPath": "/testcontainer"},
        ]
        container = ns.container("c", script, env=[pod_name_env(value)], volumeMounts=mounts)
        return ns.pod(name, containers=[container], volumes=[WORKDIR])

    escape = ns.pod(
        "symlink-escape",
        initContainers=[
            ns.container(
                "init", "ln -s /bin /vol/escape", volumeMounts=[{"name": "workdir", "mountPath": "/vol"}]
            )
        ],
        containers=[
            ns.container(
                "c", "ls /mnt", volumeMounts=[{"name": "workdir", "mountPath": "/mnt", "subPath": "escape"}]
            )
        ],
        volumes=[WORKDIR],
    )
    refused = {
        "dotdot": "unable to provision SubPath `..`: must not contain '..'",
        "absolute": "error SubPath `/tmp` must not be an absolute path",
        "symlink-escape": 'failed to prepare subPath for volumeMount "workdir" of container "c"',
    }
    await ns.create_pod(expr_pod("dotdot", ".."))
    await ns.create_pod(expr_pod("absolute", "/tmp"))
    await ns.create_pod(escape)
    config_file = ns.pod(
        "configmap-file",
        containers=[
            ns.container(
                "c",
                "cat /etc/data; echo; ls /etc",
                volumeMounts=[{"name": "cfg", "mountPath": "/etc/data", "subPath": "data-1"}],
            )
        ],
        volumes=[{"name": "cfg", "configMap": {"name": "cfg"}}],
    )
    deadline = after(90)
    expanded, from_configmap, *blocked = await gather(
        lambda: output_of(
            ns,
            expr_pod(
                "expr",
                None,
                "test -d /testcontainer/expr; echo $?; echo hello > /logscontainer/f;"
                " cat /testcontainer/expr/f",
            ),
            deadline=deadline,
        ),
        lambda: output_of(ns, config_file, deadline=deadline),
        *(
            lambda name=name: ns.wait_pod(
                name, waiting_is("c", "CreateContainerConfigError"), deadline=deadline
            )
            for name in refused
        ),
    )
    assert expanded == "0\nhello\n"
    assert from_configmap.startswith("value-1\n") and "data\n" in from_configmap.splitlines(keepends=True)
    messages = {
        name: container_status(pod, "c")["state"]["waiting"]["message"]
        for name, pod in zip(refused, blocked, strict=True)
    }
    assert messages == refused


async def test_failing_subpath_expansion_recovers_when_the_annotation_is_set(ns: Namespace) -> None:
    env = [
        {"name": "POD_NAME", "value": "foo"},
        {"name": "ANNOTATION", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['mysubpath']"}}},
    ]
    mounts = [
        {"name": "workdir", "mountPath": "/subpath_mount", "subPathExpr": "$(ANNOTATION)/$(POD_NAME)"},
        {"name": "workdir", "mountPath": "/volume_mount"},
    ]
    script = "touch /subpath_mount/test.log; ls /volume_mount/mypath/foo; sleep 600"
    await ns.create_pod(
        ns.pod(
            "recovers",
            containers=[ns.container("c", script, env=env, volumeMounts=mounts)],
            volumes=[WORKDIR],
            metadata={"annotations": {"notmysubpath": "mypath"}},
        )
    )
    deadline = after(90)
    blocked = await ns.wait_pod("recovers", waiting_is("c", "CreateContainerConfigError"), deadline=deadline)
    message = container_status(blocked, "c")["state"]["waiting"]["message"]
    assert message == "missing value for ANNOTATION"  # an empty variable is missing, as in Go

    await ns.patch_pod("recovers", {"metadata": {"annotations": {"mysubpath": "mypath"}}})
    assert await wait_log(ns, "recovers", "c", lambda log: log != "", deadline=deadline) == "test.log\n"
    running = await ns.get_pod("recovers")
    assert container_status(running, "c")["restartCount"] == 0
