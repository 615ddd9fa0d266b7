"""``SimRuntime``: the :class:`~kubelet_trio.cri.runtime.Runtime` protocol in memory, with no processes.

Containers follow behaviour scripts (:mod:`kubelet_trio.sim.script`) chosen per container by

1. the sandbox annotation ``sim.kubelet-trio.io/<container name>`` (pod annotations reach
   RunPodSandbox; CreateContainer's ``sandbox_config`` is consulted first), else
2. ``image_behaviours`` given to the constructor, matched by exact image reference (any spelling:
   ``busybox`` = ``docker.io/library/busybox:latest``, or the image id), then by a key without tag or
   digest matching any tag of that repository, else
3. with ``run_commands`` (what ``sim-cri`` serves), the container's command and args, interpreted by a
   small shell (:mod:`kubelet_trio.sim.shell`): ``sh -c 'echo hi; exit 3'`` prints and exits 3,
   ``sleep 3600`` runs, a ``while`` loop that echoes and sleeps logs a line every period; a program the
   shell does not know, or no command, means
4. ``run`` (without ``run_commands``, every unscripted container: an embedded node's pods run until
   stopped whatever their command says, unless a script decides otherwise).

Every started container also gets a :class:`~kubelet_trio.sim.shell.View` (:mod:`kubelet_trio.sim.views`):
ExecSync and streaming exec of a command no script names are answered by the shell against it (``id``,
``hostname``, ``cat /etc/resolv.conf``, files of host-path mounts...), else as the script module says.

Observable behaviour follows containerd 1.6's CRI plugin for everything a kubelet relies on (error codes
and messages included), as checked by the shared contract suite (``tests/contract``). Deliberate
differences: ExecSync of an unscripted command answers exit code 126 instead of failing the RPC,
a sandbox's "pause process" only dies through :meth:`SimRuntime.kill_sandbox_process`, and
ListPodSandboxStats answers for sandboxes without a cgroup parent (containerd refuses: "cgroupPath is
empty"), so that pod-level usage (processes, network) can be tested. Resource usage is deterministic
and set per container (:mod:`kubelet_trio.sim.usage`).

Time: every timestamp is ``a wall-clock base + Trio time elapsed`` (see
:class:`~kubelet_trio.clock.WallClock`; pass ``clock=`` to share one with a kubelet), and state is
computed lazily when read, so there are no background tasks and a ``MockClock`` drives hours of container
life in no time. Calls that take time (a stop whose SIGTERM is ignored, slow pulls, slow execs) simply
``await trio.sleep(...)`` and are cancellable. Use one SimRuntime within one ``trio.run``. Log files are
written through ``run_sync`` (a worker thread by default) when a container starts and when a harness
calls :meth:`SimRuntime.write_log`; under an autojump MockClock pass
``run_sync=kubelet_trio.fsio.run_inline`` so that the clock does not jump during the write. Like
containerd, a container keeps writing to the file it opened until ReopenContainerLog (see
:mod:`kubelet_trio.sim.logwriter`).

Runtime handlers: like containerd's CRI plugin, a set of configured runtimes (``runtime_handlers``,
default ``runc``) with a default one (``default_runtime_name``, ``runc``) that an empty handler selects;
RunPodSandbox with any other handler fails with containerd's ``failed to get sandbox runtime: no runtime
for "<handler>" is configured``. A sandbox reports the handler it was asked for (``""`` included), as
containerd does.

Images: any reference pulls successfully (taking ``pull_delay``/``pull_delays``; an image already present
returns at once) except references under the registry host ``sim.invalid`` (NotFoundError at once, with
containerd's message) and those listed in ``pull_failures``. A bad script in an annotation fails
CreateContainer with InvalidArgumentError naming the annotation and the clause.
"""

from __future__ import annotations

import json
import logging
import os
import random
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import TypeVar

import attrs
import trio
import trio_util

from kubelet_trio.api.timefmt import rfc3339_nano
from kubelet_trio.clock import WallClock, go_duration
from kubelet_trio.cri import errors
from kubelet_trio.cri.gen.runtime import v1 as pb
from kubelet_trio.cri.runtime import CRI_API_VERSION, RuntimeCapabilities
from kubelet_trio.cri.streaming.server import StreamingServer
from kubelet_trio.fsio import RunSync, run_in_thread
from kubelet_trio.logs import kobj, kv
from kubelet_trio.sim.images import HTTP_PORT, NNP, ImageStore, RefTable, SimImage, normalize, parse_ref
from kubelet_trio.sim.index import LabelIndex
from kubelet_trio.sim.logwriter import SimLogWriter, cri_records
from kubelet_trio.sim.records import (
    ERROR,
    SIGKILL_EXIT,
    SIGTERM_EXIT,
    START_ERROR,
    START_ERROR_EXIT,
    ContainerRecord,
    Exit,
    IpPool,
    SandboxRecord,
    exit_reason,
)
from kubelet_trio.sim.script import RUN, Behaviour, ExecResult, OutputLine, ScriptError, parse_script
from kubelet_trio.sim.shell import FOREVER_NS, Outcome, Process
from kubelet_trio.sim.shell import run as shell_run
from kubelet_trio.sim.usage import ContainerUsage, UsageError, usage_from_annotations
from kubelet_trio.sim.views import NGINX_ARGV, UserError, build_view, main_argv, resolve_user
from kubelet_trio.version import __version__

logger = logging.getLogger(__name__)

SIM_ANNOTATION_PREFIX = "sim.kubelet-trio.io/"
RUNTIME_NAME = "kubelet-trio-sim"
KUBELET_API_VERSION = "0.1.0"  # VersionResponse.version: what containerd reports too
MISSING_IMAGE_HOST = "sim.invalid"  # images under this registry host never exist
DEFAULT_POD_CIDR = "10.88.0.0/16"
IMAGE_FS_MOUNTPOINT = "/var/lib/kubelet-trio-sim/io.containerd.snapshotter.v1.overlayfs"
INODES_PER_IMAGE = 420
DEFAULT_RUNTIME_NAME = "runc"  # containerd's default_runtime_name
DEFAULT_RUNTIME_HANDLERS = frozenset({DEFAULT_RUNTIME_NAME})
NGINX_PID_FILES = ("/run/nginx.pid", "/var/run/nginx.pid")  # where nginx writes its master's pid
HTTPD_FQDN_WARNING = (
    "AH00558: httpd: Could not reliably determine the server's fully qualified domain name, using {ip}. "
    "Set the 'ServerName' directive globally to suppress this message"
)
HTTPD_RESUMING = "AH00489: Apache/2.4.39 (Unix) configured -- resuming normal operations"
LOOPBACK = "127.0.0.1"  # where a host-network pod's servers answer
MAX_REPEATS_PER_FLUSH = 1000  # a clock that jumps hours writes only the latest lines of a loop

T = TypeVar("T")


