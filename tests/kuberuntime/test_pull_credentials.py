"""The image manager's credential loop (Go: ``kuberuntime_image.go`` ``PullImage``,
``image_manager.go``): the pod's pull secrets, then the node keyring, each credential tried in turn;
anonymous only when none matched; errors aggregated; Go's event texts."""

from __future__ import annotations

import base64
import json

import attrs
import pytest
import trio
from trio.testing import MockClock

from kubelet_trio.credentialprovider import AuthConfig, BasicDockerKeyring
from kubelet_trio.cri import errors as cri_errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.kuberuntime.images import ImageError, ImageManager, repository_to_pull
from kubelet_trio.objects import Secret
from kubelet_trio.sim import SimRuntime
from tests.kuberuntime.conftest import WALL_START_NS, app, make_pod, spec_of

PRIVATE = "private.sim/team/app:1"


@attrs.define(eq=False, kw_only=True)
class AuthSim(SimRuntime):
    """Pulls from a host in ``accepted`` need that host's (user, password); records every pull."""

    accepted: dict[str, tuple[str, str]] = attrs.field(factory=dict)
    pulls: list[tuple[str, str | None]] = attrs.field(factory=list, init=False)

    async def pull_image(
        self,
        image: pb.ImageSpec,
        auth: pb.AuthConfig | None = None,
        sandbox_config: pb.PodSandboxConfig | None = None,
    ) -> str:
        self.pulls.append((image.image, None if auth is None else auth.username))
        wanted = self.accepted.get(image.image.split("/")[0])
        if wanted is not None and (auth is None or (auth.username, auth.password) != wanted):
            who = "anonymous" if auth is None else auth.username
            raise cri_errors.CriCallError("PullImage", f"pull access denied for {who}: 401 Unauthorized")
        return await super().pull_image(image, auth, sandbox_config)


Events = list[tuple[str, str, str]]


def manager(sim: SimRuntime, events: Events, keyring: BasicDockerKeyring | None = None) -> ImageManager:
    return ImageManager(
        sim, events=lambda pod, type_, reason, msg: events.append((type_, reason, msg)), keyring=keyring
    )


def pull_secret(name: str, auths: dict[str, tuple[str, str]], *, legacy: bool = False) -> Secret:
    entries = {key: {"auth": base64.b64encode(f"{u}:{p}".encode()).decode()} for key, (u, p) in auths.items()}
    if legacy:
        return Secret("default", name, {".dockercfg": json.dumps(entries).encode()})
    return Secret("default", name, {".dockerconfigjson": json.dumps({"auths": entries}).encode()})


def sim(**kwargs: object) -> AuthSim:
    return AuthSim(wall_clock_start_ns=WALL_START_NS, id_seed=7, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("image", "repository"),
    [
        ("busybox", "docker.io/library/busybox"),
        ("busybox:1.36", "docker.io/library/busybox"),
        ("team/app@sha256:" + "a" * 64, "docker.io/team/app"),
        ("index.docker.io/busybox", "docker.io/library/busybox"),
        ("docker.io/team/app:1", "docker.io/team/app"),
        ("localhost/app", "localhost/app"),
        ("reg.example:5000/team/app:1", "reg.example:5000/team/app"),
    ],
)
def test_the_repository_credentials_are_looked_up_for(image: str, repository: str) -> None:
    assert repository_to_pull(image) == repository


async def test_each_credential_is_tried_most_specific_first_until_one_works(
    autojump_clock: MockClock,
) -> None:
    runtime = sim(accepted={"private.sim": ("right", "pw")})
    events: Events = []
    pod = make_pod([app(image=PRIVATE)])
    secrets = [
        pull_secret("host-wide", {"private.sim": ("right", "pw")}),
        pull_secret("team", {"https://private.sim/team": ("stale", "old-pw")}),
    ]
    ensured = await manager(runtime, events).ensure_image_exists(pod, spec_of(pod), pull_secrets=secrets)
    # one keyring of all secrets: the longer key comes first whichever secret holds it
    assert runtime.pulls == [(PRIVATE, "stale"), (PRIVATE, "right")]
    assert ensured.image is not None and ensured.ref == ensured.image.id
    assert [reason for _, reason, _ in events] == ["Pulling", "Pulled"]


async def test_pod_secrets_come_before_the_node_keyring(autojump_clock: MockClock) -> None:
    runtime = sim(accepted={"private.sim": ("node", "pw")})
    node = BasicDockerKeyring.of({"private.sim": AuthConfig(username="node", password="pw")})
    pod = make_pod([app(image=PRIVATE)])
    secrets = [pull_secret("mine", {"private.sim": ("pod", "pw")}, legacy=True)]
    await manager(runtime, [], node).ensure_image_exists(pod, spec_of(pod), pull_secrets=secrets)
    assert runtime.pulls == [(PRIVATE, "pod"), (PRIVATE, "node")]


async def test_without_a_matching_credential_the_pull_is_anonymous(autojump_clock: MockClock) -> None:
    runtime = sim()
    pod = make_pod([app(image="public.sim/app:1")])
    secrets = [pull_secret("other", {"private.sim": ("u", "p")})]
    await manager(runtime, []).ensure_image_exists(pod, spec_of(pod), pull_secrets=secrets)
    assert runtime.pulls == [("public.sim/app:1", None)]


