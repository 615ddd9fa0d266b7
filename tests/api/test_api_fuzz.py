"""Hypothesis fuzzing of decoding and manifest parsing: only the project's own errors may escape.

No deadlines: how long an example takes depends on the machine's load, and tests assert no timings."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubelet_trio.api import ApiError, Pod, default_pod, parse_manifest, validate_pod

DATA = Path(__file__).resolve().parent.parent / "data" / "manifests"
SEEDS = [
    doc
    for path in sorted(DATA.iterdir())
    for doc in (
        [json.loads(path.read_text())]
        if path.suffix == ".json"
        else list(yaml.safe_load_all(path.read_text()))
    )
    if doc is not None
]

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.text(max_size=12)
    | st.floats(allow_nan=False, allow_infinity=False)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
KEYS = [
    "apiVersion", "kind", "metadata", "spec", "status", "name", "namespace", "labels", "containers",
    "initContainers", "image", "ports", "containerPort", "protocol", "env", "valueFrom", "fieldRef",
    "resources", "limits", "requests", "cpu", "memory", "volumes", "volumeMounts", "emptyDir", "hostPath",
    "projected", "sources", "livenessProbe", "httpGet", "port", "exec", "command", "restartPolicy",
    "containerStatuses", "state", "conditions",
]  # fmt: skip


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += _paths(item, (*prefix, i))
    return out


#: The typed maps of the models: a null value there decodes to the zero value, like a null list item.
MAP_FIELDS = {"labels", "annotations", "nodeSelector", "limits", "requests"}


def _has_null_item(value: Any, key: Any = None) -> bool:
    """True when decoding must turn a null into a zero value (so the round trip is not exact)."""
    if isinstance(value, list):
        return any(item is None or _has_null_item(item) for item in value)
    if isinstance(value, dict):
        if key in MAP_FIELDS and any(item is None for item in value.values()):
            return True
        return any(_has_null_item(item, k) for k, item in value.items())
    return False


def _round_trips(pod: Pod, doc: Any) -> None:
    if _has_null_item(doc):  # zero values in place of null items; encoding that again is exact
        assert Pod.from_dict(pod.to_dict()).to_dict() == pod.to_dict()
    else:
        assert pod.to_dict() == doc


@st.composite
def mutated_pods(draw: st.DrawFn) -> Any:
    """A real manifest with one to three members replaced by arbitrary JSON (or a known key added)."""
    doc = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(doc)))
        if not path:
            continue
        target = doc
        for step in path[:-1]:
            target = target[step]
        if isinstance(target, dict) and draw(st.booleans()):
            target[draw(st.sampled_from(KEYS))] = draw(json_values)
        else:
            target[path[-1]] = draw(json_values)
    return doc


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_pods())
def test_decode_round_trips_or_raises_api_error(doc: Any) -> None:
    try:
        pod = Pod.from_dict(doc)
    except ApiError:
        return
    _round_trips(pod, doc)
    validate_pod(default_pod(pod))  # must not raise


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_decode_arbitrary_json(doc: Any) -> None:
    try:
        pod = Pod.from_dict(doc)
    except ApiError:
        return
    _round_trips(pod, doc)
    validate_pod(default_pod(pod))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_pods(), st.sampled_from(["yaml", "json"]))
def test_parse_manifest_never_raises(doc: Any, fmt: str) -> None:
    text = yaml.safe_dump(doc) if fmt == "yaml" else json.dumps(doc, indent=1)
    result = parse_manifest(text, file="fuzz")
    for error in result.errors:
        assert error.line >= 1
        assert str(error).startswith("fuzz:")


YAML_ALPHABET = st.sampled_from(
    [*"abc:-[]{}&*!|>'\"#%@`,?\n \t0123456789.", "---", "<<", "!!binary", "\u00e9"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(YAML_ALPHABET, max_size=60).map("".join) | st.text(max_size=80) | st.binary(max_size=80))
def test_parse_manifest_arbitrary_text(text: str | bytes) -> None:
    result = parse_manifest(text, file="fuzz")
    assert result.pods or result.errors
