"""ConfigMaps and Secrets in env and volumes (upstream: test/e2e/common/node/configmap.go, secrets.go,
test/e2e/common/storage/configmap_volume.go, secrets_volume.go, projected_*.go): keys, envFrom with a
prefix, invalid names skipped, optional and missing sources (and recovery once they exist), file modes,
items, fsGroup, binaryData, tmpfs for secrets, namespace isolation."""

from __future__ import annotations

import base64
from typing import Any

from tests.conformance._helpers_f import (
    gather,
    other_namespace,
    output_of,
    wait_event,
    wait_log,
    waiting_is,
)
from tests.conformance.conftest import Namespace, after, container_status

BINARY = bytes([0xDE, 0xCA, 0xFE, 0xBA, 0xD0, 0xFE, 0xFF])


def b64(value: bytes | str) -> str:
    return base64.b64encode(value.encode() if isinstance(value, str) else value).decode()


async def create_objects(ns: Namespace) -> None:
    await ns.client.create(
        ns.path("configmaps"),
        {
            "metadata": {"name": "cfg"},
            "data": {"data-1": "value-1", "data-2": "value-2", "1badkey": "x"},
            "binaryData": {"dump.bin": b64(BINARY)},
        },
    )
    await ns.client.create(
        ns.path("secrets"),
        {"metadata": {"name": "sec"}, "data": {"data-1": b64("secret-1"), "data-2": b64("s2")}},
    )


def key_ref(kind: str, name: str, key: str, *, optional: bool | None = None) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": name, "key": key}
    if optional is not None:
        ref["optional"] = optional
    return {kind: ref}


async def test_configmap_and_secret_env(ns: Namespace) -> None:
    await create_objects(ns)
    print_env = {"command": ["env"]}  # not through sh: busybox sh drops variables whose names have a dash

    def selected(log: str) -> list[str]:
        return sorted(
            line
            for line in log.splitlines()
            if line.startswith(("CM_", "SEC_", "OPT_", "p_", "data", "1bad"))
        )

    env = [
        {"name": "CM_DATA_1", "valueFrom": key_ref("configMapKeyRef", "cfg", "data-1")},
        {"name": "SEC_DATA_1", "valueFrom": key_ref("secretKeyRef", "sec", "data-1")},
        {"name": "OPT_NO_MAP", "valueFrom": key_ref("configMapKeyRef", "absent", "k", optional=True)},
        {"name": "OPT_NO_KEY", "valueFrom": key_ref("secretKeyRef", "sec", "absent", optional=True)},
    ]
    env_from = [
        {"prefix": "p_", "configMapRef": {"name": "cfg"}},
        {"secretRef": {"name": "sec"}},
        {"configMapRef": {"name": "absent", "optional": True}},
    ]
    deadline = after(90)
    keys, invalid = await gather(
        lambda: output_of(
            ns,
            ns.pod("keys", containers=[ns.container("c", env=env, envFrom=env_from, **print_env)]),
            deadline=deadline,
        ),
        lambda: output_of(
            ns,
            ns.pod(
                "invalid-names",
                containers=[ns.container("c", envFrom=[{"configMapRef": {"name": "cfg"}}], **print_env)],
            ),
            deadline=deadline,
        ),
    )
    assert selected(keys) == [
        "CM_DATA_1=value-1",
        "SEC_DATA_1=secret-1",
        "data-1=secret-1",
        "data-2=s2",
        "p_1badkey=x",
        "p_data-1=value-1",
        "p_data-2=value-2",
    ]
    assert selected(invalid) == ["data-1=value-1", "data-2=value-2"]
    event = await wait_event(ns, "invalid-names", "InvalidEnvironmentVariableNames", deadline=deadline)
    assert event["message"] == (
        f"Keys [1badkey] from the EnvFrom configMap {ns.name}/cfg were skipped since they are considered "
        "invalid environment variable names."
    )


