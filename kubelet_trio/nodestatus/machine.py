"""What the node is: CPUs, memory, root filesystem, identities and versions (cAdvisor's MachineInfo and
``VersionInfo``, read from ``/proc``, ``/etc`` and ``statvfs``).

Reading is synchronous and small; the node status manager calls it once through its ``run_sync``.
Tests pass a :class:`MachineInfo` directly.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import attrs

__all__ = ["MachineInfo", "go_arch", "read_machine_info"]

_GO_ARCH = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "armv7l": "arm",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
    "riscv64": "riscv64",
    "i686": "386",
    "i386": "386",
}


def go_arch(machine: str | None = None) -> str:
    """``runtime.GOARCH`` spelling of this machine's architecture."""
    machine = (machine or platform.machine()).lower()
    return _GO_ARCH.get(machine, machine)


@attrs.frozen
class MachineInfo:
    num_cores: int
    memory_bytes: int
    ephemeral_storage_bytes: int
    machine_id: str = ""
    system_uuid: str = ""
    boot_id: str = ""
    kernel_version: str = ""
    os_image: str = ""
    operating_system: str = "linux"
    architecture: str = attrs.Factory(go_arch)


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _mem_total() -> int:
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            parts = line.split()
            return int(parts[1]) * 1024 if parts[-1] == "kB" else int(parts[1])
    return 0


def _os_image() -> str:
    for line in _read("/etc/os-release").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.partition("=")[2].strip().strip('"')
    return "Linux"


def _fs_capacity(path: str) -> int:
    """Capacity of the filesystem holding ``path`` (or its nearest existing parent)."""
    current = Path(path).absolute()
    while not current.exists() and current != current.parent:
        current = current.parent
    try:
        st = os.statvfs(current)
    except OSError:
        return 0
    return st.f_blocks * st.f_frsize


def read_machine_info(root_dir: str) -> MachineInfo:
    return MachineInfo(
        num_cores=os.cpu_count() or 1,
        memory_bytes=_mem_total(),
        ephemeral_storage_bytes=_fs_capacity(root_dir),
        machine_id=_read("/etc/machine-id"),
        system_uuid=_read("/sys/class/dmi/id/product_uuid").lower(),
        boot_id=_read("/proc/sys/kernel/random/boot_id"),
        kernel_version=platform.release(),
        os_image=_os_image(),
        operating_system=platform.system().lower() or "linux",
    )
