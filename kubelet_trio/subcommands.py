"""The ``kubelet-trio`` subcommands: name -> (module, one-line help).

A leaf module, so that both the entry point (:mod:`kubelet_trio.cli`, which runs them) and the daemon's
``--help`` (:mod:`kubelet_trio.options`) list the same commands. Each module lives under
:mod:`kubelet_trio.cmd` and exposes ``main(argv: list[str]) -> int``.
"""

from __future__ import annotations

__all__ = ["SUBCOMMANDS"]

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "sim-cri": ("kubelet_trio.cmd.sim_cri", "serve a simulated runtime as a CRI gRPC server"),
    "fake-apiserver": ("kubelet_trio.cmd.fake_apiserver", "serve the test harness's fake API server"),
    "sim-nodes": (
        "kubelet_trio.cmd.sim_nodes",
        "run N simulated nodes (one worker process per core) against a cluster",
    ),
    "check-manifests": ("kubelet_trio.cmd.check_manifests", "validate pod manifest files or directories"),
    "shutdown-node": ("kubelet_trio.cmd.shutdown_node", "graceful node shutdown: stop the pods, by priority"),
    "demo": (
        "kubelet_trio.cmd.demo",
        "the main job: --runonce over examples/ on the simulator and containerd",
    ),
}
