"""The containerd configuration kubelet-trio writes: containerd's defaults and the keys it needs here."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from kubelet_trio.containerd.config import USER_AGENT, render_config


@pytest.mark.skipif(shutil.which("containerd") is None, reason="containerd is not installed")
def test_registry_headers_name_a_user_agent(tmp_path: Path) -> None:
    """containerd 1.6.20 writes User-Agent into the shared headers map on every pull unless it is set:
    two concurrent first pulls of the sandbox image crashed it ("concurrent map writes")."""
    default = subprocess.run(["containerd", "config", "default"], capture_output=True, text=True, check=True)
    text = render_config(
        default.stdout, sandbox_image="pause:1", cni_conf_dir=tmp_path / "cni", certs_dir=tmp_path / "certs"
    )
    cri = tomllib.loads(text)["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["registry"]["headers"] == {"User-Agent": [USER_AGENT]}
    assert cri["registry"]["config_path"] == str(tmp_path / "certs")
    assert cri["sandbox_image"] == "pause:1"