async def test_missing_env_sources_block_the_container_until_they_exist(ns: Namespace) -> None:
    await create_objects(ns)
    cases = {
        "no-map": (
            [{"name": "V", "valueFrom": key_ref("configMapKeyRef", "later-cm", "k")}],
            [],
            'configmap "later-cm" not found',
        ),
        "no-secret": (
            [{"name": "V", "valueFrom": key_ref("secretKeyRef", "later-sec", "k")}],
            [],
            'secret "later-sec" not found',
        ),
        "no-key": (
            [{"name": "V", "valueFrom": key_ref("configMapKeyRef", "cfg", "k")}],
            [],
            f"couldn't find key k in ConfigMap {ns.name}/cfg",
        ),
        "no-secret-key": (
            [{"name": "V", "valueFrom": key_ref("secretKeyRef", "sec", "k")}],
            [],
            f"couldn't find key k in Secret {ns.name}/sec",
        ),
        "no-env-from": ([], [{"configMapRef": {"name": "later-from"}}], 'configmap "later-from" not found'),
    }
    deadline = after(100)
    for name, (env, env_from, _) in cases.items():
        await ns.create_pod(
            ns.pod(
                name,
                containers=[
                    ns.container("c", "echo V=$V; env | grep ^k=; sleep 600", env=env, envFrom=env_from)
                ],
            )
        )
    blocked = await gather(
        *(
            lambda name=name: ns.wait_pod(
                name, waiting_is("c", "CreateContainerConfigError"), deadline=deadline
            )
            for name in cases
        )
    )
    messages = {
        name: container_status(pod, "c")["state"]["waiting"]["message"]
        for name, pod in zip(cases, blocked, strict=True)
    }
    assert messages == {name: message for name, (_, _, message) in cases.items()}

    # Once the data exists, the kubelet starts the containers (no restart of the pod needed).
    await ns.client.create(
        ns.path("configmaps"), {"metadata": {"name": "later-cm"}, "data": {"k": "from-map"}}
    )
    await ns.client.create(
        ns.path("secrets"), {"metadata": {"name": "later-sec"}, "data": {"k": b64("from-secret")}}
    )
    await ns.client.create(
        ns.path("configmaps"), {"metadata": {"name": "later-from"}, "data": {"k": "from-env-from"}}
    )
    await ns.client.merge_patch(ns.path("configmaps", "cfg"), {"data": {"k": "added-key"}})
    await ns.client.merge_patch(ns.path("secrets", "sec"), {"data": {"k": b64("added-secret-key")}})
    expected = {
        "no-map": "V=from-map\n",
        "no-secret": "V=from-secret\n",
        "no-key": "V=added-key\n",
        "no-secret-key": "V=added-secret-key\n",
        "no-env-from": "V=\nk=from-env-from\n",
    }
    logs = await gather(
        *(
            lambda name=name: wait_log(
                ns, name, "c", lambda log, name=name: log == expected[name], deadline=deadline
            )
            for name in cases
        )
    )
    assert dict(zip(cases, logs, strict=True)) == expected


SHOW_VOLUME = (
    "cd {path}; for f in $(find -L . -type f | grep -v -e '/[.][.]' -e '[.]bin$' | sort); do"
    ' echo "$f=$(cat $f | head -c 100):$(stat -L -c "%a %u %g" $f)"; done'
)


def volume_pod(
    ns: Namespace, name: str, volumes: list[dict[str, Any]], script: str, **spec: Any
) -> dict[str, Any]:
    mounts = [{"name": v["name"], "mountPath": f"/etc/{v['name']}"} for v in volumes]
    return ns.pod(name, containers=[ns.container("c", script, volumeMounts=mounts)], volumes=volumes, **spec)


def show(*volumes: str) -> str:
    return "; ".join(SHOW_VOLUME.format(path=f"/etc/{v}") for v in volumes)


