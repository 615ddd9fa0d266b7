"""Image pull secrets end to end on SimRuntime + the in-process fake API server (MockClock): a pod's
``spec.imagePullSecrets`` are fetched through the object store and their credentials reach PullImage
(Go: ``getPullSecretsForPod`` in ``SyncPod``, then the image manager's credential loop); a secret that is
missing gives Go's ``FailedToRetrieveImagePullSecret`` Warning and the pull goes on without it; the
namespace's default ServiceAccount's ``imagePullSecrets`` reach pods created without any (the API
server's ServiceAccount admission); credential provider plugins given to the builder supply credentials
for another registry. The password (``S3NT1NEL-pw``) shows in no log record, event, pod status or
``/configz``."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from kubelet_trio.api import Pod
from kubelet_trio.apiobjects import SECRETS, ObjectRef, referenced_objects, secret_from_json
from kubelet_trio.clock import WallClock
from kubelet_trio.configz import configz_body
from kubelet_trio.credentialprovider import register_credential_provider_plugins
from kubelet_trio.fsio import run_inline
from kubelet_trio.kubelet_pods import FAILED_TO_RETRIEVE_IMAGE_PULL_SECRET
from kubelet_trio.logs import record_fields
from kubelet_trio.options import load_options
from kubelet_trio.testing.fakeapi import FakeApi, open_fake_api
from kubelet_trio.testing.fakeapi.store import FakeStore
from kubelet_trio.testing.node import open_sim_node
from kubelet_trio.testing.pods import pod_manifest
from tests.apiserver.harness import open_api_node
from tests.apiserver.pod_status import container_status, running
from tests.credentialprovider.plugins import config_yaml, provider, write_plugin
from tests.credentialprovider.test_secrecy import Leaks
from tests.kuberuntime.test_pull_credentials import AuthSim

SENTINEL = "S3NT1NEL-pw"
PRIVATE = "private.sim/team/app:1"
PUBLIC = "public.sim/app:1"
PLUGGED = "plugged.sim/team/app:1"  # credentials from a credential provider plugin only
MISSING_TEXT = (
    "Unable to retrieve some image pull secrets ({}); attempting to pull the image may not succeed."
)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def docker_config_secret(name: str, host: str, user: str, password: str) -> dict[str, Any]:
    config = {"auths": {host: {"auth": b64(f"{user}:{password}")}}}
    return {
        "metadata": {"name": name},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": b64(json.dumps(config))},
    }


def auth_sim(clock: WallClock, **accepted: tuple[str, str]) -> AuthSim:
    hosts = {host.replace("_", "."): creds for host, creds in accepted.items()}
    return AuthSim(clock=clock, run_sync=run_inline, accepted=hosts)


def manifest(name: str, image: str, *secrets: str, **spec: Any) -> dict[str, Any]:
    if secrets:
        spec["imagePullSecrets"] = [{"name": s} for s in secrets]
    return pod_manifest(name, {"app": "run"}, image=image, node="node-1", **spec)


def waiting(api: FakeApi, pod: str) -> tuple[str, str] | None:
    state = (container_status(api, pod) or {}).get("state", {}).get("waiting")
    return (state.get("reason", ""), state.get("message", "")) if state else None


def pod_events(api: FakeApi, pod: str) -> list[tuple[str, str, str]]:
    return [
        (e["type"], e["reason"], e["message"])
        for e in api.events()
        if e.get("involvedObject", {}).get("name") == pod
    ]


@pytest.fixture
def leaks(caplog: pytest.LogCaptureFixture) -> Iterator[Leaks]:
    """Every log record (klog's V(10) included), formatted both ways, must be free of the password."""
    caplog.set_level(1)
    found = Leaks()
    yield found
    found.check(caplog)


def published(api: FakeApi, leaks: Leaks) -> None:
    """What the node published (pods with their status, events) is checked for the password too."""
    leaks.texts += [json.dumps(api.pods()), json.dumps(api.events())]


async def test_pod_with_its_pull_secret_runs(autojump_clock: trio.testing.MockClock, leaks: Leaks) -> None:
    clock = WallClock()
    sim = auth_sim(clock, private_sim=("alice", SENTINEL))
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock, sim=sim) as node:
        api.store.create(
            "secrets", "default", docker_config_secret("regcred", "private.sim", "alice", SENTINEL)
        )
        api.create_pod(manifest("web", PRIVATE, "regcred"))
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "web"))
        assert sim.pulls == [(PRIVATE, "alice")]
        # the object store fetched (and watches) the pull secret as it does any referenced secret
        assert ObjectRef(SECRETS, "default", "regcred") in node.mode.objects._watches  # type: ignore[union-attr]
        assert [r for _, r, _ in pod_events(api, "web")].count(FAILED_TO_RETRIEVE_IMAGE_PULL_SECRET) == 0
        published(api, leaks)


