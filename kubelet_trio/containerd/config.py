"""The configuration of a containerd that kubelet-trio starts: its files under one directory.

``config.toml`` is containerd's own ``config default`` with a few keys set (the facts in
shared/RUNTIME-NOTES.md): ``restrict_oom_score_adj`` (a machine without CAP_SYS_RESOURCE), the CNI
binaries found on this host, the CNI configuration directory of this containerd, the sandbox image and
``config_path`` for per-registry ``hosts.toml`` files (plain HTTP to a loopback registry, an optional
``docker.io`` mirror). The CNI configuration is one bridge network (:mod:`.network`).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

import attrs

from kubelet_trio.containerd.network import PodNetwork

__all__ = [
    "CNI_BIN_DIRS",
    "ContainerdLayout",
    "cni_bin_dir",
    "cni_conflist",
    "render_config",
    "write_config",
    "write_registry_hosts",
]

CNI_BIN_DIRS = ("/usr/lib/cni", "/opt/cni/bin")
#: containerd's own default; a local image avoids a pull from the internet for every sandbox.
DEFAULT_SANDBOX_IMAGE = "registry.k8s.io/pause:3.8"


def cni_bin_dir() -> str:
    for d in CNI_BIN_DIRS:
        if Path(d, "bridge").exists():
            return d
    raise FileNotFoundError(
        f"CNI plugins not found in {' or '.join(CNI_BIN_DIRS)}: apt-get install containernetworking-plugins"
    )


def _set(text: str, key: str, value: str) -> str:
    """Replace the first ``key = ...`` line, keeping its indentation."""
    new, count = re.subn(rf"(?m)^(\s*){re.escape(key)} = .*$", rf"\g<1>{key} = {value}", text, count=1)
    if count != 1:
        raise ValueError(f"containerd default config has no {key!r}")
    return new


def render_config(default_config: str, *, sandbox_image: str, cni_conf_dir: Path, certs_dir: Path) -> str:
    text = _set(default_config, "restrict_oom_score_adj", "true")
    text = _set(text, "sandbox_image", json.dumps(sandbox_image))
    text = _set(text, "bin_dir", json.dumps(cni_bin_dir()))
    text = _set(text, "conf_dir", json.dumps(str(cni_conf_dir)))
    text = _set(text, "config_path", json.dumps(str(certs_dir)))
    return _with_user_agent(text)


#: containerd 1.6.20 sets ``User-Agent`` in its configured registry headers, one map shared by every pull,
#: unless it is there already: two first pulls at once (two sandboxes wanting the pause image) then crash
#: it with "concurrent map writes" (fixed in 1.6.21 by a copy). Configured, the header is only read.
USER_AGENT = "containerd/1.6 (kubelet-trio)"


def _with_user_agent(text: str) -> str:
    section = '[plugins."io.containerd.grpc.v1.cri".registry.headers]'
    new, count = re.subn(
        rf"(?m)^([ \t]*){re.escape(section)}$",
        rf"\g<0>\n\g<1>  User-Agent = [{json.dumps(USER_AGENT)}]",
        text,
    )
    if count != 1:
        raise ValueError("containerd default config has no registry headers section")
    return new


def cni_conflist(network: PodNetwork, *, ip_masq: bool = False) -> dict[str, object]:
    """One bridge network; IPAM leases kept with the network's claim so they leave with it. ``ip_masq``
    gives pods egress through NAT (the bridge plugin's rules carry the network's name)."""
    return {
        "cniVersion": "0.4.0",
        "name": network.name,
        "plugins": [
            {
                "type": "bridge",
                "bridge": network.bridge,
                "isGateway": True,
                "ipMasq": ip_masq,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": network.subnet, "gateway": network.gateway}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(network.cni_data_dir),
                },
            }
        ],
    }


@attrs.frozen
class ContainerdLayout:
    """Where one containerd keeps everything: config, socket, root, state, CNI config, log."""

    workdir: Path

    @property
    def config(self) -> Path:
        return self.workdir / "config.toml"

    @property
    def socket(self) -> Path:
        return self.workdir / "containerd.sock"

    @property
    def endpoint(self) -> str:
        return f"unix://{self.socket}"

    @property
    def root(self) -> Path:
        return self.workdir / "root"

    @property
    def state(self) -> Path:
        return self.workdir / "state"

    @property
    def cni_conf_dir(self) -> Path:
        return self.workdir / "cni"

    @property
    def certs_dir(self) -> Path:
        return self.workdir / "certs.d"

    @property
    def log(self) -> Path:
        return self.workdir / "containerd.log"

    @property
    def images_dir(self) -> Path:
        """Image archives imported at start and when added (``--image-import-dir``'s default for the
        managed runtime; k3s's ``agent/images``)."""
        return self.workdir / "images"

    def command(self) -> list[str]:
        return [
            "containerd",
            "--config", str(self.config),
            "--address", str(self.socket),
            "--root", str(self.root),
            "--state", str(self.state),
        ]  # fmt: skip


def _hosts_toml(registry: str, capabilities: Sequence[str]) -> str:
    caps = ", ".join(json.dumps(c) for c in capabilities)
    return (
        f'server = "http://{registry}"\n\n'
        f'[host."http://{registry}"]\n'
        f"  capabilities = [{caps}]\n"
        "  skip_verify = true\n"
    )


def write_registry_hosts(
    certs_dir: Path, registries: Sequence[str], *, docker_io_mirror: bool = False
) -> None:
    """``hosts.toml`` files for plain-HTTP ``registries`` (``host:port``); with ``docker_io_mirror`` the
    first also answers for ``docker.io``. Blocking."""
    for registry in registries:
        host_dir = certs_dir / registry
        host_dir.mkdir(parents=True, exist_ok=True)
        (host_dir / "hosts.toml").write_text(_hosts_toml(registry, ("pull", "resolve", "push")))
    if docker_io_mirror and registries:
        mirror_dir = certs_dir / "docker.io"
        mirror_dir.mkdir(parents=True, exist_ok=True)
        (mirror_dir / "hosts.toml").write_text(_hosts_toml(registries[0], ("pull", "resolve")))


def write_config(
    layout: ContainerdLayout,
    network: PodNetwork,
    *,
    sandbox_image: str = DEFAULT_SANDBOX_IMAGE,
    registries: Sequence[str] = (),
    docker_io_mirror: bool = False,
    ip_masq: bool = False,
) -> Path:
    """Write ``config.toml``, the CNI conflist and the registries' ``hosts.toml``. Blocking (runs
    ``containerd config default``)."""
    layout.cni_conf_dir.mkdir(parents=True, exist_ok=True)
    for old in layout.cni_conf_dir.glob("*.conflist"):
        old.unlink()
    conflist = cni_conflist(network, ip_masq=ip_masq)
    (layout.cni_conf_dir / "10-kubelet-trio.conflist").write_text(json.dumps(conflist, indent=2))
    write_registry_hosts(layout.certs_dir, registries, docker_io_mirror=docker_io_mirror)
    layout.certs_dir.mkdir(parents=True, exist_ok=True)
    default = subprocess.run(
        ["containerd", "config", "default"], check=True, capture_output=True, text=True
    ).stdout
    layout.config.write_text(
        render_config(
            default,
            sandbox_image=sandbox_image,
            cni_conf_dir=layout.cni_conf_dir,
            certs_dir=layout.certs_dir,
        )
    )
    return layout.config
