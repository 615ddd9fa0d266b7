"""Real-world manifests parse, round-trip unchanged and validate; invalid ones report path and line."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubelet_trio.api import (
    ManifestError,
    Pod,
    PodList,
    Quantity,
    default_pod,
    gojson,
    parse_manifest,
    read_manifest_file,
    validate_pod,
)
from kubelet_trio.api.manifest import Document, Unreadable, _load


def load_documents(content: bytes, *, file: str) -> list[Document]:
    """The manifest's documents as the reader splits them (JSON as one document, else YAML ones)."""
    documents: list[Document] = []
    for part in _load(content, file):
        if isinstance(part, Unreadable):
            raise part.error
        documents.append(part)
    return documents


VALID = [
    "api-server-pod.yaml",
    "dns-custom.yaml",
    "env-everything.yaml",
    "etcd-static.yaml",
    "grpc-server.yaml",
    "hello.json",
    "job-like.yaml",
    "kube-proxy-hostnet.yaml",
    "multi-doc.yaml",
    "nginx-web.yaml",
    "quantities.json",
    "redis-tcp.yaml",
    "sidecar-logging.yaml",
    "volumes-all.yaml",
]


def test_every_data_manifest_is_in_the_table(manifests_dir: Path) -> None:
    assert sorted(p.name for p in manifests_dir.iterdir()) == sorted(VALID)


@pytest.mark.parametrize("name", VALID)
def test_valid_manifest_round_trips_and_validates(manifests_dir: Path, name: str) -> None:
    path = manifests_dir / name
    docs = load_documents(path.read_bytes(), file=str(path))
    assert docs
    for doc in docs:
        pod = Pod.from_dict(doc.data)
        assert pod.to_dict() == doc.data  # unknown fields, nulls and empties all survive
        assert json.dumps(pod.to_dict(), sort_keys=True) == json.dumps(doc.data, sort_keys=True)
        assert validate_pod(default_pod(pod)) == []
    result = read_manifest_file(path)
    assert result.errors == ()
    assert len(result.pods) == len(docs)


def _pod(manifests_dir: Path, name: str, index: int = 0) -> Pod:
    path = manifests_dir / name
    return Pod.from_dict(load_documents(path.read_bytes(), file=name)[index].data)


def test_sidecar_and_probe_kinds(manifests_dir: Path) -> None:
    pod = _pod(manifests_dir, "sidecar-logging.yaml")
    assert pod.spec is not None and pod.spec.init_containers is not None
    migrate, shipper = pod.spec.init_containers
    assert not migrate.is_sidecar and shipper.is_sidecar
    assert shipper.startup_probe is not None and shipper.startup_probe.exec is not None
    assert shipper.readiness_probe is not None and shipper.readiness_probe.tcp_socket is not None
    grpc = _pod(manifests_dir, "grpc-server.yaml").spec.containers[0]  # type: ignore[union-attr, index]
    assert grpc.readiness_probe.grpc.service == "readiness"  # type: ignore[union-attr]
    nginx = _pod(manifests_dir, "nginx-web.yaml").spec.containers[0]  # type: ignore[union-attr, index]
    assert nginx.readiness_probe.http_get.port == "http"  # type: ignore[union-attr]
    assert nginx.liveness_probe.http_get.port == 80  # type: ignore[union-attr]


def test_env_sources(manifests_dir: Path) -> None:
    container = _pod(manifests_dir, "env-everything.yaml").spec.containers[0]  # type: ignore[union-attr, index]
    env = {var.name: var for var in container.env or ()}
    assert env["PLAIN"].value == "hello world"
    assert env["EMPTY"].value == ""
    assert env["POD_NAME"].value_from.field_ref.field_path == "metadata.name"  # type: ignore[union-attr]
    ref = env["MEM_LIMIT_MI"].value_from.resource_field_ref  # type: ignore[union-attr]
    assert ref.divisor == Quantity("1Mi")  # type: ignore[union-attr]
    assert env["LOG_LEVEL"].value_from.config_map_key_ref.optional is True  # type: ignore[union-attr]
    assert env["DB_PASSWORD"].value_from.secret_key_ref.key == "password"  # type: ignore[union-attr]
    assert container.env_from[1].prefix == "DB_"  # type: ignore[index]
    assert container.env_from[1].secret_ref.name == "db-credentials"  # type: ignore[index, union-attr]


