"""What ``crictl`` shows for a pod and container on sim-cri, compared with what it shows on a private
containerd for the same pod: the same crictl sequence runs against both, and the JSON views (``ps``,
``images``, ``pods``, ``inspect``, ``inspectp``), the logs and exec's output and exit codes are compared
field by field. Where containerd's answer is runtime-specific (its ``info`` maps, ids, digests, sizes)
the comparison checks shape, not value; :data:`RUNTIME_SPECIFIC_INFO` lists what is left out."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs
import pytest

from kubelet_trio.testing.env import LocalCriEnvironment
from tests.critest.conftest import find_binary

pytestmark = pytest.mark.critest

#: The container's command: a line on each stream, then it waits to be stopped.
COMMAND = ["sh", "-c", "echo hello; echo err >&2; sleep 3600"]
#: Keys of ``inspect``/``inspectp``'s ``info`` map that only containerd fills: its OCI runtime spec and
#: options, the CRI config it was given, snapshots, the CNI result, the pause image, a removal flag.
#: sim-cri runs no processes, keeps no snapshots and calls no CNI; its own extra key is ``sim``. The common
#: keys (pid, sandboxID; pid, processStatus, netNamespaceClosed, runtimeHandler) are compared.
RUNTIME_SPECIFIC_INFO = frozenset(
    {
        "removing",
        "snapshotKey",
        "snapshotter",
        "runtimeType",
        "runtimeOptions",
        "config",
        "runtimeSpec",
        "image",
        "cniResult",
    }
)

Run = Callable[..., subprocess.CompletedProcess[str]]


@attrs.frozen
class Views:
    """What one runtime showed, step by step (stderr without crictl's own config warning)."""

    workdir: Path
    pod_id: str
    container_id: str
    images: dict[str, Any]
    ps_running: dict[str, Any]
    pods_ready: dict[str, Any]
    inspect_running: dict[str, Any]
    inspectp_ready: dict[str, Any]
    logs: tuple[str, str]
    exec_hi: tuple[str, str, int]
    exec_exit: tuple[str, str, int]
    exec_sync_hi: tuple[str, str, int]
    exec_sync_exit: tuple[str, str, int]
    ps_exited: dict[str, Any]
    inspect_exited: dict[str, Any]
    ps_after_rm: dict[str, Any]
    pods_notready: dict[str, Any]
    inspectp_notready: dict[str, Any]
    pods_after_rmp: dict[str, Any]


def _stderr(text: str) -> str:
    """crictl's stderr without its warning about a missing config file, and without log timestamps."""
    lines = [line for line in text.splitlines() if "level=warning" not in line]
    return "\n".join(re.sub(r'^time="[^"]*" ', "", line) for line in lines)


def crictl_on(endpoint: str) -> Run:
    crictl = find_binary("crictl")
    if crictl is None:
        pytest.skip(
            "crictl missing: bash ../shared/tools/build-node-parts.sh <git dir of kubernetes-sigs/cri-tools>"
        )

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                str(crictl),
                "--runtime-endpoint",
                endpoint,
                "--image-endpoint",
                endpoint,
                "--timeout",
                "30s",
                *args,
            ],
            capture_output=True,
            text=True,
            check=check,
            timeout=60,
        )

    return run


