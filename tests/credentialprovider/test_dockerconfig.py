"""``.dockercfg`` / ``config.json`` parsing (Go: ``pkg/credentialprovider/config.go``) and a pod's pull
secrets as a keyring (``secrets/secrets.go``)."""

from __future__ import annotations

import base64
import json

import attrs
import pytest

from kubelet_trio.credentialprovider import (
    AuthConfig,
    DockerConfigError,
    PullSecretError,
    keyring_from_secrets,
    make_docker_keyring,
    parse_docker_config_json,
    parse_dockercfg,
)
from kubelet_trio.credentialprovider.dockerconfig import decode_auth_field
from kubelet_trio.objects import Secret


def b64(text: str, *, padded: bool = True) -> str:
    encoded = base64.b64encode(text.encode()).decode()
    return encoded if padded else encoded.rstrip("=")


def test_config_json_entries() -> None:
    document = {
        "auths": {
            "https://reg.example": {"auth": b64("alice:s3cret:with:colons")},
            "reg.example:5000": {"username": "bob", "password": "pw", "email": "b@example"},
            "token.example": {"identitytoken": "id-token", "registrytoken": "reg-token"},
            "both.example": {"username": "ignored", "password": "ignored", "auth": b64("carol:pw")},
            "empty.example": None,
        },
        "HttpHeaders": {"User-Agent": "x"},
        "credsStore": "desktop",
    }
    config = parse_docker_config_json(json.dumps(document).encode())
    assert config == {
        "https://reg.example": AuthConfig(username="alice", password="s3cret:with:colons"),
        "reg.example:5000": AuthConfig(username="bob", password="pw"),
        "token.example": AuthConfig(identity_token="id-token", registry_token="reg-token"),
        "both.example": AuthConfig(username="carol", password="pw"),
        "empty.example": AuthConfig(),
    }


def test_legacy_dockercfg_is_the_map_itself() -> None:
    config = parse_dockercfg(json.dumps({"reg.example": {"auth": b64("u:p")}}))
    assert config == {"reg.example": AuthConfig(username="u", password="p")}


def test_field_names_match_case_insensitively_like_encoding_json() -> None:
    config = parse_docker_config_json(
        json.dumps(
            {"Auths": {"reg.example": {"Username": "u", "PASSWORD": "p", "password": None, "extra": 1}}}
        )
    )
    assert config == {"reg.example": AuthConfig(username="u", password="p")}


@pytest.mark.parametrize("document", ["{}", "null", '{"auths": null}', '{"auths": {}}'])
def test_a_config_json_without_auths_is_valid_and_empty(document: str) -> None:
    assert parse_docker_config_json(document) == {}


@pytest.mark.parametrize(
    ("field", "decoded"),
    [
        (b64("u:p"), ("u", "p")),
        (b64("u:p", padded=False), ("u", "p")),
        (b64("user:"), ("user", "")),
        (b64(":pw"), ("", "pw")),
        (b64("u:p:q"), ("u", "p:q")),
        (b64("a-longer-user:and a password") + "\n", ("a-longer-user", "and a password")),
    ],
)
def test_auth_fields_decode(field: str, decoded: tuple[str, str]) -> None:
    assert decode_auth_field(field) == decoded


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("{not json", "invalid JSON: Expecting property name enclosed in double quotes at line 1 column 2"),
        ("[]", "(root): must be an object"),
        ('{"auths": []}', "auths: must be an object"),
        ('{"auths": {"reg.example": "x"}}', 'auths["reg.example"]: must be an object'),
        ('{"auths": {"reg.example": {"password": 12}}}', 'auths["reg.example"].password: must be a string'),
        (
            '{"auths": {"reg.example": {"auth": "%%%%"}}}',
            'auths["reg.example"].auth: illegal base64 data',
        ),
        (
            json.dumps({"auths": {"reg.example": {"auth": b64("no-colon")}}}),
            'auths["reg.example"].auth: unable to parse auth field, '
            "must be formatted as base64(username:password)",
        ),
        (
            json.dumps({"auths": {"reg.example": {"auth": b64("u:p") + "x"}}}),
            'auths["reg.example"].auth: illegal base64 data',
        ),
    ],
)
def test_bad_configs_name_the_field(document: str, message: str) -> None:
    with pytest.raises(DockerConfigError) as caught:
        parse_docker_config_json(document)
    assert str(caught.value) == message