def test_volume_kinds(manifests_dir: Path) -> None:
    spec = _pod(manifests_dir, "volumes-all.yaml").spec
    assert spec is not None
    kinds = {v.name: v.source_kinds() for v in spec.volumes or ()}
    assert kinds == {
        "scratch": ["emptyDir"],
        "host-logs": ["hostPath"],
        "config": ["configMap"],
        "certs": ["secret"],
        "podinfo": ["downwardAPI"],
        "all-in-one": ["projected"],
        "data": ["persistentVolumeClaim"],
        "csi-vol": ["csi"],
        "defaulted": [],
    }
    volumes = {v.name: v for v in spec.volumes or ()}
    assert volumes["config"].config_map.default_mode == 0o644  # type: ignore[union-attr]
    projected = volumes["all-in-one"].projected
    assert projected is not None and projected.sources is not None
    assert projected.sources[0].service_account_token.expiration_seconds == 7200  # type: ignore[union-attr]
    assert projected.sources[4].cluster_trust_bundle["signerName"] == "example.com/signer"
    defaulted = {v.name: v for v in default_pod(Pod(spec=spec)).spec.volumes or ()}  # type: ignore[union-attr]
    assert defaulted["defaulted"].source_kinds() == ["emptyDir"]
    assert defaulted["certs"].secret.default_mode == 0o400  # type: ignore[union-attr]
    assert defaulted["podinfo"].downward_api.default_mode == 0o644  # type: ignore[union-attr]


def test_quantities_of_every_form(manifests_dir: Path) -> None:
    containers = _pod(manifests_dir, "quantities.json").spec.containers  # type: ignore[union-attr]
    assert containers is not None
    res = {c.name: c.resources for c in containers}
    canon = {
        name: {
            kind: {k: q.canonical() for k, q in (getattr(r, kind) or {}).items()}
            for kind in ("requests", "limits")
        }
        for name, r in res.items()
    }
    assert canon == {
        "decimal-si": {
            "requests": {"cpu": "100m", "memory": "102400m", "ephemeral-storage": "1E"},
            "limits": {"cpu": "1500m", "memory": "1e3", "ephemeral-storage": "1Ei"},
        },
        "numbers": {
            "requests": {"cpu": "250m", "memory": "1048576"},
            "limits": {"cpu": "2", "memory": "1Gi"},
        },
        "signs-and-dots": {
            "requests": {"cpu": "500m", "memory": "1"},
            "limits": {"cpu": "1", "memory": "1500", "hugepages-2Mi": "4Mi"},
        },
    }


def test_status_types(manifests_dir: Path) -> None:
    pod = _pod(manifests_dir, "api-server-pod.yaml")
    status = pod.status
    assert status is not None and status.container_statuses is not None
    cs = status.container_statuses[0]
    assert cs.ready and cs.started and cs.restart_count == 1
    assert cs.state.running.started_at == "2024-05-01T12:00:04Z"  # type: ignore[union-attr]
    assert cs.last_state.terminated.exit_code == 137  # type: ignore[union-attr]
    assert [ip.ip for ip in status.pod_ips or ()] == ["10.244.1.7", "fd00::7"]
    assert status.conditions[0].extra == {"lastProbeTime": None}  # type: ignore[index]
    assert pod.metadata.owner_references[0].controller is True  # type: ignore[union-attr, index]