async def test_without_the_secret_the_pull_fails_and_backs_off(
    autojump_clock: trio.testing.MockClock, leaks: Leaks
) -> None:
    clock = WallClock()
    sim = auth_sim(clock, private_sim=("alice", SENTINEL))
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock, sim=sim):
        api.store.create(
            "secrets", "default", docker_config_secret("regcred", "private.sim", "alice", SENTINEL)
        )
        api.create_pod(manifest("web", PRIVATE))
        with trio.fail_after(30):
            await api.wait_for(lambda: (waiting(api, "web") or ("",))[0] == "ErrImagePull")
        _, message = waiting(api, "web")  # type: ignore[misc]
        assert "pull access denied for anonymous: 401 Unauthorized" in message
        with trio.fail_after(60):
            await api.wait_for(lambda: (waiting(api, "web") or ("",))[0] == "ImagePullBackOff")
        _, backoff_message = waiting(api, "web")  # type: ignore[misc]
        assert backoff_message == f'Back-off pulling image "{PRIVATE}": ErrImagePull: {message}'
        assert sim.pulls[0] == (PRIVATE, None)
        assert set(sim.pulls) == {(PRIVATE, None)}  # anonymous only: the secret is not the pod's
        expected = {
            ("Normal", "Pulling", f'Pulling image "{PRIVATE}"'),
            ("Warning", "Failed", f'Failed to pull image "{PRIVATE}": {message}'),
            ("Warning", "Failed", "Error: ErrImagePull"),
            ("Normal", "BackOff", f'Back-off pulling image "{PRIVATE}"'),
            ("Warning", "Failed", "Error: ImagePullBackOff"),
        }
        with trio.fail_after(30):  # events are sent in the background
            await api.wait_for(lambda: expected <= set(pod_events(api, "web")))
        published(api, leaks)


async def test_a_missing_secret_is_reported_and_the_pull_goes_on(
    autojump_clock: trio.testing.MockClock, leaks: Leaks, caplog: pytest.LogCaptureFixture
) -> None:
    clock = WallClock()
    sim = auth_sim(clock, private_sim=("alice", SENTINEL))
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock, sim=sim):
        api.store.create(
            "secrets", "default", docker_config_secret("regcred", "private.sim", "alice", SENTINEL)
        )
        # anonymously, for lack of the only secret it names
        api.create_pod(manifest("public", PUBLIC, "absent"))
        # with the secrets that were found, in the pod's order (an empty name is skipped, as in Go)
        api.create_pod(manifest("private", PRIVATE, "nosuch", "", "regcred", "gone"))
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "public") and running(api, "private"))
        assert sorted(sim.pulls) == [(PRIVATE, "alice"), (PUBLIC, None)]
        missing = ("Warning", FAILED_TO_RETRIEVE_IMAGE_PULL_SECRET)
        with trio.fail_after(30):  # events are sent in the background
            await api.wait_for(
                lambda: (
                    (*missing, MISSING_TEXT.format("absent")) in pod_events(api, "public")
                    and (*missing, MISSING_TEXT.format("nosuch, gone")) in pod_events(api, "private")
                )
            )
        published(api, leaks)
    logged = [r for r in caplog.records if r.getMessage().startswith("Unable to retrieve pull secret")]
    assert {(r.levelno, r.getMessage(), record_fields(r)["secret"]) for r in logged} >= {
        (logging.INFO, "Unable to retrieve pull secret, the image pull may not succeed.", "default/absent"),
        (logging.INFO, "Unable to retrieve pull secret, the image pull may not succeed.", "default/gone"),
    }


async def test_the_default_service_account_pull_secrets(autojump_clock: trio.testing.MockClock) -> None:
    clock = WallClock()
    sim = auth_sim(clock, private_sim=("alice", SENTINEL))
    async with open_fake_api(now=clock.now) as api, open_api_node(api, clock=clock, sim=sim):
        api.store.create(
            "secrets", "default", docker_config_secret("regcred", "private.sim", "alice", SENTINEL)
        )
        api.store.create(
            "serviceaccounts",
            "default",
            {"metadata": {"name": "default"}, "imagePullSecrets": [{"name": "regcred"}]},
        )
        created = api.create_pod(manifest("web", PRIVATE))
        assert created["spec"]["imagePullSecrets"] == [{"name": "regcred"}]  # the API server's admission
        with trio.fail_after(30):
            await api.wait_for(lambda: running(api, "web"))
        assert sim.pulls == [(PRIVATE, "alice")]


