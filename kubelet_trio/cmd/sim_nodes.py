"""``kubelet-trio sim-nodes``: many full kubelets on simulated runtimes, joined to a cluster.

Each node is the real node agent (sync loop, pod workers, PLEG, probes, status, lease, events) built by
:func:`~kubelet_trio.kubelet_builder.open_kubelet` in API mode on its own
:class:`~kubelet_trio.sim.tracking.ChangeTrackingSimRuntime` (its relists are free while nothing
changes): pods bound to it (``spec.nodeName``) start, crash,
restart, become ready and terminate gracefully as their ``sim.kubelet-trio.io/<container>`` annotations
script them. The nodes of a process share one API connection pool and one rate limiter (``--kube-api-qps``
is for the whole command), and one event rate limit (``--event-qps``, also for the whole command: events
are the bulk of the requests and the least needed, so by default the command posts as many as one Go
kubelet may; the rest wait in each node's queue and are dropped when it is full, as Go drops them).

The command runs nodes ``--node-offset`` .. ``--node-offset + --nodes - 1``; a node's name, address, pod
CIDR and ports derive from that global index, so commands on several machines with disjoint ranges join
one cluster without clashes. ``--processes`` (default: one per core) splits the nodes over worker
processes under one supervisor (:mod:`kubelet_trio.cmd.sim_nodes_supervisor`), the limits shared out in
proportion to their nodes. The read-only and Kubelet API servers are off unless a port base is given
(node ``i`` then serves on ``base + i`` on 127.0.0.1). Runs until SIGINT or SIGTERM, then exits 0, leaving
the Node objects behind as a stopped kubelet does.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import ipaddress
import logging
import os
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from functools import partial

import attrs
import trio
import trio_util

from kubelet_trio import defaults
from kubelet_trio.api.quantity import Quantity
from kubelet_trio.apimode import ApiModeOptions
from kubelet_trio.client import (
    ApiClient,
    KubeConfigError,
    TokenBucket,
    load_kubeconfig,
    open_api_client,
)
from kubelet_trio.clock import WallClock
from kubelet_trio.cmd.sim_nodes_supervisor import Worker, WorkerSlice, run_workers, split_nodes
from kubelet_trio.config.podconfig import PodConfig
from kubelet_trio.config.types import API_SOURCE
from kubelet_trio.fsio import run_inline
from kubelet_trio.kubelet import KubeletConfig
from kubelet_trio.kubelet_builder import KubeletDeps, KubeletNode, open_kubelet
from kubelet_trio.logs import configure_logging, kv
from kubelet_trio.metrics import KubeletMetrics
from kubelet_trio.nodestatus import MachineInfo
from kubelet_trio.sim.tracking import ChangeTrackingSimRuntime

logger = logging.getLogger(__name__)

#: Node ``i``'s address (198.18.0.0/15 is set aside for benchmarks) and pod CIDR.
NODE_IP_BASE = ipaddress.IPv4Address("198.18.0.1")
POD_NETWORK = ipaddress.IPv4Network("10.128.0.0/9")
MAX_NODES = 2**15  # a /24 of pods per node within POD_NETWORK
START_CONCURRENCY = 10  # nodes registering at once
REQUEST_CONNECTIONS = 64  # connections for requests other than watches, shared by all nodes
#: The cyclic collector's thresholds in a process that runs nodes. With CPython's default (700, 10, 10)
#: the statuses, pods and requests of thousands of pods live just long enough to be promoted to the oldest
#: generation, whose growth then triggers full collections: at 10 000 pods on 100 nodes that was 30 full
#: collections of up to 2 s each in the first 90 s, a third of the process's CPU. A larger first
#: generation lets them die young (by reference count) instead.
GC_THRESHOLDS = (50_000, 20, 20)


@attrs.frozen(kw_only=True)
class SimNodesSettings:
    """What every simulated node is built with (the command's flags)."""

    nodes: int
    offset: int = 0  # the first node's global index
    name_prefix: str = "sim-"
    max_pods: int = defaults.MAX_PODS
    node_labels: dict[str, str] = attrs.Factory(dict)
    cpu: int = 4
    memory_bytes: int = 16 * 1024**3
    ephemeral_storage_bytes: int = 100 * 1024**3
    read_only_port_base: int = 0
    port_base: int = 0
    root_dir: str = ""  # "" : a temporary directory, removed on exit
    event_qps: float = defaults.EVENT_RECORD_QPS  # for the whole process; 0: no limit
    event_burst: int = defaults.EVENT_BURST

    @property
    def indexes(self) -> range:
        """The global indexes of this command's nodes."""
        return range(self.offset, self.offset + self.nodes)

    def check(self) -> None:
        """Every index within ``MAX_NODES`` and every port within 65535, or ``ValueError``."""
        if self.nodes < 1 or self.offset < 0 or self.offset + self.nodes > MAX_NODES:
            raise ValueError(
                f"--node-offset + --nodes must be at most {MAX_NODES}, got {self.offset} + {self.nodes}"
            )
        last = self.indexes[-1]
        for flag, base in (
            ("--read-only-port-base", self.read_only_port_base),
            ("--port-base", self.port_base),
        ):
            if base and base + last > 65535:
                raise ValueError(f"{flag} {base} + node index {last} is beyond port 65535")


def node_name(settings: SimNodesSettings, index: int) -> str:
    return f"{settings.name_prefix}{index}"


def node_machine(name: str, settings: SimNodesSettings) -> MachineInfo:
    """A machine per node: the flags' capacity, identities derived from the name (stable across runs)."""
    digest = hashlib.sha256(name.encode()).hexdigest()
    return MachineInfo(
        num_cores=settings.cpu,
        memory_bytes=settings.memory_bytes,
        ephemeral_storage_bytes=settings.ephemeral_storage_bytes,
        machine_id=digest[:32],
        system_uuid=f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}",
        boot_id=f"{digest[32:40]}-{digest[40:44]}-{digest[44:48]}-{digest[48:52]}-{digest[52:64]}",
        kernel_version="6.1.0-kubelet-trio-sim",
        os_image="kubelet-trio simulated node",
        operating_system="linux",
        architecture="amd64",
    )