def run_sequence(endpoint: str, image: str, workdir: Path) -> Views:
    """Pull, run a pod and a container, look at them, exec, stop and remove; every view as crictl shows it."""
    run = crictl_on(endpoint)
    workdir.mkdir(parents=True)

    def out(*args: str) -> str:
        return run(*args).stdout

    def js(*args: str) -> dict[str, Any]:
        return json.loads(out(*args))  # type: ignore[no-any-return]

    pod = workdir / "pod.json"
    pod.write_text(
        json.dumps(
            {
                "metadata": {"name": "web", "namespace": "default", "uid": "u-1", "attempt": 0},
                "hostname": "web-host",
                "log_directory": str(workdir / "logs"),
                "labels": {"app": "web"},
                "annotations": {"note": "pod"},
                "linux": {},
            }
        )
    )
    container = workdir / "container.json"
    container.write_text(
        json.dumps(
            {
                "metadata": {"name": "app", "attempt": 0},
                "image": {"image": image},
                "command": COMMAND,
                "log_path": "app/0.log",
                "labels": {"tier": "app"},
                "annotations": {"note": "container"},
                "linux": {},
            }
        )
    )
    out("pull", image)
    images = js("images", "-o", "json")
    pod_id = out("runp", str(pod)).strip()
    container_id = out("create", pod_id, str(container), str(pod)).strip()
    out("start", container_id)
    ps_running = js("ps", "-a", "-o", "json")
    pods_ready = js("pods", "-o", "json")
    inspect_running = js("inspect", "-o", "json", container_id)
    inspectp_ready = js("inspectp", "-o", "json", pod_id)
    logs = run("logs", container_id)
    hi = run("exec", container_id, "echo", "hi", check=False)
    code = run("exec", container_id, "sh", "-c", "exit 3", check=False)
    sync_hi = run("exec", "-s", container_id, "echo", "hi", check=False)
    sync_code = run("exec", "-s", container_id, "sh", "-c", "exit 3", check=False)
    out("stop", container_id)
    ps_exited = js("ps", "-a", "-o", "json")
    inspect_exited = js("inspect", "-o", "json", container_id)
    out("rm", container_id)
    ps_after_rm = js("ps", "-a", "-o", "json")
    out("stopp", pod_id)
    pods_notready = js("pods", "-o", "json")
    inspectp_notready = js("inspectp", "-o", "json", pod_id)
    out("rmp", pod_id)
    pods_after_rmp = js("pods", "-o", "json")

    def outcome(result: subprocess.CompletedProcess[str]) -> tuple[str, str, int]:
        return result.stdout, _stderr(result.stderr).replace(container_id, "<container>"), result.returncode

    return Views(
        workdir=workdir,
        pod_id=pod_id,
        container_id=container_id,
        images=images,
        ps_running=ps_running,
        pods_ready=pods_ready,
        inspect_running=inspect_running,
        inspectp_ready=inspectp_ready,
        logs=(logs.stdout, _stderr(logs.stderr)),
        exec_hi=outcome(hi),
        exec_exit=outcome(code),
        exec_sync_hi=outcome(sync_hi),
        exec_sync_exit=outcome(sync_code),
        ps_exited=ps_exited,
        inspect_exited=inspect_exited,
        ps_after_rm=ps_after_rm,
        pods_notready=pods_notready,
        inspectp_notready=inspectp_notready,
        pods_after_rmp=pods_after_rmp,
    )


def key_paths(value: Any, prefix: str = "") -> set[str]:
    """Every field's path in a JSON value (``status.image.image``, ``mounts[]``): which fields exist."""
    if isinstance(value, dict):
        paths = {prefix} if prefix else set()
        for key, item in value.items():
            paths |= key_paths(item, f"{prefix}.{key}" if prefix else key)
        return paths
    if isinstance(value, list):
        return set().union({f"{prefix}[]"}, *(key_paths(item, f"{prefix}[]") for item in value))
    return {prefix}


def rfc3339_ns(stamp: str) -> int:
    """Nanoseconds since the epoch of an RFC 3339 timestamp as crictl prints them (0 for Go's zero time)."""
    match = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z", stamp)
    assert match, stamp
    if match[1].startswith("0001-"):
        return 0
    seconds = datetime.fromisoformat(match[1] + "+00:00").timestamp()
    return int(seconds) * 10**9 + int((match[2] or "0").ljust(9, "0"))


