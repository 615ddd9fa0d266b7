"""What ``crictl`` shows for a pod and container on sim-cri: names, states, image references, logs, exec
and inspect output have the fields and values a containerd node would show for the same pod."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.critest.conftest import find_binary

pytestmark = pytest.mark.critest
IMAGE = "registry.k8s.io/e2e-test-images/busybox:1.29-2"


def test_crictl_views_of_a_pod(sim_cri: str, tmp_path: Path) -> None:
    crictl = find_binary("crictl")
    if crictl is None:
        pytest.skip(
            "crictl missing: bash ../shared/tools/build-node-parts.sh <git dir of kubernetes-sigs/cri-tools>"
        )

    def run(*args: str) -> str:
        return subprocess.run(
            [str(crictl), "--runtime-endpoint", sim_cri, "--image-endpoint", sim_cri, *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout

    log_dir = tmp_path / "logs"
    pod = tmp_path / "pod.json"
    pod.write_text(
        json.dumps(
            {
                "metadata": {"name": "web", "namespace": "default", "uid": "u-1", "attempt": 0},
                "hostname": "web-host",
                "log_directory": str(log_dir),
                "linux": {},
            }
        )
    )
    container = tmp_path / "container.json"
    container.write_text(
        json.dumps(
            {
                "metadata": {"name": "app"},
                "image": {"image": IMAGE},
                "command": ["sh", "-c", "echo hello from app; sleep 3600"],
                "log_path": "app/0.log",
                "linux": {},
            }
        )
    )
    run("pull", IMAGE)
    images = run("images")
    assert "registry.k8s.io/e2e-test-images/busybox" in images and "1.29-2" in images
    pod_id = run("runp", str(pod)).strip()
    container_id = run("create", pod_id, str(container), str(pod)).strip()
    run("start", container_id)

    ps = run("ps", "-a")
    assert container_id[:13] in ps and "Running" in ps and "app" in ps and IMAGE in ps
    assert run("logs", container_id) == "hello from app\n"
    assert run("exec", container_id, "hostname") == "web-host\n"
    assert run("exec", container_id, "sh", "-c", "echo -n a; echo b") == "ab\n"

    status = json.loads(run("inspect", container_id))["status"]
    assert status["metadata"]["name"] == "app" and status["state"] == "CONTAINER_RUNNING"
    assert status["image"]["image"] == IMAGE and status["imageRef"].startswith("registry.k8s.io/")
    assert status["logPath"] == str(log_dir / "app" / "0.log")
    sandbox = json.loads(run("inspectp", pod_id))["status"]
    assert sandbox["metadata"]["name"] == "web" and sandbox["state"] == "SANDBOX_READY"
    assert sandbox["network"]["ip"]

    run("stop", container_id)
    assert "Exited" in run("ps", "-a")
    run("stopp", pod_id)
    run("rmp", pod_id)
    assert container_id[:13] not in run("ps", "-a")