def test_multi_document(manifests_dir: Path) -> None:
    result = read_manifest_file(manifests_dir / "multi-doc.yaml")
    assert [p.name for p in result.pods] == ["first", "second"]


# (file, [(line, field path, message fragment), ...]) - every problem, in report order.
INVALID = [
    (
        "port-out-of-range.yaml",
        [
            (
                12,
                "spec.containers[1].ports[0].containerPort",
                "Invalid value: 70000: must be between 1 and 65535",
            ),
            (13, "spec.containers[1].ports[0].protocol", 'Unsupported value: "HTTP"'),
        ],
    ),
    ("duplicate-container-name.yaml", [(10, "spec.containers[0].name", 'Duplicate value: "app"')]),
    ("missing-image.yaml", [(7, "spec.containers[0].image", "Required value")]),
    ("mount-unknown-volume.yaml", [(12, "spec.containers[0].volumeMounts[1].name", 'Not found: "dat"')]),
    (
        "duplicate-volume.yaml",
        [
            (12, "spec.volumes[1].name", 'Duplicate value: "data"'),
            (13, "spec.volumes[1].hostPath", "may not specify more than 1 volume type"),
        ],
    ),
    (
        "liveness-success-threshold.yaml",
        [
            (12, "spec.containers[0].livenessProbe.successThreshold", "must be 1"),
            (14, "spec.containers[0].startupProbe.tcpSocket", "may not specify more than 1 handler type"),
        ],
    ),
    (
        "bad-names.yaml",
        [
            (4, "metadata.name", "RFC 1123 subdomain"),
            (7, "spec.containers[0].name", "RFC 1123 label"),
            (10, "spec.containers[0].ports[0].name", "must be no more than 15 characters"),
        ],
    ),
    ("syntax-error.yaml", [(8, "", "invalid YAML")]),
    ("wrong-type.yaml", [(10, "spec.containers[0].ports[0].containerPort", "expected integer, got string")]),
    ("bad-quantity.yaml", [(11, "spec.containers[0].resources.limits[cpu]", "quantities must match")]),
    ("wrong-kind.yaml", [(2, "kind", 'Unsupported value: "Deployment"')]),
    (
        "init-container-probe.yaml",
        [
            (6, "spec.restartPolicy", 'Unsupported value: "Sometimes"'),
            (10, "spec.initContainers[0].readinessProbe", "Forbidden"),
            (15, "spec.initContainers[1].restartPolicy", 'supported values: "Always"'),
            (19, "spec.containers[0].imagePullPolicy", 'Unsupported value: "Sometimes"'),
        ],
    ),
    (
        "request-over-limit.yaml",
        [
            (
                11,
                "spec.containers[0].resources.requests[cpu]",
                "must be less than or equal to cpu limit of 1500m",
            )
        ],
    ),
    ("second-doc-bad.yaml", [(15, "spec.containers", "Required value")]),
    ("bad-json.json", [(5, "", "invalid JSON")]),
    (
        "json-bad-probe.json",
        [
            (11, "spec.containers[0].readinessProbe.httpGet.port", "must be between 1 and 65535"),
            (12, "spec.containers[0].readinessProbe.periodSeconds", "must be greater than or equal to 0"),
        ],
    ),
    ("empty.yaml", [(1, "", "no pod manifest")]),
]


def test_every_invalid_file_is_in_the_table(invalid_dir: Path) -> None:
    assert sorted(p.name for p in invalid_dir.iterdir()) == sorted(name for name, _ in INVALID)


@pytest.mark.parametrize(("name", "expected"), INVALID, ids=[name for name, _ in INVALID])
def test_invalid_manifest_reports_path_and_line(
    invalid_dir: Path, name: str, expected: list[tuple[int, str, str]]
) -> None:
    path = invalid_dir / name
    result = read_manifest_file(path)
    got = [(e.line, ".".join([]) or _path(e), e.message) for e in result.errors]
    assert [(line, field) for line, field, _ in got] == [(line, field) for line, field, _ in expected]
    for (_, _, message), (_, _, fragment) in zip(got, expected, strict=True):
        assert fragment in message
    for error in result.errors:
        assert error.file == str(path)
        assert str(error).startswith(f"{path}:{error.line}: ")