def pod_cidr(index: int) -> str:
    """Node ``index``'s /24 of ``POD_NETWORK``, so pod IPs are unique across the simulated nodes."""
    return str(ipaddress.IPv4Network((int(POD_NETWORK.network_address) + index * 256, 24)))


@contextlib.asynccontextmanager
async def open_sim_nodes(
    client: ApiClient,
    settings: SimNodesSettings,
    *,
    clock: WallClock | None = None,
) -> AsyncIterator[list[KubeletNode]]:
    """Run the nodes of ``settings.indexes`` against ``client`` until the block exits; yields once all
    are up."""
    settings.check()
    clock = clock or WallClock()
    with contextlib.ExitStack() as files:
        root = settings.root_dir or files.enter_context(
            tempfile.TemporaryDirectory(prefix="kubelet-trio-sim-")
        )
        started: dict[int, KubeletNode] = {}
        limiter = trio.CapacityLimiter(START_CONCURRENCY)
        events = TokenBucket(settings.event_qps, settings.event_burst)

        async def run_node(index: int, *, task_status: trio.TaskStatus[None]) -> None:
            async with limiter:
                name = node_name(settings, index)
                config = KubeletConfig(
                    node_name=name,
                    root_dir=f"{root}/{name}",
                    pod_logs_dir=f"{root}/{name}/pod-logs",
                    node_ips=(str(NODE_IP_BASE + index),),
                    memory_backed_volumes=False,  # simulated containers cannot see tmpfs mounts
                    read_only_port=settings.read_only_port_base + index
                    if settings.read_only_port_base
                    else 0,
                    port=settings.port_base + index if settings.port_base else 0,
                    address="127.0.0.1",
                )
                runtime = ChangeTrackingSimRuntime(clock=clock, run_sync=run_inline, pod_cidr=pod_cidr(index))
                deps = KubeletDeps(
                    runtime=runtime,
                    pod_config=PodConfig(sources=(API_SOURCE,), now=clock.now),
                    clock=clock,
                    run_sync=run_inline,
                    metrics=KubeletMetrics(enabled=bool(config.port or config.read_only_port)),
                    api_client=client,
                    api_options=ApiModeOptions(
                        node_labels=settings.node_labels,
                        max_pods=settings.max_pods,
                        kubelet_port=config.port,
                        machine=node_machine(name, settings),
                        event_limiter=events,
                    ),
                )
                stack = contextlib.AsyncExitStack()
                node = await stack.enter_async_context(open_kubelet(config, deps))
            async with stack:
                started[index] = node
                task_status.started()
                await trio.sleep_forever()

        async with trio.open_nursery() as nursery:
            async with trio.open_nursery() as starting:
                for index in settings.indexes:
                    starting.start_soon(nursery.start, run_node, index)
            logger.info("simulated nodes running", extra=kv(nodes=settings.nodes, root_dir=root))
            yield [started[index] for index in sorted(started)]
            nursery.cancel_scope.cancel()


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _index(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0-65535, got {value}")
    return value


def _qps(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text!r}")
    return value


def _bytes(text: str) -> int:
    try:
        return Quantity(text).int_value()
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected a quantity such as 16Gi, got {text!r}: {err}") from None


def _labels(text: str) -> dict[str, str]:
    """``key=value,key2=value2`` as ``--node-labels`` takes it."""
    labels: dict[str, str] = {}
    for pair in filter(None, text.split(",")):
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"expected key=value pairs separated by commas, got {pair!r}")
        labels[key] = value
    return labels


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubelet-trio sim-nodes",
        description="Run N kubelets on simulated runtimes, joined to a cluster: nodes for "
        "testing schedulers, controllers and operators. Pod behaviour comes from the pods' "
        "sim.kubelet-trio.io/<container> annotations (see kubelet_trio.sim.script).",
    )
    parser.add_argument("--kubeconfig", required=True, metavar="FILE", help="the cluster to join")
    parser.add_argument("--nodes", type=_positive_int, metavar="N", help="how many nodes (required)")
    parser.add_argument("--node-count", dest="nodes", type=_positive_int, metavar="N", help="--nodes")
    parser.add_argument(
        "--node-offset",
        type=_index,
        default=0,
        metavar="K",
        help="run nodes K .. K+N-1 (default 0): names, addresses, pod CIDRs and ports derive from the index,"
        " so commands with disjoint ranges (on several machines) join one cluster without clashes",
    )
    parser.add_argument(
        "--processes",
        type=_positive_int,
        default=None,
        metavar="P",
        help="split the nodes over P worker processes under one supervisor (default: one per core);"
        " a worker that exits is restarted and takes its nodes back",
    )
    parser.add_argument("--supervised", action="store_true", help=argparse.SUPPRESS)  # a worker
    parser.add_argument("--name-prefix", default="sim-", help="node names are PREFIX<K> .. PREFIX<K+N-1>")
    parser.add_argument(
        "--max-pods", type=_positive_int, default=defaults.MAX_PODS, help="maxPods of every node"
    )
    parser.add_argument(
        "--node-labels",
        type=_labels,
        action="append",
        default=[],
        metavar="KEY=VALUE,...",
        help="labels every node registers with (repeatable)",
    )
    parser.add_argument("--node-cpu", type=_positive_int, default=4, metavar="CORES", help="CPU capacity")
    parser.add_argument(
        "--node-memory", type=_bytes, default=16 * 1024**3, metavar="QUANTITY", help="memory capacity (16Gi)"
    )
    parser.add_argument(
        "--kube-api-qps",
        type=_qps,
        default=PROCESS_QPS,
        help=f"API requests per second for the whole command, 0 for no limit (default {PROCESS_QPS:g})",
    )
    parser.add_argument(
        "--kube-api-burst", type=_positive_int, default=PROCESS_BURST, help="burst of the shared rate limit"
    )
    parser.add_argument(
        "--event-qps",
        type=_qps,
        default=defaults.EVENT_RECORD_QPS,
        help="events posted per second by the whole command, 0 for no limit (default"
        f" {defaults.EVENT_RECORD_QPS:g}: one Go kubelet's eventRecordQPS)",
    )
    parser.add_argument(
        "--event-burst", type=_positive_int, default=defaults.EVENT_BURST, help="burst of the event limit"
    )
    parser.add_argument(
        "--read-only-port-base",
        type=_port,
        default=0,
        help="node i serves its read-only API on BASE+i (default 0: off)",
    )
    parser.add_argument(
        "--port-base",
        type=_port,
        default=0,
        help="node i serves the Kubelet API on BASE+i (default 0: off)",
    )
    parser.add_argument(
        "--root-dir", default="", help="nodes' files go under DIR/<node> (default: a temp dir)"
    )
    parser.add_argument("--v", type=int, default=0, metavar="LEVEL", help="log verbosity")
    return parser


