"""Cgroups by name, under either driver and either cgroup version (Go:
``pkg/kubelet/cm/cgroup_manager_linux.go``, ``types.go`` ``CgroupName``).

A cgroup is named driver-neutrally as a tuple of components (``("kubepods", "burstable", "pod<uid>")``);
the driver turns it into the path the runtime and the kernel see: ``/kubepods/burstable/pod<uid>`` under
``cgroupfs``, ``/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice`` under
``systemd`` (a ``-`` inside a component becomes ``_``, since ``-`` nests slices).

The manager writes the cgroup files itself, on cgroup v1 (one hierarchy per controller under the root)
and v2 (one unified hierarchy). Under the ``systemd`` driver it creates the slices' directories as
systemd would lay them out, without asking systemd over D-Bus to own them: enough for a runtime
configured with ``SystemdCgroup`` to place containers, not a systemd unit. Every method blocks: callers
run them through their ``run_sync``.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import time
from collections.abc import Mapping
from typing import Final, Literal

import attrs

from kubelet_trio.cm.helpers import ResourceConfig
from kubelet_trio.logs import go_quote, kv

__all__ = [
    "CGROUPFS",
    "CGROUP_ROOT",
    "ROOT_CGROUP_NAME",
    "SYSTEMD",
    "CgroupDriver",
    "CgroupError",
    "CgroupManager",
    "CgroupName",
    "cgroup_version",
    "machine_hugepage_sizes",
    "new_cgroup_name",
    "parse_cgroupfs_to_cgroup_name",
    "parse_systemd_to_cgroup_name",
    "to_cgroupfs",
    "to_systemd",
]

logger = logging.getLogger(__name__)

CGROUP_ROOT = "/sys/fs/cgroup"
CGROUPFS: Final = "cgroupfs"
SYSTEMD: Final = "systemd"
CgroupDriver = Literal["cgroupfs", "systemd"]
CgroupName = tuple[str, ...]
ROOT_CGROUP_NAME: CgroupName = ()

SYSTEMD_SUFFIX = ".slice"
#: v1 hierarchies that must all hold a cgroup for it to exist (Go's allow-list in ``Exists``).
REQUIRED_V1 = ("cpu", "cpuacct", "cpuset", "memory", "systemd", "pids", "hugetlb")
#: the hybrid layout's v2 mount inside a v1 root: not a controller hierarchy
UNIFIED_IN_HYBRID = "unified"
#: v2 controllers the kubelet enables down to its cgroups
V2_CONTROLLERS = ("cpu", "cpuset", "memory", "hugetlb", "pids")
HUGEPAGES_DIR = "/sys/kernel/mm/hugepages"
HUGEPAGE_UNBOUNDED = 1 << 62  # Go's "unbounded" huge page limit
#: rmdir of a cgroup whose last processes are still exiting fails with EBUSY for a moment
REMOVE_ATTEMPTS = 5
REMOVE_FIRST_DELAY = 0.01  # seconds, doubled per attempt


class CgroupError(Exception):
    """A cgroup could not be created, updated or removed."""


def new_cgroup_name(base: CgroupName, *components: str) -> CgroupName:
    """``base`` extended by ``components``, none of which may hold ``/`` or ``_`` (they would not
    survive the round trip through either driver's path)."""
    for component in components:
        if "/" in component or "_" in component:
            raise ValueError(f"invalid character in cgroup name component {component!r}")
    return (*base, *components)


def to_cgroupfs(name: CgroupName) -> str:
    return "/" + "/".join(name)


def parse_cgroupfs_to_cgroup_name(path: str) -> CgroupName:
    return tuple(part for part in path.split("/") if part)


def _escape_systemd(part: str) -> str:
    return part.replace("-", "_")


def _unescape_systemd(part: str) -> str:
    return part.replace("_", "-")


def to_systemd(name: CgroupName) -> str:
    """The expanded slice path: every prefix of the joined name is a parent slice."""
    if not name or name == ("",):
        return "/"
    parts = [_escape_systemd(part) for part in name]
    path = ""
    for i in range(len(parts)):
        path += "/" + "-".join(parts[: i + 1]) + SYSTEMD_SUFFIX
    return path


def parse_systemd_to_cgroup_name(path: str) -> CgroupName:
    base = os.path.basename(path.rstrip("/")).removesuffix(SYSTEMD_SUFFIX)
    if not base:
        return ROOT_CGROUP_NAME
    return tuple(_unescape_systemd(part) for part in base.split("-"))


def _go_name(cgroup: CgroupName) -> str:
    """A cgroup name as Go's ``%q`` prints its ``CgroupName`` (``["kube-reserved"]``)."""
    return "[" + " ".join(go_quote(component) for component in cgroup) + "]"


def cgroup_version(root: str = CGROUP_ROOT) -> int:
    """2 when ``root`` is the unified hierarchy (it lists its controllers), else 1."""
    return 2 if os.path.exists(os.path.join(root, "cgroup.controllers")) else 1


def _write(path: str, value: str) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(value)


def _read(path: str) -> str:
    with open(path, encoding="ascii") as f:
        return f.read().strip()


def _page_size_name(size: int) -> str:
    """libcontainer's hugetlb file infix: ``2MB``, ``1GB``, ``64KB``."""
    for unit in ("KB", "MB", "GB", "TB"):
        size //= 1024
        if size < 1024 or unit == "TB":
            return f"{size}{unit}"
    raise AssertionError("unreachable")


def _cpu_weight(shares: int) -> int:
    """cgroup v2 ``cpu.weight`` for v1 shares (runc's conversion: [2, 262144] onto [1, 10000])."""
    if shares == 0:
        return 0
    return 1 + ((shares - 2) * 9999) // 262142


def machine_hugepage_sizes(directory: str = HUGEPAGES_DIR) -> tuple[int, ...]:
    """The machine's huge page sizes in bytes (``hugepages-2048kB`` → 2097152)."""
    try:
        entries = os.listdir(directory)
    except OSError:
        return ()
    sizes = []
    for entry in entries:
        if entry.startswith("hugepages-") and entry.endswith("kB"):
            with contextlib.suppress(ValueError):
                sizes.append(int(entry.removeprefix("hugepages-").removesuffix("kB")) * 1024)
    return tuple(sorted(sizes))


def _remove_tree(path: str) -> None:
    """rmdir ``path`` and every cgroup below it, deepest first. On a real cgroup filesystem the control
    files vanish with the directory; a stand-in directory of plain files has them removed first."""
    if not os.path.isdir(path):
        return
    for current, dirs, files in os.walk(path, topdown=False):
        for name in dirs:
            _rmdir(os.path.join(current, name), files=[])
        _rmdir(current, files=files)


def _rmdir(path: str, *, files: list[str]) -> None:
    delay = REMOVE_FIRST_DELAY
    for attempt in range(REMOVE_ATTEMPTS):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError as err:
            if err.errno == errno.ENOTEMPTY and files:
                for name in files:
                    os.unlink(os.path.join(path, name))
                files = []
                continue
            if err.errno != errno.EBUSY or attempt == REMOVE_ATTEMPTS - 1:
                raise
        time.sleep(delay)
        delay *= 2


@attrs.define(eq=False)
class CgroupManager:
    """Create, update, inspect and remove cgroups named by :data:`CgroupName` under ``root``."""

    driver: CgroupDriver = CGROUPFS
    root: str = CGROUP_ROOT
    version: int = attrs.field(default=0)
    #: the machine's huge page sizes (bytes); None: read from the kernel when first needed
    hugepage_sizes: tuple[int, ...] | None = None

    def __attrs_post_init__(self) -> None:
        if self.driver not in (CGROUPFS, SYSTEMD):
            raise ValueError(f"unknown cgroup driver {self.driver!r} (want cgroupfs or systemd)")
        if not self.version:
            self.version = cgroup_version(self.root)

    # --- names ------------------------------------------------------------------------------------

    def name(self, cgroup: CgroupName) -> str:
        """The literal path of ``cgroup`` under the driver (what a runtime takes as a cgroup parent)."""
        return to_systemd(cgroup) if self.driver == SYSTEMD else to_cgroupfs(cgroup)

    def cgroup_name(self, path: str) -> CgroupName:
        """The inverse of :meth:`name`."""
        if self.driver == SYSTEMD:
            return parse_systemd_to_cgroup_name(path)
        return parse_cgroupfs_to_cgroup_name(path)

    def hierarchies(self) -> list[str]:
        """v1: the mounted hierarchies (``cpu``, ``memory``, ``systemd``...); v2: the one, ``""``."""
        if self.version == 2:
            return [""]
        try:
            entries = sorted(os.listdir(self.root))
        except FileNotFoundError:
            return []
        return [e for e in entries if e != UNIFIED_IN_HYBRID and os.path.isdir(os.path.join(self.root, e))]

    def paths(self, cgroup: CgroupName) -> dict[str, str]:
        """Hierarchy → directory of ``cgroup``."""
        relative = self.name(cgroup).lstrip("/")
        return {h: os.path.join(self.root, h, relative).rstrip("/") for h in self.hierarchies()}

    def _paths_with_unified(self, cgroup: CgroupName) -> list[str]:
        """:meth:`paths`, plus on the hybrid layout the cgroup's directory in the v2 mount, where runc
        makes each container's cgroup too (Go's libcontainer removes it with the others)."""
        paths = list(self.paths(cgroup).values())
        unified = os.path.join(self.root, UNIFIED_IN_HYBRID)
        if self.version == 1 and os.path.isdir(unified):
            paths.append(os.path.join(unified, self.name(cgroup).lstrip("/")).rstrip("/"))
        return paths

    # --- queries ----------------------------------------------------------------------------------

    def exists(self, cgroup: CgroupName) -> bool:
        paths = self.paths(cgroup)
        if self.version == 2:
            return os.path.isdir(paths[""])
        required = [p for h, p in paths.items() if h in REQUIRED_V1]
        return bool(required) and all(os.path.isdir(p) for p in required)

    def validate(self, cgroup: CgroupName) -> None:
        """Raise :class:`CgroupError` unless ``cgroup`` exists everywhere the kubelet would write its
        limits (Go: ``Validate``, with its texts): v1, in each hierarchy of :data:`REQUIRED_V1` mounted;
        v2, with each of :data:`V2_CONTROLLERS` the machine has enabled in it."""
        paths = self.paths(cgroup)
        if self.version == 2:
            try:
                enabled = set(_read(os.path.join(paths[""], "cgroup.controllers")).split())
            except OSError as err:
                raise CgroupError(f"could not read controllers for cgroup {_go_name(cgroup)}: {err}") from err
            try:
                available = set(_read(os.path.join(self.root, "cgroup.controllers")).split())
            except OSError:
                available = set(V2_CONTROLLERS)
            missing = sorted((available & set(V2_CONTROLLERS)) - enabled)
            if missing:
                raise CgroupError(
                    f"cgroup {_go_name(cgroup)} has some missing controllers: {', '.join(missing)}"
                )
            return
        absent = [
            path for hierarchy, path in paths.items() if hierarchy in REQUIRED_V1 and not os.path.isdir(path)
        ]
        if absent:
            raise CgroupError(f"cgroup {_go_name(cgroup)} has some missing paths: {', '.join(absent)}")

    def pids(self, cgroup: CgroupName) -> list[int]:
        """Every process in ``cgroup`` or below it, in any hierarchy."""
        found: set[int] = set()
        for path in self.paths(cgroup).values():
            for current, _dirs, _files in os.walk(path):
                try:
                    text = _read(os.path.join(current, "cgroup.procs"))
                except (FileNotFoundError, NotADirectoryError):
                    continue
                found.update(int(line) for line in text.split() if line)
        return sorted(found)

    def children(self, cgroup: CgroupName) -> set[CgroupName]:
        """The cgroups directly below ``cgroup`` in any hierarchy (the hybrid layout's v2 mount too)."""
        found: set[CgroupName] = set()
        base = self.name(cgroup).rstrip("/")
        for path in self._paths_with_unified(cgroup):
            try:
                with os.scandir(path) as entries:  # the directory's own types: no stat per control file
                    names = [entry.name for entry in entries if entry.is_dir(follow_symlinks=False)]
            except (FileNotFoundError, NotADirectoryError):
                continue
            found.update(self.cgroup_name(f"{base}/{name}") for name in names)
        return found

    # --- changes ----------------------------------------------------------------------------------

    def create(self, cgroup: CgroupName, config: ResourceConfig | None = None) -> None:
        """Make ``cgroup`` (and its missing parents) in every hierarchy, then apply ``config``."""
        try:
            for hierarchy, path in self.paths(cgroup).items():
                self._make(os.path.join(self.root, hierarchy), path, cpuset=hierarchy == "cpuset")
        except OSError as err:
            raise CgroupError(f"failed to create cgroup {self.name(cgroup)}: {err}") from err
        if config is not None:
            self.update(cgroup, config)

    def _make(self, base: str, path: str, *, cpuset: bool) -> None:
        relative = os.path.relpath(path, base)
        current = base
        for part in relative.split(os.sep) if relative != "." else ():
            parent, current = current, os.path.join(current, part)
            if os.path.isdir(current):
                continue
            if self.version == 2:
                self._enable_controllers(parent)
            os.mkdir(current)
            if cpuset:
                self._inherit_cpuset(parent, current)

    @staticmethod
    def _enable_controllers(parent: str) -> None:
        """Delegate the kubelet's v2 controllers from ``parent`` to its children."""
        try:
            available = set(_read(os.path.join(parent, "cgroup.controllers")).split())
        except FileNotFoundError:
            return
        wanted = [c for c in V2_CONTROLLERS if c in available]
        if wanted:
            _write(os.path.join(parent, "cgroup.subtree_control"), " ".join("+" + c for c in wanted))

    @staticmethod
    def _inherit_cpuset(parent: str, child: str) -> None:
        """A new v1 cpuset cgroup starts with no CPUs or memory nodes and cannot hold a process: copy
        the parent's."""
        for name in ("cpuset.cpus", "cpuset.mems"):
            try:
                value = _read(os.path.join(parent, name))
            except FileNotFoundError:
                continue
            try:
                current = _read(os.path.join(child, name))
            except FileNotFoundError:  # a stand-in directory: the kernel would have made it empty
                current = ""
            if not current:
                _write(os.path.join(child, name), value)

    def update(self, cgroup: CgroupName, config: ResourceConfig) -> None:
        """Write ``config`` to ``cgroup``'s files (only the values it sets)."""
        try:
            for filename, value in self._files(config).items():
                path = self._file_path(cgroup, filename)
                if path is not None:
                    _write(path, value)
        except OSError as err:
            raise CgroupError(f"failed to update cgroup {self.name(cgroup)}: {err}") from err

    def _file_path(self, cgroup: CgroupName, filename: str) -> str | None:
        """The file's path, or None when its controller is not mounted (v1) or not delegated."""
        paths = self.paths(cgroup)
        controller = filename.split(".", 1)[0]
        if self.version == 2:
            try:
                enabled = _read(os.path.join(paths[""], "cgroup.controllers")).split()
            except FileNotFoundError:
                enabled = [controller]
            return os.path.join(paths[""], filename) if controller in enabled else None
        directory = paths.get(controller)
        return os.path.join(directory, filename) if directory is not None else None

    def _files(self, config: ResourceConfig) -> Mapping[str, str]:
        files: dict[str, str] = {}
        if self.version == 2:
            if config.cpu_shares is not None:
                files["cpu.weight"] = str(_cpu_weight(config.cpu_shares))
            if config.cpu_quota is not None or config.cpu_period is not None:
                quota = "max" if config.cpu_quota in (None, -1) else str(config.cpu_quota)
                files["cpu.max"] = f"{quota} {config.cpu_period or 100_000}"
            if config.memory is not None:
                files["memory.max"] = str(config.memory) if config.memory > 0 else "max"
            if config.pids_limit is not None:
                files["pids.max"] = str(config.pids_limit) if config.pids_limit > 0 else "max"
            for size, limit in self._hugepages(config).items():
                files[f"hugetlb.{_page_size_name(size)}.max"] = str(limit)
            return files
        if config.cpu_shares is not None:
            files["cpu.shares"] = str(config.cpu_shares)
        if config.cpu_period is not None:
            files["cpu.cfs_period_us"] = str(config.cpu_period)
        if config.cpu_quota is not None:
            files["cpu.cfs_quota_us"] = str(config.cpu_quota)
        if config.memory is not None:
            files["memory.limit_in_bytes"] = str(config.memory) if config.memory > 0 else "-1"
        if config.pids_limit is not None:
            files["pids.max"] = str(config.pids_limit) if config.pids_limit > 0 else "max"
        for size, limit in self._hugepages(config).items():
            files[f"hugetlb.{_page_size_name(size)}.limit_in_bytes"] = str(limit)
        return files

    def _hugepages(self, config: ResourceConfig) -> dict[int, int]:
        if config.hugepage_limits is None and not config.hugepages_unbounded:
            return {}
        if self.hugepage_sizes is None:
            self.hugepage_sizes = machine_hugepage_sizes()
        if config.hugepages_unbounded:
            return dict.fromkeys(self.hugepage_sizes, HUGEPAGE_UNBOUNDED)
        return dict.fromkeys(self.hugepage_sizes, 0) | dict(config.hugepage_limits or {})

    def destroy(self, cgroup: CgroupName) -> None:
        """Remove ``cgroup`` and everything below it from every hierarchy, the hybrid layout's v2 mount
        included (it must hold no process)."""
        try:
            for path in self._paths_with_unified(cgroup):
                _remove_tree(path)
        except OSError as err:
            raise CgroupError(f"failed to remove cgroup {self.name(cgroup)}: {err}") from err
        logger.debug("removed cgroup", extra=kv(cgroup=self.name(cgroup)))