def _path(error: ManifestError) -> str:
    from kubelet_trio.api import format_path

    return format_path(error.path)


def test_second_document_good_pod_is_still_returned(invalid_dir: Path) -> None:
    result = read_manifest_file(invalid_dir / "second-doc-bad.yaml")
    assert [p.name for p in result.pods] == ["good"]


BASE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "base"},
    "spec": {
        "containers": [
            {
                "name": "app",
                "image": "busybox:1.36",
                "ports": [{"containerPort": 80, "name": "http"}],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            },
            {"name": "helper", "image": "busybox:1.36"},
        ],
        "volumes": [{"name": "data", "emptyDir": {}}],
    },
}


def _set(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    target: Any = doc
    for step in path[:-1]:
        target = target[step]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value


_DELETE = object()

# Inline mutations of a valid pod: (path to change, new value, expected error path, message fragment).
MUTATIONS = [
    (("spec", "containers", 1, "name"), "app", "spec.containers[1].name", "Duplicate value"),
    (
        ("spec", "containers", 0, "ports", 0, "containerPort"),
        0,
        "spec.containers[0].ports[0].containerPort",
        "Required",
    ),
    (
        ("spec", "containers", 0, "ports", 0, "containerPort"),
        65536,
        "spec.containers[0].ports[0].containerPort",
        "65535",
    ),
    (
        ("spec", "containers", 0, "ports", 0, "protocol"),
        "tcp",
        "spec.containers[0].ports[0].protocol",
        "Unsupported",
    ),
    (
        ("spec", "containers", 0, "ports", 0, "name"),
        "9000",
        "spec.containers[0].ports[0].name",
        "at least one letter",
    ),
    (
        ("spec", "containers", 0, "ports", 0, "name"),
        "a--b",
        "spec.containers[0].ports[0].name",
        "consecutive hyphens",
    ),
    (
        ("spec", "containers", 0, "volumeMounts", 0, "name"),
        "nope",
        "spec.containers[0].volumeMounts[0].name",
        "Not found",
    ),
    (("spec", "containers", 0, "image"), _DELETE, "spec.containers[0].image", "Required value"),
    (("spec", "containers", 0, "image"), " busybox", "spec.containers[0].image", "whitespace"),
    (("spec", "volumes", 0, "name"), "Data", "spec.volumes[0].name", "RFC 1123 label"),
    (("spec", "restartPolicy"), "Sometimes", "spec.restartPolicy", "Unsupported"),
    (("spec", "dnsPolicy"), "None", "spec.dnsConfig", "Required value"),
    (("spec", "activeDeadlineSeconds"), 0, "spec.activeDeadlineSeconds", "between 1 and"),
    # (A negative terminationGracePeriodSeconds is not an error: the API server makes it 1 on create.)
    (("metadata", "name"), _DELETE, "metadata.name", "Required value"),
    (("metadata", "name"), "x" * 254, "metadata.name", "no more than 253"),
    (("metadata", "namespace"), "Prod", "metadata.namespace", "RFC 1123 label"),
    (("metadata", "labels"), {"app": "-bad-"}, "metadata.labels[app]", "valid label"),
    (("spec", "containers", 0, "livenessProbe"), {}, "spec.containers[0].livenessProbe", "handler type"),
    (
        ("spec", "containers", 0, "startupProbe"),
        {"exec": {"command": ["true"]}, "successThreshold": 2},
        "spec.containers[0].startupProbe.successThreshold",
        "must be 1",
    ),
    (
        ("spec", "containers", 0, "readinessProbe"),
        {"tcpSocket": {"port": "no_such"}},
        "spec.containers[0].readinessProbe.tcpSocket.port",
        "alpha-numeric",
    ),
    (
        ("spec", "containers", 0, "env"),
        [{"name": "A", "value": "x", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "spec.containers[0].env[0].valueFrom",
        "may not be specified when `value` is not empty",
    ),
    (
        ("spec", "containers", 0, "env"),
        [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "spec.secret"}}}],
        "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath",
        "Unsupported",
    ),
    (
        ("spec", "volumes", 0),
        {"name": "data", "hostPath": {"path": ""}},
        "spec.volumes[0].hostPath.path",
        "Required",
    ),
    (
        ("spec", "volumes", 0),
        {"name": "data", "secret": {"secretName": "s", "defaultMode": 0o1777}},
        "spec.volumes[0].secret.defaultMode",
        "0777",
    ),
    (
        ("spec", "volumes", 0),
        {
            "name": "data",
            "projected": {"sources": [{"serviceAccountToken": {"path": "t", "expirationSeconds": 60}}]},
        },
        "spec.volumes[0].projected.sources[0].serviceAccountToken.expirationSeconds",
        "less than 10 minutes",
    ),
    (
        ("spec", "volumes", 0),
        {"name": "data", "configMap": {"name": "c", "items": [{"key": "k", "path": "../etc/passwd"}]}},
        "spec.volumes[0].configMap.items[0].path",
        "'..'",
    ),
    (
        ("spec", "containers", 0, "volumeMounts"),
        [{"name": "data", "mountPath": "/a"}, {"name": "data", "mountPath": "/a"}],
        "spec.containers[0].volumeMounts[1].mountPath",
        "must be unique",
    ),
]