async def test_configmap_secret_and_projected_volumes(ns: Namespace) -> None:
    await create_objects(ns)
    await ns.client.create(
        ns.path("secrets"), {"metadata": {"name": "shared"}, "data": {"who": b64("this-namespace")}}
    )
    non_root = {"securityContext": {"runAsUser": 1000, "fsGroup": 1001}}
    projected = {
        "name": "all",
        "projected": {
            "defaultMode": 0o400,
            "sources": [
                {"configMap": {"name": "cfg", "items": [{"key": "data-1", "path": "cm/data-1"}]}},
                {
                    "secret": {
                        "name": "sec",
                        "items": [{"key": "data-1", "path": "sec/data-1", "mode": 0o600}],
                    }
                },
                {"downwardAPI": {"items": [{"path": "podname", "fieldRef": {"fieldPath": "metadata.name"}}]}},
            ],
        },
    }
    deadline = after(100)
    async with other_namespace(ns) as other:
        await ns.client.create(
            f"/api/v1/namespaces/{other}/secrets",
            {"metadata": {"name": "shared"}, "data": {"who": b64("other-namespace")}},
        )
        outputs = await gather(
            lambda: output_of(
                ns,
                volume_pod(
                    ns,
                    "cm-mode",
                    [{"name": "cfg", "configMap": {"name": "cfg", "defaultMode": 0o400}}],
                    show("cfg"),
                ),
                deadline=deadline,
            ),
            lambda: output_of(
                ns,
                volume_pod(
                    ns,
                    "cm-items-fsgroup",
                    [
                        {
                            "name": "cfg",
                            "configMap": {
                                "name": "cfg",
                                "items": [{"key": "data-2", "path": "path/to/data-2", "mode": 0o400}],
                            },
                        }
                    ],
                    show("cfg"),
                    **non_root,
                ),
                deadline=deadline,
            ),
            lambda: output_of(
                ns,
                volume_pod(
                    ns,
                    "binary",
                    [
                        {
                            "name": "cfg",
                            "configMap": {"name": "cfg", "items": [{"key": "dump.bin", "path": "dump.bin"}]},
                        }
                    ],
                    "od -An -tx1 /etc/cfg/dump.bin | tr -s ' '",
                ),
                deadline=deadline,
            ),
            lambda: output_of(
                ns,
                volume_pod(
                    ns,
                    "secret-fsgroup",
                    [{"name": "sec", "secret": {"secretName": "sec", "defaultMode": 0o400}}],
                    show("sec") + "; grep ' /etc/sec ' /proc/mounts | cut -d' ' -f3",
                    **non_root,
                ),
                deadline=deadline,
            ),
            lambda: output_of(
                ns,
                volume_pod(
                    ns, "isolation", [{"name": "shared", "secret": {"secretName": "shared"}}], show("shared")
                ),
                deadline=deadline,
            ),
            lambda: output_of(
                ns,
                volume_pod(
                    ns,
                    "twice",
                    [
                        {
                            "name": "one",
                            "configMap": {"name": "cfg", "items": [{"key": "data-1", "path": "d"}]},
                        },
                        {
                            "name": "two",
                            "configMap": {"name": "cfg", "items": [{"key": "data-1", "path": "d"}]},
                        },
                    ],
                    show("one", "two"),
                ),
                deadline=deadline,
            ),
            lambda: output_of(ns, volume_pod(ns, "projected", [projected], show("all")), deadline=deadline),
            lambda: output_of(
                ns,
                volume_pod(
                    ns,
                    "optional-missing",
                    [
                        {"name": "cfg", "configMap": {"name": "absent", "optional": True}},
                        {"name": "sec", "secret": {"secretName": "absent", "optional": True}},
                    ],
                    "echo cfg=$(ls /etc/cfg | wc -l) sec=$(ls /etc/sec | wc -l)",
                ),
                deadline=deadline,
            ),
        )
    cm_mode, cm_items, binary, secret, isolation, twice, via_projected, optional = outputs
    assert cm_mode == "./1badkey=x:400 0 0\n./data-1=value-1:400 0 0\n./data-2=value-2:400 0 0\n"
    assert cm_items == "./path/to/data-2=value-2:440 0 1001\n"
    assert binary == " de ca fe ba d0 fe ff\n"
    assert secret == "./data-1=secret-1:440 0 1001\n./data-2=s2:440 0 1001\ntmpfs\n"
    assert isolation == "./who=this-namespace:644 0 0\n"
    assert twice == "./d=value-1:644 0 0\n./d=value-1:644 0 0\n"
    assert (
        via_projected
        == "./cm/data-1=value-1:400 0 0\n./podname=projected:400 0 0\n./sec/data-1=secret-1:600 0 0\n"
    )
    assert optional == "cfg=0 sec=0\n"


async def test_missing_configmap_volume_blocks_the_pod_until_it_exists(ns: Namespace) -> None:
    await ns.create_pod(
        volume_pod(
            ns,
            "waits",
            [
                {"name": "cfg", "configMap": {"name": "later"}},
                {"name": "sec", "secret": {"secretName": "later-secret"}},
            ],
            "cat /etc/cfg/k /etc/sec/k; sleep 600",
        )
    )
    deadline = after(90)
    event = await wait_event(ns, "waits", "FailedMount", deadline=deadline)
    assert event["message"] in (
        'MountVolume.SetUp failed for volume "cfg" : configmap "later" not found',
        'MountVolume.SetUp failed for volume "sec" : secret "later-secret" not found',
    )
    pod = await ns.get_pod("waits")
    assert container_status(pod, "c")["state"]["waiting"]["reason"] == "ContainerCreating"
    await ns.client.create(ns.path("configmaps"), {"metadata": {"name": "later"}, "data": {"k": "map\n"}})
    await ns.client.create(
        ns.path("secrets"), {"metadata": {"name": "later-secret"}, "data": {"k": b64("secret\n")}}
    )
    assert (
        await wait_log(ns, "waits", "c", lambda log: log == "map\nsecret\n", deadline=deadline)
        == "map\nsecret\n"
    )