def _new_id(rng: random.Random) -> str:
    return f"{rng.getrandbits(256):064x}"


def _resolve(store: Mapping[str, T], key: str, op: str, context: str) -> T | None:
    """Find by full id or unique prefix (containerd's truncindex); an ambiguous prefix is an error."""
    if key in store:
        return store[key]
    if not key:
        return None
    matches = [value for id_, value in store.items() if key and id_.startswith(key)]
    if len(matches) > 1:
        raise errors.CriCallError(op, f"{context}: Multiple IDs found with provided prefix: {key}")
    return matches[0] if matches else None


def _get(store: Mapping[str, T], key: str, op: str, context: str) -> T:
    found = _resolve(store, key, op, context)
    if found is None:
        raise errors.NotFoundError(op, f"{context}: not found")
    return found


def _labels_match(labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def _log_lines(behaviour: Behaviour, wall_ns: int) -> bytes:
    stamp = rfc3339_nano(wall_ns)
    return "".join(f"{stamp} {line.stream} F {line.text}\n" for line in behaviour.output).encode()


def _namespace_options(config: pb.PodSandboxConfig) -> pb.NamespaceOption | None:
    security = config.linux.security_context if config.linux is not None else None
    return security.namespace_options if security is not None else None


def _lines(text: str, stream: str) -> list[OutputLine]:
    return [OutputLine("stdout" if stream == "stdout" else "stderr", line) for line in text.splitlines()]


def _sandbox_info(sandbox: SandboxRecord) -> dict[str, object]:
    """The keys of containerd's verbose sandbox ``info`` that mean something without processes (no pid, no
    OCI spec, no snapshot, no CNI result), with containerd's values: the pause process is "running" while
    the sandbox is ready and "deleted" once stopped."""
    return {
        "pid": 0,
        "processStatus": "running" if sandbox.ready else "deleted",
        "netNamespaceClosed": sandbox.network_closed,
        "runtimeHandler": sandbox.runtime_handler,
        "sim": True,
    }


def _behaviour_of(outcome: Outcome, listens: tuple[int, ...]) -> Behaviour:
    """What a container whose command had ``outcome`` does: print, then exit or run on."""
    output = (*_lines(outcome.stdout, "stdout"), *_lines(outcome.stderr, "stderr"))
    return Behaviour(
        exit_code=None if outcome.forever else outcome.code,
        exit_after_ns=0 if outcome.forever else outcome.elapsed_ns,
        output=output,
        repeat=outcome.repeat,
        repeat_period_ns=outcome.period_ns,
        listens=listens,
        exit_reason="OOMKilled" if outcome.oom_killed else "",
    )


def _default_behaviour(argv: tuple[str, ...], ip: str, wall_ns: int, ports: tuple[int, ...]) -> Behaviour:
    """What an image's own command does: nginx and httpd serve the image's ports (80 unless its config
    says), httpd logging its start-up (on stderr, as Apache does) so that a client tailing the log sees
    the server come up."""
    ports = ports or (HTTP_PORT,)
    if argv[:1] == ("nginx",):
        return Behaviour(listens=ports)
    if argv[:1] != ("httpd-foreground",):
        return RUN
    stamp = datetime.fromtimestamp(wall_ns / 1e9, UTC).strftime("%a %b %d %H:%M:%S.%f %Y")
    output = (
        OutputLine("stderr", HTTPD_FQDN_WARNING.format(ip=ip)),
        OutputLine("stderr", HTTPD_FQDN_WARNING.format(ip=ip)),
        OutputLine("stderr", f"[{stamp}] [mpm_event:notice] [pid 1:tid 1] {HTTPD_RESUMING}"),
        OutputLine(
            "stderr", f"[{stamp}] [core:notice] [pid 1:tid 1] AH00094: Command line: 'httpd -D FOREGROUND'"
        ),
    )
    return Behaviour(listens=ports, output=output)


def _exec_result(outcome: Outcome) -> ExecResult:
    return ExecResult(
        outcome.code,
        stdout=outcome.stdout.encode(),
        stderr=outcome.stderr.encode(),
        delay_ns=FOREVER_NS if outcome.forever else outcome.elapsed_ns,
    )


def _log_path(log_directory: str, log_path: str) -> str:
    """``<log_directory>/<log_path>`` cleaned like Go's filepath.Join; "" unless both are set."""
    return os.path.normpath(os.path.join(log_directory, log_path)) if log_directory and log_path else ""


@attrs.define(eq=False, kw_only=True)
class SimRuntime:
    """An in-memory CRI runtime (RuntimeService + ImageService) with scripted containers.

    Args:
        image_behaviours: image reference → behaviour script, the default for containers of that image.
        pull_delay: seconds (Trio time) every pull of an absent image takes.
        pull_delays: per-image pull durations, overriding ``pull_delay``.
        pull_failures: image reference → error message; pulling it fails (after its delay) with
            ``failed to pull and unpack image "<ref>": <message>`` (NotFoundError when the message
            says "not found", else CriCallError). Images under ``sim.invalid`` never exist.
        preloaded_images: images present from the start (no pull needed).
        pod_cidr: where pod IPs come from (``UpdateRuntimeConfig`` with a pod CIDR switches it).
        node_ip: the IP reported for host-network sandboxes; "" like containerd (the kubelet uses the
            node's address for those pods itself).
        id_seed: seed for sandbox/container ids, for reproducible runs (default: random).
        wall_clock_start_ns: the wall-clock time (ns) that the clock origin maps to (default: the real
            time at construction). The origin is the Trio time at construction when built inside
            ``trio.run``, else the Trio time of first use.
        clock: a :class:`~kubelet_trio.clock.WallClock` to share with a kubelet, so that both read the
            same wall-clock time (backoff anchored on ``finishedAt`` is then exact under MockClock).
        runtime_handlers: the configured runtimes (containerd: ``[plugins.cri.containerd.runtimes.*]``).
        default_runtime_name: the handler an empty RunPodSandbox ``runtime_handler`` means.
        stop_missing_ok: StopContainer and StopPodSandbox of an unknown id succeed, as the CRI asks
            (idempotent stops) and containerd 1.7+ answers (``sim-cri`` serves so unless told
            ``--containerd-1.6``); containerd 1.6, the default here as in the contract suite, says NotFound.
        image_fs_mountpoint: the directory ImageFsInfo names; the Go kubelet's cAdvisor stats it to find
            the image filesystem's capacity, so a sim serving it should name a directory that exists.
        run_commands: an unscripted container does what its command says (step 3 above), as a runtime
            serving any CRI client must; off, it runs until stopped, as embedded harnesses expect.
    """

    image_behaviours: Mapping[str, str] = attrs.field(factory=dict)
    pull_delay: float = 0.0
    pull_delays: Mapping[str, float] = attrs.field(factory=dict)
    pull_failures: Mapping[str, str] = attrs.field(factory=dict)
    preloaded_images: Iterable[str] = ()
    pod_cidr: str = DEFAULT_POD_CIDR
    node_ip: str = ""
    id_seed: int | None = None
    wall_clock_start_ns: int | None = None
    clock: WallClock | None = None
    run_sync: RunSync = run_in_thread  # log file writes; harnesses under MockClock pass fsio.run_inline
    runtime_handlers: frozenset[str] = attrs.field(default=DEFAULT_RUNTIME_HANDLERS, converter=frozenset)
    default_runtime_name: str = DEFAULT_RUNTIME_NAME
    stop_missing_ok: bool = False
    image_fs_mountpoint: str = IMAGE_FS_MOUNTPOINT
    run_commands: bool = False

    _rng: random.Random = attrs.field(init=False)
    _ips: IpPool = attrs.field(init=False)
    _behaviours: RefTable[Behaviour] = attrs.field(init=False)
    _pull_delays: RefTable[float] = attrs.field(init=False)
    _pull_failures: RefTable[str] = attrs.field(init=False)
    _images: ImageStore = attrs.field(init=False, factory=ImageStore)
    _sandboxes: dict[str, SandboxRecord] = attrs.field(init=False, factory=dict)
    _containers: dict[str, ContainerRecord] = attrs.field(init=False, factory=dict)
    _sandbox_names: dict[str, str] = attrs.field(init=False, factory=dict)
    _container_names: dict[str, str] = attrs.field(init=False, factory=dict)  # reserved name -> id
    _name_of: dict[str, str] = attrs.field(init=False, factory=dict)  # id -> reserved name
    _by_sandbox: dict[str, dict[str, None]] = attrs.field(init=False, factory=dict)  # sandbox -> containers
    _sandbox_index: LabelIndex = attrs.field(init=False, factory=LabelIndex)
    _container_index: LabelIndex = attrs.field(init=False, factory=LabelIndex)
    _exec_overrides: dict[tuple[str, tuple[str, ...]], ExecResult] = attrs.field(init=False, factory=dict)
    _log_writers: dict[str, SimLogWriter] = attrs.field(init=False, factory=dict)  # by container id
    _usage: dict[str, ContainerUsage] = attrs.field(init=False, factory=dict)  # by container id
    _next_pid: int = attrs.field(init=False, default=1000)
    #: The streaming server for Exec/Attach/PortForward, while ``open_sim_streaming`` runs it.
    streaming: StreamingServer | None = attrs.field(init=False, default=None)
    #: How many containers have started: whoever serves their ports for real waits on it (sim-cri's pod
    #: network, :mod:`kubelet_trio.sim.podnet`).
    starts: trio_util.AsyncValue[int] = attrs.field(init=False, factory=lambda: trio_util.AsyncValue(0))
    #: Every ``UpdateContainerResources`` applied, in order: (container id, the new resources).
    resource_updates: list[tuple[str, pb.LinuxContainerResources]] = attrs.field(init=False, factory=list)

    def __attrs_post_init__(self) -> None:
        if self.clock is None:
            self.clock = (
                WallClock()
                if self.wall_clock_start_ns is None
                else WallClock(base_wall_ns=self.wall_clock_start_ns)
            )
        self._rng = random.Random(self.id_seed)
        self._ips = IpPool.for_cidr(self.pod_cidr)
        behaviours: dict[str, Behaviour] = {}
        for ref, script in self.image_behaviours.items():
            try:
                behaviours[ref] = parse_script(script)
            except ScriptError as err:
                raise ScriptError(f"behaviour for image {ref!r}: {err}") from None
        self._behaviours = RefTable.of(behaviours)
        self._pull_delays = RefTable.of(self.pull_delays)
        self._pull_failures = RefTable.of(self.pull_failures)
        for ref in self.preloaded_images:
            self._images.add(ref)

    def _now(self) -> int:
        assert self.clock is not None
        return self.clock.wall_ns()

    def capabilities(self) -> RuntimeCapabilities:
        """Simulated containers use no real resources: the node's eviction signals are simulated too."""
        return RuntimeCapabilities(simulated=True)

    # --- harness extras -------------------------------------------------------------------------

    def sandbox_cgroup_parent(self, sandbox_id: str) -> str:
        """The cgroup parent the sandbox was run under (``linux.cgroup_parent`` of its config; "": the
        runtime's default), as a real runtime would place its processes."""
        sandbox = _get(self._sandboxes, sandbox_id, "sandbox_cgroup_parent", f"sandbox {sandbox_id!r}")
        linux = sandbox.config.linux
        return linux.cgroup_parent if linux is not None else ""

    def kill_sandbox_process(self, sandbox_id: str) -> None:
        """Simulate the sandbox's pause process dying: the sandbox turns NOTREADY and its running
        containers are killed (exit code 137). The network stays set up until StopPodSandbox."""
        sandbox = _get(self._sandboxes, sandbox_id, "kill_sandbox_process", f"sandbox {sandbox_id!r}")
        sandbox.ready = False
        self._kill_containers(sandbox.id)
        logger.info("sim: sandbox process killed", extra=kv(sandbox=sandbox.id))

    def set_exec_result(
        self, container_id: str, argv: Iterable[str], exit_code: int, stdout: bytes = b"", stderr: bytes = b""
    ) -> None:
        """Script ExecSync of ``argv`` in one running container from now on (probes that flip)."""
        container = _get(self._containers, container_id, "set_exec_result", f"container {container_id!r}")
        self._exec_overrides[(container.id, tuple(argv))] = ExecResult(exit_code, stdout, stderr)

    def set_usage(self, container_id: str, usage: ContainerUsage) -> None:
        """The container's resource usage from now on (see :mod:`kubelet_trio.sim.usage`)."""
        container = _get(self._containers, container_id, "set_usage", f"container {container_id!r}")
        self._usage[container.id] = usage

    def container_config(self, container_id: str) -> pb.ContainerConfig:
        """The config a container was created with (envs, mounts, resources...), for assertions."""
        return _get(self._containers, container_id, "container_config", f"container {container_id!r}").config

    async def write_log(self, container_id: str, text: str, stream: str = "stdout") -> None:
        """A running container prints ``text`` on ``stream``: one ``F`` record per line, a ``P`` record
        for a last line without a newline. It lands where the runtime's log file is open."""
        container = _get(self._containers, container_id, "write_log", f"container {container_id!r}")
        writer = self._log_writers.get(container.id)
        if container.state(self._now()) is not pb.ContainerState.CONTAINER_RUNNING or writer is None:
            raise errors.CriCallError("write_log", f"container {container.id} is not running with a log")
        await self.run_sync(writer.write, cri_records(text, stream, self._now()))

    def end_container(self, container_id: str, exit_code: int) -> None:
        """The container's process ends on its own (an interactive shell whose input ended)."""
        container = _get(self._containers, container_id, "end_container", f"container {container_id!r}")
        container.terminate(Exit(self._now(), exit_code, exit_reason(exit_code)))

    def crash_container(self, container_id: str, exit_code: int) -> None:
        """Make a running container exit now with ``exit_code`` (reason Completed for 0, else Error)."""
        container = _get(self._containers, container_id, "crash_container", f"container {container_id!r}")
        now = self._now()
        state = container.state(now)
        if state is not pb.ContainerState.CONTAINER_RUNNING:
            raise errors.CriCallError("crash_container", f"container is in {state.name} state")
        container.terminate(Exit(now, exit_code, exit_reason(exit_code)))
        logger.info("sim: container crashed", extra=kv(container=container.id, exit_code=exit_code))

    # --- RuntimeService ------------------------------------------------------------------------

    async def version(self, api_version: str = CRI_API_VERSION) -> pb.VersionResponse:
        return pb.VersionResponse(
            version=KUBELET_API_VERSION,
            runtime_name=RUNTIME_NAME,
            runtime_version=__version__,
            runtime_api_version=CRI_API_VERSION,
        )

    async def status(self, verbose: bool = False) -> pb.StatusResponse:
        conditions = [
            pb.RuntimeCondition(type="RuntimeReady", status=True),
            pb.RuntimeCondition(type="NetworkReady", status=True),
        ]
        info = {"config": json.dumps({"podCIDR": self.pod_cidr, "sim": True})} if verbose else {}
        return pb.StatusResponse(status=pb.RuntimeStatus(conditions=conditions), info=info)

    async def update_runtime_config(self, runtime_config: pb.RuntimeConfig) -> None:
        cidr = runtime_config.network_config.pod_cidr if runtime_config.network_config else ""
        if cidr and cidr != self.pod_cidr:
            self._ips = IpPool.for_cidr(cidr)
            self.pod_cidr = cidr

    async def run_pod_sandbox(self, config: pb.PodSandboxConfig, runtime_handler: str = "") -> str:
        op = "RunPodSandbox"
        md = config.metadata
        if md is None:
            raise errors.CriCallError(op, "sandbox config must include metadata")
        name = f"{md.name}_{md.namespace}_{md.uid}_{md.attempt}"
        if name in self._sandbox_names:
            owner = self._sandbox_names[name]
            raise errors.CriCallError(
                op, f'failed to reserve sandbox name "{name}": name "{name}" is reserved for "{owner}"'
            )
        runtime = runtime_handler or self.default_runtime_name
        if runtime not in self.runtime_handlers:
            raise errors.CriCallError(
                op, f'failed to get sandbox runtime: no runtime for "{runtime}" is configured'
            )
        sandbox_id = self._unique_id()
        namespaces = (
            config.linux.security_context.namespace_options
            if config.linux is not None and config.linux.security_context is not None
            else None
        )
        host_network = namespaces is not None and namespaces.network is pb.NamespaceMode.NODE
        ip = self.node_ip if host_network else self._ips.allocate()
        self._sandbox_names[name] = sandbox_id
        self._sandboxes[sandbox_id] = SandboxRecord(
            id=sandbox_id, config=config, runtime_handler=runtime_handler, created_ns=self._now(), ip=ip
        )
        self._sandbox_index.add(sandbox_id, config.labels)
        logger.debug("sim: sandbox ready", extra=kv(sandbox=sandbox_id, pod=kobj(md), ip=ip))
        return sandbox_id

    async def stop_pod_sandbox(self, pod_sandbox_id: str) -> None:
        op = "StopPodSandbox"
        context = f'an error occurred when try to find sandbox "{pod_sandbox_id}"'
        sandbox = _resolve(self._sandboxes, pod_sandbox_id, op, context)
        if sandbox is None:
            if self.stop_missing_ok:
                return
            raise errors.NotFoundError(op, f"{context}: not found")
        self._stop_sandbox(sandbox)

    def _stop_sandbox(self, sandbox: SandboxRecord) -> None:
        # containerd stops every container with timeout 0 (SIGKILL), then the pause container.
        self._kill_containers(sandbox.id)
        sandbox.ready = False
        if not sandbox.network_closed:
            sandbox.network_closed = True
            self._ips.release(sandbox.ip)

    def _kill_containers(self, sandbox_id: str) -> None:
        now = self._now()
        for container in self._containers.values():
            if container.sandbox_id == sandbox_id:
                container.terminate(Exit(now, SIGKILL_EXIT, ERROR))

    async def remove_pod_sandbox(self, pod_sandbox_id: str) -> None:
        op = "RemovePodSandbox"
        context = f'an error occurred when try to find sandbox "{pod_sandbox_id}"'
        sandbox = _resolve(self._sandboxes, pod_sandbox_id, op, context)
        if sandbox is None:
            return  # like containerd: removing what does not exist succeeds
        self._stop_sandbox(sandbox)
        for container in self._filter_containers("", sandbox.id, {}):
            self._drop_container(container)
        del self._sandboxes[sandbox.id]
        self._sandbox_index.remove(sandbox.id, sandbox.config.labels)
        self._sandbox_names = {k: v for k, v in self._sandbox_names.items() if v != sandbox.id}
        logger.debug("sim: sandbox removed", extra=kv(sandbox=sandbox.id))

    async def pod_sandbox_status(
        self, pod_sandbox_id: str, verbose: bool = False
    ) -> pb.PodSandboxStatusResponse:
        op = "PodSandboxStatus"
        sandbox = _get(self._sandboxes, pod_sandbox_id, op, "an error occurred when try to find sandbox")
        info = {"info": json.dumps(_sandbox_info(sandbox))} if verbose else {}
        return pb.PodSandboxStatusResponse(status=sandbox.status(), info=info)

    async def list_pod_sandbox(self, filter: pb.PodSandboxFilter | None = None) -> list[pb.PodSandbox]:
        sandboxes: Iterable[SandboxRecord] = self._sandboxes.values()
        if filter is not None and (ids := self._sandbox_index.select(filter.label_selector)) is not None:
            sandboxes = [self._sandboxes[i] for i in ids]
        if filter is not None:
            sandbox_id = self._normalize_filter_id(self._sandboxes, filter.id)
            sandboxes = [
                s
                for s in sandboxes
                if (not sandbox_id or s.id == sandbox_id)
                and (filter.state is None or s.state is filter.state.state)
                and _labels_match(s.config.labels, filter.label_selector)
            ]
        return [s.to_pb() for s in sandboxes]  # insertion order = created_at order

    async def create_container(
        self, pod_sandbox_id: str, config: pb.ContainerConfig, sandbox_config: pb.PodSandboxConfig
    ) -> str:
        op = "CreateContainer"
        sandbox = _get(self._sandboxes, pod_sandbox_id, op, f'failed to find sandbox id "{pod_sandbox_id}"')
        if not sandbox.ready:  # containerd looks up the pause task, which is gone
            raise errors.NotFoundError(
                op,
                f"failed to get sandbox container task: no running task found: "
                f"task {sandbox.id} not found: not found",
            )
        md = config.metadata
        if md is None:
            raise errors.CriCallError(op, "container config must include metadata")
        smd = (sandbox_config.metadata if sandbox_config is not None else None) or sandbox.metadata
        name = f"{md.name}_{smd.name}_{smd.namespace}_{smd.uid}_{md.attempt}"
        if name in self._container_names:
            owner = self._container_names[name]
            raise errors.CriCallError(
                op, f'failed to reserve container name "{name}": name "{name}" is reserved for "{owner}"'
            )
        spec = config.image if config.image is not None else pb.ImageSpec()
        image = self._images.find(spec.image)
        if image is None:
            raise errors.NotFoundError(op, f'failed to resolve image "{spec.image}": not found')
        behaviour = self._behaviour_for(op, md.name, sandbox, sandbox_config, spec, image)
        try:
            resolve_user(config, image.config)
        except UserError as err:
            raise errors.CriCallError(op, f"failed to generate container spec: {err}") from None
        usage = self._usage_for(op, md.name, sandbox, sandbox_config)
        log_path = _log_path(sandbox.config.log_directory, config.log_path)
        container_id = self._unique_id()
        self._container_names[name] = container_id
        self._name_of[container_id] = name
        self._containers[container_id] = ContainerRecord(
            id=container_id,
            sandbox_id=sandbox.id,
            config=config,
            image=image,
            behaviour=behaviour if behaviour is not None else RUN,
            log_path=log_path,
            created_ns=self._now(),
            scripted=behaviour is not None,
            argv=main_argv(config, image.config),
        )
        self._container_index.add(container_id, config.labels)
        self._by_sandbox.setdefault(sandbox.id, {})[container_id] = None
        if usage is not None:
            self._usage[container_id] = usage
        logger.debug(
            "sim: container created", extra=kv(container=container_id, sandbox=sandbox.id, name=md.name)
        )
        return container_id

    def _behaviour_for(
        self,
        op: str,
        container_name: str,
        sandbox: SandboxRecord,
        sandbox_config: pb.PodSandboxConfig | None,
        spec: pb.ImageSpec,
        image: SimImage,
    ) -> Behaviour | None:
        key = SIM_ANNOTATION_PREFIX + container_name
        for source in (
            sandbox_config.annotations if sandbox_config is not None else {},
            sandbox.config.annotations,
        ):
            if key in source:
                try:
                    return parse_script(source[key])
                except ScriptError as err:
                    raise errors.InvalidArgumentError(op, f"annotation {key}: {err}") from None
        return self._behaviours.lookup([spec.image, spec.user_specified_image, *image.refs])

    @staticmethod
    def _usage_for(
        op: str, container_name: str, sandbox: SandboxRecord, sandbox_config: pb.PodSandboxConfig | None
    ) -> ContainerUsage | None:
        for source in (
            sandbox_config.annotations if sandbox_config is not None else {},
            sandbox.config.annotations,
        ):
            try:
                usage = usage_from_annotations(source, container_name)
            except UsageError as err:
                raise errors.InvalidArgumentError(op, str(err)) from None
            if usage is not None:
                return usage
        return None

    async def start_container(self, container_id: str) -> None:
        op = "StartContainer"
        container = self._container(op, container_id)
        context = f'failed to set starting state for container "{container.id}"'
        if container.starting:
            raise errors.CriCallError(op, f"{context}: container is already in starting state")
        state = container.state(self._now())
        if state is not pb.ContainerState.CONTAINER_CREATED:
            raise errors.CriCallError(op, f"{context}: container is in {state.name} state")
        container.starting = True
        try:
            started = self._now()
            self._check_sandbox_ready(op, container)
            await self._boot(container)
            if container.log_path:
                writer = SimLogWriter(container.log_path)
                try:
                    await self.run_sync(writer.open, _log_lines(container.behaviour, started))
                except OSError as err:
                    self._fail_start(op, container, f"failed to create container loggers: {err}")
                self._log_writers[container.id] = writer
            self._check_sandbox_ready(op, container)
            container.started_ns = started
        finally:
            container.starting = False
        await self._flush_output(container)
        self.starts.value += 1
        logger.debug("sim: container started", extra=kv(container=container.id))

    async def _boot(self, container: ContainerRecord) -> None:
        """Give the container its view and, unless a script decides, what its command does."""
        sandbox = self._sandboxes[container.sandbox_id]
        self._next_pid += 1
        container.pid = self._next_pid
        container.view = await self.run_sync(
            lambda: build_view(
                sandbox.config,
                container.config,
                container.image.config,
                processes=lambda: self._visible_processes(container),
                listening_ports=lambda: sorted(self.listening_ports(sandbox.id)),
            )
        )
        if container.argv[:1] == ("nginx",):
            pid = 1 if self._pid_mode(container) is pb.NamespaceMode.CONTAINER else container.pid
            for path in NGINX_PID_FILES:  # /var/run links to /run in the image
                container.view.files[path] = f"{pid}\n"
        if container.scripted or not self.run_commands:
            return
        if not (container.config.command or container.config.args) and container.argv[:1] != (NNP,):
            # the image's default process runs until stopped; a web server listens and says so
            container.behaviour = _default_behaviour(
                container.argv, sandbox.ip or "127.0.0.1", self._now(), container.image.config.ports
            )
            return
        if container.argv in (("sh",), ("/bin/sh",)) and container.config.stdin:
            container.behaviour = Behaviour(reads_stdin=True)
            return
        outcome = shell_run(container.argv, container.view)
        if outcome is not None:
            serves = container.image.config.entrypoint == ("nginx",)
            container.behaviour = _behaviour_of(outcome, container.image.config.ports if serves else ())

    def _visible_processes(self, container: ContainerRecord) -> tuple[Process, ...]:
        """What the container's PID namespace shows: itself (CONTAINER), the pause process and the pod's
        containers sharing the pod namespace (POD), or every container and the host's init (NODE)."""
        now = self._now()
        mode = self._pid_mode(container)

        def running(c: ContainerRecord) -> bool:
            return c.state(now) is pb.ContainerState.CONTAINER_RUNNING

        def process(c: ContainerRecord, pid: int | None = None) -> Process:
            argv = NGINX_ARGV if c.argv[:1] == ("nginx",) else c.argv
            return Process(c.pid if pid is None else pid, argv)

        if mode is pb.NamespaceMode.CONTAINER:
            return (process(container, 1),)
        if mode is pb.NamespaceMode.NODE:
            others = tuple(process(c) for c in self._containers.values() if running(c))
            return (Process(1, ("/sbin/init",)), *others)
        pod = tuple(
            process(c)
            for c in self._containers.values()
            if c.sandbox_id == container.sandbox_id and running(c)
        )
        return (Process(1, ("/pause",)), *pod)

    def _pid_mode(self, container: ContainerRecord) -> pb.NamespaceMode:
        sandbox = self._sandboxes.get(container.sandbox_id)
        options = _namespace_options(sandbox.config) if sandbox is not None else None
        return options.pid if options is not None else pb.NamespaceMode.POD

    def _check_sandbox_ready(self, op: str, container: ContainerRecord) -> None:
        sandbox = self._sandboxes.get(container.sandbox_id)
        if sandbox is None or not sandbox.ready:
            self._fail_start(op, container, f'sandbox container "{container.sandbox_id}" is not running')

    def _fail_start(self, op: str, container: ContainerRecord, message: str) -> None:
        """containerd marks a container that failed to start EXITED (128, StartError)."""
        container.forced_exit = Exit(self._now(), START_ERROR_EXIT, START_ERROR, message)
        raise errors.CriCallError(op, message)

    async def stop_container(self, container_id: str, timeout_seconds: int) -> None:
        op = "StopContainer"
        if self.stop_missing_ok and _resolve(self._containers, container_id, op, "") is None:
            return
        container = self._container(op, container_id)
        now = self._now()
        if container.state(now) is not pb.ContainerState.CONTAINER_RUNNING:
            return  # stopping a created or exited container is a no-op
        if timeout_seconds <= 0:
            container.terminate(Exit(now, SIGKILL_EXIT, ERROR))
        elif not container.behaviour.ignore_sigterm:
            container.terminate(Exit(now, SIGTERM_EXIT, ERROR))
        else:
            # SIGTERM is ignored: wait for the grace period (or the scripted exit, or another stop).
            deadline = now + timeout_seconds * 10**9
            natural = container.natural_exit()
            wake = min(deadline, natural.at_ns) if natural is not None else deadline
            with trio.move_on_after((wake - now) / 1e9):
                await container.terminated.wait()
            # The Trio timer fired no earlier than ``wake``: don't let float rounding undercut it.
            container.terminate(Exit(max(self._now(), wake), SIGKILL_EXIT, ERROR))
        logger.debug("sim: container stopped", extra=kv(container=container.id))

    async def reopen_container_log(self, container_id: str) -> None:
        op = "ReopenContainerLog"
        container = self._container(op, container_id)
        if container.state(self._now()) is not pb.ContainerState.CONTAINER_RUNNING:
            raise errors.CriCallError(op, "container is not running")
        writer = self._log_writers.get(container.id)
        if writer is not None:
            await self._flush_output(container)  # what it printed so far still lands in the old file
            try:
                await self.run_sync(writer.open, b"")
            except OSError as err:
                raise errors.CriCallError(op, f"failed to create and open log files: {err}") from err

    async def flush_output(self) -> None:
        """Write to the logs what looping containers (``Behaviour.repeat``) have printed by now. State is
        computed when read, but a log file is read by others: a server calls this periodically."""
        for container in list(self._containers.values()):
            await self._flush_output(container)

    async def _flush_output(self, container: ContainerRecord) -> None:
        behaviour, started = container.behaviour, container.started_ns
        if not behaviour.repeat or behaviour.repeat_period_ns <= 0 or started is None:
            return
        now = self._now()
        exit_ = container.exit_at(now)
        end = exit_.at_ns if exit_ is not None else now
        due = (end - started) // behaviour.repeat_period_ns + 1
        first = max(container.repeats_written, due - MAX_REPEATS_PER_FLUSH)
        container.repeats_written = max(due, container.repeats_written)
        writer = self._log_writers.get(container.id)
        if writer is None or first >= due:
            return
        data = b"".join(
            cri_records(
                "".join(line.text + "\n" for line in behaviour.repeat),
                "stdout",
                started + k * behaviour.repeat_period_ns,
            )
            for k in range(first, due)
        )
        await self.run_sync(writer.write, data)

    async def remove_container(self, container_id: str) -> None:
        op = "RemoveContainer"
        context = f'an error occurred when try to find container "{container_id}"'
        container = _resolve(self._containers, container_id, op, context)
        if container is not None:
            self._drop_container(container)

    def _drop_container(self, container: ContainerRecord) -> None:
        container.terminate(Exit(self._now(), SIGKILL_EXIT, ERROR))  # forcibly, if running
        del self._containers[container.id]
        self._log_writers.pop(container.id, None)
        self._usage.pop(container.id, None)
        self._container_index.remove(container.id, container.config.labels)
        siblings = self._by_sandbox.get(container.sandbox_id, {})
        siblings.pop(container.id, None)
        if not siblings:
            self._by_sandbox.pop(container.sandbox_id, None)
        self._container_names.pop(self._name_of.pop(container.id, ""), None)
        logger.debug("sim: container removed", extra=kv(container=container.id))

    async def list_containers(self, filter: pb.ContainerFilter | None = None) -> list[pb.Container]:
        now = self._now()
        containers = self._selected(filter)
        if filter is not None and filter.state is not None:
            wanted = filter.state.state
            containers = [c for c in containers if c.state(now) is wanted]
        return [c.to_pb(now) for c in containers]

    def _selected(self, filter: pb.ContainerFilter | pb.ContainerStatsFilter | None) -> list[ContainerRecord]:
        """The containers a list or stats filter selects by id, sandbox and labels (all when None)."""
        if filter is None:
            return self._filter_containers("", "", {})
        return self._filter_containers(filter.id, filter.pod_sandbox_id, filter.label_selector)

    def _filter_containers(
        self, container_id: str, sandbox_id: str, selector: Mapping[str, str]
    ) -> list[ContainerRecord]:
        container_id = self._normalize_filter_id(self._containers, container_id)
        sandbox_id = self._normalize_filter_id(self._sandboxes, sandbox_id)
        ids: Iterable[str] | None = self._container_index.select(selector)
        if ids is None and sandbox_id:
            ids = self._by_sandbox.get(sandbox_id, {})
        candidates = self._containers.values() if ids is None else [self._containers[i] for i in ids]
        return [
            c
            for c in candidates
            if (not container_id or c.id == container_id)
            and (not sandbox_id or c.sandbox_id == sandbox_id)
            and _labels_match(c.config.labels, selector)
        ]

    @staticmethod
    def _normalize_filter_id(store: Mapping[str, SandboxRecord | ContainerRecord], key: str) -> str:
        """containerd resolves a filter's id prefix when unique, else compares it verbatim."""
        try:
            found = _resolve(store, key, "", "")
        except errors.CriError:
            return key
        return found.id if found is not None else key

    async def container_status(self, container_id: str, verbose: bool = False) -> pb.ContainerStatusResponse:
        container = self._container("ContainerStatus", container_id)
        present = self._images.find(container.image.id) is not None
        info = (
            {"info": json.dumps({"sandboxID": container.sandbox_id, "pid": 0, "sim": True})}
            if verbose
            else {}
        )
        return pb.ContainerStatusResponse(status=container.status(self._now(), present), info=info)

    async def update_container_resources(
        self, container_id: str, linux: pb.LinuxContainerResources | None
    ) -> None:
        """As containerd: the new resources replace the container's, and its status reports them."""
        container = self._container("UpdateContainerResources", container_id)
        alive = (pb.ContainerState.CONTAINER_CREATED, pb.ContainerState.CONTAINER_RUNNING)
        if container.state(self._now()) not in alive:
            raise errors.CriCallError(
                "UpdateContainerResources", f"container {container_id} is not in created or running state"
            )
        if linux is None:
            return
        if container.config.linux is None:
            container.config.linux = pb.LinuxContainerConfig()
        container.config.linux.resources = linux
        self.resource_updates.append((container_id, linux))

    async def exec_sync(
        self, container_id: str, cmd: list[str], timeout_seconds: int = 0
    ) -> pb.ExecSyncResponse:
        op = "ExecSync"
        context = f'failed to exec in container: failed to find container "{container_id}" in store'
        container = _get(self._containers, container_id, op, context)
        state = container.state(self._now())
        if state is not pb.ContainerState.CONTAINER_RUNNING:
            raise errors.CriCallError(op, f"failed to exec in container: container is in {state.name} state")
        result = self._exec_overrides.get((container.id, tuple(cmd))) or container.behaviour.scripted_exec(
            cmd
        )
        if result is None:
            outcome = shell_run(cmd, container.view) if container.view is not None else None
            result = _exec_result(outcome) if outcome is not None else container.behaviour.exec_result(cmd)
        if timeout_seconds > 0 and result.delay_ns > timeout_seconds * 10**9:
            await trio.sleep(timeout_seconds)
            raise errors.DeadlineExceededError(
                op,
                f"failed to exec in container: timeout {go_duration(timeout_seconds)} exceeded: "
                "context deadline exceeded",
            )
        if result.delay_ns:
            await trio.sleep(result.delay_ns / 1e9)
        return pb.ExecSyncResponse(stdout=result.stdout, stderr=result.stderr, exit_code=result.exit_code)

    async def exec(self, request: pb.ExecRequest) -> str:
        self._streamable("Exec", request.container_id)
        return self._streaming_server("Exec").get_exec(request)

    async def attach(self, request: pb.AttachRequest) -> str:
        self._streamable("Attach", request.container_id)
        return self._streaming_server("Attach").get_attach(request)

    async def port_forward(self, request: pb.PortForwardRequest) -> str:
        _get(self._sandboxes, request.pod_sandbox_id, "PortForward", "failed to find sandbox")
        return self._streaming_server("PortForward").get_port_forward(request)

    def _streaming_server(self, op: str) -> StreamingServer:
        """The server ``open_sim_streaming`` runs for this runtime (it sets :attr:`streaming`)."""
        if self.streaming is None:
            raise errors.CriCallError(op, "streaming server is not running")
        return self.streaming

    def _streamable(self, op: str, container_id: str) -> None:
        context = f'failed to find container "{container_id}" in store'
        container = _get(self._containers, container_id, op, context)
        state = container.state(self._now())
        if state is not pb.ContainerState.CONTAINER_RUNNING:
            raise errors.CriCallError(op, f"container {container_id} is not running: {state.name}")

    def container_record(self, container_id: str) -> ContainerRecord | None:
        """The simulated container (for the streaming backend)."""
        return self._containers.get(container_id)

    def now_ns(self) -> int:
        return self._now()

    def listening_ports(self, sandbox_id: str) -> set[int]:
        """The ports the sandbox's running containers ``listen`` on (their scripts say)."""
        now = self._now()
        return {
            port
            for c in self._containers.values()
            if c.sandbox_id == sandbox_id and c.state(now) is pb.ContainerState.CONTAINER_RUNNING
            for port in c.behaviour.listens
        }

    def pod_address(self, sandbox_id: str) -> str | None:
        """Where the sandbox's servers answer: its pod IP, or loopback for a host-network pod (the
        simulator never serves on the node's outside addresses); None once its network is torn down."""
        sandbox = self._sandboxes.get(sandbox_id)
        if sandbox is None or sandbox.network_closed:
            return None
        options = _namespace_options(sandbox.config)
        if options is not None and options.network is pb.NamespaceMode.NODE:
            return LOOPBACK
        return sandbox.ip

    def serving(self) -> list[tuple[ContainerRecord, list[tuple[str, int]]]]:
        """The running containers that listen, each with the addresses that reach it: each port on its
        :meth:`pod_address`, and the host ports its sandbox maps to those ports (on their host IP, else
        loopback)."""
        now = self._now()
        found = []
        for container in self._containers.values():
            listens = container.behaviour.listens
            address = self.pod_address(container.sandbox_id) if listens else None
            if not address or container.state(now) is not pb.ContainerState.CONTAINER_RUNNING:
                continue
            addresses = [(address, port) for port in listens]
            if address != LOOPBACK:  # a host-network pod's ports are the host's already
                config = self._sandboxes[container.sandbox_id].config
                addresses += [
                    (m.host_ip or LOOPBACK, m.host_port)
                    for m in config.port_mappings
                    if m.host_port and m.container_port in listens and m.protocol is pb.Protocol.TCP
                ]
            found.append((container, addresses))
        return found

    async def container_stats(self, container_id: str) -> pb.ContainerStats:
        """As containerd 1.6: a container whose task is gone has no metrics to report (an error, where
        the list of all containers' stats just has none for it)."""
        container = _get(self._containers, container_id, "ContainerStats", "failed to find container")
        now = self._now()
        if container.state(now) is pb.ContainerState.CONTAINER_EXITED:
            raise errors.CriCallError("ContainerStats", "unexpected metrics response: []")
        return self._stats(container, now)

    async def list_container_stats(
        self, filter: pb.ContainerStatsFilter | None = None
    ) -> list[pb.ContainerStats]:
        now = self._now()
        containers = self._selected(filter)
        return [self._stats(c, now) for c in containers]

    async def list_pod_sandbox_stats(
        self, filter: pb.PodSandboxStatsFilter | None = None
    ) -> list[pb.PodSandboxStats]:
        """Ready sandboxes only: a stopped one has no cgroup to read (containerd skips it too)."""
        listed = await self.list_pod_sandbox(
            pb.PodSandboxFilter(id=filter.id, label_selector=dict(filter.label_selector))
            if filter is not None
            else None
        )
        now = self._now()
        return [
            self._sandbox_stats(self._sandboxes[s.id], now)
            for s in listed
            if s.state is pb.PodSandboxState.SANDBOX_READY
        ]

    def _sandbox_stats(self, sandbox: SandboxRecord, now: int) -> pb.PodSandboxStats:
        """The pod cgroup: the sum of its running containers (no pause overhead); one ``eth0`` with
        zero traffic unless the pod uses the host network."""
        members = [c for c in self._containers.values() if c.sandbox_id == sandbox.id]
        containers = [self._stats(c, now) for c in members]
        running = [c for c in members if c.state(now) is pb.ContainerState.CONTAINER_RUNNING]
        usages = [self._usage.get(c.id, ContainerUsage()) for c in running]

        def total(values: Iterable[int]) -> pb.UInt64Value:
            return pb.UInt64Value(value=sum(values))

        memory = total(u.memory_bytes for u in usages)
        linux = pb.LinuxPodSandboxStats(
            cpu=pb.CpuUsage(
                timestamp=now,
                usage_core_nano_seconds=total(
                    self._usage.get(c.id, ContainerUsage()).cpu_core_nano_seconds(self._running_ns(c, now))
                    for c in members
                ),
                usage_nano_cores=total(u.nano_cores for u in usages),
            ),
            memory=pb.MemoryUsage(
                timestamp=now,
                working_set_bytes=memory,
                available_bytes=pb.UInt64Value(value=0),
                usage_bytes=memory,
                rss_bytes=memory,
                page_faults=pb.UInt64Value(value=0),
                major_page_faults=pb.UInt64Value(value=0),
            ),
            process=pb.ProcessUsage(timestamp=now, process_count=total(u.processes for u in usages)),
            containers=containers,
        )
        host_network = bool(
            sandbox.config.linux
            and sandbox.config.linux.security_context
            and sandbox.config.linux.security_context.namespace_options
            and sandbox.config.linux.security_context.namespace_options.network is pb.NamespaceMode.NODE
        )
        if not host_network:
            zero = pb.UInt64Value(value=0)
            linux.network = pb.NetworkUsage(
                timestamp=now,
                default_interface=pb.NetworkInterfaceUsage(
                    name="eth0", rx_bytes=zero, rx_errors=zero, tx_bytes=zero, tx_errors=zero
                ),
            )
        return pb.PodSandboxStats(
            attributes=pb.PodSandboxAttributes(
                id=sandbox.id,
                metadata=sandbox.metadata,
                labels=dict(sandbox.config.labels),
                annotations=dict(sandbox.config.annotations),
            ),
            linux=linux,
        )

    @staticmethod
    def _running_ns(container: ContainerRecord, now: int) -> int:
        if container.started_ns is None:
            return 0
        exit_ = container.exit_at(now)
        return (exit_.at_ns if exit_ is not None else now) - container.started_ns

    def _stats(self, container: ContainerRecord, now: int) -> pb.ContainerStats:
        """The container's usage (:mod:`kubelet_trio.sim.usage`); CPU and memory only while running,
        like containerd."""
        usage = self._usage.get(container.id, ContainerUsage())
        stats = pb.ContainerStats(
            attributes=pb.ContainerAttributes(
                id=container.id,
                metadata=container.metadata,
                labels=dict(container.config.labels),
                annotations=dict(container.config.annotations),
            ),
            writable_layer=pb.FilesystemUsage(
                timestamp=now,
                fs_id=pb.FilesystemIdentifier(mountpoint=self.image_fs_mountpoint),
                used_bytes=pb.UInt64Value(value=usage.rootfs_bytes),
                inodes_used=pb.UInt64Value(value=usage.rootfs_inodes),
            ),
        )
        if container.state(now) is pb.ContainerState.CONTAINER_RUNNING:
            memory = pb.UInt64Value(value=usage.memory_bytes)
            resources = container.config.linux.resources if container.config.linux else None
            limit = resources.memory_limit_in_bytes if resources else 0
            zero = pb.UInt64Value(value=0)
            stats.cpu = pb.CpuUsage(
                timestamp=now,
                usage_core_nano_seconds=pb.UInt64Value(
                    value=usage.cpu_core_nano_seconds(self._running_ns(container, now))
                ),
                usage_nano_cores=pb.UInt64Value(value=usage.nano_cores),
            )
            stats.memory = pb.MemoryUsage(
                timestamp=now,
                working_set_bytes=memory,
                available_bytes=pb.UInt64Value(value=max(limit - usage.memory_bytes, 0) if limit else 0),
                usage_bytes=memory,
                rss_bytes=memory,
                page_faults=zero,
                major_page_faults=zero,
            )
        return stats

    def _container(self, op: str, container_id: str) -> ContainerRecord:
        context = f'an error occurred when try to find container "{container_id}"'
        return _get(self._containers, container_id, op, context)

    def _unique_id(self) -> str:
        while (new := _new_id(self._rng)) in self._sandboxes or new in self._containers:
            pass
        return new

    # --- ImageService --------------------------------------------------------------------------

    async def list_images(self, filter: pb.ImageFilter | None = None) -> list[pb.Image]:
        if filter is not None and filter.image is not None and filter.image.image:
            found = self._images.find(filter.image.image)
            return [found.to_pb()] if found else []
        return [image.to_pb() for image in self._images.list()]

    async def image_status(self, image: pb.ImageSpec, verbose: bool = False) -> pb.Image | None:
        found = self._images.find(image.image)
        return found.to_pb() if found else None

    async def pull_image(
        self,
        image: pb.ImageSpec,
        auth: pb.AuthConfig | None = None,
        sandbox_config: pb.PodSandboxConfig | None = None,
    ) -> str:
        op = "PullImage"
        if not image.image:
            raise errors.CriCallError(op, 'failed to parse image reference "": invalid reference format')
        ref = normalize(image.image)
        present = self._images.find(ref)
        if present is not None:
            return present.id
        context = f'failed to pull and unpack image "{ref}"'
        if parse_ref(ref).repository.split("/", 1)[0] == MISSING_IMAGE_HOST:
            message = f'{context}: failed to resolve reference "{ref}": {ref}: not found'
            raise errors.NotFoundError(op, message)
        delay = self._pull_delays.lookup([image.image])
        delay = self.pull_delay if delay is None else delay
        if delay > 0:
            await trio.sleep(delay)
        failure = self._pull_failures.lookup([image.image])
        if failure is not None:
            cls: Callable[..., errors.CriError] = (
                errors.NotFoundError if "not found" in failure else errors.CriCallError
            )
            raise cls(op, f"{context}: {failure}")
        pulled = self._images.add(ref)
        logger.debug("sim: image pulled", extra=kv(image=ref, id=pulled.id))
        return pulled.id

    async def remove_image(self, image: pb.ImageSpec) -> None:
        self._images.remove(image.image)

    async def image_fs_info(self) -> pb.ImageFsInfoResponse:
        images = self._images.list()
        usage = pb.FilesystemUsage(
            timestamp=self._now(),
            fs_id=pb.FilesystemIdentifier(mountpoint=self.image_fs_mountpoint),
            used_bytes=pb.UInt64Value(value=self._images.total_size),
            inodes_used=pb.UInt64Value(value=INODES_PER_IMAGE * len(images)),
        )
        return pb.ImageFsInfoResponse(image_filesystems=[usage])