def dockerconfigjson(auths: dict[str, dict[str, str]]) -> bytes:
    return json.dumps({"auths": auths}).encode()


def test_secrets_become_one_keyring_in_the_pods_order() -> None:
    secrets = [
        Secret("ns", "first", {".dockerconfigjson": dockerconfigjson({"reg.example": {"auth": b64("a:1")}})}),
        Secret("ns", "opaque", {"token": b"x"}),
        Secret("ns", "empty", {".dockerconfigjson": b""}),
        Secret("ns", "legacy", {".dockercfg": json.dumps({"reg.example": {"auth": b64("b:2")}}).encode()}),
        Secret("ns", "wider", {".dockerconfigjson": dockerconfigjson({"*.example": {"auth": b64("c:3")}})}),
    ]
    keyring = keyring_from_secrets(secrets)
    assert keyring is not None
    assert [c.username for c in keyring.find("reg.example/app")] == ["a", "b", "c"]
    assert keyring_from_secrets([Secret("ns", "opaque", {"token": b"x"})]) is None


def test_dockerconfigjson_wins_over_dockercfg_in_one_secret() -> None:
    secret = Secret(
        "ns",
        "both",
        {
            ".dockerconfigjson": dockerconfigjson({"reg.example": {"auth": b64("json:1")}}),
            ".dockercfg": json.dumps({"reg.example": {"auth": b64("cfg:2")}}).encode(),
        },
    )
    keyring = keyring_from_secrets([secret])
    assert keyring is not None and [c.username for c in keyring.find("reg.example/x")] == ["json"]


@attrs.frozen
class TypedSecret:
    namespace: str
    name: str
    data: dict[str, bytes]
    type: str


def test_a_secret_with_a_type_must_have_the_matching_one() -> None:
    data = {".dockerconfigjson": dockerconfigjson({"reg.example": {"auth": b64("u:p")}})}
    assert keyring_from_secrets([TypedSecret("ns", "s", data, "Opaque")]) is None
    typed = keyring_from_secrets([TypedSecret("ns", "s", data, "kubernetes.io/dockerconfigjson")])
    assert typed is not None and typed.keys == ("reg.example",)
    untyped = keyring_from_secrets([TypedSecret("ns", "s", data, "")])
    assert untyped is not None and untyped.keys == ("reg.example",)
    legacy = {".dockercfg": json.dumps({"reg.example": {}}).encode()}
    assert keyring_from_secrets([TypedSecret("ns", "s", legacy, "kubernetes.io/dockerconfigjson")]) is None


def test_a_bad_secret_fails_the_lookup_and_is_named() -> None:
    bad = Secret("team", "regcred", {".dockerconfigjson": b'{"auths": {"reg.example": {"auth": "!"}}}'})
    with pytest.raises(PullSecretError) as caught:
        keyring_from_secrets([bad])
    assert str(caught.value) == (
        'image pull secret "team/regcred": .dockerconfigjson: auths["reg.example"].auth: illegal base64 data'
    )


async def test_make_docker_keyring_puts_the_pods_secrets_first() -> None:
    from kubelet_trio.credentialprovider import BasicDockerKeyring

    node = BasicDockerKeyring.of({"reg.example": AuthConfig(username="node")})
    secrets = [
        Secret("ns", "s", {".dockerconfigjson": dockerconfigjson({"reg.example": {"auth": b64("pod:p")}})})
    ]
    keyring = make_docker_keyring(secrets, node)
    assert keyring is not None
    assert [c.username for c in await keyring.lookup("reg.example/app")] == ["pod", "node"]
    assert make_docker_keyring([], node) is node
    assert make_docker_keyring([], None) is None
