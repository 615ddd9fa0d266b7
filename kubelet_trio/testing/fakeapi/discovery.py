"""API discovery documents (``/api``, ``/apis``, ``/api/v1``, ``/apis/<group>/<version>``) for the fake
API server's resources, so ``kubectl`` can map ``pods`` to its path (it asks before every command).

Pods also list the subresources kubectl uses: ``log``, ``status``, ``exec``, ``attach``,
``portforward`` and ``ephemeralcontainers``.
"""

from __future__ import annotations

from kubelet_trio.testing.fakeapi.store import RESOURCES, Obj

__all__ = ["discovery"]

_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]
_POD_SUBRESOURCES = {
    "log": ["get"],
    "status": ["get", "patch", "update"],
    "exec": ["create", "get"],
    "attach": ["create", "get"],
    "portforward": ["create", "get"],
    "ephemeralcontainers": ["get", "patch", "update"],
}


def _resources(api_version: str) -> list[Obj]:
    listed: list[Obj] = []
    for rtype in RESOURCES.values():
        if rtype.api_version != api_version:
            continue
        singular = rtype.kind.lower()
        listed.append(
            {
                "name": rtype.name,
                "singularName": singular,
                "namespaced": rtype.namespaced,
                "kind": rtype.kind,
                "verbs": _VERBS,
            }
        )
        if rtype.name == "pods":
            for sub, verbs in _POD_SUBRESOURCES.items():
                kind = {"log": "Pod", "status": "Pod", "ephemeralcontainers": "Pod"}.get(
                    sub, "Pod" + sub.title()
                )
                listed.append(
                    {
                        "name": f"pods/{sub}",
                        "singularName": "",
                        "namespaced": True,
                        "kind": kind,
                        "verbs": verbs,
                    }
                )
    return listed


def discovery(path: str) -> Obj | None:
    """The discovery document served at ``path``, or None when ``path`` is not a discovery path."""
    if path == "/api":
        return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
    groups = sorted({r.api_version for r in RESOURCES.values() if "/" in r.api_version})
    if path == "/apis":
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                {
                    "name": gv.split("/")[0],
                    "versions": [{"groupVersion": gv, "version": gv.split("/")[1]}],
                    "preferredVersion": {"groupVersion": gv, "version": gv.split("/")[1]},
                }
                for gv in groups
            ],
        }
    for api_version, prefix in [("v1", "/api/v1"), *((gv, f"/apis/{gv}") for gv in groups)]:
        if path == prefix:
            return {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": api_version,
                "resources": _resources(api_version),
            }
    return None