async def test_when_every_credential_fails_there_is_no_anonymous_attempt(autojump_clock: MockClock) -> None:
    runtime = sim(accepted={"private.sim": ("right", "pw")})
    events: Events = []
    pod = make_pod([app(image=PRIVATE)])
    secrets = [pull_secret("s", {"private.sim": ("alice", "x"), "private.sim/team": ("bob", "y")})]
    images = manager(runtime, events)
    with pytest.raises(ImageError) as caught:
        await images.ensure_image_exists(pod, spec_of(pod), pull_secrets=secrets)
    assert runtime.pulls == [(PRIVATE, "bob"), (PRIVATE, "alice")]
    aggregated = (
        "[pull access denied for bob: 401 Unauthorized, pull access denied for alice: 401 Unauthorized]"
    )
    assert (caught.value.reason, caught.value.message, caught.value.backoff_until) == (
        "ErrImagePull",
        aggregated,
        10,
    )
    assert events[-1] == ("Warning", "Failed", f'Failed to pull image "{PRIVATE}": {aggregated}')

    # while backing off: no lookup result is used, no pull; the message carries the last failure
    with pytest.raises(ImageError) as caught:
        await images.ensure_image_exists(pod, spec_of(pod), pull_secrets=secrets)
    assert caught.value.reason == "ImagePullBackOff"
    assert caught.value.message == f'Back-off pulling image "{PRIVATE}": ErrImagePull: {aggregated}'
    assert events[-1] == ("Normal", "BackOff", f'Back-off pulling image "{PRIVATE}"')
    assert len(runtime.pulls) == 2


async def test_identical_errors_aggregate_to_one(autojump_clock: MockClock) -> None:
    runtime = sim(pull_failures={PRIVATE: "RegistryUnavailable: connection refused"})
    pod = make_pod([app(image=PRIVATE)])
    secrets = [pull_secret("s", {"private.sim": ("a", "x"), "private.sim/team": ("a", "y")})]
    with pytest.raises(ImageError) as caught:
        await manager(runtime, []).ensure_image_exists(pod, spec_of(pod), pull_secrets=secrets)
    assert len(runtime.pulls) == 2
    assert caught.value.reason == "ErrImagePull"
    # the same message twice is reported once, without brackets (an UNKNOWN status: its message alone,
    # as Go's CRI client strips the code)
    assert caught.value.message == (
        f'failed to pull and unpack image "{PRIVATE}": RegistryUnavailable: connection refused'
    )


async def test_docker_hub_credentials_serve_short_names(autojump_clock: MockClock) -> None:
    runtime = sim()
    seen: list[str] = []

    class Spy:
        async def lookup(self, image: str) -> list[AuthConfig]:
            seen.append(image)
            return []

    pod = make_pod([app(image="busybox:1.36")])
    secrets = [pull_secret("hub", {"https://index.docker.io/v1/": ("hub", "pw")})]
    images = manager(runtime, [])
    images.keyring = Spy()
    await images.ensure_image_exists(pod, spec_of(pod), pull_secrets=secrets)
    assert seen == ["docker.io/library/busybox"]
    assert runtime.pulls == [("busybox:1.36", "hub")]


async def test_a_secret_that_does_not_parse_fails_without_a_pull(autojump_clock: MockClock) -> None:
    runtime = sim()
    pod = make_pod([app(image=PRIVATE)])
    bad = Secret("default", "regcred", {".dockerconfigjson": b'{"auths": {"private.sim": {"auth": "???"}}}'})
    images = manager(runtime, [])
    with pytest.raises(ImageError) as caught:
        await images.ensure_image_exists(pod, spec_of(pod), pull_secrets=[bad])
    assert (caught.value.reason, caught.value.message, caught.value.backoff_until) == (
        "ErrImagePull",
        'image pull secret "default/regcred": .dockerconfigjson: auths["private.sim"].auth: '
        "illegal base64 data",
        None,
    )
    assert runtime.pulls == []
    assert not images.backoff.is_in_backoff_since_update(
        images.backoff_key(pod, spec_of(pod)), trio.current_time()
    )


async def test_a_present_image_needs_no_credentials(autojump_clock: MockClock) -> None:
    runtime = sim(preloaded_images=[PRIVATE])
    seen: list[str] = []

    class Spy:
        async def lookup(self, image: str) -> list[AuthConfig]:
            seen.append(image)
            return []

    pod = make_pod([app(image=PRIVATE)])
    images = manager(runtime, [])
    images.keyring = Spy()
    await images.ensure_image_exists(pod, spec_of(pod))
    assert seen == [] and runtime.pulls == []


async def test_the_pulled_event_has_gos_durations_and_size(autojump_clock: MockClock) -> None:
    runtime = sim(pull_delay=1.2)
    events: Events = []
    images = manager(runtime, events)
    first = make_pod([app(image="public.sim/a:1")], uid="uid-1")
    second = make_pod([app(image="public.sim/b:1")], uid="uid-2")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(images.ensure_image_exists, first, spec_of(first))
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(images.ensure_image_exists, second, spec_of(second))
    sizes = {}
    for image in ("public.sim/a:1", "public.sim/b:1"):
        status = await runtime.image_status(pb.ImageSpec(image=image))
        assert status is not None
        sizes[image] = status.size
    pulled = [msg for _, reason, msg in events if reason == "Pulled"]
    assert pulled == [
        f'Successfully pulled image "public.sim/a:1" in 1.2s (1.2s including waiting). '
        f"Image size: {sizes['public.sim/a:1']} bytes.",
        # serialised: the second waited for the first
        f'Successfully pulled image "public.sim/b:1" in 1.2s (2.4s including waiting). '
        f"Image size: {sizes['public.sim/b:1']} bytes.",
    ]


def test_auth_config_to_cri() -> None:
    auth = AuthConfig(username="u", password="p", identity_token="i", registry_token="r")
    assert auth.to_cri() == pb.AuthConfig(username="u", password="p", identity_token="i", registry_token="r")