#: The shared rate limit's defaults: the Go kubelet's kubeAPIQPS/kubeAPIBurst (50/100) for ten nodes.
PROCESS_QPS = 10 * defaults.KUBE_API_QPS
PROCESS_BURST = 10 * defaults.KUBE_API_BURST


def settings_from(args: argparse.Namespace) -> SimNodesSettings:
    labels: dict[str, str] = {}
    for group in args.node_labels:
        labels.update(group)
    return SimNodesSettings(
        nodes=args.nodes,
        offset=args.node_offset,
        name_prefix=args.name_prefix,
        max_pods=args.max_pods,
        node_labels=labels,
        cpu=args.node_cpu,
        memory_bytes=args.node_memory,
        read_only_port_base=args.read_only_port_base,
        port_base=args.port_base,
        root_dir=args.root_dir,
        event_qps=args.event_qps,
        event_burst=args.event_burst,
    )


@contextlib.asynccontextmanager
async def open_shared_client(kubeconfig: str, *, qps: float, burst: int) -> AsyncIterator[ApiClient]:
    """One client for all nodes: one token bucket, one set of connections. Single requests share
    :data:`REQUEST_CONNECTIONS`; each watch holds a connection of its own while it runs."""
    try:
        config = load_kubeconfig(kubeconfig)
    except KubeConfigError as err:
        raise RuntimeError(f"--kubeconfig: {err}") from None
    async with open_api_client(
        config, qps=qps, burst=burst, max_request_connections=REQUEST_CONNECTIONS
    ) as client:
        yield client


