"""Differential test of manifest validation: ``check-manifests`` (our decoder + validator) against a real
kube-apiserver's dry run, on ~1000 deterministic variants of one pod (tests/envtest/pod_variants.py).

For each variant, the API server's verdict is ``POST /api/v1/namespaces/default/pods?dryRun=All`` (201
accepts; 400 - cannot decode - or 422 - invalid - rejects) and ours is :func:`parse_manifest` on the same
JSON (no errors accepts; unknown fields are warnings, as the server's default field validation drops them).
Verdicts must match, except for the variants matched by :data:`EXCLUSIONS`, each with its reason and the
direction of the difference; an exclusion that no longer explains a difference fails the test, so the list
stays minimal. Where both accept, the members the server dropped (its answer lacks them) must be exactly
the unknown fields we warn about.

Part of the envtest tier: skipped with the build command when the binaries are absent, and in CI with the
binaries present a skip fails the session (tests/conftest.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import attrs
import httpx

from kubelet_trio.api.errors import FieldPath, format_path
from kubelet_trio.api.manifest import UNKNOWN_FIELD, parse_manifest
from tests.envtest.conftest import EnvtestCluster
from tests.envtest.pod_variants import DELETE, Mutation, Variant, base_pod, variants

COUNT = 1000
SEED = 19
DRY_RUN = "/api/v1/namespaces/default/pods?dryRun=All"
ANY: Any = object()


@attrs.frozen
class Exclusion:
    """Variants with a mutation at ``path`` (of value ``value``, or any) where the verdicts differ."""

    path: tuple[str | int, ...]
    value: Any
    #: "accepts": the API server accepts what we reject; "rejects": the reverse.
    server: str
    reason: str

    def matches(self, mutation: Mutation) -> bool:
        return mutation.path == self.path and (self.value is ANY or _same(mutation.value, self.value))


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


C = ("spec", "containers", 0)

#: Where our verdict cannot agree with kube-apiserver 1.36's, and why. Keep it minimal: every entry must
#: explain at least one difference in the run.
EXCLUSIONS: tuple[Exclusion, ...] = (
    Exclusion(
        ("apiVersion",),
        DELETE,
        "accepts",
        "a POST body may omit apiVersion/kind (the endpoint implies them); a manifest file may not, in Go's "
        "kubelet either (its decoder has no endpoint to infer them from)",
    ),
    Exclusion(("kind",), DELETE, "accepts", "as for apiVersion"),
    Exclusion(
        ("spec", "serviceAccountName"),
        DELETE,
        "rejects",
        "a projected serviceAccountToken needs spec.serviceAccountName; on a real cluster the ServiceAccount "
        "admission plugin sets it (to default) before validation, but this test's API server runs without "
        "that plugin (nothing creates service accounts here)",
    ),
    *(
        Exclusion(
            path,
            value,
            "accepts",
            "a kubelet-side check: the API server does not check the name of the configMap or secret a "
            "volume reads, but the kubelet fetches it by a URL path, so it must be a path segment (Go's "
            "client-go refuses to build the request: IsValidPathSegmentName); we refuse it when loading",
        )
        for path, value in (
            (("spec", "volumes", 1, "configMap", "name"), "../x"),
            (("spec", "volumes", 1, "configMap", "name"), "a/b"),
            (("spec", "volumes", 1, "configMap", "name"), ".."),
            (("spec", "volumes", 2, "secret", "secretName"), "a%2fb"),
        )
    ),
)


#: Known fields that kube-apiserver 1.36 drops from a new pod although they are not unknown (so they are
#: missing from its answer without being a typo), and why.
SERVER_CLEARED = {
    "metadata.deletionGracePeriodSeconds": "cleared on create (a new object is not being deleted)",
}


@attrs.frozen
class Outcome:
    variant: Variant
    server_accepts: bool
    server_message: str
    ours_accepts: bool
    our_errors: tuple[str, ...]
    server_dropped: frozenset[str]
    our_unknown: frozenset[str]

    def describe(self) -> str:
        server = "accepts" if self.server_accepts else f"rejects ({self.server_message})"
        ours = "accepts" if self.ours_accepts else f"rejects ({'; '.join(self.our_errors)})"
        return f"{self.variant.name} [{self.variant.describe()}]: API server {server}, we {ours}"


def _empty(value: Any) -> bool:
    return value in (None, "", 0, False, [], {}) and value is not True


def _dropped(sent: Any, got: Any, path: FieldPath = ()) -> Iterator[FieldPath]:
    """Members of ``sent`` that the server's answer ``got`` lacks (ignoring ones that are empty anyway)."""
    if isinstance(sent, dict) and isinstance(got, dict):
        for key, value in sent.items():
            if key not in got:
                if not _empty(value):
                    yield (*path, key)
            else:
                yield from _dropped(value, got[key], (*path, key))
    elif isinstance(sent, list) and isinstance(got, list) and len(sent) == len(got):
        for i, (a, b) in enumerate(zip(sent, got, strict=True)):
            yield from _dropped(a, b, (*path, i))


