"""The critest tier's fixtures: binaries from cri-tools, and ``kubelet-trio sim-cri`` on a private socket."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubelet_trio.testing.envtest import DEFAULT_ASSETS, assets


def find_binary(name: str) -> Path | None:
    """``name`` in the envtest assets directory, else on PATH."""
    for directory in (assets(), Path(DEFAULT_ASSETS)):
        if directory is not None and (Path(directory) / name).is_file():
            return Path(directory) / name
    found = shutil.which(name)
    return Path(found) if found else None


@pytest.fixture
def sim_cri(tmp_path: Path) -> Iterator[str]:
    """``kubelet-trio sim-cri`` on a private socket, with its defaults (the CRI's answers, pods on a
    loopback /16 whose ports answer); yields its endpoint."""
    socket = tmp_path / "sim.sock"
    log = (tmp_path / "sim-cri.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubelet_trio", "sim-cri", "--listen", f"unix://{socket}"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        for _ in range(300):
            if socket.exists() or proc.poll() is not None:
                break
            subprocess.run(["sleep", "0.1"], check=True)
        assert socket.exists(), (tmp_path / "sim-cri.log").read_text()
        yield f"unix://{socket}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
