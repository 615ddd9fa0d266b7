"""Per-document results of parse_manifest: every document checked, unknown fields as warnings (errors when
strict), null list items, and the API server's rules the differential test found (tests/envtest)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from kubelet_trio.api.manifest import UNKNOWN_FIELD, parse_manifest

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  containers:
  - name: c
    image: busybox
"""


def _docs(*docs: str) -> str:
    return "---\n".join(docs)


def test_a_syntax_error_in_one_document_does_not_hide_the_others() -> None:
    text = _docs(
        POD.format(name="one"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: two\n",  # unclosed flow mapping
        POD.format(name="three").replace("    image: busybox\n", ""),  # image missing
        "# only a comment: an empty document, not counted\n",
        POD.format(name="four"),
    )
    result = parse_manifest(text, file="pods.yaml")
    assert [p.name for p in result.pods] == ["one", "four"]
    verdicts = [(d.number, d.line, d.ok, [p.name for p in d.pods]) for d in result.documents]
    assert verdicts == [
        (1, 1, True, ["one"]),
        (2, 10, False, []),
        (3, 14, False, []),
        (4, 24, True, ["four"]),
    ]
    (syntax,) = result.documents[1].errors
    assert syntax.message.startswith("invalid YAML") and syntax.line == 12
    (image,) = result.documents[2].errors
    assert (image.line, image.field, image.message) == (20, "spec.containers[0].image", "Required value")
    assert [e.line for e in result.errors] == [12, 20]


def test_unknown_fields_warn_and_the_pod_still_loads() -> None:
    text = POD.format(name="web") + "  restartPolcy: Never\n"
    text = text.replace("    image: busybox\n", "    image: busybox\n    comand: [sh]\n")
    result = parse_manifest(text, file="web.yaml")
    assert [p.name for p in result.pods] == ["web"] and result.ok
    assert [(w.line, w.field, w.message) for w in result.warnings] == [
        (9, "spec.containers[0].comand", UNKNOWN_FIELD),
        (10, "spec.restartPolcy", UNKNOWN_FIELD),
    ]
    assert str(result.warnings[1]) == "web.yaml:10: spec.restartPolcy: unknown field"

    strict = parse_manifest(text, file="web.yaml", strict=True)
    assert strict.pods == () and strict.warnings == ()
    assert [(e.line, e.field) for e in strict.errors] == [
        (9, "spec.containers[0].comand"),
        (10, "spec.restartPolcy"),
    ]


def test_strict_fails_only_the_list_items_with_unknown_fields() -> None:
    good, bad = (json.loads(json.dumps(_pod_dict(n))) for n in ("good", "bad"))
    bad["spec"]["bogus"] = 1
    body = json.dumps({"apiVersion": "v1", "kind": "PodList", "items": [good, bad]})
    result = parse_manifest(body, file="url", allow_lists=True, strict=True)
    assert [p.name for p in result.pods] == ["good"]
    assert [e.field for e in result.errors] == ["items[1].spec.bogus"]


def _pod_dict(name: str, **container: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox", **container}]},
    }


def test_null_items_of_string_lists_decode_as_empty_strings() -> None:
    result = parse_manifest(json.dumps(_pod_dict("web", command=[None, "sh"], args=[None])), file="x")
    assert result.ok, result.errors
    (container,) = result.pods[0].spec.containers  # type: ignore[union-attr, misc]
    assert (container.command, container.args) == (("", "sh"), ("",))
    # A null port is a zero-valued port: its containerPort is then missing, as the API server says.
    ports = parse_manifest(json.dumps(_pod_dict("web", ports=[None])), file="x")
    assert [(e.field, e.message) for e in ports.errors] == [
        ("spec.containers[0].ports[0].containerPort", "Required value")
    ]


def test_all_type_errors_are_reported_inside_opaque_subtrees_too() -> None:
    doc = _pod_dict("web", securityContext={"seccompProfile": {"type": 5}})
    doc["spec"]["affinity"] = []
    result = parse_manifest(json.dumps(doc), file="x")
    assert [(e.field, e.message) for e in result.errors] == [
        ("spec.containers[0].securityContext.seccompProfile.type", "expected string, got number"),
        ("spec.affinity", "expected object, got array"),
    ]


def test_create_time_changes_of_the_api_server() -> None:
    doc = _pod_dict("web")
    doc["spec"]["terminationGracePeriodSeconds"] = -5
    doc["metadata"]["deletionGracePeriodSeconds"] = -1
    result = parse_manifest(json.dumps(doc), file="x")
    assert result.ok, result.errors
    (pod,) = result.pods
    assert pod.spec.termination_grace_period_seconds == 1  # type: ignore[union-attr]
    assert pod.metadata.deletion_grace_period_seconds is None  # type: ignore[union-attr]


BASE = _pod_dict(
    "web",
    env=[{"name": "E", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
    volumeMounts=[{"name": "v", "mountPath": "/v"}],
    readinessProbe={"tcpSocket": {"port": 80}},
    livenessProbe={"httpGet": {"port": 80}},
)
BASE["spec"]["volumes"] = [{"name": "v", "emptyDir": {}}]
C = ("spec", "containers", 0)

# (path, value, expected error field or None for "accepted") - each verdict as kube-apiserver 1.36's dry run
# gives it; the fields as 1.24 named them (1.36 names the parent for a few: resources.requests, httpHeaders,
# volumeMounts.mountPropagation, spec.os, and adds the volume mount a broken volume leaves unmatched).
AGREEMENT = [
    ((*C, "env", 0, "valueFrom"), {}, "spec.containers[0].env[0].valueFrom"),
    ((*C, "env", 0, "valueFrom"), {"bogus": 1}, "spec.containers[0].env[0].valueFrom"),
    (
        (*C, "env", 0, "valueFrom"),
        {"configMapKeyRef": {"name": "a", "key": ".."}},
        "spec.containers[0].env[0].valueFrom.configMapKeyRef.key",
    ),
    (
        (*C, "env", 0, "valueFrom"),
        {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1Ki"}},
        "spec.containers[0].env[0].valueFrom.resourceFieldRef.divisor",
    ),
    (
        (*C, "env", 0, "valueFrom"),
        {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1m"}},
        "spec.containers[0].env[0].valueFrom.resourceFieldRef.divisor",
    ),
    ((*C, "env", 0, "valueFrom"), {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "0"}}, None),
    (
        (*C, "envFrom"),
        [{"prefix": "A=", "configMapRef": {"name": "a"}}],
        "spec.containers[0].envFrom[0].prefix",
    ),
    (
        (*C, "resources"),
        {"limits": {"example.com/gpu": "0.5"}},  # the request defaults to the limit: both are wrong
        (
            "spec.containers[0].resources.limits[example.com/gpu]",
            "spec.containers[0].resources.requests[example.com/gpu]",
        ),
    ),
    (
        (*C, "resources"),
        {"limits": {"example.com/gpu": "2"}, "requests": {"example.com/gpu": "1"}},
        "spec.containers[0].resources.requests[example.com/gpu]",
    ),
    (
        (*C, "resources"),
        {"requests": {"example.com/gpu": "1"}},
        "spec.containers[0].resources.limits[example.com/gpu]",
    ),
    ((*C, "ports"), [{"containerPort": 80, "hostIP": "not-an-ip"}], None),
    (
        (*C, "readinessProbe", "terminationGracePeriodSeconds"),
        10,
        "spec.containers[0].readinessProbe.terminationGracePeriodSeconds",
    ),
    (
        (*C, "livenessProbe", "httpGet", "httpHeaders"),
        [{"name": "bad header"}],
        "spec.containers[0].livenessProbe.httpGet.httpHeaders[0].name",
    ),
    (
        (*C, "volumeMounts", 0, "mountPropagation"),
        "Bidirectional",
        "spec.containers[0].volumeMounts[0].mountPropagation",
    ),
    (
        (*C, "securityContext"),
        {"privileged": True, "allowPrivilegeEscalation": False},
        "spec.containers[0].securityContext",
    ),
    (
        (*C, "securityContext"),
        {"seccompProfile": {"type": "bogus"}},
        "spec.containers[0].securityContext.seccompProfile.type",
    ),
    ((*C, "securityContext"), {"procMount": "Bogus"}, "spec.containers[0].securityContext.procMount"),
    (
        ("spec", "securityContext"),
        {"seccompProfile": {"type": "Localhost"}},
        "spec.securityContext.seccompProfile.localhostProfile",
    ),
    (("spec", "securityContext"), {"supplementalGroups": [-1]}, "spec.securityContext.supplementalGroups[0]"),
    (
        ("spec", "securityContext"),
        {"sysctls": [{"name": "bad name", "value": "1"}]},
        "spec.securityContext.sysctls[0].name",
    ),
    (
        ("spec", "securityContext"),
        {"fsGroupChangePolicy": "Bogus"},
        "spec.securityContext.fsGroupChangePolicy",
    ),
    (("spec", "os"), {"name": "plan9"}, "spec.os.name"),
    (("spec", "volumes", 0), {"name": "v", "emptyDir": {"medium": "Disk"}}, None),
    (("spec", "volumes", 0), {"name": "v", "secret": {"secretName": "Not_A_DNS_Name"}}, None),
    (
        ("spec", "volumes", 0),
        {"name": "v", "configMap": {"name": "c", "items": [{"key": "k", "path": "..a"}]}},
        "spec.volumes[0].configMap.items[0].path",
    ),
    (("spec", "volumes", 0), {"name": "v", "projected": {"sources": [{}]}}, None),
]


@pytest.mark.parametrize(("path", "value", "field"), AGREEMENT, ids=[str(a[2]) for a in AGREEMENT])
def test_verdicts_the_api_server_gave(
    path: tuple[Any, ...], value: Any, field: str | tuple[str, ...] | None
) -> None:
    doc = copy.deepcopy(BASE)
    target: Any = doc
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    result = parse_manifest(json.dumps(doc), file="x")
    expected = [field] if isinstance(field, str) else list(field or ())
    assert sorted(e.field for e in result.errors) == expected


@pytest.mark.parametrize("name", ["../x", "a/b", "..", "a%2fb"])
def test_volume_object_names_must_be_path_segments(name: str) -> None:
    """Kubelet-side (the API server accepts these): the kubelet fetches the object by a URL path."""
    doc = copy.deepcopy(BASE)
    doc["spec"]["volumes"][0] = {"name": "v", "configMap": {"name": name}}
    result = parse_manifest(json.dumps(doc), file="x")
    assert [e.field for e in result.errors] == ["spec.volumes[0].configMap.name"]
