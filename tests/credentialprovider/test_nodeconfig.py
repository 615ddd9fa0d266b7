"""The node's docker config file: where it is looked for and in which order (Go: ``config.go``
``ReadDockerConfigFile``), and its five-minute cache."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import trio
from trio.testing import MockClock

from kubelet_trio.credentialprovider import (
    NODE_DOCKER_CONFIG_LIFETIME,
    node_docker_keyring,
    read_docker_config_file,
)
from kubelet_trio.credentialprovider.nodeconfig import docker_config_json_paths, dockercfg_paths
from kubelet_trio.fsio import run_inline


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    paths = {name: tmp_path / name for name in ("root", "cwd", "home")}
    for path in paths.values():
        path.mkdir()
    monkeypatch.chdir(paths["cwd"])
    return paths


def write_json(directory: Path, user: str, name: str = "config.json") -> None:
    directory.mkdir(parents=True, exist_ok=True)
    entry = {"reg.example": {"auth": base64.b64encode(f"{user}:pw".encode()).decode()}}
    (directory / name).write_text(json.dumps({"auths": entry} if name == "config.json" else entry))


def user_of(dirs: dict[str, Path]) -> str | None:
    config = read_docker_config_file(str(dirs["root"]), home=str(dirs["home"]))
    if config is None:
        return None
    return config["reg.example"].username if "reg.example" in config else ""


def test_the_search_paths_are_gos() -> None:
    assert docker_config_json_paths("/var/lib/kubelet", home="/root") == [
        "/var/lib/kubelet",
        "",
        "/root/.docker",
        "/.docker",
    ]
    assert dockercfg_paths("/var/lib/kubelet", home="/root") == ["/var/lib/kubelet", "", "/root", "/"]


def test_no_file_means_no_config(dirs: dict[str, Path]) -> None:
    assert user_of(dirs) is None


def test_config_json_is_looked_for_root_dir_then_cwd_then_home(dirs: dict[str, Path]) -> None:
    write_json(dirs["home"] / ".docker", "home")
    assert user_of(dirs) == "home"
    write_json(dirs["cwd"], "cwd")
    assert user_of(dirs) == "cwd"
    write_json(dirs["root"], "root")
    assert user_of(dirs) == "root"


def test_any_config_json_wins_over_a_dockercfg(dirs: dict[str, Path]) -> None:
    write_json(dirs["home"], "legacy-home", ".dockercfg")
    assert user_of(dirs) == "legacy-home"  # $HOME itself for .dockercfg, not $HOME/.docker
    write_json(dirs["root"], "legacy-root", ".dockercfg")
    assert user_of(dirs) == "legacy-root"
    write_json(dirs["home"] / ".docker", "json-home")
    assert user_of(dirs) == "json-home"


def test_a_file_that_does_not_parse_is_skipped_but_an_empty_one_counts(dirs: dict[str, Path]) -> None:
    write_json(dirs["cwd"], "cwd")
    (dirs["root"] / "config.json").write_text("{broken")
    assert user_of(dirs) == "cwd"
    (dirs["root"] / "config.json").write_text("{}")
    assert user_of(dirs) == ""


async def test_the_node_keyring_rereads_the_file_every_five_minutes(
    dirs: dict[str, Path], mock_clock: MockClock
) -> None:
    keyring = node_docker_keyring(str(dirs["root"]), run_sync=run_inline, home=str(dirs["home"]))
    assert await keyring.lookup("reg.example/app") == []
    write_json(dirs["root"], "late")
    mock_clock.jump(NODE_DOCKER_CONFIG_LIFETIME - 1)
    assert await keyring.lookup("reg.example/app") == []
    mock_clock.jump(1)
    assert [c.username for c in await keyring.lookup("reg.example/app")] == ["late"]
    assert trio.current_time() == NODE_DOCKER_CONFIG_LIFETIME
