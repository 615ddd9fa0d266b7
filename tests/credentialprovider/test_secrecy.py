"""Credentials are secrets: a password (here ``S3NT1NEL-pw``) that flows through parsing, keyrings,
plugins and pulls appears in no log record (at any level, message or field, formatted either way), no
event, and no exception's text, repr or traceback."""

from __future__ import annotations

import base64
import json
import logging
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest
from trio.testing import MockClock

from kubelet_trio.credentialprovider import (
    AuthConfig,
    BasicDockerKeyring,
    DockerConfigError,
    ExternalCredentialProviderKeyring,
    PluginError,
    keyring_from_secrets,
    node_docker_keyring,
    parse_docker_config_json,
    register_credential_provider_plugins,
)
from kubelet_trio.credentialprovider.plugin import decode_response
from kubelet_trio.fsio import run_inline
from kubelet_trio.kuberuntime.images import ImageError, ImageManager
from kubelet_trio.logs import KlogJsonFormatter, KlogTextFormatter
from kubelet_trio.objects import Secret
from tests.credentialprovider.plugins import V1, config_yaml, provider, write_plugin
from tests.kuberuntime.conftest import app, make_pod, spec_of
from tests.kuberuntime.test_pull_credentials import AuthSim, sim

SENTINEL = "S3NT1NEL-pw"
PRIVATE = "private.sim/team/app:1"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class Leaks:
    """Everything a flow produced that someone could read."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def exception(self, err: BaseException) -> None:
        self.texts += [str(err), repr(err), "".join(traceback.format_exception(err))]

    def check(self, caplog: pytest.LogCaptureFixture) -> None:
        text, js = KlogTextFormatter(), KlogJsonFormatter()
        records = caplog.get_records("call")
        assert records, "the flows should have logged something"
        for record in records:
            self.texts += [record.getMessage(), repr(record.__dict__), text.format(record), js.format(record)]
        for item in self.texts:
            assert SENTINEL not in item, item
            assert b64(f"alice:{SENTINEL}") not in item, item


@pytest.fixture
def leaks(caplog: pytest.LogCaptureFixture) -> Iterator[Leaks]:
    caplog.set_level(1)  # every level, klog's V(10) included
    found = Leaks()
    yield found
    found.check(caplog)


def secret(name: str, auths: object) -> Secret:
    return Secret("default", name, {".dockerconfigjson": json.dumps({"auths": auths}).encode()})


def test_values_never_show_in_reprs(leaks: Leaks) -> None:
    creds = AuthConfig(username="alice", password=SENTINEL, identity_token=SENTINEL, registry_token=SENTINEL)
    assert repr(creds) == (
        "AuthConfig(username='alice', password=<redacted>, identity_token=<redacted>, "
        "registry_token=<redacted>)"
    )
    keyring = BasicDockerKeyring.of({"reg.example": creds})
    from_secret = keyring_from_secrets([secret("s", {"reg.example": {"auth": b64(f"alice:{SENTINEL}")}})])
    leaks.texts += [str(creds), repr(keyring), repr(from_secret), repr(keyring.find("reg.example/x"))]
    logging.getLogger("test").debug("a credential", extra={"creds": creds})


@pytest.mark.parametrize(
    "document",
    [
        '{"auths": S3NT1NEL-pw}',
        json.dumps({"auths": {"reg.example": {"auth": SENTINEL}}}),
        json.dumps({"auths": {"reg.example": {"auth": b64(SENTINEL)}}}),  # no colon
        json.dumps({"auths": {"reg.example": {"password": [SENTINEL]}}}),
        json.dumps({"auths": {"reg.example": SENTINEL}}),
        json.dumps({"auths": [SENTINEL]}),
        json.dumps([SENTINEL]),
    ],
)
def test_parse_errors_do_not_quote_the_document(document: str, leaks: Leaks) -> None:
    with pytest.raises(DockerConfigError) as caught:
        parse_docker_config_json(document)
    leaks.exception(caught.value)
    with pytest.raises(DockerConfigError) as caught:
        keyring_from_secrets([Secret("ns", "s", {".dockerconfigjson": document.encode()})])
    leaks.exception(caught.value)
    logging.getLogger("test").info("parse failed", extra={"fields": {"err": str(caught.value)}})


async def test_node_config_files_that_do_not_parse(
    tmp_path: Path, mock_clock: MockClock, leaks: Leaks
) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"auths": {"reg.example": {"auth": SENTINEL}}}))
    (tmp_path / ".dockercfg").write_text(json.dumps({"reg.example": {"auth": b64(f"alice:{SENTINEL}")}}))
    keyring = node_docker_keyring(str(tmp_path), run_sync=run_inline, home=str(tmp_path))
    [found] = await keyring.lookup("reg.example/app")
    assert found.password == SENTINEL


async def test_pulls_with_secret_credentials(mock_clock: MockClock, leaks: Leaks) -> None:
    events: list[str] = []
    right = secret("right", {"private.sim": {"auth": b64(f"alice:{SENTINEL}")}})
    wrong = secret("wrong", {"private.sim/team": {"username": "bob", "password": SENTINEL + "-old"}})
    for accepted in ({"private.sim": ("alice", SENTINEL)}, {"private.sim": ("carol", "other")}):
        runtime: AuthSim = sim(accepted=accepted)
        images = ImageManager(
            runtime, events=lambda pod, t, reason, msg: events.append(f"{t} {reason} {msg}")
        )
        pod = make_pod([app(image=PRIVATE)])
        try:
            ensured = await images.ensure_image_exists(pod, spec_of(pod), pull_secrets=[right, wrong])
            leaks.texts.append(repr(ensured))
        except ImageError as err:
            leaks.exception(err)
        with pytest.raises(ImageError) as caught:  # backing off, or absent with policy Never
            await images.ensure_image_exists(
                make_pod([app(image="other.sim/x:1", imagePullPolicy="Never")]),
                spec_of(make_pod([app(image="other.sim/x:1", imagePullPolicy="Never")])),
                pull_secrets=[right, wrong],
            )
        leaks.exception(caught.value)
    bad = secret("bad", {"private.sim": {"auth": SENTINEL}})
    with pytest.raises(ImageError) as caught:
        await ImageManager(sim()).ensure_image_exists(pod, spec_of(pod), pull_secrets=[bad])
    leaks.exception(caught.value)
    leaks.texts += events
    assert any("Pulled" in event for event in events) and any("Failed" in event for event in events)


AUTH = f"{{'private.sim': {{'username': 'alice', 'password': '{SENTINEL}'}}}}"
PLUGIN_OUTPUTS = {
    "good": f"respond(cacheKeyType='Image', auth={AUTH})",
    "garbage": f"print('{SENTINEL} is not a response')",
    "wrong-api": (
        "print(json.dumps({'kind': 'CredentialProviderResponse', 'apiVersion': 'x/v2', "
        f"'cacheKeyType': 'Image', 'auth': {{'private.sim': {{'password': '{SENTINEL}'}}}}}}))"
    ),
    "secret-api": f"print(json.dumps({{'apiVersion': '{SENTINEL}'}}))",
    "bad-auth": f"respond(cacheKeyType='Image', auth={{'private.sim': {{'password': ['{SENTINEL}']}}}})",
    "bad-duration": f"respond(cacheKeyType='Image', cacheDuration='{SENTINEL}', auth={{}})",
    "bad-key-type": f"respond(cacheKeyType='{SENTINEL}', auth={AUTH})",
    "exit-1": f"print('{SENTINEL}'); sys.exit(1)",
}


async def test_plugins_whatever_they_print(tmp_path: Path, mock_clock: MockClock, leaks: Leaks) -> None:
    bin_dir = tmp_path / "bin"
    for name, body in PLUGIN_OUTPUTS.items():
        write_plugin(bin_dir, name, body)
    config = tmp_path / "config.json"
    config.write_text(
        config_yaml(
            *(
                provider(name, ["private.sim"], env=[{"name": "PLUGIN_TOKEN", "value": SENTINEL}])
                for name in PLUGIN_OUTPUTS
            )
        )
    )
    providers = register_credential_provider_plugins(str(config), str(bin_dir))
    leaks.texts += [repr(p) for p in providers] + [repr(p.plugin) for p in providers]
    keyring = ExternalCredentialProviderKeyring(providers)
    found = await keyring.lookup("private.sim/team/app")
    assert [c.username for c in found] == ["alice"]
    runtime: AuthSim = sim(accepted={"private.sim": ("alice", SENTINEL)})
    pod = make_pod([app(image=PRIVATE)])
    await ImageManager(runtime, keyring=keyring).ensure_image_exists(pod, spec_of(pod))
    assert runtime.pulls == [(PRIVATE, "alice")]


def test_decode_errors_never_quote_stdout(leaks: Leaks) -> None:
    for data in (
        SENTINEL.encode(),
        json.dumps({"apiVersion": SENTINEL}).encode(),
        json.dumps({"apiVersion": V1, "kind": SENTINEL}).encode(),
        json.dumps(
            {"apiVersion": V1, "kind": "CredentialProviderResponse", "cacheDuration": SENTINEL}
        ).encode(),
    ):
        with pytest.raises(PluginError) as caught:
            decode_response(data, V1)
        leaks.exception(caught.value)
    logging.getLogger("test").info("decoded nothing")
