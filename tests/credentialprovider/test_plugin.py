"""Exec credential provider plugins (Go: ``plugin/plugin.go``): the request, the response, the cache
(by image, registry or globally, for the response's or the default duration) and every way a plugin
can fail.

The plugins are real processes. Tests that check cache lifetimes run under ``mock_clock`` (a MockClock
without autojump: virtual time stands still while a plugin runs, and moves only by ``jump``); an
autojump clock would count the wait for the process as idle time and jump to the exec timeout.
The timeout test runs on the real clock with a short timeout.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from trio.testing import MockClock

from kubelet_trio.credentialprovider import (
    AuthConfig,
    ExecPlugin,
    ExternalCredentialProviderKeyring,
    PluginError,
    PluginProvider,
    register_credential_provider_plugins,
)
from kubelet_trio.credentialprovider.plugin import CredentialProviderResponse, decode_response, encode_request
from tests.credentialprovider.plugins import V1, calls, config_yaml, provider, write_plugin

IMAGE = "eu.reg.example/team/app"
RESPOND = """\
auth = {{"*.reg.example": {{"username": "u-" + request["image"], "password": "pw"}}}}
respond(cacheKeyType="{key_type}", {duration}auth=auth)
"""


def responder(key_type: str = "Image", duration: str | None = None) -> str:
    return RESPOND.format(
        key_type=key_type, duration="" if duration is None else f'cacheDuration="{duration}", '
    )


Register = Callable[..., ExternalCredentialProviderKeyring]


@pytest.fixture
def register(tmp_path: Path) -> Register:
    """Write plugins and their config, register them; returns the keyring of all of them."""

    def factory(*providers: tuple[dict[str, object], str]) -> ExternalCredentialProviderKeyring:
        for config, body in providers:
            write_plugin(tmp_path / "bin", str(config["name"]), body)
        (tmp_path / "config.json").write_text(config_yaml(*(config for config, _ in providers)))
        registered = register_credential_provider_plugins(
            str(tmp_path / "config.json"),
            str(tmp_path / "bin"),
            environ=lambda: {"PATH": os.environ.get("PATH", ""), "PLUGIN_MODE": "inherited"},
        )
        return ExternalCredentialProviderKeyring(registered)

    return factory


def users(found: list[AuthConfig]) -> list[str]:
    return [c.username for c in found]


def execs(tmp_path: Path) -> list[str]:
    return [call["request"]["image"] for call in calls(tmp_path / "bin")]


async def test_the_request_args_env_and_response(
    register: Register, tmp_path: Path, mock_clock: MockClock
) -> None:
    config = provider(
        "ecr",
        ["*.reg.example"],
        args=["get-credentials", "--x"],
        env=[{"name": "PLUGIN_MODE", "value": "config"}],
    )
    keyring = register((config, responder()))
    found = await keyring.lookup(IMAGE)
    assert found == [AuthConfig(username=f"u-{IMAGE}", password="pw")]
    [call] = calls(tmp_path / "bin")
    assert call == {
        "request": {"kind": "CredentialProviderRequest", "apiVersion": V1, "image": IMAGE},
        "argv": ["get-credentials", "--x"],
        "mode": "config",  # the configured variable wins over the kubelet's own
    }
    assert encode_request(V1, IMAGE) == (
        b'{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v1",'
        b'"image":"eu.reg.example/team/app"}\n'
    )


async def test_an_image_that_matches_no_glob_runs_no_plugin(
    register: Register, tmp_path: Path, mock_clock: MockClock
) -> None:
    keyring = register((provider("p", ["*.reg.example", "reg.example:5000/team"]), responder()))
    assert await keyring.lookup("reg.example/team/app") == []
    assert await keyring.lookup("reg.example:5000/other") == []
    assert users(await keyring.lookup("reg.example:5000/team/app")) == []  # auth keys are *.reg.example
    assert execs(tmp_path) == ["reg.example:5000/team/app"]


async def test_image_cache_key(register: Register, tmp_path: Path, mock_clock: MockClock) -> None:
    keyring = register((provider("p", ["*.reg.example"]), responder("Image", "10m")))
    for _ in range(3):
        assert users(await keyring.lookup(IMAGE)) == [f"u-{IMAGE}"]
    await keyring.lookup("eu.reg.example/team/other")
    assert execs(tmp_path) == [IMAGE, "eu.reg.example/team/other"]
    mock_clock.jump(600)  # expires only once the time is past now + duration
    await keyring.lookup(IMAGE)
    assert len(execs(tmp_path)) == 2
    mock_clock.jump(0.001)
    await keyring.lookup(IMAGE)
    assert execs(tmp_path) == [IMAGE, "eu.reg.example/team/other", IMAGE]


async def test_registry_cache_key(register: Register, tmp_path: Path, mock_clock: MockClock) -> None:
    keyring = register((provider("p", ["*.reg.example", "*.reg.example:5000"]), responder("Registry", "1h")))
    assert users(await keyring.lookup("eu.reg.example/a")) == ["u-eu.reg.example/a"]
    # cached for the registry: the first image's answer serves the second
    assert users(await keyring.lookup("eu.reg.example/b")) == ["u-eu.reg.example/a"]
    await keyring.lookup("eu.reg.example:5000/c")  # another registry (the port is part of it)
    assert execs(tmp_path) == ["eu.reg.example/a", "eu.reg.example:5000/c"]
    mock_clock.jump(3600.5)
    await keyring.lookup("eu.reg.example/b")
    assert execs(tmp_path)[-1] == "eu.reg.example/b"


async def test_global_cache_key(register: Register, tmp_path: Path, mock_clock: MockClock) -> None:
    keyring = register((provider("p", ["*.reg.example", "*.other.example"]), responder("Global", "1h")))
    await keyring.lookup("eu.reg.example/a")
    assert users(await keyring.lookup("us.reg.example/b")) == ["u-eu.reg.example/a"]
    assert await keyring.lookup("x.other.example/c") == []  # the cached auth keys do not match it
    assert execs(tmp_path) == ["eu.reg.example/a"]


@pytest.mark.parametrize(
    ("default", "duration", "cached_for"),
    [
        ("1m", None, 60.0),  # no cacheDuration: the provider's default
        ("0s", None, None),  # ... which may be zero: not cached
        ("1m", "0s", None),  # an explicit zero: not cached
        ("0s", "30s", 30.0),
    ],
)
async def test_cache_durations(
    register: Register,
    tmp_path: Path,
    mock_clock: MockClock,
    default: str,
    duration: str | None,
    cached_for: float | None,
) -> None:
    keyring = register((provider("p", ["*.reg.example"], default), responder("Image", duration)))
    await keyring.lookup(IMAGE)
    await keyring.lookup(IMAGE)
    if cached_for is None:
        assert len(execs(tmp_path)) == 2
        return
    assert len(execs(tmp_path)) == 1
    mock_clock.jump(cached_for)
    await keyring.lookup(IMAGE)
    assert len(execs(tmp_path)) == 1
    mock_clock.jump(0.5)
    await keyring.lookup(IMAGE)
    assert len(execs(tmp_path)) == 2


GOOD = responder("Image", "0s")
FAILURES = {
    "garbage": "print('this is not json')",
    "a list": "print('[1, 2]')",
    "wrong apiVersion": (
        "print(json.dumps({'kind': 'CredentialProviderResponse', "
        "'apiVersion': 'credentialprovider.kubelet.k8s.io/v1alpha1', 'cacheKeyType': 'Image', 'auth': {}}))"
    ),
    "wrong kind": "print(json.dumps({'kind': 'Other', 'apiVersion': request['apiVersion']}))",
    "bad duration": "respond(cacheKeyType='Image', cacheDuration='soon', auth={})",
    "bad auth": "respond(cacheKeyType='Image', auth={'*.reg.example': {'username': 1}})",
    "exit 3": "sys.stderr.write('cannot reach the metadata server\\n'); sys.exit(3)",
    "killed": "os.kill(os.getpid(), 9)",
    "bad cacheKeyType": "respond(cacheKeyType='image', auth={'*.reg.example': {'username': 'u'}})",
}
MESSAGES = {
    "garbage": "error reading GVK from response: the response is not JSON",
    "a list": "error reading GVK from response: the response is not a JSON object",
    "wrong apiVersion": (
        "apiVersion from credential plugin response did not match expected apiVersion:"
        f"{V1}, actual apiVersion:credentialprovider.kubelet.k8s.io/v1alpha1"
    ),
    "wrong kind": "error decoding credential provider plugin response from stdout",
    "bad duration": "error decoding credential provider plugin response from stdout",
    "bad auth": "error decoding credential provider plugin response from stdout",
    "exit 3": (
        f"error execing credential provider plugin broken for image {IMAGE}: exit status 3: "
        "cannot reach the metadata server"
    ),
    "killed": f"error execing credential provider plugin broken for image {IMAGE}: signal: killed: ",
}


@pytest.mark.parametrize("failure", sorted(FAILURES))
async def test_a_failing_plugin_logs_one_line_and_gives_nothing(
    register: Register, tmp_path: Path, mock_clock: MockClock, caplog: pytest.LogCaptureFixture, failure: str
) -> None:
    keyring = register(
        (provider("broken", ["*.reg.example"]), FAILURES[failure]),
        (provider("good", ["*.reg.example"]), GOOD),
    )
    caplog.set_level(logging.WARNING)
    assert users(await keyring.lookup(IMAGE)) == [f"u-{IMAGE}"]  # the other plugin still answers
    [record] = caplog.records
    fields = record.__dict__["fields"]
    assert (fields["plugin"], fields["image"]) == ("broken", IMAGE)
    if failure == "bad cacheKeyType":
        assert record.getMessage() == "credential provider plugin did not return a valid cacheKeyType"
        assert fields["cacheKeyType"] == "image"  # case matters
    else:
        assert record.getMessage() == "failed getting credential from external registry credential provider"
        assert fields["err"] == MESSAGES[failure]


async def test_a_plugin_that_vanished_after_registration(
    register: Register, tmp_path: Path, mock_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    keyring = register((provider("gone", ["*.reg.example"]), GOOD))
    (tmp_path / "bin" / "gone").unlink()
    caplog.set_level(logging.WARNING)
    assert await keyring.lookup(IMAGE) == []
    [record] = caplog.records
    assert record.__dict__["fields"]["err"] == (
        f"error execing credential provider plugin gone for image {IMAGE}: No such file or directory: "
    )


async def test_a_hanging_plugin_is_killed_at_the_timeout(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_plugin(
        tmp_path / "bin",
        "slow",
        "open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'pid'), 'w').write(str(os.getpid()))\n"
        "time.sleep(60)\n",
    )
    plugin = ExecPlugin(name="slow", api_version=V1, bin_dir=str(tmp_path / "bin"), timeout=1.0)
    keyring = ExternalCredentialProviderKeyring([PluginProvider(plugin, ("*.reg.example",))])
    caplog.set_level(logging.WARNING)
    with trio.fail_after(20):
        started = time.monotonic()
        assert await keyring.lookup(IMAGE) == []
        assert 1.0 <= time.monotonic() - started < 10
    [record] = caplog.records
    assert record.__dict__["fields"]["err"] == (
        f"error execing credential provider plugin slow for image {IMAGE}: context deadline exceeded: "
    )
    pid = int((tmp_path / "bin" / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


class BlockingPlugin:
    """A fake plugin that answers when released; counts its runs."""

    name = "blocking"

    def __init__(self) -> None:
        self.runs = 0
        self.release = trio.Event()

    async def exec(self, image: str) -> CredentialProviderResponse:
        self.runs += 1
        await self.release.wait()
        return CredentialProviderResponse(
            "Image", 0.0, {"*.reg.example": AuthConfig(username=f"run{self.runs}")}
        )


async def test_concurrent_lookups_of_one_image_share_one_run(autojump_clock: MockClock) -> None:
    plugin = BlockingPlugin()
    provider_ = PluginProvider(plugin, ("*.reg.example",))
    results: list[str] = []

    async def lookup() -> None:
        config = await provider_.provide(IMAGE)
        results.append(config["*.reg.example"].username)

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(lookup)
        await trio.testing.wait_all_tasks_blocked()
        plugin.release.set()
    assert (plugin.runs, results) == (1, ["run1", "run1", "run1"])


async def test_a_waiter_runs_the_plugin_itself_when_the_first_caller_is_cancelled(
    autojump_clock: MockClock,
) -> None:
    plugin = BlockingPlugin()
    provider_ = PluginProvider(plugin, ("*.reg.example",))
    got: list[str] = []

    async def waiter() -> None:
        got.append((await provider_.provide(IMAGE))["*.reg.example"].username)

    leader_scope = trio.CancelScope()

    async def leader() -> None:
        with leader_scope:
            await provider_.provide(IMAGE)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(leader)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert plugin.runs == 1  # the waiter waits for the leader's run
        leader_scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert plugin.runs == 2
        plugin.release.set()
    assert got == ["run2"]


def test_decode_response_ignores_unknown_fields() -> None:
    data = (
        b'{"kind":"CredentialProviderResponse","apiVersion":"' + V1.encode() + b'","cacheKeyType":"Registry",'
        b'"cacheDuration":"5m","auth":{"reg.example":{"username":"u","password":"p"},"empty.example":null},'
        b'"futureField":true}'
    )
    response = decode_response(data, V1)
    assert response == CredentialProviderResponse(
        "Registry",
        300.0,
        {"reg.example": AuthConfig(username="u", password="p"), "empty.example": AuthConfig()},
    )
    with pytest.raises(PluginError, match="actual apiVersion:<invalid>"):
        decode_response(b'{"apiVersion": "not an api version!"}', V1)
