"""betterproto2 imported for the generated bindings (:mod:`kubelet_trio.cri.gen`) without what they never
use, before anything else imports it.

- betterproto2 imports pydantic whenever it is installed, for messages generated as pydantic dataclasses;
  ours are plain (~3 MB and ~25 modules a process otherwise). It is hidden for that import only.
- betterproto2 reads its own version through ``importlib.metadata`` to check the bindings' compiler version;
  that loads ``email``, ``zipfile`` and ``csv`` (~1.4 MB) in a process that needs none of them. The version is
  read from the ``Version:`` line of its installed ``METADATA`` instead, and the check is the same rule (the
  library's and the compiler's major and minor versions match). Where the metadata is not found (an unusual
  installation), the library's own module is used.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types

__all__ = ["import_betterproto2"]

_VERSION_MODULE = "betterproto2._version"


def _installed_version() -> str | None:
    spec = importlib.util.find_spec("betterproto2")
    if spec is None or spec.origin is None:
        return None
    site = os.path.dirname(os.path.dirname(spec.origin))
    try:
        infos = [n for n in os.listdir(site) if n.startswith("betterproto2-") and n.endswith(".dist-info")]
    except OSError:
        return None
    if len(infos) != 1:
        return None
    try:
        with open(os.path.join(site, infos[0], "METADATA"), encoding="utf-8") as f:
            for line in f:
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
                if not line.strip():
                    break  # the end of the headers
    except OSError:
        return None
    return None


def _version_module(version: str) -> types.ModuleType:
    module = types.ModuleType(_VERSION_MODULE)
    module.__version__ = version  # type: ignore[attr-defined]

    def check_compiler_version(compiler_version: str) -> None:
        """Bindings compiled by betterproto2_compiler a.b.c need betterproto2 a.b.x."""
        if version.split(".")[:2] != compiler_version.split(".")[:2]:
            raise ImportError(
                f"betterproto2 {version} cannot load bindings compiled by betterproto2_compiler "
                f"{compiler_version}: their major and minor versions must match (run scripts/gen-proto)"
            )

    module.check_compiler_version = check_compiler_version  # type: ignore[attr-defined]
    return module


def import_betterproto2() -> None:
    """Import betterproto2 as described above; nothing if it is imported already."""
    if "betterproto2" in sys.modules:
        return
    seeded: dict[str, types.ModuleType | None] = {}
    if "pydantic" not in sys.modules:
        seeded["pydantic"] = None  # `import pydantic` raises ImportError
    if "importlib.metadata" not in sys.modules:
        version = _installed_version()
        if version is not None:
            seeded[_VERSION_MODULE] = _version_module(version)
    sys.modules.update(seeded)  # type: ignore[arg-type]
    try:
        import betterproto2  # noqa: F401
    finally:
        if "pydantic" in seeded:
            del sys.modules["pydantic"]
