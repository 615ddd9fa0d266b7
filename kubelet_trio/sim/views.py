"""What a simulated container would observe from inside (:class:`kubelet_trio.sim.shell.View`), derived
from its CRI configuration the way containerd turns that configuration into an OCI spec: user and groups,
hostname and ``resolv.conf``, mounts (symlinked host paths resolved), image volumes (a read-only copy of
the few files the simulator knows an image to have, or of its ``image_sub_path`` directory), capabilities,
masked and read-only paths, sysctls, and which processes, sockets and IPC objects its namespaces let it
see.

Blocking (it reads host files such as ``/etc/resolv.conf``): call through the runtime's ``run_sync``.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Sequence

from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.sim.images import ImageConfig, image_config
from kubelet_trio.sim.shell import CAPABILITIES, DEFAULT_CAPABILITIES, Process, View

__all__ = ["UserError", "build_view", "main_argv", "resolve_user"]

_NETSTAT_HEAD = (
    "Active Internet connections (only servers)\nProto Recv-Q Send-Q Local Address Foreign Address State\n"
)
NGINX_ARGV = ("nginx: master process nginx -g daemon off;",)


MOUNT_IMAGE_SUB_PATH = 10  # Mount.image_sub_path's field number, for bindings that predate it


def _unknown_string(message: object, number: int) -> str:
    """A string field that the generated bindings do not know, read from the message's unknown bytes."""
    data: bytes = getattr(message, "_unknown_fields", b"")
    i, found = 0, ""
    while i < len(data):
        key, i = _varint(data, i)
        wire = key & 7
        if wire == 0:
            _, i = _varint(data, i)
        elif wire == 2:
            size, i = _varint(data, i)
            if key >> 3 == number:
                found = data[i : i + size].decode(errors="replace")
            i += size
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        else:
            return found  # groups: not in the CRI
    return found


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while i < len(data):
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    return value, i


def image_sub_path(mount: pb.Mount) -> str:
    sub: str | None = getattr(mount, "image_sub_path", None)
    return sub if sub is not None else _unknown_string(mount, MOUNT_IMAGE_SUB_PATH)


def image_files(image: ImageConfig) -> dict[str, str]:
    """The files of an image's root the simulator knows (a busybox-like one): what an image volume shows."""
    passwd = "".join(f"{name}:x:{uid}:{uid}:{name}:/:/bin/sh\n" for name, uid in image.users.items())
    group = "".join(f"{name}:x:{uid}:\n" for name, uid in image.users.items())
    return {"/bin/sh": "", "/bin/ls": "", "/etc/passwd": passwd, "/etc/group": group}


def _is_image_volume(mount: pb.Mount) -> bool:
    return mount.image is not None and bool(mount.image.image)


def _image_volume(mount: pb.Mount) -> dict[str, str]:
    """The files an image volume puts at its container path: the image's, under ``image_sub_path``."""
    assert mount.image is not None
    sub = "/" + image_sub_path(mount).strip("/")
    prefix = sub.rstrip("/") + "/"
    target = os.path.normpath(mount.container_path).rstrip("/")
    return {
        target + "/" + path[len(prefix) :]: content
        for path, content in image_files(image_config(mount.image.image)).items()
        if path.startswith(prefix)
    }


class UserError(ValueError):
    """The security context's user settings cannot be honoured (CreateContainer fails)."""


def main_argv(config: pb.ContainerConfig, image: ImageConfig) -> tuple[str, ...]:
    """The container's process, as the OCI spec would say: command + args, defaulting to the image's
    entrypoint and cmd (Docker's rules)."""
    if config.command:
        return (*config.command, *config.args)
    return (*image.entrypoint, *(config.args or image.cmd))


def resolve_user(config: pb.ContainerConfig, image: ImageConfig) -> tuple[int, int]:
    """uid and gid: RunAsUser / RunAsUsername / RunAsGroup, else the image's ``User``."""
    security = config.linux.security_context if config.linux is not None else None
    run_as_user = security.run_as_user if security is not None else None
    username = security.run_as_username if security is not None else ""
    run_as_group = security.run_as_group if security is not None else None
    if run_as_group is not None and run_as_user is None and not username:
        raise UserError(f'user group "{run_as_group.value}" is specified without user')
    image_user, _, image_group = image.user.partition(":")
    if run_as_user is not None:
        uid = run_as_user.value
    elif username:
        if username not in image.users:
            raise UserError(f"no users found in /etc/passwd matching {username!r}")
        uid = image.users[username]
    elif image_user:
        uid = int(image_user) if image_user.isdigit() else image.users.get(image_user, 0)
    else:
        uid = 0
    if run_as_group is not None:
        gid = run_as_group.value
    elif image_group and run_as_user is None and not username:
        gid = int(image_group) if image_group.isdigit() else image.users.get(image_group, 0)
    else:
        gid = uid if uid in image.users.values() and uid != 0 else 0
    return uid, gid


