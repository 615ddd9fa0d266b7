"""Unknown fields and wrong JSON types found against the core/v1 field table (kubelet_trio.api.strict), and
the table's agreement with the models."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from kubelet_trio.api import container, meta, pod, status, volume
from kubelet_trio.api.errors import format_path
from kubelet_trio.api.openapi_fields import TYPES
from kubelet_trio.api.serialize import Model, _codecs
from kubelet_trio.api.strict import type_errors, unknown_fields


def _pod(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "labels": {"a": "b"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec},
    }


def test_unknown_fields_are_named_by_their_paths_in_document_order() -> None:
    doc = _pod(restartPolcy="Never")
    doc["spec"]["containers"][0] |= {"comand": ["sh"], "imagePullPolcy": "Always"}
    doc["spec"]["affinity"] = {"nodeAfinity": {}}  # inside a subtree the models keep opaque
    doc["spec"]["volumes"] = [{"name": "v", "nfs": {"server": "s", "path": "/", "readonly": True}}]
    doc["metadata"]["labels"]["spec"] = "keys of a map are data, not fields"
    assert [format_path(p) for p in unknown_fields(doc)] == [
        "spec.containers[0].comand",
        "spec.containers[0].imagePullPolcy",
        "spec.restartPolcy",
        "spec.affinity.nodeAfinity",
        "spec.volumes[0].nfs.readonly",
    ]


def test_every_known_field_passes_including_ones_the_models_keep_opaque() -> None:
    doc = _pod(
        overhead={"cpu": "10m"},
        topologySpreadConstraints=[
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
        ],
        securityContext={
            "seccompProfile": {"type": "RuntimeDefault"},
            "sysctls": [{"name": "a", "value": "1"}],
        },
        os={"name": "linux"},
    )
    doc["status"] = {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}]}
    assert unknown_fields(doc) == []
    assert type_errors(doc) == []


def test_pod_list_items_are_pods() -> None:
    doc = {
        "apiVersion": "v1",
        "kind": "PodList",
        "items": [_pod(bogus=1)],
        "metadata": {"resourceVersion": "1"},
    }
    assert [format_path(p) for p in unknown_fields(doc, "PodList")] == ["items[0].spec.bogus"]


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        ({"affinity": []}, "spec.affinity", "expected object, got array"),
        ({"affinity": {"nodeAffinity": "x"}}, "spec.affinity.nodeAffinity", "expected object, got string"),
        (
            {"securityContext": {"seccompProfile": {"type": 5}}},
            "spec.securityContext.seccompProfile.type",
            "expected string, got number",
        ),
        ({"hostNetwork": "true"}, "spec.hostNetwork", "expected boolean, got string"),
        ({"activeDeadlineSeconds": 1.5}, "spec.activeDeadlineSeconds", "expected integer, got number"),
        ({"nodeSelector": {"a": 1}}, "spec.nodeSelector[a]", "expected string, got number"),
        ({"tolerations": {"key": "a"}}, "spec.tolerations", "expected array, got object"),
    ],
)  # fmt: skip
def test_type_errors_everywhere(spec: dict[str, Any], field: str, message: str) -> None:
    (error,) = type_errors(_pod(**spec))
    assert (format_path(error.path), error.message) == (field, message)


def test_quantities_may_be_numbers_and_null_is_any_type() -> None:
    doc = _pod(overhead={"cpu": 1, "memory": 1.5})
    doc["spec"]["containers"][0]["resources"] = {"limits": {"cpu": 2}, "requests": {"cpu": "1"}}
    doc["spec"]["volumes"] = [{"name": "v", "emptyDir": {"sizeLimit": 1024}}]
    doc["spec"]["affinity"] = None
    doc["spec"]["containers"][0]["command"] = [None, "x"]
    assert type_errors(doc) == []
    doc["spec"]["containers"][0]["resources"]["limits"]["cpu"] = True
    assert [e.message for e in type_errors(doc)] == ["expected string, got boolean"]


def _models() -> list[type[Model]]:
    found = []
    for module in (container, meta, pod, status, volume):
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Model) and cls is not Model and cls.__module__ == module.__name__:
                found.append(cls)
    return found


@pytest.mark.parametrize("model", _models(), ids=lambda m: m.__name__)
def test_every_modelled_field_is_in_the_api_table(model: type[Model]) -> None:
    """A model field missing from the table is a typo in the model, or the table is older than the model."""
    assert model.__name__ in TYPES, f"{model.__name__} is not a core/v1 type"
    missing = sorted(set(_codecs(model)) - set(TYPES[model.__name__]))
    assert missing == []