@pytest.mark.parametrize(
    ("path", "value", "field", "fragment"), MUTATIONS, ids=[m[2] + ":" + m[3] for m in MUTATIONS]
)
def test_inline_mutation(path: tuple[Any, ...], value: Any, field: str, fragment: str) -> None:
    doc = copy.deepcopy(BASE)
    _set(doc, path, value)
    text = yaml.safe_dump(doc, sort_keys=False)
    result = parse_manifest(text, file="mutated.yaml")
    fields = [_path(e) for e in result.errors]
    assert field in fields, result.errors
    error = result.errors[fields.index(field)]
    assert fragment in error.message
    assert error.line == _expected_line(text, error.path)


def _expected_line(text: str, path: tuple[Any, ...]) -> int:
    """Walk the composed YAML along ``path``: the line of the deepest step that exists."""
    node = yaml.compose(text)
    line = node.start_mark.line + 1
    for step in path:
        if isinstance(node, yaml.MappingNode):
            match = [(k, v) for k, v in node.value if k.value == step]
            if not match:
                break
            key, node = match[0]
            line = key.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int) and step < len(node.value):
            node = node.value[step]
            line = node.start_mark.line + 1
        else:
            break
    return line


def test_list_kinds_only_when_allowed() -> None:
    pods = {"apiVersion": "v1", "kind": "PodList", "items": [BASE, BASE | {"metadata": {"name": "other"}}]}
    assert parse_manifest(json.dumps(pods), file="x").errors[0].message.startswith("Unsupported value")
    result = parse_manifest(json.dumps(pods), file="x", allow_lists=True)
    assert [p.name for p in result.pods] == ["base", "other"]
    assert PodList.from_dict(pods).to_dict() == pods
    bad = json.loads(json.dumps(pods))  # no shared sub-objects
    bad["items"][1]["spec"]["containers"][0]["image"] = ""
    errors = parse_manifest(json.dumps(bad, indent=1), file="x", allow_lists=True).errors
    assert [_path(e) for e in errors] == ["items[1].spec.containers[0].image"]


def test_oversized_manifest_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(b"# " + b"x" * (10 * 1024 * 1024) + b"\n")
    result = read_manifest_file(big)
    assert result.errors and "larger than" in result.errors[0].message


