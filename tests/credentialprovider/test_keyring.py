"""Matching an image repository against registry keys, as Go's ``BasicDockerKeyring`` does
(``pkg/credentialprovider/keyring.go``): host labels with ``*`` globs, port, path prefix, scheme ignored,
most specific key first, the Docker Hub fallback; and unions of keyrings."""

from __future__ import annotations

import logging

import pytest

from kubelet_trio.credentialprovider import (
    AuthConfig,
    BasicDockerKeyring,
    CachingDockerConfigProvider,
    DockerConfig,
    ProvidersDockerKeyring,
    UnionDockerKeyring,
    is_default_registry_match,
    registry_key,
    urls_match_str,
)
from kubelet_trio.credentialprovider.urls import InvalidURLError, glob_match, parse_schemeless_url


def cred(user: str) -> AuthConfig:
    return AuthConfig(username=user, password=f"{user}-pw")


def users(found: list[AuthConfig]) -> list[str]:
    return [c.username for c in found]


@pytest.mark.parametrize(
    ("key", "image", "matches"),
    [
        # host only: any path of that host
        ("reg.example", "reg.example/team/app", True),
        ("reg.example", "reg.example", True),
        ("reg.example", "other.example/team/app", False),
        ("reg.example", "sub.reg.example/app", False),  # label count differs
        ("reg.example", "reg.examplex/app", False),
        # ports must agree exactly
        ("reg.example:5000", "reg.example:5000/app", True),
        ("reg.example:5000", "reg.example/app", False),
        ("reg.example", "reg.example:5000/app", False),
        ("reg.example:5000", "reg.example:5001/app", False),
        # the key's path is a string prefix of the image's
        ("reg.example/team", "reg.example/team/app", True),
        ("reg.example/team", "reg.example/teamwork/app", True),
        ("reg.example/team", "reg.example/other/app", False),
        ("reg.example/team/app", "reg.example/team", False),
        # one * per label, never across a dot
        ("*.reg.example", "eu.reg.example/app", True),
        ("*.reg.example", "reg.example/app", False),
        ("*.reg.example", "a.eu.reg.example/app", False),
        ("*.*.example", "eu.reg.example/app", True),
        ("eu-*.reg.example", "eu-west.reg.example/app", True),
        ("eu-*.reg.example", "us-west.reg.example/app", False),
        ("eu.re[a-g].example", "eu.reg.example/app", True),
        ("eu.re[^a-g].example", "eu.reg.example/app", False),
        # Go's url.Parse quirks: "?" starts a query, a leading "[" an IPv6 literal
        ("r?g.example", "reg.example/app", False),
        ("[a-f]*.example", "docker.example/app", False),
        ("*.reg.example:443/team", "eu.reg.example:443/team/app", True),
        # a malformed glob matches nothing
        ("[a.reg.example", "a.reg.example/app", False),
        ("reg.example\\", "reg.example/app", False),
        # case matters, as in Go
        ("Reg.Example", "reg.example/app", False),
    ],
)
def test_a_key_matches_an_image(key: str, image: str, matches: bool) -> None:
    assert urls_match_str(key, image) is matches
    keyring = BasicDockerKeyring.of({key: cred("u")})
    assert users(keyring.find(image)) == (["u"] if matches else [])


@pytest.mark.parametrize(
    ("location", "key"),
    [
        ("reg.example", "reg.example"),
        ("https://reg.example", "reg.example"),
        ("http://reg.example/", "reg.example"),
        ("https://index.docker.io/v1/", "index.docker.io"),
        ("index.docker.io/v1/", "index.docker.io"),
        ("https://reg.example/v2/", "reg.example"),
        ("reg.example/v1/team", "reg.example/team"),
        ("reg.example:5000/team/app", "reg.example:5000/team/app"),
        ("reg.example/v3/team", "reg.example/v3/team"),
        ("user@reg.example/team", "reg.example/team"),
        ("reg.example/a%20b", "reg.example/a b"),
        ("reg.example/team?x=1#frag", "reg.example/team"),
    ],
)
def test_keys_are_normalised_when_added(location: str, key: str) -> None:
    assert registry_key(location) == key
    assert BasicDockerKeyring.of({location: cred("u")}).keys == (key,)