def normalized(views: Views, image: str) -> dict[str, Any]:
    """The views with what is this runtime's own replaced by placeholders, after checking its shape: ids,
    image ids and digests, sizes, pod IPs, timestamps (checked present and ordered), paths under the
    test's directory, and the runtime-specific part of ``info``."""
    pod, ctr = views.pod_id, views.container_id
    assert re.fullmatch(r"[0-9a-f]{64}", pod) and re.fullmatch(r"[0-9a-f]{64}", ctr)
    [listed] = views.images["images"]
    image_id = listed["id"]
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", image_id)
    repository = image.rpartition(":")[0]
    [digest] = listed["repoDigests"]
    assert re.fullmatch(rf"{re.escape(repository)}@sha256:[0-9a-f]{{64}}", digest)
    assert int(listed["size"]) > 0
    text = json.dumps(attrs.asdict(views, filter=lambda a, _: a.name not in ("workdir",)))
    for value, placeholder in (
        (pod, "<pod>"),
        (ctr, "<container>"),
        (image_id, "<image id>"),
        (digest, "<repo digest>"),
        (str(views.workdir), "<workdir>"),
    ):
        text = text.replace(value, placeholder)
    result: dict[str, Any] = json.loads(text)
    result["images"]["images"][0]["size"] = "<size>"

    created = int(result["pods_ready"]["items"][0]["createdAt"])
    ctr_created = int(result["ps_running"]["containers"][0]["createdAt"])
    assert created <= ctr_created
    for key in ("ps_running", "ps_exited"):
        [entry] = result[key]["containers"]
        assert int(entry["createdAt"]) == ctr_created
        entry["createdAt"] = "<created>"
        # containerd 1.6's CRI proto predates ImageSpec.user_specified_image and drops it; 1.7+ keeps
        # what the client sent, as sim-cri does
        assert entry["image"]["userSpecifiedImage"] in ("", image)
        entry["image"]["userSpecifiedImage"] = "<as sent>"
    for key in ("pods_ready", "pods_notready"):
        [entry] = result[key]["items"]
        assert int(entry["createdAt"]) == created
        entry["createdAt"] = "<created>"

    running, exited = result["inspect_running"]["status"], result["inspect_exited"]["status"]
    assert rfc3339_ns(running["createdAt"]) == ctr_created and rfc3339_ns(exited["createdAt"]) == ctr_created
    started = rfc3339_ns(running["startedAt"])
    assert ctr_created < started and rfc3339_ns(running["finishedAt"]) == 0
    assert rfc3339_ns(exited["startedAt"]) == started < rfc3339_ns(exited["finishedAt"])
    for status in (running, exited):
        status["createdAt"] = status["startedAt"] = "<stamp>"
        if status["finishedAt"] != "0001-01-01T00:00:00Z":
            status["finishedAt"] = "<stamp>"
    for key in ("inspectp_ready", "inspectp_notready"):
        status = result[key]["status"]
        assert rfc3339_ns(status["createdAt"]) == created
        status["createdAt"] = "<stamp>"
    ready_ip = result["inspectp_ready"]["status"]["network"]["ip"]
    assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+", ready_ip)
    result["inspectp_ready"]["status"]["network"]["ip"] = "<pod ip>"

    for key in ("inspect_running", "inspect_exited", "inspectp_ready", "inspectp_notready"):
        info = result[key]["info"]
        result[key]["info"] = {k: v for k, v in info.items() if k not in RUNTIME_SPECIFIC_INFO | {"sim"}}
        assert isinstance(info["pid"], int)
        result[key]["info"]["pid"] = "<pid>"
    return result


@pytest.mark.containerd
def test_crictl_views_match_containerd(sim_cri: str, cri_env: LocalCriEnvironment, tmp_path: Path) -> None:
    """The same crictl session on sim-cri and on containerd (the registry's busybox on both) shows the same
    fields with the same values, up to what :func:`normalized` abstracts."""
    image = cri_env.images.busybox
    ours = run_sequence(sim_cri, image, tmp_path / "sim-cri")
    theirs = run_sequence(cri_env.endpoint, image, tmp_path / "containerd")
    expected, actual = normalized(theirs, image), normalized(ours, image)

    # which fields exist, recursively, in every JSON view (info maps: their common keys, below)
    for view, value in expected.items():
        if isinstance(value, dict):
            shown = {path for path in key_paths(value) if not path.startswith("info.")}
            ours_shown = {path for path in key_paths(actual[view]) if not path.startswith("info.")}
            assert ours_shown == shown, view
    # then every value, view by view, so that a failure names the view
    for view in expected:
        assert actual[view] == expected[view], view

    # and what the comparison rests on, spelled out
    assert expected["logs"] == ["hello\n", "err"]
    assert expected["exec_hi"] == ["hi\n", "", 0] and expected["exec_sync_hi"][2] == 0
    assert "exited with 3" in expected["exec_sync_exit"][1] and expected["exec_sync_exit"][2] != 0
    [running] = expected["ps_running"]["containers"]
    assert running["state"] == "CONTAINER_RUNNING" and running["metadata"] == {"name": "app", "attempt": 0}
    assert running["labels"] == {"tier": "app"} and running["annotations"] == {"note": "container"}
    assert expected["ps_exited"]["containers"][0]["state"] == "CONTAINER_EXITED"
    assert expected["inspect_exited"]["status"]["exitCode"] == 137
    assert expected["pods_ready"]["items"][0]["state"] == "SANDBOX_READY"
    assert expected["pods_notready"]["items"][0]["state"] == "SANDBOX_NOTREADY"
    assert expected["inspectp_ready"]["status"]["labels"] == {"app": "web"}
    assert expected["images"]["images"][0]["repoTags"] == [image]
    assert expected["inspect_running"]["status"]["imageRef"] == "<repo digest>"
    assert expected["inspect_running"]["info"] == {"pid": "<pid>", "sandboxID": "<pod>"}
    assert expected["inspectp_ready"]["info"].keys() == {
        "pid",
        "processStatus",
        "netNamespaceClosed",
        "runtimeHandler",
    }
    assert expected["ps_after_rm"] == {"containers": []} and expected["pods_after_rmp"] == {"items": []}