def _capabilities(security: pb.LinuxContainerSecurityContext | None) -> frozenset[str]:
    if security is None:
        return DEFAULT_CAPABILITIES
    if security.privileged:
        return frozenset(CAPABILITIES)
    caps = set(DEFAULT_CAPABILITIES)
    if security.capabilities is not None:
        add = {c.upper().removeprefix("CAP_") for c in security.capabilities.add_capabilities}
        drop = {c.upper().removeprefix("CAP_") for c in security.capabilities.drop_capabilities}
        caps |= set(CAPABILITIES) if "ALL" in add else add
        caps -= set(CAPABILITIES) if "ALL" in drop else drop
    return frozenset(caps)


def _resolv_conf(dns: pb.DnsConfig | None) -> str:
    if dns is None or not (dns.servers or dns.searches or dns.options):
        try:
            with open("/etc/resolv.conf", encoding="utf-8") as f:
                return f.read()
        except OSError:
            return ""
    lines = []
    if dns.searches:
        lines.append("search " + " ".join(dns.searches))
    lines += [f"nameserver {server}" for server in dns.servers]
    if dns.options:
        lines.append("options " + " ".join(dns.options))
    return "".join(line + "\n" for line in lines)


def _host_listening() -> str:
    """``netstat -ln`` on the host: its listening TCP sockets (what a host-network container sees)."""
    out = [
        "Active Internet connections (only servers)",
        "Proto Recv-Q Send-Q Local Address Foreign Address State",
    ]
    for name, proto in (("/proc/net/tcp", "tcp"), ("/proc/net/tcp6", "tcp6")):
        try:
            with open(name, encoding="ascii") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 3 and fields[3] == "0A":  # LISTEN
                port = int(fields[1].rpartition(":")[2], 16)
                address = "0.0.0.0" if proto == "tcp" else ":::"
                out.append(f"{proto} 0 0 {address}:{port} *:* LISTEN")
    return "\n".join(out) + "\n"


def _host_ipc() -> str:
    """``ipcs -m`` on the host: its System V shared memory segments."""
    out = ["", "------ Shared Memory Segments --------", "key        shmid      owner      perms      bytes"]
    try:
        with open("/proc/sysvipc/shm", encoding="ascii") as f:
            rows = f.read().splitlines()[1:]
    except OSError:
        rows = []
    for row in rows:
        fields = row.split()
        if len(fields) > 3:
            out.append(f"0x{int(fields[0]):08x} {fields[1]} root {fields[2]} {fields[3]}")
    return "\n".join(out) + "\n"


def _sandbox_listening(ports: Sequence[int]) -> str:
    return _NETSTAT_HEAD + "".join(f"tcp 0 0 :::{port} :::* LISTEN\n" for port in sorted(ports))


def build_view(
    sandbox: pb.PodSandboxConfig,
    config: pb.ContainerConfig,
    image: ImageConfig,
    *,
    processes: Callable[[], tuple[Process, ...]],
    listening_ports: Callable[[], Sequence[int]],
) -> View:
    """The container's view (see the module docstring). ``processes`` are those its PID namespace shows,
    ``listening_ports`` what its pod's containers listen on."""
    security = config.linux.security_context if config.linux is not None else None
    sandbox_linux = sandbox.linux
    sandbox_security = sandbox_linux.security_context if sandbox_linux is not None else None
    options = sandbox_security.namespace_options if sandbox_security is not None else None
    host_network = options is not None and options.network is pb.NamespaceMode.NODE
    host_ipc = options is not None and options.ipc is pb.NamespaceMode.NODE
    resources = config.linux.resources if config.linux is not None else None
    uid, gid = resolve_user(config, image)
    groups: list[int] = list(image.member_of.get(uid, ()))
    for source in (sandbox_security, security):
        if source is not None:
            groups += [g for g in source.supplemental_groups if g not in groups]
    image_volumes = [m for m in config.mounts if m.container_path and _is_image_volume(m)]
    mounts = {
        m.container_path: (os.path.realpath(m.host_path), m.readonly)
        for m in config.mounts
        if m.container_path and not _is_image_volume(m)
    }
    hostname = sandbox.hostname or socket.gethostname()
    files = {"/etc/hostname": hostname + "\n"}
    for volume in image_volumes:
        files.update(_image_volume(volume))
    for key, value in (sandbox_linux.sysctls if sandbox_linux is not None else {}).items():
        files["/proc/sys/" + key.replace(".", "/")] = value + "\n"
    return View(
        hostname=hostname,
        resolv_conf=_resolv_conf(sandbox.dns_config),
        uid=uid,
        gid=gid,
        groups=tuple(groups),
        user_names={value: name for name, value in image.users.items()},
        capabilities=_capabilities(security),
        no_new_privs=bool(security is not None and security.no_new_privs),
        readonly_rootfs=bool(security is not None and security.readonly_rootfs),
        masked_paths=tuple(security.masked_paths) if security is not None else (),
        readonly_paths=(
            *(security.readonly_paths if security is not None else ()),
            *(os.path.normpath(m.container_path) for m in image_volumes),
        ),
        mounts=mounts,
        files=files,
        processes=processes,
        listening=_host_listening if host_network else lambda: _sandbox_listening(listening_ports()),
        ipc=_host_ipc if host_ipc else lambda: _host_ipc_empty(),
        memory_limit=resources.memory_limit_in_bytes if resources is not None else 0,
    )


def _host_ipc_empty() -> str:
    return "\n------ Shared Memory Segments --------\nkey        shmid      owner      perms      bytes\n\n"