def default_processes() -> int:
    """One worker per core this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _share(total: float, part: int, whole: int) -> float:
    return total * part / whole


def worker_argv(args: argparse.Namespace, part: WorkerSlice) -> list[str]:
    """The command line of the worker that runs ``part`` of ``args``' nodes: the same flags, its own
    range, one process, and its share of the command's rate limits (in proportion to its nodes)."""
    whole = args.nodes
    labels = {k: v for group in args.node_labels for k, v in group.items()}
    argv = [sys.executable, "-m", "kubelet_trio", "sim-nodes", "--supervised", "--processes", "1"]
    argv += ["--kubeconfig", args.kubeconfig, "--name-prefix", args.name_prefix]
    argv += ["--node-offset", str(part.offset), "--nodes", str(part.count)]
    argv += ["--max-pods", str(args.max_pods), "--node-cpu", str(args.node_cpu)]
    argv += ["--node-memory", str(args.node_memory)]
    if labels:
        argv += ["--node-labels", ",".join(f"{k}={v}" for k, v in labels.items())]
    argv += ["--kube-api-qps", repr(_share(args.kube_api_qps, part.count, whole))]
    argv += ["--kube-api-burst", str(max(1, round(_share(args.kube_api_burst, part.count, whole))))]
    argv += ["--event-qps", repr(_share(args.event_qps, part.count, whole))]
    argv += ["--event-burst", str(max(1, round(_share(args.event_burst, part.count, whole))))]
    argv += ["--read-only-port-base", str(args.read_only_port_base), "--port-base", str(args.port_base)]
    argv += ["--root-dir", args.root_dir, "--v", str(args.v)]
    return argv


