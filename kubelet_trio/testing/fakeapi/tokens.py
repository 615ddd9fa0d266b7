"""The fake API server's TokenRequest (``POST .../serviceaccounts/<name>/token``) and the objects every
namespace of a real cluster has (the ``default`` ServiceAccount, the ``kube-root-ca.crt`` ConfigMap).

Semantics follow the API server: the ServiceAccount must exist (404); ``expirationSeconds`` defaults to
3600 and may not be under 600 (422); a server maximum (``--service-account-max-token-expiration``) caps
it and the answer's spec says so; a bound Pod must exist (404) with the given UID (409); no audience means
the API server's own. Tokens are unsigned JWTs with the usual claims, so tests can read ``exp``/``aud``,
and each is accepted by the fake's TokenReview as the service account.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from typing import Any

import attrs

from kubelet_trio.api.timefmt import rfc3339
from kubelet_trio.testing.fakeapi.store import FakeApiError, FakeStore, Obj

__all__ = ["API_AUDIENCE", "FAKE_CA_PEM", "KUBE_ROOT_CA", "TokenIssuer", "decode_token", "seed_namespace"]

API_AUDIENCE = "https://kubernetes.default.svc.cluster.local"
MIN_EXPIRATION = 600
DEFAULT_EXPIRATION = 3600
KUBE_ROOT_CA = "kube-root-ca.crt"
FAKE_CA_PEM = "-----BEGIN CERTIFICATE-----\nZmFrZSBjbHVzdGVyIENB\n-----END CERTIFICATE-----\n"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def decode_token(token: str) -> dict[str, Any]:
    """The claims of a token issued by the fake."""
    payload = token.split(".")[1]
    claims: dict[str, Any] = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return claims


def seed_namespace(store: FakeStore, namespace: str, ca_pem: str = FAKE_CA_PEM) -> None:
    """What the controllers of a real cluster create in every namespace."""
    store.create("serviceaccounts", namespace, {"metadata": {"name": "default"}})
    store.create("configmaps", namespace, {"metadata": {"name": KUBE_ROOT_CA}, "data": {"ca.crt": ca_pem}})


@attrs.define(eq=False)
class TokenIssuer:
    store: FakeStore
    max_expiration_seconds: int | None = None
    issued: list[Obj] = attrs.Factory(list)  # every answer, in order

    def issue(self, namespace: str, name: str, body: Any) -> tuple[Obj, dict[str, Any]]:
        """(the TokenRequest answer, the TokenReview user of its token)."""
        account = self.store.get("serviceaccounts", namespace, name)
        spec = dict((body or {}).get("spec") or {})
        seconds = int(spec.get("expirationSeconds") or DEFAULT_EXPIRATION)
        if seconds < MIN_EXPIRATION:
            raise FakeApiError(
                422,
                "Invalid",
                f"TokenRequest.authentication.k8s.io {name!r} is invalid: spec.expirationSeconds: "
                f"Invalid value: {seconds}: may not specify a duration less than 10 minutes",
            )
        if self.max_expiration_seconds is not None:
            seconds = min(seconds, self.max_expiration_seconds)
        spec["expirationSeconds"] = seconds
        audiences = spec.get("audiences") or [API_AUDIENCE]
        spec["audiences"] = audiences
        pod_claim: dict[str, str] | None = None
        ref = spec.get("boundObjectRef")
        if ref:
            if ref.get("kind") != "Pod":
                raise FakeApiError(400, "BadRequest", f"cannot bind a token to a {ref.get('kind')}")
            pod = self.store.get("pods", namespace, ref.get("name", ""))
            uid = pod["metadata"]["uid"]
            if ref.get("uid") and ref["uid"] != uid:
                raise FakeApiError(
                    409,
                    "Conflict",
                    f"the UID in the bound object reference ({ref['uid']}) does not match the UID in "
                    f"record. The object might have been deleted and then recreated",
                )
            pod_claim = {"name": ref["name"], "uid": uid}
        now = self.store.now()
        expires = now + dt.timedelta(seconds=seconds)
        subject = f"system:serviceaccount:{namespace}:{name}"
        claims = {
            "aud": audiences,
            "exp": int(expires.timestamp()),
            "iat": int(now.timestamp()),
            "nbf": int(now.timestamp()),
            "iss": API_AUDIENCE,
            "jti": f"token-{len(self.issued) + 1}",
            "sub": subject,
            "kubernetes.io": {
                "namespace": namespace,
                "serviceaccount": {"name": name, "uid": account["metadata"]["uid"]},
                **({"pod": pod_claim} if pod_claim else {}),
            },
        }
        header = {"alg": "none", "kid": "fake"}
        token = ".".join(
            (_b64(json.dumps(header).encode()), _b64(json.dumps(claims).encode()), _b64(b"unsigned"))
        )
        answer = {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": None},
            "spec": spec,
            "status": {"token": token, "expirationTimestamp": rfc3339(expires)},
        }
        self.issued.append(answer)
        groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
        user = {"username": subject, "groups": groups}
        return answer, user