@pytest.mark.parametrize("location", ["reg.example:abc", "reg example", "reg.example/%zz", "[::1", "a\x00b"])
def test_an_unparsable_key_is_ignored_with_a_log_line(
    location: str, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(InvalidURLError):
        registry_key(location)
    caplog.set_level(logging.ERROR)
    keyring = BasicDockerKeyring.of({location: cred("bad"), "reg.example": cred("good")})
    assert keyring.keys == ("reg.example",)
    assert [r.getMessage() for r in caplog.records] == ["entry in dockercfg invalid, ignoring"]


def test_the_most_specific_key_comes_first_and_every_match_is_returned() -> None:
    keyring = BasicDockerKeyring.of(
        {
            "reg.example": cred("host"),
            "reg.example/team/app": cred("app"),
            "https://reg.example/team": cred("team"),
            "*.example": cred("glob"),
            "other.example": cred("other"),
        }
    )
    # reverse lexicographic order of the normalised keys
    assert keyring.keys == (
        "reg.example/team/app",
        "reg.example/team",
        "reg.example",
        "other.example",
        "*.example",
    )
    assert users(keyring.find("reg.example/team/app")) == ["app", "team", "host", "glob"]
    assert users(keyring.find("reg.example/solo")) == ["host", "glob"]


def test_credentials_of_one_key_keep_the_order_they_were_added() -> None:
    keyring = BasicDockerKeyring.of(
        {"reg.example": cred("first")},
        {"https://reg.example/v2/": cred("second")},
        {"reg.example": cred("third")},
    )
    assert keyring.keys == ("reg.example",)
    assert users(keyring.find("reg.example/app")) == ["first", "second", "third"]


@pytest.mark.parametrize(
    ("image", "hub"),
    [
        ("docker.io/library/busybox", True),
        ("index.docker.io/library/busybox", True),
        ("library/busybox", True),
        ("busybox", True),
        ("team/app", True),
        ("localhost/app", True),  # Go looks for "." or ":" only
        ("reg.example/app", False),
        ("reg:5000/app", False),
        ("/app", False),
    ],
)
def test_docker_hub_images(image: str, hub: bool) -> None:
    assert is_default_registry_match(image) is hub


def test_index_docker_io_credentials_serve_docker_hub_images() -> None:
    keyring = BasicDockerKeyring.of({"https://index.docker.io/v1/": cred("hub")})
    assert users(keyring.find("docker.io/library/busybox")) == ["hub"]
    assert users(keyring.find("docker.io/team/app")) == ["hub"]
    assert keyring.find("reg.example/app") == []


def test_a_matching_key_wins_over_the_docker_hub_fallback() -> None:
    keyring = BasicDockerKeyring.of({"index.docker.io": cred("legacy"), "docker.io": cred("modern")})
    assert users(keyring.find("docker.io/library/busybox")) == ["modern"]
    keyring = BasicDockerKeyring.of({"index.docker.io": cred("legacy"), "docker.io/other": cred("other")})
    assert users(keyring.find("docker.io/library/busybox")) == ["legacy"]


def test_glob_match_is_go_filepath_match() -> None:
    assert glob_match("*", "anything")
    assert glob_match("a\\*b", "a*b") and not glob_match("a\\*b", "axb")
    assert glob_match("[a-c][!-~]", "b!")  # "!" is not negation in Go
    assert not glob_match("[]a]", "]")  # "]" may not open a class
    assert not glob_match("[z-a]", "m")  # an empty range matches nothing
    assert glob_match("[^z-a]", "m")


def test_schemeless_urls_parse_like_go() -> None:
    parsed = parse_schemeless_url("reg.example:5000/team/app")
    assert (parsed.host, parsed.path) == ("reg.example:5000", "/team/app")
    assert parse_schemeless_url("[::1]:5000/x").host == "[::1]:5000"
    assert urls_match_str("[::1]:5000", "[::1]:5000/app")
    for bad in ("reg.example:port", "a b", "reg.example/%x"):
        with pytest.raises(InvalidURLError):
            parse_schemeless_url(bad)


@pytest.mark.parametrize(
    "keyrings",
    [
        lambda a, b: UnionDockerKeyring((a, None, b)),
        lambda a, b: UnionDockerKeyring((UnionDockerKeyring((a,)), b)),
    ],
)
async def test_a_union_asks_each_keyring_in_order(keyrings: object) -> None:
    first = BasicDockerKeyring.of({"reg.example": cred("pod")})
    second = BasicDockerKeyring.of({"reg.example/team": cred("node"), "*.example": cred("node-glob")})
    union = keyrings(first, second)  # type: ignore[operator]
    assert users(await union.lookup("reg.example/team/app")) == ["pod", "node", "node-glob"]
    assert users(await union.lookup("other.example/app")) == ["node-glob"]
    assert await union.lookup("reg.other/app") == []


class CountingProvider:
    def __init__(self, config: DockerConfig) -> None:
        self.config = config
        self.calls: list[str] = []

    async def provide(self, image: str) -> DockerConfig:
        self.calls.append(image)
        return self.config


async def test_providers_are_asked_per_lookup_and_a_cache_keeps_their_answer(mock_clock: object) -> None:
    import trio

    counting = CountingProvider({"reg.example": cred("file")})
    cached = CachingDockerConfigProvider(counting, lifetime=300)
    keyring = ProvidersDockerKeyring((cached, CountingProvider({"*.example": cred("other")})))
    assert users(await keyring.lookup("reg.example/app")) == ["file", "other"]
    assert users(await keyring.lookup("reg.example/app")) == ["file", "other"]
    assert counting.calls == ["reg.example/app"]
    mock_clock.jump(299.9)  # type: ignore[attr-defined]
    await keyring.lookup("reg.example/app")
    assert len(counting.calls) == 1
    mock_clock.jump(0.2)  # type: ignore[attr-defined]
    await keyring.lookup("reg.example/b")
    assert counting.calls == ["reg.example/app", "reg.example/b"]
    assert trio.current_time() == pytest.approx(300.1)
