"""Manifests for the run-once tests: each container's simulated behaviour mirrors its shell command."""

from __future__ import annotations

from pathlib import Path

GOOD_JOB = ("good-job", "OnFailure", "busybox:1.36", "echo done; exit 0", 'print "done"; exit 0 after 2s')
WEB = (
    "web",
    "Always",
    "busybox:1.36",
    "trap 'exit 0' TERM; echo up; while true; do sleep 1; done",
    'print "up"; run',
)
CRASH = ("crash", "OnFailure", "busybox:1.36", "echo boom; exit 1", 'print "boom"; exit 1')
BAD_ONCE = ("bad-once", "Never", "busybox:1.36", "echo bad; sleep 1; exit 3", 'print "bad"; exit 3 after 1s')


def missing_image(image: str = "sim.invalid/kubelet-trio/does-not-exist:1") -> tuple[str, str, str, str, str]:
    return ("no-image", "Always", image, "true", "run")


def write_manifest(directory: Path, spec: tuple[str, str, str, str, str]) -> None:
    name, policy, image, command, script = spec
    directory.mkdir(parents=True, exist_ok=True)
    quoted_command = command.replace("'", "''")
    quoted_script = script.replace("'", "''")
    (directory / f"{name}.yaml").write_text(
        f"""apiVersion: v1
kind: Pod
metadata:
  name: {name}
  annotations:
    sim.kubelet-trio.io/app: '{quoted_script}'
spec:
  restartPolicy: {policy}
  terminationGracePeriodSeconds: 2
  containers:
    - name: app
      image: {image}
      command: ["sh", "-c", '{quoted_command}']
"""
    )


def write_manifests(directory: Path, *specs: tuple[str, str, str, str, str]) -> Path:
    for spec in specs:
        write_manifest(directory, spec)
    return directory
