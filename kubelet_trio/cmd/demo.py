"""``kubelet-trio demo``: start one pod through the ``Runtime`` interface and show what happened.

It runs on the simulated runtime everywhere and, when this machine can run a private containerd
(root, containerd, runc, CNI plugins, docker-registry, busybox), on containerd too — the same calls.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import tempfile
from pathlib import Path

import trio

from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.runtime import Runtime

SIM_SCRIPT = 'print "hello from kubelet-trio" "pod running on the simulated runtime"; exit 0 after 1s'
SHELL = 'echo "hello from kubelet-trio"; echo "pod running on $(uname -s) in $(hostname)"; sleep 1'


async def run_demo_pod(runtime: Runtime, image: str, log_dir: Path, out: list[str]) -> int:
    """Pull, run a sandbox, create + start a container, wait for it to exit, print, clean up."""
    version = await runtime.version()
    out.append(
        f"runtime      {version.runtime_name} {version.runtime_version} (CRI {version.runtime_api_version})"
    )
    started = trio.current_time()
    image_ref = await runtime.pull_image(pb.ImageSpec(image=image))
    out.append(f"image        {image} -> {image_ref}")
    uid = secrets.token_hex(8)
    sandbox_config = pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name="demo", namespace="default", uid=uid),
        hostname="demo",
        log_directory=str(log_dir / f"default_demo_{uid}"),
        annotations={"sim.kubelet-trio.io/hello": SIM_SCRIPT},
        labels={"io.kubernetes.pod.name": "demo"},
    )
    sandbox_id = await runtime.run_pod_sandbox(sandbox_config)
    try:
        sandbox = (await runtime.pod_sandbox_status(sandbox_id)).status
        ip = sandbox.network.ip if sandbox and sandbox.network else "-"
        out.append(f"sandbox      {sandbox_id[:13]} ready, pod IP {ip}")
        container_config = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name="hello"),
            image=pb.ImageSpec(image=image),
            command=["sh", "-c", SHELL],
            log_path="hello/0.log",
        )
        cid = await runtime.create_container(sandbox_id, container_config, sandbox_config)
        await runtime.start_container(cid)
        out.append(f"container    {cid[:13]} started")
        with trio.fail_after(30):
            while True:
                status = (await runtime.container_status(cid)).status
                assert status is not None
                if status.state is pb.ContainerState.CONTAINER_EXITED:
                    break
                await trio.sleep(0.1)
        ran = (status.finished_at - status.started_at) / 1e9
        total = trio.current_time() - started
        out.append(
            f"exited       code {status.exit_code} ({status.reason}) after {ran:.2f}s; pod total {total:.2f}s"
        )
        for line in (await trio.Path(status.log_path).read_text()).splitlines():
            out.append(f"log          {line}")
        return status.exit_code
    finally:
        with trio.move_on_after(30, shield=True):
            await runtime.stop_pod_sandbox(sandbox_id)
            await runtime.remove_pod_sandbox(sandbox_id)


async def demo_sim(log_dir: Path) -> int:
    from kubelet_trio.sim.runtime import SimRuntime

    out: list[str] = []
    code = await run_demo_pod(SimRuntime(), "registry.sim/library/busybox:1.36", log_dir, out)
    print("\n".join(["== simulated runtime ==", *out]), flush=True)
    return code


async def demo_containerd(endpoint: str, image: str, log_dir: Path) -> int:
    from kubelet_trio.cri.remote import open_cri_runtime

    out: list[str] = []
    async with open_cri_runtime(endpoint) as runtime:
        code = await run_demo_pod(runtime, image, log_dir, out)
    print("\n".join([f"== containerd via CRI at {endpoint} ==", *out]), flush=True)
    return code


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="kubelet-trio demo", description=__doc__)
    parser.add_argument(
        "--containerd",
        choices=["auto", "yes", "no"],
        default="auto",
        help="also run on a private containerd (auto: when this machine can)",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kubelet-trio-demo-") as tmp:
        codes = [trio.run(demo_sim, Path(tmp) / "sim")]
        if args.containerd != "no":
            from kubelet_trio.testing.env import LocalCriEnvironment, missing_prerequisites

            missing = missing_prerequisites()
            if missing:
                print(f"\n(containerd skipped: {'; '.join(missing)})", file=sys.stderr)
                if args.containerd == "yes":
                    return 1
            else:
                print()
                with LocalCriEnvironment(Path(tmp) / "cri") as env:
                    codes.append(
                        trio.run(demo_containerd, env.endpoint, env.images.busybox, Path(tmp) / "logs")
                    )
    return 0 if all(c == 0 for c in codes) else 1
