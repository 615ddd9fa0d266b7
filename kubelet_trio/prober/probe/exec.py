"""exec probes: CRI ExecSync with the probe's timeout (Go: ``pkg/probe/exec``, ``remote_runtime.go``
``ExecSync``). Exit 0 is success, anything else failure with the output; a timeout is a failure."""

from __future__ import annotations

from collections.abc import Sequence

from kubelet_trio.cri import errors as cri_errors
from kubelet_trio.cri.runtime import RuntimeService
from kubelet_trio.prober.probe.result import MAX_OUTPUT_LENGTH, ProbeError, Result

__all__ = ["exec_probe", "run_in_container"]


async def run_in_container(
    runtime: RuntimeService, container_id: str, command: Sequence[str], timeout_seconds: int
) -> tuple[int, str]:
    """``(exit code, stdout + stderr)``; raises TimeoutError on the CRI deadline, ProbeError otherwise.

    ``timeout_seconds`` is the ExecSync request's own field (0: none), enforced by the runtime."""
    try:
        response = await runtime.exec_sync(container_id, list(command), timeout_seconds)
    except cri_errors.DeadlineExceededError as err:
        raise TimeoutError(f'command "{" ".join(command)}" timed out') from err
    except cri_errors.CriError as err:
        raise ProbeError(str(err)) from err
    output = (response.stdout + response.stderr)[:MAX_OUTPUT_LENGTH]
    return response.exit_code, output.decode("utf-8", "replace")


async def exec_probe(
    runtime: RuntimeService, container_id: str, command: Sequence[str], timeout_seconds: int
) -> tuple[Result, str]:
    try:
        code, output = await run_in_container(runtime, container_id, command, timeout_seconds)
    except TimeoutError as err:
        return Result.FAILURE, str(err)
    return (Result.SUCCESS if code == 0 else Result.FAILURE), output
