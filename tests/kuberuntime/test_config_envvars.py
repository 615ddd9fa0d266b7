"""$(VAR) expansion, env/envFrom resolution and downward API field paths (Go: expansion/expand_test.go,
kubelet_pods_test.go TestMakeEnvironmentVariables)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from kubelet_trio.api import Container, EnvVar, Pod, VolumeMount, default_pod
from kubelet_trio.cm.allocatable import NodeAllocatable
from kubelet_trio.container.expansion import (
    expand,
    expand_command_and_args,
    expand_command_only_static,
    expand_subpath_expr,
    mapping_for,
)
from kubelet_trio.fieldpath import extract_field_path, format_map
from kubelet_trio.kuberuntime.envvars import make_environment_variables
from kubelet_trio.objects import ConfigMap, EnvError, Secret

CONTEXT = {"VAR_A": "A", "VAR_B": "B", "VAR_C": "C", "VAR_REF": "$(VAR_A)", "VAR_EMPTY": ""}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$(VAR_A)", "A"),
        ("___$(VAR_B)___", "___B___"),
        ("$(VAR_C)$(VAR_A)", "CA"),
        ("$$(VAR_B)", "$(VAR_B)"),
        ("$$$(VAR_B)", "$B"),
        ("$$$$$$(BIG_MONEY)", "$$$(BIG_MONEY)"),
        ("$(VAR_EMPTY)", ""),
        ("$(VAR_REF)", "$(VAR_A)"),  # no recursion
        ("$(VAR_Z)", "$(VAR_Z)"),  # unknown: left as written
        ("$(VAR_A", "$(VAR_A"),  # incomplete
        ("$VAR_A", "$VAR_A"),
        ("$(", "$("),
        ("$", "$"),
        ("$$", "$"),
        ("$(VAR_A)$", "A$"),
        ("$()", "$()"),
        ("foo$(VAR_A)bar$(VAR_B)baz", "fooAbarBbaz"),
        ("", ""),
    ],
)
def test_expand(text: str, expected: str) -> None:
    assert expand(text, mapping_for(CONTEXT)) == expected


def pod(containers: list[dict[str, Any]], **extra: Any) -> Pod:
    meta = {
        "name": "web",
        "namespace": "shop",
        "uid": "uid-1",
        "labels": {"app": "web", "tier": "front"},
        "annotations": {"note": 'say "hi"\n'},
    }
    meta.update(extra.pop("metadata", {}))
    data = {
        "metadata": meta,
        "spec": {"containers": containers, "nodeName": "node-a", "serviceAccountName": "sa", **extra},
    }
    return default_pod(Pod.from_dict(data))


def first(p: Pod) -> Container:
    assert p.spec is not None and p.spec.containers
    return p.spec.containers[0]


@attrs.define
class Store:
    config_maps: dict[tuple[str, str], ConfigMap] = attrs.Factory(dict)
    secrets: dict[tuple[str, str], Secret] = attrs.Factory(dict)

    def get_config_map(self, namespace: str, name: str) -> ConfigMap | None:
        return self.config_maps.get((namespace, name))

    def get_secret(self, namespace: str, name: str) -> Secret | None:
        return self.secrets.get((namespace, name))


def field(path: str) -> dict[str, Any]:
    return {"valueFrom": {"fieldRef": {"fieldPath": path}}}


def test_field_refs_and_expansion_order() -> None:
    p = pod(
        [
            {
                "name": "app",
                "image": "busybox",
                "command": ["sh", "-c", "echo $(POD_NAME) $$(POD_NAME) $(MISSING)"],
                "args": ["$(GREETING)"],
                "env": [
                    {"name": "POD_NAME", **field("metadata.name")},
                    {"name": "NS", **field("metadata.namespace")},
                    {"name": "UID", **field("metadata.uid")},
                    {"name": "TIER", **field("metadata.labels['tier']")},
                    {"name": "NOTE", **field("metadata.annotations['note']")},
                    {"name": "LABELS", **field("metadata.labels")},
                    {"name": "NODE", **field("spec.nodeName")},
                    {"name": "SA", **field("spec.serviceAccountName")},
                    {"name": "IP", **field("status.podIP")},
                    {"name": "IPS", **field("status.podIPs")},
                    {"name": "HOST", **field("status.hostIP")},
                    {"name": "HOSTS", **field("status.hostIPs")},
                    {"name": "GREETING", "value": "hello $(POD_NAME) from $(LATER)"},
                    {"name": "LATER", "value": "x"},
                ],
            }
        ]
    )
    env = dict(
        make_environment_variables(p, first(p), pod_ips=("10.88.0.5",), host_ips=("192.0.2.1", "2001:db8::1"))
    )
    assert env["POD_NAME"] == "web" and env["NS"] == "shop" and env["UID"] == "uid-1"
    assert env["TIER"] == "front"
    assert env["NOTE"] == 'say "hi"\n'
    assert env["LABELS"] == 'app="web"\ntier="front"'
    assert (env["NODE"], env["SA"]) == ("node-a", "sa")
    assert (env["IP"], env["IPS"]) == ("10.88.0.5", "10.88.0.5")
    assert (env["HOST"], env["HOSTS"]) == ("192.0.2.1", "192.0.2.1,2001:db8::1")
    assert env["GREETING"] == "hello web from $(LATER)"  # only variables defined before it
    command, args = expand_command_and_args(first(p), list(env.items()))
    assert command == ("sh", "-c", "echo web $(POD_NAME) $(MISSING)")
    assert args == ("hello web from $(LATER)",)


def test_format_map_quotes_like_go() -> None:
    assert format_map({"b": "x", "a": 'q"\\\t\x01é'}) == 'a="q\\"\\\\\\t\\x01é"\nb="x"'
    assert format_map({}) == ""


def test_unsupported_field_path() -> None:
    p = pod([{"name": "app", "image": "busybox"}])
    with pytest.raises(EnvError, match=r"unsupported fieldPath: spec\.nope"):
        extract_field_path(p, "spec.nope")
    with pytest.raises(EnvError, match="does not support subscript"):
        extract_field_path(p, "metadata.name['x']")


def test_resource_field_refs_with_divisor_and_node_defaults() -> None:
    p = pod(
        [
            {
                "name": "app",
                "image": "busybox",
                "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
                "env": [
                    {"name": "CPU_REQ", "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu"}}},
                    {
                        "name": "CPU_REQ_M",
                        "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu", "divisor": "1m"}},
                    },
                    {
                        "name": "MEM_MI",
                        "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}},
                    },
                    {"name": "CPU_LIM", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
                ],
            }
        ]
    )
    allocatable = NodeAllocatable(milli_cpu=4000, memory=8 * 2**30)
    env = dict(make_environment_variables(p, first(p), allocatable=allocatable))
    assert env["CPU_REQ"] == "1"  # ceil(0.25)
    assert env["CPU_REQ_M"] == "250"
    assert env["MEM_MI"] == "128"
    assert env["CPU_LIM"] == "4"  # no limit: the node's allocatable


def test_config_maps_and_secrets() -> None:
    p = pod(
        [
            {
                "name": "app",
                "image": "busybox",
                "envFrom": [
                    {"configMapRef": {"name": "cfg"}, "prefix": "CFG_"},
                    {"secretRef": {"name": "sec"}},
                ],
                "env": [
                    {"name": "CFG_mode", "value": "override"},
                    {"name": "ONE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "mode"}}},
                    {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "password"}}},
                    {
                        "name": "OPT",
                        "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "nope", "optional": True}},
                    },
                ],
            }
        ]
    )
    store = Store(
        {("shop", "cfg"): ConfigMap("shop", "cfg", {"mode": "fast", "level": "3"})},
        {("shop", "sec"): Secret("shop", "sec", {"password": b"hunter2"})},
    )
    env = make_environment_variables(p, first(p), objects=store)
    assert dict(env) == {
        "CFG_mode": "override",
        "CFG_level": "3",
        "password": "hunter2",
        "ONE": "fast",
        "PW": "hunter2",
    }
    with pytest.raises(EnvError, match='configmap "cfg" not found'):
        make_environment_variables(p, first(p))  # the standalone store knows no objects


def test_env_from_skips_invalid_variable_names_with_a_warning() -> None:
    p = pod(
        [
            {
                "name": "app",
                "image": "busybox",
                "envFrom": [
                    {"configMapRef": {"name": "cfg"}},
                    {"secretRef": {"name": "sec"}, "prefix": "S_"},
                ],
            }
        ]
    )
    store = Store(
        {("shop", "cfg"): ConfigMap("shop", "cfg", {"2alsobad": "x", "good.key": "1", "1badkey": "y"})},
        {("shop", "sec"): Secret("shop", "sec", {"ok": b"v", "bad key": b"w"})},
    )
    warnings: list[str] = []
    env = make_environment_variables(p, first(p), objects=store, warnings=warnings)
    assert dict(env) == {"good.key": "1", "S_ok": "v"}
    assert warnings == [
        "Keys [1badkey, 2alsobad] from the EnvFrom configMap shop/cfg were skipped since they are "
        "considered invalid environment variable names.",
        "Keys [S_bad key] from the EnvFrom secret shop/sec were skipped since they are "
        "considered invalid environment variable names.",
    ]
    missing_key = attrs.evolve(
        first(p),
        env_from=None,
        env=(EnvVar.from_dict({"name": "X", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "k"}}}),),
    )
    with pytest.raises(EnvError, match="couldn't find key k in Secret shop/sec"):
        make_environment_variables(p, missing_key, objects=store)
    optional = attrs.evolve(
        first(p),
        env_from=None,
        env=(
            EnvVar.from_dict(
                {
                    "name": "X",
                    "valueFrom": {"configMapKeyRef": {"name": "gone", "key": "k", "optional": True}},
                }
            ),
        ),
    )
    assert make_environment_variables(p, optional) == []


def test_exec_probe_commands_see_only_static_env() -> None:
    env = (
        EnvVar(name="A", value="1"),
        EnvVar.from_dict({"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}),
    )
    assert expand_command_only_static(["echo", "$(A)", "$(B)", "$(C)"], env) == ["echo", "1", "", "$(C)"]


def test_subpath_expr() -> None:
    mount = VolumeMount(name="v", mount_path="/data", sub_path_expr="logs/$(POD_NAME)")
    assert expand_subpath_expr(mount, [("POD_NAME", "web")]) == "logs/web"
    with pytest.raises(EnvError, match="missing value for POD_NAME"):
        expand_subpath_expr(mount, [("POD_NAME", "")])