def _value_at(doc: Any, path: FieldPath) -> Any:
    for step in path:
        doc = doc[step]
    return doc


def _server_verdict(client: httpx.Client, doc: dict[str, Any]) -> tuple[bool, str, Any]:
    response = client.post(DRY_RUN, content=json.dumps(doc), headers={"Content-Type": "application/json"})
    if response.status_code == 201:
        return True, "", response.json()
    assert response.status_code in (400, 422), f"unexpected answer {response.status_code}: {response.text}"
    return False, str(response.json().get("message", response.text)), None


def _outcome(client: httpx.Client, variant: Variant) -> Outcome:
    server_accepts, message, answer = _server_verdict(client, variant.doc)
    result = parse_manifest(json.dumps(variant.doc), file=f"{variant.name}.json")
    dropped = frozenset(format_path(p) for p in _dropped(variant.doc, answer)) if answer else frozenset()
    dropped -= SERVER_CLEARED.keys()
    unknown = frozenset(
        format_path(w.path)
        for w in result.warnings
        if w.message == UNKNOWN_FIELD and not _empty(_value_at(variant.doc, w.path))
    )
    errors = tuple(f"{format_path(e.path)}: {e.message}" for e in result.errors)
    return Outcome(variant, server_accepts, message, result.ok, errors, dropped, unknown)


def _exclusion(outcome: Outcome) -> int | None:
    """The index of the exclusion that explains ``outcome``'s difference, if any."""
    direction = "accepts" if outcome.server_accepts else "rejects"
    for index, exclusion in enumerate(EXCLUSIONS):
        if exclusion.server == direction and any(exclusion.matches(m) for m in outcome.variant.mutations):
            return index
    return None


def test_verdicts_match_the_api_server_dry_run(envtest: EnvtestCluster) -> None:
    mismatches: list[str] = []
    field_mismatches: list[str] = []
    used: set[int] = set()
    counts = {"accepted": 0, "rejected": 0, "unknown fields compared": 0}
    with envtest.http_client() as client:
        assert _server_verdict(client, base_pod())[0], "the base pod must be valid"
        for variant in variants(COUNT, SEED):
            outcome = _outcome(client, variant)
            counts["accepted" if outcome.server_accepts else "rejected"] += 1
            if outcome.server_accepts != outcome.ours_accepts:
                exclusion = _exclusion(outcome)
                if exclusion is None:
                    mismatches.append(outcome.describe())
                else:
                    used.add(exclusion)
            elif outcome.server_accepts and outcome.server_dropped != outcome.our_unknown:
                dropped, unknown = sorted(outcome.server_dropped), sorted(outcome.our_unknown)
                field_mismatches.append(
                    f"{variant.describe()}: API server dropped {dropped}, we warn of {unknown}"
                )
            if outcome.server_accepts and outcome.our_unknown:
                counts["unknown fields compared"] += 1
    # Both verdicts occur in quantity: the variants exercise validation, not just one side of it.
    assert counts["accepted"] > 100 and counts["rejected"] > 300, counts
    assert counts["unknown fields compared"] > 10, counts
    assert not mismatches, f"{len(mismatches)} verdicts differ:\n" + "\n".join(mismatches)
    assert not field_mismatches, "unknown fields differ:\n" + "\n".join(field_mismatches)
    stale = [e for i, e in enumerate(EXCLUSIONS) if i not in used]
    assert not stale, "exclusions that explain no difference any more (remove them):\n" + "\n".join(
        f"{format_path(e.path)} = {e.value!r}" for e in stale
    )
