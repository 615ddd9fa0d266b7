"""Live updates of configMap, secret, projected and downwardAPI volumes (upstream: configmap_volume.go
"updates should be reflected in volume" / "optional updates should be reflected in volume",
secrets_volume.go, projected_*.go, downwardapi_volume.go "should update labels/annotations on
modification"): within 2 minutes, without restarting the container."""

from __future__ import annotations

import base64

from tests.conformance._helpers_f import last_values, wait_log
from tests.conformance.conftest import Namespace, after, container_running, container_status

UPDATE_LIMIT = 120  # seconds: upstream's bound for a change to reach a mounted volume

READ_LOOP = (
    "while true; do"
    " echo upd=$(cat /etc/upd/data-1 2>/dev/null);"
    " echo del=$(cat /etc/del/data-1 2>/dev/null);"
    " echo cre=$(cat /etc/cre/data-1 2>/dev/null);"
    " echo sec=$(cat /etc/sec/data-1 2>/dev/null);"
    " echo proj=$(cat /etc/proj/cm/data-1 2>/dev/null)/$(cat /etc/proj/labels 2>/dev/null);"
    " echo labels=$(cat /etc/podinfo/labels | tr '\\n' ',');"
    " echo annotation=$(grep builder= /etc/podinfo/annotations);"
    " sleep 1; done"
)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


async def test_volumes_follow_updates_without_restart(ns: Namespace) -> None:
    configmaps = ns.path("configmaps")
    for name in ("upd-cm", "del-cm", "proj-cm"):
        await ns.client.create(configmaps, {"metadata": {"name": name}, "data": {"data-1": "value-1"}})
    await ns.client.create(
        ns.path("secrets"), {"metadata": {"name": "upd-secret"}, "data": {"data-1": b64("s-1")}}
    )
    labels_item = {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}
    volumes = [
        {"name": "upd", "configMap": {"name": "upd-cm"}},
        {"name": "del", "configMap": {"name": "del-cm", "optional": True}},
        {"name": "cre", "configMap": {"name": "cre-cm", "optional": True}},
        {"name": "sec", "secret": {"secretName": "upd-secret"}},
        {
            "name": "proj",
            "projected": {
                "sources": [
                    {"configMap": {"name": "proj-cm", "items": [{"key": "data-1", "path": "cm/data-1"}]}},
                    {"downwardAPI": {"items": [labels_item]}},
                ]
            },
        },
        {
            "name": "podinfo",
            "downwardAPI": {
                "items": [
                    labels_item,
                    {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}},
                ]
            },
        },
    ]
    mounts = [{"name": v["name"], "mountPath": f"/etc/{v['name']}"} for v in volumes]
    await ns.create_pod(
        ns.pod(
            "watcher",
            containers=[ns.container("c", READ_LOOP, volumeMounts=mounts)],
            volumes=volumes,
            metadata={"labels": {"app": "v1"}, "annotations": {"builder": "foo"}},
        )
    )
    before = await ns.wait_pod("watcher", container_running("c"), deadline=after(60))

    def shows(expected: dict[str, str]) -> object:
        return lambda log: last_values(log) == expected

    initial = {
        "upd": "value-1",
        "del": "value-1",
        "cre": "",
        "sec": "s-1",
        "proj": 'value-1/app="v1"',
        "labels": 'app="v1"',
        "annotation": 'builder="foo"',
    }
    await wait_log(ns, "watcher", "c", shows(initial), deadline=after(30), what="initial contents")

    await ns.client.merge_patch(ns.path("configmaps", "upd-cm"), {"data": {"data-1": "value-2"}})
    await ns.client.delete(ns.path("configmaps", "del-cm"))
    await ns.client.create(configmaps, {"metadata": {"name": "cre-cm"}, "data": {"data-1": "value-1"}})
    await ns.client.merge_patch(ns.path("secrets", "upd-secret"), {"data": {"data-1": b64("s-2")}})
    await ns.client.merge_patch(ns.path("configmaps", "proj-cm"), {"data": {"data-1": "value-2"}})
    await ns.patch_pod("watcher", {"metadata": {"labels": {"app": "v2"}, "annotations": {"builder": "bar"}}})
    updated = {
        "upd": "value-2",
        "del": "",
        "cre": "value-1",
        "sec": "s-2",
        "proj": 'value-2/app="v2"',
        "labels": 'app="v2"',
        "annotation": 'builder="bar"',
    }
    await wait_log(ns, "watcher", "c", shows(updated), deadline=after(UPDATE_LIMIT), what="updated contents")

    after_update = await ns.get_pod("watcher")
    status = container_status(after_update, "c")
    assert status["restartCount"] == 0
    assert status["containerID"] == container_status(before, "c")["containerID"]
