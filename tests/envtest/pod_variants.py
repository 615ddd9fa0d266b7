"""Deterministic variants of one pod for the differential test of manifest validation (see
test_manifest_differential.py): a valid base pod that kube-apiserver 1.24 accepts, and mutations of it -
wrong types, missing required fields, bad names, quantities, ports, probes, volumes, env, securityContext,
unknown fields, null list items - applied one at a time (every mutation in the tables) and then in seeded
random pairs.

The base uses nothing newer than 1.24, so that a difference is a difference in validation, not in the API.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from typing import Any

import attrs

__all__ = ["DELETE", "Mutation", "Variant", "base_pod", "mutations", "variants"]

Path = tuple[str | int, ...]


class _Delete:
    def __repr__(self) -> str:
        return "DELETE"


#: A mutation value that removes the member instead of setting it.
DELETE: Any = _Delete()


@attrs.frozen
class Mutation:
    category: str
    path: Path
    value: Any

    def __str__(self) -> str:
        where = ".".join(str(p) for p in self.path)
        return f"{self.category}: {where} = {self.value!r}"

    def apply(self, doc: dict[str, Any]) -> None:
        target: Any = doc
        for step in self.path[:-1]:
            if isinstance(target, dict) and step not in target:
                target[step] = {}
            target = target[step]
        last = self.path[-1]
        if self.value is DELETE:
            if isinstance(target, dict):
                target.pop(last, None)
            else:
                del target[last]
        elif isinstance(target, list) and last == len(target):
            target.append(copy.deepcopy(self.value))
        else:
            target[last] = copy.deepcopy(self.value)


@attrs.frozen
class Variant:
    name: str
    mutations: tuple[Mutation, ...]
    doc: dict[str, Any]

    def describe(self) -> str:
        return "; ".join(str(m) for m in self.mutations)


def base_pod() -> dict[str, Any]:
    """A pod using much of the v1 PodSpec that kube-apiserver 1.24 accepts (dry run, namespace default)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "labels": {"app.kubernetes.io/name": "web", "tier": "frontend"},
            "annotations": {"example.com/owner": "team-web"},
        },
        "spec": {
            "restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst",
            "terminationGracePeriodSeconds": 30,
            "activeDeadlineSeconds": 3600,
            "hostname": "web-0",
            "subdomain": "web",
            "serviceAccountName": "web",
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["db.local"]}],
            "dnsConfig": {
                "nameservers": ["1.1.1.1"],
                "searches": ["svc.local"],
                "options": [{"name": "ndots"}],
            },
            "tolerations": [{"key": "example.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "securityContext": {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 2000},
            "initContainers": [{"name": "init", "image": "busybox:1.36", "command": ["sh", "-c", "true"]}],
            "containers": [
                {
                    "name": "app",
                    "image": "busybox:1.36",
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["sh", "-c"],
                    "args": ["sleep 3600"],
                    "workingDir": "/work",
                    "ports": [
                        {"name": "http", "containerPort": 8080, "protocol": "TCP"},
                        {"name": "dns", "containerPort": 53, "protocol": "UDP"},
                    ],
                    "env": [
                        {"name": "PLAIN", "value": "hello"},
                        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {
                            "name": "CPU",
                            "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1m"}},
                        },
                        {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "level"}}},
                        {
                            "name": "PASSWORD",
                            "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}},
                        },
                    ],
                    "envFrom": [
                        {"configMapRef": {"name": "cfg"}},
                        {"prefix": "DB_", "secretRef": {"name": "db"}},
                    ],
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "64Mi"},
                        "limits": {"cpu": "500m", "memory": "128Mi"},
                    },
                    "volumeMounts": [
                        {"name": "scratch", "mountPath": "/scratch"},
                        {"name": "config", "mountPath": "/etc/config", "readOnly": True},
                        {"name": "secret", "mountPath": "/etc/secret", "subPath": "sub"},
                        {"name": "info", "mountPath": "/etc/info"},
                    ],
                    "livenessProbe": {
                        "httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
                        "initialDelaySeconds": 5,
                        "periodSeconds": 10,
                        "timeoutSeconds": 1,
                        "successThreshold": 1,
                        "failureThreshold": 3,
                    },
                    "readinessProbe": {
                        "tcpSocket": {"port": 8080},
                        "periodSeconds": 5,
                        "successThreshold": 2,
                    },
                    "startupProbe": {"exec": {"command": ["true"]}, "failureThreshold": 30},
                    "lifecycle": {
                        "postStart": {"exec": {"command": ["sh", "-c", "true"]}},
                        "preStop": {"httpGet": {"path": "/stop", "port": 8080}},
                    },
                    "securityContext": {
                        "runAsNonRoot": True,
                        "readOnlyRootFilesystem": True,
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
                    },
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                },
            ],
            "volumes": [
                {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
                {
                    "name": "config",
                    "configMap": {
                        "name": "cfg",
                        "defaultMode": 420,
                        "items": [{"key": "a", "path": "a.conf"}],
                    },
                },
                {"name": "secret", "secret": {"secretName": "db", "optional": True}},
                {
                    "name": "info",
                    "downwardAPI": {
                        "items": [
                            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                            {
                                "path": "cpu",
                                "resourceFieldRef": {"containerName": "app", "resource": "requests.cpu"},
                            },
                        ]
                    },
                },
                {
                    "name": "token",
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
                            {"configMap": {"name": "cfg"}},
                        ]
                    },
                },
                {"name": "host", "hostPath": {"path": "/var/log", "type": "Directory"}},
            ],
        },
    }


