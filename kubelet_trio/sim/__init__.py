"""The simulated container runtime: in memory, scripted, driven by Trio's clock.

``SimRuntime`` implements the :class:`~kubelet_trio.cri.runtime.Runtime` protocol; behaviour scripts are
documented in :mod:`kubelet_trio.sim.script`; :func:`kubelet_trio.sim.server.serve_sim_cri` serves a
SimRuntime as a CRI gRPC server (imported from there, since it pulls in asyncio and grpclib).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.sim.runtime import SIM_ANNOTATION_PREFIX, SimRuntime
    from kubelet_trio.sim.script import Behaviour, ScriptError, parse_script

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "SIM_ANNOTATION_PREFIX": "kubelet_trio.sim.runtime",
    "SimRuntime": "kubelet_trio.sim.runtime",
    "Behaviour": "kubelet_trio.sim.script",
    "ScriptError": "kubelet_trio.sim.script",
    "parse_script": "kubelet_trio.sim.script",
}

__all__ = ["SIM_ANNOTATION_PREFIX", "Behaviour", "ScriptError", "SimRuntime", "parse_script"]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