def test_unreadable_and_non_utf8() -> None:
    assert "UTF-8" in parse_manifest(b"kind: Pod\nname: \xff\n", file="x").errors[0].message
    assert read_manifest_file("/nonexistent/file.yaml").errors[0].message.startswith("cannot read")


def test_yaml_specials() -> None:
    text = """
apiVersion: v1
kind: Pod
metadata:
  name: specials
  creationTimestamp: 2024-05-01T12:00:00Z
  labels: &labels {app: x}
  annotations:
    <<: *labels
    "1": one
spec:
  containers: [{name: a, image: busybox:1.36}]
"""
    (doc,) = load_documents(text, file="x")
    assert doc.data["metadata"]["creationTimestamp"] == "2024-05-01T12:00:00Z"  # not a datetime
    assert doc.data["metadata"]["annotations"] == {"app": "x", "1": "one"}
    assert parse_manifest("a: &a [*a]\n", file="x").errors[0].message == "recursive alias"
    assert "NaN" in parse_manifest("kind: Pod\nx: .nan\n", file="x").errors[0].message


def test_a_lone_surrogate_escape_decodes_to_the_replacement_character_in_json() -> None:
    # As Go's encoding/json: the pod is valid and its text encodes (a CRI request, a log line) as UTF-8.
    text = (
        '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sur", "annotations": {"x": "a\\ud800b"}},'
        ' "spec": {"containers": [{"name": "c", "image": "busybox:1.36", "args": ["\\ud83d\\ude00"]}]}}'
    )
    result = parse_manifest(text.encode(), file="x")
    assert not result.errors
    (pod,) = result.pods
    assert dict(pod.metadata.annotations or {}) == {"x": "a\ufffdb"}
    assert pod.spec.containers[0].args == ("\U0001f600",)  # a valid pair stays one character


def test_a_surrogate_escape_in_yaml_is_an_error_naming_the_field() -> None:
    # Go's YAML scanner refuses any escape in the surrogate range, pairs included.
    text = 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: sur\n  annotations: {x: "a\\ud800b"}\n'
    (error,) = parse_manifest(text.encode(), file="x").errors
    assert error.path == ("metadata", "annotations", "x")
    assert error.message == "found invalid Unicode character escape code"


def test_go_json_replaces_lone_surrogates_in_keys_too() -> None:
    assert gojson.loads(rb'{"\udfff": ["\ud800", 1]}') == {"\ufffd": ["\ufffd", 1]}
    with pytest.raises(ValueError, match="NaN is not valid JSON"):
        gojson.loads("[NaN]")


@pytest.mark.parametrize(
    ("proc_mount", "host_users", "error"),
    [
        ("Default", None, None),
        ("Unmasked", False, None),
        ("Unmasked", None, 'Invalid value: "Unmasked": `hostUsers` must be false to use `Unmasked`'),
        ("Unmasked", True, 'Invalid value: "Unmasked": `hostUsers` must be false to use `Unmasked`'),
        ("Bogus", False, 'Unsupported value: "Bogus": supported values: "Default", "Unmasked"'),
    ],
)
def test_proc_mount_as_kube_apiserver_136(
    proc_mount: str, host_users: bool | None, error: str | None
) -> None:
    """kube-apiserver 1.36 refuses an unknown ``procMount`` and ``Unmasked`` outside a user namespace."""
    spec: dict[str, object] = {
        "containers": [{"name": "a", "image": "b", "securityContext": {"procMount": proc_mount}}]
    }
    if host_users is not None:
        spec["hostUsers"] = host_users
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}, "spec": spec}
    errors = [(e.path, e.message) for e in parse_manifest(json.dumps(manifest), file="x").errors]
    path = ("spec", "containers", 0, "securityContext", "procMount")
    assert errors == ([] if error is None else [(path, error)])