async def test_credential_provider_plugins_given_to_the_builder(tmp_path: Path, leaks: Leaks) -> None:
    """Real time: the plugin is a real process (under an autojumping clock its minute-long exec timeout
    could expire while it starts)."""
    bin_dir = tmp_path / "bin"
    write_plugin(
        bin_dir,
        "sim-login",
        "creds = {'username': 'bob', 'password': os.environ['PLUGIN_TOKEN']}\n"
        "respond(cacheKeyType='Registry', auth={'plugged.sim': creds})",
    )
    config = tmp_path / "credential-providers.yaml"
    config.write_text(
        config_yaml(
            provider(
                "sim-login",
                ["plugged.sim"],
                env=[{"name": "PLUGIN_TOKEN", "value": SENTINEL}],
                args=[f"--password={SENTINEL}"],
            )
        )
    )
    flags = [
        f"--image-credential-provider-config={config}",
        f"--image-credential-provider-bin-dir={bin_dir}",
        "--kubeconfig=/dev/null",
    ]
    options, _ = load_options(flags)
    leaks.texts.append(json.dumps(configz_body(options)))
    providers = register_credential_provider_plugins(
        options.image_credential_provider_config, options.image_credential_provider_bin_dir
    )
    clock = WallClock()
    sim = auth_sim(clock, private_sim=("alice", SENTINEL), plugged_sim=("bob", SENTINEL))
    with trio.fail_after(60):
        async with (
            open_fake_api(now=clock.now) as api,
            open_api_node(api, clock=clock, sim=sim, credential_providers=providers),
        ):
            api.store.create(
                "secrets", "default", docker_config_secret("regcred", "private.sim", "alice", SENTINEL)
            )
            web = pod_manifest("web", {"app": "run", "side": "run"}, image=PRIVATE, node="node-1")
            web["spec"]["containers"][1]["image"] = PLUGGED
            web["spec"]["imagePullSecrets"] = [{"name": "regcred"}]
            api.create_pod(web)
            await api.wait_for(lambda: running(api, "web") and running(api, "web", "side"))
            published(api, leaks)
    assert sorted(sim.pulls) == [(PLUGGED, "bob"), (PRIVATE, "alice")]


async def test_standalone_pull_secrets_are_ignored(autojump_clock: trio.testing.MockClock) -> None:
    """No API server, no secrets: a static pod's references are not looked up (no event) and the pull is
    anonymous (Go 1.33's standalone kubelet has no secret manager; later ones refuse such manifests)."""
    clock = WallClock()
    sim = auth_sim(clock)
    events: list[tuple[str, str, str]] = []
    async with open_sim_node(sim=sim, clock=clock, event_sink=lambda _, *e: events.append(e)) as node:
        [pod] = await node.apply(manifest("web", PUBLIC, "regcred"))
        await node.wait_for_phase(pod, "Running")
    assert sim.pulls == [(PUBLIC, None)]
    assert FAILED_TO_RETRIEVE_IMAGE_PULL_SECRET not in [reason for _, reason, _ in events]


def test_pull_secrets_are_referenced_objects_first() -> None:
    pod = Pod.from_dict(
        manifest("web", PRIVATE, "regcred", "", volumes=[{"name": "s", "secret": {"secretName": "vol"}}])
    )
    assert referenced_objects(pod) == [ObjectRef(SECRETS, "", "regcred"), ObjectRef(SECRETS, "", "vol")]


def test_secret_type_from_the_api() -> None:
    store = FakeStore()
    created = store.create("secrets", "default", docker_config_secret("regcred", "h", "u", SENTINEL))
    assert secret_from_json(created).type == "kubernetes.io/dockerconfigjson"
    opaque = store.create("secrets", "default", {"metadata": {"name": "plain"}, "data": {}})
    assert opaque["type"] == "Opaque" and secret_from_json(opaque).type == "Opaque"
    assert SENTINEL not in repr(secret_from_json(created))


def test_service_account_admission_copies_pull_secrets_only_into_pods_without_any() -> None:
    store = FakeStore()
    store.create(
        "serviceaccounts", "ns", {"metadata": {"name": "default"}, "imagePullSecrets": [{"name": "a"}]}
    )
    store.create(
        "serviceaccounts", "ns", {"metadata": {"name": "builder"}, "imagePullSecrets": [{"name": "b"}]}
    )

    def created(name: str, **spec: Any) -> Any:
        return store.create("pods", "ns", manifest(name, PRIVATE, **spec))["spec"].get("imagePullSecrets")

    assert created("plain") == [{"name": "a"}]
    assert created("named", serviceAccountName="builder") == [{"name": "b"}]
    assert created("own", imagePullSecrets=[{"name": "mine"}]) == [{"name": "mine"}]
    assert created("no-account", serviceAccountName="nobody") is None
    mirror = manifest("mirror", PRIVATE)
    mirror["metadata"]["annotations"]["kubernetes.io/config.mirror"] = "hash"
    assert store.create("pods", "ns", mirror)["spec"].get("imagePullSecrets") is None
