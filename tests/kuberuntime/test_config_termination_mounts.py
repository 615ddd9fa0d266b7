"""Termination messages (file, FallbackToLogsOnError) and volume mounts (subPath, readOnly, propagation,
/etc/hosts, the termination message file) — Go: kuberuntime_container_test.go, kubelet_pods_test.go
TestMakeMounts."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from kubelet_trio.api import Pod, default_pod
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.fsio import run_inline
from kubelet_trio.kuberuntime.mounts import MountConfigError, RunOptionsGenerator, make_mounts
from kubelet_trio.kuberuntime.termination import (
    create_termination_message_file,
    read_last_log_text,
    termination_message,
)
from kubelet_trio.objects import EnvError
from kubelet_trio.volumemanager import MountedVolume, VolumeManager


def status(
    tmp_path: Path, message_file: str | None, *, exit_code: int = 1, log: str = "", reason: str = "Error"
) -> pb.ContainerStatus:
    log_path = tmp_path / "0.log"
    log_path.write_text(log)
    mounts = [pb.Mount(container_path="/dev/termination-log", host_path=message_file)] if message_file else []
    return pb.ContainerStatus(
        id="c", exit_code=exit_code, reason=reason, mounts=mounts, log_path=str(log_path)
    )


def cri_log(*lines: str, stream: str = "stdout") -> str:
    return "".join(f"2024-05-01T10:00:00.000000000Z {stream} F {line}\n" for line in lines)


def test_message_from_file(tmp_path: Path) -> None:
    path = create_termination_message_file(str(tmp_path / "c"))
    assert os.stat(path).st_mode & 0o777 == 0o666
    Path(path).write_text("hi" + "x" * 5000 + "bye")
    message = termination_message(status(tmp_path, path), "/dev/termination-log", "File")
    assert message.endswith("xbye") and len(message) == 4096  # the last 4 KiB, as Go's tail.ReadAtMost


def test_fallback_to_logs_on_error(tmp_path: Path) -> None:
    path = create_termination_message_file(str(tmp_path / "c"))
    log = cri_log(*(f"line {i}" for i in range(100)))
    assert termination_message(status(tmp_path, path, log=log), "/dev/termination-log", "File") == ""
    fallback = termination_message(
        status(tmp_path, path, log=log), "/dev/termination-log", "FallbackToLogsOnError"
    )
    assert fallback.startswith("line 20\n") and fallback.endswith("line 99\n")  # the last 80 lines
    ok = termination_message(
        status(tmp_path, path, exit_code=0, log=log), "/dev/termination-log", "FallbackToLogsOnError"
    )
    assert ok == ""  # only failed containers fall back
    Path(path).write_text("from file")
    assert (
        termination_message(status(tmp_path, path, log=log), "/dev/termination-log", "FallbackToLogsOnError")
        == "from file"
    )


def test_log_tail_keeps_the_last_2k_and_fragments_stay_without_newline(tmp_path: Path) -> None:
    """Go: the last 80 records through a 2048-byte circular buffer, records as written."""
    log = tmp_path / "1.log"
    log.write_text(cri_log("x" * 3000, "a", "b") + "2024-05-01T10:00:02Z stdout P DONE\n")
    end = "\na\nb\nDONE"
    assert read_last_log_text(str(log)) == "x" * (2048 - len(end)) + end
    log.write_text(
        "2024-05-01T10:00:00Z stderr P par\n"
        "2024-05-01T10:00:00Z stdout F out\n"
        "2024-05-01T10:00:01Z stderr F tial\n"
    )
    assert read_last_log_text(str(log)) == "parout\ntial\n"  # in file order, as Go serves them
    assert read_last_log_text(str(log), lines=1) == "tial\n"
    assert read_last_log_text(str(tmp_path / "missing.log")) == ""


def test_runtime_message_comes_first(tmp_path: Path) -> None:
    path = create_termination_message_file(str(tmp_path / "c"))
    Path(path).write_text("details")
    with_message = status(tmp_path, path)
    with_message.message = "OOMKilled"
    assert termination_message(with_message, "/dev/termination-log", "File") == "OOMKilled: details"


def read(path: str) -> str:
    return Path(path).read_text()


def pod(containers: list[dict[str, Any]], **spec: Any) -> Pod:
    return default_pod(
        Pod.from_dict(
            {
                "metadata": {"name": "web", "namespace": "ns", "uid": "uid-9"},
                "spec": {"containers": containers, **spec},
            }
        )
    )


def test_make_mounts(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    os.chmod(data, 0o777)
    volumes = {
        "data": MountedVolume("data", "emptyDir", str(data)),
        "info": MountedVolume("info", "downwardAPI", str(tmp_path / "info"), read_only=True),
    }
    p = pod(
        [
            {
                "name": "app",
                "volumeMounts": [
                    {"name": "data", "mountPath": "/data"},
                    {
                        "name": "data",
                        "mountPath": "/logs",
                        "subPathExpr": "logs/$(POD)",
                        "mountPropagation": "HostToContainer",
                    },
                    {"name": "data", "mountPath": "/ro", "readOnly": True, "subPath": "ro"},
                    {"name": "info", "mountPath": "/etc/info"},
                ],
            }
        ]
    )
    assert p.spec is not None and p.spec.containers
    mounts = make_mounts(p, p.spec.containers[0], volumes, [("POD", "web")])
    assert [(m.container_path, m.host_path, m.readonly, m.propagation) for m in mounts] == [
        ("/data", str(data), False, pb.MountPropagation.PROPAGATION_PRIVATE),
        ("/logs", str(data / "logs/web"), False, pb.MountPropagation.PROPAGATION_HOST_TO_CONTAINER),
        ("/ro", str(data / "ro"), True, pb.MountPropagation.PROPAGATION_PRIVATE),
        ("/etc/info", str(tmp_path / "info"), True, pb.MountPropagation.PROPAGATION_PRIVATE),
    ]
    assert (data / "logs/web").is_dir() and os.stat(data / "logs/web").st_mode & 0o777 == 0o777


@pytest.mark.parametrize(
    ("mount", "error"),
    [
        ({"name": "nope", "mountPath": "/x"}, 'cannot find volume "nope" to mount into container "app"'),
        ({"name": "data", "mountPath": "/x", "subPath": "/abs"}, "must not be an absolute path"),
        ({"name": "data", "mountPath": "/x", "subPath": "a/../../b"}, "must not contain '..'"),
        ({"name": "data", "mountPath": "/x", "subPath": "escape/out"}, "failed to prepare subPath"),
    ],
)
def test_bad_mounts(tmp_path: Path, mount: dict[str, Any], error: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "escape").symlink_to("/tmp")
    p = pod([{"name": "app", "volumeMounts": [mount]}])
    assert p.spec is not None and p.spec.containers
    with pytest.raises(MountConfigError, match=error):
        make_mounts(p, p.spec.containers[0], {"data": MountedVolume("data", "emptyDir", str(data))})


async def test_run_options_add_hosts_and_termination_file(tmp_path: Path) -> None:
    volumes = VolumeManager(root_dir=str(tmp_path), run_sync=run_inline)
    generator = RunOptionsGenerator(
        root_dir=str(tmp_path), volumes=volumes, host_ips=("192.0.2.1",), run_sync=run_inline
    )
    p = pod(
        [
            {
                "name": "app",
                "command": ["echo", "$(ME)"],
                "env": [{"name": "ME", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
            }
        ],
        hostAliases=[{"ip": "192.0.2.7", "hostnames": ["db"]}],
    )
    assert p.spec is not None and p.spec.containers
    options = await generator(p, p.spec.containers[0], "10.88.0.7")
    assert options.command == ("echo", "10.88.0.7")
    hosts, term = options.mounts
    assert hosts.container_path == "/etc/hosts"
    assert hosts.host_path == str(tmp_path / "pods/uid-9/etc-hosts")
    hosts_text = read(hosts.host_path)
    assert "10.88.0.7\tweb\n" in hosts_text and "192.0.2.7\tdb\n" in hosts_text
    assert term.container_path == "/dev/termination-log"
    assert term.host_path.startswith(str(tmp_path / "pods/uid-9/containers/app/"))
    no_ip = await generator(p, p.spec.containers[0], "")
    assert [m.container_path for m in no_ip.mounts] == ["/dev/termination-log"]  # no pod IP: no hosts file
    missing = pod(
        [{"name": "app", "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}]
    )
    assert missing.spec is not None and missing.spec.containers
    with pytest.raises(EnvError, match='secret "s" not found'):
        await generator(missing, missing.spec.containers[0], "10.88.0.7")