C = ("spec", "containers", 0)
IC = ("spec", "initContainers", 0)
META = ("metadata",)
SPEC = ("spec",)
LIVE = (*C, "livenessProbe")
READY = (*C, "readinessProbe")
PORT = (*C, "ports", 0)
ENV = (*C, "env")
VOL = ("spec", "volumes")
SC = (*C, "securityContext")
PSC = ("spec", "securityContext")
BAD_NAMES = ["Web", "web_1", "-web", "web-", "a" * 64, "a" * 254, "a.b", "", "web..1", "ünï"]
QUANTITIES = [
    "1",
    "1.5",
    "100m",
    "1Gi",
    "1e3",
    "0.1m",
    "1.5.5",
    "-1",
    "abc",
    "1 Gi",
    "",
    " 1",
    1,
    1.5,
    "1E",
    "2Ki",
]


def mutations() -> list[Mutation]:
    """Every single mutation of the base pod, in a fixed order."""
    out: list[Mutation] = []

    def add(category: str, path: Path, *values: Any) -> None:
        out.extend(Mutation(category, path, v) for v in values)

    # Wrong types (the decoder must reject what Go's JSON decoding rejects).
    add("type", (*META, "name"), 5, True, ["web"], {"a": 1})
    add("type", (*META, "labels"), ["a"], "a=b", {"a": 1}, {"a": True}, {"a": None})
    add("type", (*SPEC, "containers"), {"name": "app"}, "app", None, [])
    add("type", (*C, "command"), "sh -c true", [1], [True], [["sh"]], [None], [None, "x"])
    add("type", (*C, "args"), [None], [1.5], {})
    add("type", (*PORT, "containerPort"), "8080", 8080.0, 8080.5, True, None, 2**31, 2**40)
    add("type", (*SPEC, "terminationGracePeriodSeconds"), "30", 30.0, 1.5, -1, None)
    add("type", (*SPEC, "hostNetwork"), "true", 1, None)
    add("type", (*C, "env"), {"name": "A"}, [None], ["A=B"], [{"name": "A", "value": 1}])
    add("type", (*C, "resources", "limits"), ["cpu"], {"cpu": None}, {"cpu": True})
    add("type", (*C, "resources"), "none", [])
    add("type", (*C, "livenessProbe"), "http", [])
    add("type", (*C, "ports"), [None], {"containerPort": 1}, [80])
    add("type", (*SPEC, "volumes"), [None], [{"name": "x"}, None])
    add("type", (*SPEC, "affinity"), "any", [], {"nodeAffinity": "x"})
    add("type", (*PSC, "runAsUser"), "1000", 1000.0, None)
    add("type", (*SC, "capabilities", "add"), "NET_ADMIN", [1], [None])
    add("type", (*SC, "privileged"), "yes", 1)
    add("type", (*SC, "seccompProfile"), "RuntimeDefault", {"type": 5}, {"type": "RuntimeDefault", "x": 1})
    add("type", (*SPEC, "tolerations", 0, "tolerationSeconds"), "10", 10.5)
    add("type", (*META, "annotations", "example.com/owner"), 5, None, ["x"])

    # Missing required fields.
    for path in [
        (*META, "name"),
        (*C, "name"),
        (*C, "image"),
        (*PORT, "containerPort"),
        (*ENV, 0, "name"),
        (*C, "volumeMounts", 0, "name"),
        (*C, "volumeMounts", 0, "mountPath"),
        (*VOL, 0, "name"),
        (*VOL, 0, "emptyDir"),
        (*VOL, 1, "configMap", "items", 0, "key"),
        (*VOL, 1, "configMap", "items", 0, "path"),
        (*VOL, 1, "configMap", "name"),
        (*VOL, 2, "secret", "secretName"),
        (*VOL, 3, "downwardAPI", "items", 0, "path"),
        (*VOL, 3, "downwardAPI", "items", 0, "fieldRef"),
        (*VOL, 3, "downwardAPI", "items", 1, "resourceFieldRef", "containerName"),
        (*VOL, 4, "projected", "sources", 0, "serviceAccountToken", "path"),
        (*VOL, 5, "hostPath", "path"),
        (*LIVE, "httpGet", "port"),
        (*LIVE, "httpGet"),
        (*READY, "tcpSocket", "port"),
        (*C, "startupProbe", "exec", "command"),
        (*ENV, 1, "valueFrom", "fieldRef", "fieldPath"),
        (*ENV, 2, "valueFrom", "resourceFieldRef", "resource"),
        (*ENV, 3, "valueFrom", "configMapKeyRef", "key"),
        (*ENV, 4, "valueFrom", "secretKeyRef", "name"),
        (*C, "envFrom", 0, "configMapRef", "name"),
        (*SPEC, "hostAliases", 0, "ip"),
        (*SPEC, "serviceAccountName"),
        (*SPEC, "dnsConfig", "options", 0, "name"),
        (*SPEC, "tolerations", 0, "key"),
        (*IC, "image"),
        (*C, "lifecycle", "preStop", "httpGet"),
        ("apiVersion",),
        ("kind",),
        ("metadata",),
        ("spec",),
    ]:
        add("required", path, DELETE)

    # Names.
    add("name", (*META, "name"), *BAD_NAMES, "web.example.com", "a" * 253)
    add("name", (*META, "generateName"), "web-")
    add("name", (*META, "namespace"), "default")  # (another namespace is another request path)
    add("name", (*C, "name"), *BAD_NAMES, "init")
    add("name", (*IC, "name"), "app")
    add("name", (*VOL, 0, "name"), *BAD_NAMES, "config")
    add("name", (*PORT, "name"), "HTTP", "http-", "-http", "h--p", "toolongportname1", "80", "dns", "a", "")
    add("name", (*LIVE, "httpGet", "port"), "metrics", "HTTP", "h_p", "")
    add(
        "name", (*META, "labels"), {"Bad Key": "x"}, {"a/b/c": "x"}, {"example.com/": "x"}, {"k": "bad value"}
    )
    add("name", (*META, "labels"), {"k": "a" * 64}, {"k": "-x"}, {"k": ""}, {"EXAMPLE.com/k": "v"})
    add("name", (*META, "annotations"), {"bad key": "x"}, {"Example.COM/Key": "v"}, {"a" * 64: "x"})
    add("name", (*SPEC, "hostname"), "Web", "web.0", "a" * 64)
    add("name", (*SPEC, "subdomain"), "web_1", "a" * 64)
    add("name", (*SPEC, "nodeName"), "Node_1", "node-1.example.com")
    add("name", (*SPEC, "serviceAccountName"), "Sa_1", "sa-1")
    add("name", (*SPEC, "nodeSelector"), {"bad key": "x"}, {"k": "bad value"})
    add("name", (*SPEC, "hostAliases", 0, "hostnames"), ["Bad_Host"], ["ok.host"], [""])
    add("name", (*ENV, 3, "valueFrom", "configMapKeyRef", "name"), "Cfg", "cfg.ok")
    add("name", (*ENV, 3, "valueFrom", "configMapKeyRef", "key"), "a/b", "a b", "..", ".ok_key-1")
    add(
        "name",
        (*SPEC, "readinessGates"),
        [{"conditionType": "example.com/ready"}],
        [{"conditionType": "bad type"}],
    )

    # Quantities.
    for path in [(*C, "resources", "limits", "cpu"), (*C, "resources", "requests", "memory")]:
        add("quantity", path, *QUANTITIES)
    add("quantity", (*C, "resources", "requests", "cpu"), "1", "501m")
    add("quantity", (*C, "resources", "limits", "example.com/gpu"), "1", "0.5")
    add("quantity", (*C, "resources", "limits", "bad resource name"), "1")
    add("quantity", (*C, "resources", "requests", "example.com/fpga"), "1")
    add("quantity", (*C, "resources", "limits", "notkubernetes.io/x"), "0.5")
    add("quantity", (*VOL, 0, "emptyDir", "sizeLimit"), "-1Mi", "abc", "0")
    add("quantity", (*ENV, 2, "valueFrom", "resourceFieldRef", "divisor"), "0", "-1", "1Ki", "x")

    # Ports.
    add("port", (*PORT, "containerPort"), 0, -1, 1, 65535, 65536, 70000)
    add("port", (*PORT, "hostPort"), 0, -1, 80, 65536)
    add("port", (*PORT, "protocol"), "tcp", "HTTP", "SCTP", "")
    add("port", (*PORT, "hostIP"), "10.0.0.1", "bad", "")
    add("port", (*C, "ports", 1, "name"), "http")
    add("port", (*C, "ports", 2), {"containerPort": 8080, "protocol": "TCP"})
    add("port", (*SPEC, "hostNetwork"), True)
    add("port", (*IC, "ports"), [{"containerPort": 80, "hostPort": 8080}])

    # Probes and handlers.
    for probe in (LIVE, READY):
        add("probe", (*probe, "periodSeconds"), 0, -1)
        add("probe", (*probe, "timeoutSeconds"), 0, -1)
        add("probe", (*probe, "initialDelaySeconds"), -1)
        add("probe", (*probe, "failureThreshold"), 0, -1)
        add("probe", (*probe, "successThreshold"), 0, 1, 3)
        add("probe", (*probe, "terminationGracePeriodSeconds"), 0, 10, -1)
        add("probe", (*probe, "exec"), {"command": ["true"]})
        add("probe", (*probe, "grpc"), {"port": 9090})
    add("probe", (*LIVE, "httpGet", "port"), 0, 70000, -1, 8080)
    add("probe", (*LIVE, "httpGet", "scheme"), "FTP", "https", "HTTPS")
    add(
        "probe",
        (*LIVE, "httpGet", "httpHeaders"),
        [{"name": "X", "value": "y"}],
        [{"value": "y"}],
        [{"name": "bad header"}],
    )
    add("probe", (*LIVE, "httpGet", "path"), "healthz", "")
    add("probe", (*READY, "tcpSocket", "port"), 0, "http", "nope", 65536)
    add("probe", (*C, "startupProbe", "exec", "command"), [], [""])
    add("probe", (*C, "startupProbe", "grpc"), {"port": 0}, {"service": "x"})
    add("probe", (*C, "startupProbe"), {}, {"exec": {}})
    add(
        "probe",
        (*C, "lifecycle", "postStart"),
        {},
        {"tcpSocket": {"port": 80}},
        {"exec": {"command": ["x"]}, "httpGet": {"port": 1}},
    )
    add("probe", (*IC, "livenessProbe"), {"exec": {"command": ["true"]}})
    add("probe", (*IC, "lifecycle"), {"postStart": {"exec": {"command": ["true"]}}})

    # Volumes and mounts.
    add("volume", (*VOL, 0, "hostPath"), {"path": "/tmp"})
    add("volume", (*VOL, 0, "emptyDir", "medium"), "Disk", "", "HugePages", "memory")
    add("volume", (*VOL, 1, "configMap", "defaultMode"), 0, 511, 512, -1, 0o644)
    add("volume", (*VOL, 1, "configMap", "items", 0, "path"), "/abs", "../up", "a/../b", "a/b", "..a", "")
    add("volume", (*VOL, 1, "configMap", "items", 0, "mode"), 0o777, 0o1000, -1)
    add("volume", (*VOL, 2, "secret", "secretName"), "Db", "db.ok", "a%2fb")
    add("volume", (*VOL, 2, "secret", "defaultMode"), 1024)
    add("volume", (*VOL, 1, "configMap", "name"), "Cfg", "cfg_1", "../x", "a/b", "..")
    add("volume", (*VOL, 4, "projected", "sources", 1, "configMap", "name"), "Cfg", "")
    add(
        "volume",
        (*VOL, 3, "downwardAPI", "items", 0, "fieldRef", "fieldPath"),
        "metadata.uid",
        "spec.nodeName",
        "metadata.labels['app']",
        "bogus",
    )
    add(
        "volume",
        (*VOL, 3, "downwardAPI", "items", 1, "resourceFieldRef", "resource"),
        "limits.memory",
        "limits.gpu",
    )
    add(
        "volume",
        (*VOL, 3, "downwardAPI", "items", 0, "resourceFieldRef"),
        {"containerName": "app", "resource": "limits.cpu"},
    )
    add(
        "volume",
        (*VOL, 4, "projected", "sources", 0, "serviceAccountToken", "expirationSeconds"),
        100,
        600,
        2**33,
    )
    add("volume", (*VOL, 4, "projected", "sources", 0, "serviceAccountToken", "path"), "/token", "../t")
    add(
        "volume",
        (*VOL, 4, "projected", "sources", 1),
        {},
        {"configMap": {"name": "a"}, "secret": {"name": "b"}},
    )
    add("volume", (*VOL, 4, "projected", "defaultMode"), 0o1000)
    add("volume", (*VOL, 5, "hostPath", "type"), "Bogus", "", "DirectoryOrCreate", "directory")
    add("volume", (*VOL, 5, "hostPath", "path"), "relative", "/")
    add("volume", (*VOL, 6), {"name": "pvc", "persistentVolumeClaim": {"claimName": "data"}}, {"name": "pvc"})
    add("volume", (*VOL, 6), {"name": "nfs", "nfs": {"server": "s", "path": "/x"}, "emptyDir": {}})
    add("volume", (*VOL, 6), {"name": "scratch", "emptyDir": {}})
    add("volume", (*C, "volumeMounts", 0, "name"), "missing", "config")
    add("volume", (*C, "volumeMounts", 0, "mountPath"), "/etc/config", "relative", "")
    add("volume", (*C, "volumeMounts", 0, "subPath"), "/abs", "../x", "ok/sub")
    add("volume", (*C, "volumeMounts", 0, "subPathExpr"), "$(POD_NAME)")
    add("volume", (*C, "volumeMounts", 2, "subPathExpr"), "$(POD_NAME)")
    add("volume", (*C, "volumeMounts", 0, "mountPropagation"), "Bidirectional", "HostToContainer", "bogus")

    # Environment.
    add("env", (*ENV, 0, "name"), "A=B", "1ABC", "A B", "a.b-c_d", "-x", "ÄB", "")
    add("env", (*ENV, 0, "valueFrom"), {}, {"fieldRef": {"fieldPath": "metadata.name"}})
    add(
        "env",
        (*ENV, 1, "valueFrom"),
        {},
        {"bogus": 1},
        {"fieldRef": {"fieldPath": "metadata.name"}, "secretKeyRef": {"name": "a", "key": "b"}},
    )
    add(
        "env",
        (*ENV, 1, "valueFrom", "fieldRef", "fieldPath"),
        "status.podIP",
        "status.hostIP",
        "spec.nodeName",
        "metadata.labels",
        "metadata.annotations['a']",
        "spec.bogus",
        "metadata.labels['Bad Key']",
    )
    add("env", (*ENV, 1, "valueFrom", "fieldRef", "apiVersion"), "v1", "v2")
    add(
        "env",
        (*ENV, 2, "valueFrom", "resourceFieldRef", "resource"),
        "limits.memory",
        "requests.ephemeral-storage",
        "limits.gpu",
        "cpu",
    )
    add("env", (*ENV, 2, "valueFrom", "resourceFieldRef", "containerName"), "app", "missing")
    add("env", (*ENV, 3, "valueFrom", "configMapKeyRef", "optional"), True)
    add(
        "env",
        (*C, "envFrom", 0),
        {},
        {"configMapRef": {"name": "a"}, "secretRef": {"name": "b"}},
        {"prefix": "1X", "configMapRef": {"name": "a"}},
    )
    add("env", (*C, "envFrom", 1, "prefix"), "A=", "ok_", "1")
    add("env", (*ENV, 5), {"name": "PLAIN", "value": "dup"})

    # securityContext.
    add("security", (*PSC, "runAsUser"), -1, 0, 2**31, 2**31 - 1)
    add("security", (*PSC, "runAsGroup"), -1)
    add("security", (*PSC, "fsGroup"), -1)
    add("security", (*PSC, "supplementalGroups"), [-1], [1, 2])
    add(
        "security",
        (*PSC, "sysctls"),
        [{"name": "kernel.shm_rmid_forced", "value": "1"}],
        [{"name": "bad name", "value": "1"}],
        [{"name": "", "value": "1"}],
        [{"name": "net.core.somaxconn"}],
    )
    add("security", (*PSC, "fsGroupChangePolicy"), "Always", "Bogus")
    add(
        "security",
        (*PSC, "seccompProfile"),
        {"type": "RuntimeDefault"},
        {"type": "Bogus"},
        {"type": "Localhost"},
        {"type": "Localhost", "localhostProfile": "p.json"},
    )
    add("security", (*PSC, "seLinuxOptions"), {"level": "s0:c1,c2"}, {"level": "bad level!"})
    add("security", (*SC, "runAsUser"), -1, 2**31)
    add("security", (*SC, "privileged"), True)
    add("security", (*SC, "procMount"), "Default", "Unmasked", "Bogus")
    add("security", (*SC, "capabilities", "add"), ["SYS_ADMIN"], ["bad cap"])
    add("security", (*SC, "seccompProfile"), {"type": "Unconfined"}, {"type": "bogus"})
    add("security", (*SC, "windowsOptions"), {"runAsUserName": "x"})

    # Pod-level fields.
    add("spec", (*SPEC, "restartPolicy"), "Sometimes", "", "Never", "always")
    add("spec", (*SPEC, "dnsPolicy"), "Bogus", "None", "Default")
    add(
        "spec", (*SPEC, "dnsConfig", "nameservers"), ["bad"], ["1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4"], []
    )
    add("spec", (*SPEC, "dnsConfig", "searches"), ["Bad_Domain"], ["ok.domain."], ["a" * 254])
    add("spec", (*SPEC, "activeDeadlineSeconds"), 0, -1, 1, 2**31)
    add("spec", (*SPEC, "terminationGracePeriodSeconds"), 0, -5)
    add("spec", (*SPEC, "hostAliases", 0, "ip"), "bad", "::1", "")
    add("spec", (*SPEC, "tolerations", 0, "operator"), "Bogus", "Equal")
    add("spec", (*SPEC, "tolerations", 0, "effect"), "Bogus", "NoExecute", "")
    add("spec", (*SPEC, "tolerations", 0, "tolerationSeconds"), 10)
    add("spec", (*SPEC, "tolerations", 0, "value"), "v")
    add("spec", (*SPEC, "tolerations", 1), {"operator": "Exists"}, {"operator": "Equal", "value": "x"})
    add("spec", (*SPEC, "shareProcessNamespace"), True)
    add("spec", (*SPEC, "hostPID"), True)
    add("spec", (*SPEC, "schedulerName"), "Bad Scheduler")
    add("spec", (*SPEC, "os"), {"name": "linux"}, {"name": "plan9"})
    add("spec", (*C, "imagePullPolicy"), "Sometimes", "always", "")
    add("spec", (*C, "terminationMessagePolicy"), "Bogus")
    add("spec", (*C, "terminationMessagePath"), "")
    add("spec", (*C, "image"), " busybox", "busybox ")
    add("spec", (*C, "stdinOnce"), True)
    add("spec", ("apiVersion",), "v2", "apps/v1")
    add("spec", ("kind",), "Deployment", "pod")
    add("spec", (*META, "deletionGracePeriodSeconds"), -1)

    # Unknown fields: accepted (dropped) by a non-strict API server; warnings here.
    add("unknown", (*SPEC, "restartPolcy"), "Never")
    add("unknown", (*C, "comand"), ["sh"])
    add("unknown", (*C, "imagePullPolcy"), "Always")
    add("unknown", ("extra",), {"a": 1})
    add("unknown", (*META, "nmae"), "x")
    add("unknown", (*LIVE, "httpGet", "paht"), "/")
    add("unknown", (*PORT, "containerport"), 80)
    add("unknown", (*VOL, 0, "emptyDir", "sizeLimt"), "1Mi")
    add("unknown", (*PSC, "seLinuxOptions", "levle"), "s0")
    add("unknown", (*SPEC, "affinity"), {"nodeAfinity": {}})
    add(
        "unknown",
        (*VOL, 6),
        {"name": "pvc", "persistentVolumeClaim": {"claimName": "data", "readonly": True}},
    )
    add("unknown", (*ENV, 1, "valueFrom", "fieldRef", "fieldpath"), "metadata.name")
    add("unknown", (*C, "ports", 1, "bogus"), None)
    return out


def variants(count: int, seed: int) -> Iterator[Variant]:
    """Every single mutation, then seeded random pairs of them, up to ``count`` variants in all."""
    singles = mutations()
    rng = random.Random(seed)
    for i in range(count):
        if i < len(singles):
            chosen: tuple[Mutation, ...] = (singles[i],)
        else:
            chosen = tuple(rng.sample(singles, 2))
        doc = base_pod()
        try:
            for mutation in chosen:
                mutation.apply(doc)
        except (KeyError, IndexError, TypeError):
            continue  # the first mutation removed what the second one edits
        yield Variant(f"v{i:04d}", chosen, doc)
