"""The sim-nodes supervisor's parts: slices, the restart delays, the line relay, the workers' command
lines, and a worker's lifecycle with a stand-in child process (no kubelets)."""

from __future__ import annotations

import os
import signal
import sys

import pytest
import trio
import trio.testing

from kubelet_trio.cmd.sim_nodes import SimNodesSettings, parse_args, worker_argv
from kubelet_trio.cmd.sim_nodes_supervisor import (
    MAX_LINE,
    RestartBackoff,
    Worker,
    WorkerSlice,
    relay_lines,
    split_nodes,
)

HANG_GUARD = 30.0


def test_nodes_split_into_contiguous_slices_of_near_equal_size() -> None:
    assert split_nodes(0, 4, 2) == [WorkerSlice(0, 0, 2), WorkerSlice(1, 2, 2)]
    assert split_nodes(10, 5, 2) == [WorkerSlice(0, 10, 3), WorkerSlice(1, 13, 2)]
    assert split_nodes(0, 2, 8) == [WorkerSlice(0, 0, 1), WorkerSlice(1, 1, 1)]  # no worker without nodes
    assert WorkerSlice(1, 13, 2).describe("sim-") == "sim-13..sim-14"
    assert WorkerSlice(0, 4, 1).describe("edge-") == "edge-4"


def test_restart_delays_double_up_to_the_maximum() -> None:
    backoff = RestartBackoff(initial=1.0, maximum=10.0)
    assert [backoff.delay(n) for n in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


async def test_relay_passes_only_whole_lines() -> None:
    send, receive = trio.testing.memory_stream_one_way_pair()
    written: list[bytes] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(relay_lines, receive, written.append)
        for chunk in (b"one\ntw", b"o", b"\nthree\nfo", b"ur"):
            await send.send_all(chunk)
            await trio.testing.wait_all_tasks_blocked()
        await send.aclose()
    assert written == [b"one\n", b"two\nthree\n", b"four\n"]  # the last line's newline added at the end
    assert all(piece.endswith(b"\n") for piece in written)


async def test_relay_cuts_an_overlong_line_into_whole_lines() -> None:
    send, receive = trio.testing.memory_stream_one_way_pair()
    written: list[bytes] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(relay_lines, receive, written.append)
        await send.send_all(b"x" * (MAX_LINE + 5))
        await send.aclose()
    assert written == [b"x" * MAX_LINE + b"\n", b"xxxxx\n"]


def test_a_worker_gets_its_range_and_its_share_of_the_limits() -> None:
    args = parse_args(
        [
            *("--kubeconfig", "kc", "--nodes", "3", "--node-offset", "10", "--name-prefix", "edge-"),
            *("--kube-api-qps", "300", "--kube-api-burst", "30", "--event-qps", "0"),
            *("--node-labels", "a=1", "--node-labels", "b=2", "--port-base", "20000"),
        ]
    )
    first, second = split_nodes(args.node_offset, args.nodes, 2)
    argv = worker_argv(args, second)
    assert argv[:4] == [sys.executable, "-m", "kubelet_trio", "sim-nodes"]
    worker = parse_args(argv[4:])
    assert (worker.node_offset, worker.nodes, worker.processes) == (12, 1, 1)
    assert worker.supervised
    assert worker.kube_api_qps == pytest.approx(100.0)  # a third of the nodes: a third of the limit
    assert worker.kube_api_burst == 10
    assert worker.event_qps == 0  # no limit stays no limit
    assert worker.name_prefix == "edge-"
    assert worker.node_labels == [{"a": "1", "b": "2"}]
    assert worker.port_base == 20000  # node i still serves on base + i: the index is global
    assert parse_args(worker_argv(args, first)[4:]).kube_api_qps == pytest.approx(200.0)


def test_the_global_index_must_leave_room_for_every_port() -> None:
    SimNodesSettings(nodes=10, offset=100, port_base=65000).check()
    with pytest.raises(ValueError, match="--port-base 65000 \\+ node index 600 is beyond port 65535"):
        SimNodesSettings(nodes=10, offset=591, port_base=65000).check()
    with pytest.raises(ValueError, match="--node-offset \\+ --nodes must be at most"):
        SimNodesSettings(nodes=2, offset=2**15 - 1).check()


def test_node_count_is_another_name_for_nodes() -> None:
    args = parse_args(["--kubeconfig", "kc", "--node-count", "4", "--node-offset", "8"])
    assert (args.nodes, args.node_offset, args.processes) == (4, 8, None)
    with pytest.raises(SystemExit):
        parse_args(["--kubeconfig", "kc"])


# A stand-in worker: logs a line, says its nodes run, then runs until its stdin closes or a signal. The log
# line comes first so that it is in the pipe before the test, told the nodes run, kills the worker.
STAND_IN = (
    "import sys; sys.stderr.write('worker line\\n'); sys.stderr.flush(); "
    "print('1 nodes running', flush=True); sys.stdin.read()"
)


async def test_a_killed_worker_is_restarted_and_a_cancelled_one_stopped() -> None:
    written: list[bytes] = []
    worker = Worker(
        WorkerSlice(0, 0, 1),
        [sys.executable, "-c", STAND_IN],
        backoff=RestartBackoff(initial=0.0),
        write=written.append,
    )
    with trio.fail_after(HANG_GUARD):
        async with trio.open_nursery() as nursery:
            await nursery.start(worker.run)
            first = worker.pid.value
            assert first is not None and worker.running.value
            os.kill(first, signal.SIGKILL)
            await worker.running.wait_value(False)
            await worker.running.wait_value(True)
            second = worker.pid.value
            assert second is not None and second != first
            assert worker.restarts == 1
            nursery.cancel_scope.cancel()
    assert worker.pid.value is None
    with pytest.raises(ProcessLookupError):
        os.kill(second, 0)  # stopped and reaped, not orphaned
    assert written.count(b"worker line\n") == 2  # each run's log reached the supervisor's


async def test_a_worker_that_exits_before_its_nodes_run_fails_the_start() -> None:
    written: list[bytes] = []
    failing = "import sys; sys.stderr.write('kubelet-trio sim-nodes: no cluster\\n'); sys.exit(1)"
    worker = Worker(
        WorkerSlice(1, 2, 2), [sys.executable, "-c", failing], "sim-2..sim-3", write=written.append
    )
    with (
        trio.fail_after(HANG_GUARD),
        pytest.RaisesGroup(
            pytest.RaisesExc(RuntimeError, match=r"worker 1 \(sim-2..sim-3\) exited with exit code 1 before")
        ),
    ):
        async with trio.open_nursery() as nursery:
            await nursery.start(worker.run)
    assert written == [b"kubelet-trio sim-nodes: no cluster\n"]