async def _first_signal(signals: AsyncIterator[int]) -> None:
    async for signum in signals:
        logger.info("stopping", extra=kv(signal=signal.Signals(signum).name))
        return


async def _stdin_closed() -> None:
    """A worker's orphan guard: its stdin is a pipe from the supervisor, closed when the supervisor ends."""
    async with trio.lowlevel.FdStream(os.dup(sys.stdin.fileno())) as stdin:
        while await stdin.receive_some():
            pass
    logger.info("stopping: the supervisor is gone")


async def serve_in_process(args: argparse.Namespace, settings: SimNodesSettings) -> int:
    gc.set_threshold(*GC_THRESHOLDS)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with (
            open_shared_client(args.kubeconfig, qps=args.kube_api_qps, burst=args.kube_api_burst) as client,
            open_sim_nodes(client, settings) as nodes,
        ):
            print(f"{len(nodes)} nodes running", flush=True)  # for scripts: every node is up
            stops: list[Callable[[], Awaitable[None]]] = [partial(_first_signal, signals)]
            if args.supervised:
                stops.append(_stdin_closed)
            await trio_util.wait_any(*stops)
    return 0


async def supervise(args: argparse.Namespace, settings: SimNodesSettings, processes: int) -> int:
    """Run the nodes in worker processes (:mod:`~kubelet_trio.cmd.sim_nodes_supervisor`) until a signal."""
    try:
        load_kubeconfig(args.kubeconfig)  # a bad one is reported once, not by every worker
    except KubeConfigError as err:
        raise RuntimeError(f"--kubeconfig: {err}") from None
    with contextlib.ExitStack() as files:
        if not args.root_dir:  # one for all workers, so a restarted worker finds its nodes' files again
            root = files.enter_context(tempfile.TemporaryDirectory(prefix="kubelet-trio-sim-"))
            args = argparse.Namespace(**{**vars(args), "root_dir": root})
        workers = [
            Worker(part, worker_argv(args, part), description=part.describe(settings.name_prefix))
            for part in split_nodes(settings.offset, settings.nodes, processes)
        ]
        await _run_supervised(workers, settings.nodes)
    return 0


async def _run_supervised(workers: list[Worker], nodes: int) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_cancel_on_signal, signals, nursery.cancel_scope)
            logger.info("starting workers", extra=kv(workers=len(workers), nodes=nodes))
            await nursery.start(run_workers, workers)
            print(f"{nodes} nodes running", flush=True)  # for scripts: every node is up


async def _cancel_on_signal(signals: AsyncIterator[int], scope: trio.CancelScope) -> None:
    await _first_signal(signals)
    scope.cancel()


async def serve(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    settings.check()
    processes = min(args.processes or default_processes(), settings.nodes)
    if processes > 1:
        return await supervise(args, settings, processes)
    return await serve_in_process(args, settings)


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(list(argv))
    if args.nodes is None:
        parser.error("the following arguments are required: --nodes (or --node-count)")
    return args


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    configure_logging(args.v)
    try:
        return trio.run(serve, args)
    except KeyboardInterrupt:
        return 130
    except Exception as err:
        for leaf in _leaves(err):
            if isinstance(leaf, RuntimeError | OSError | ValueError):
                print(f"kubelet-trio sim-nodes: {leaf}", file=sys.stderr)
            else:
                logger.error("sim-nodes failed", exc_info=leaf)
        return 1
