"""Service account tokens from the TokenRequest API (Go: ``pkg/kubelet/token``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelet_trio.lazy import lazy_exports

if TYPE_CHECKING:
    from kubelet_trio.token.manager import (
        STANDALONE_ERROR,
        IssuedToken,
        TokenError,
        TokenManager,
        TokenRequest,
    )

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "STANDALONE_ERROR": "kubelet_trio.token.manager",
    "IssuedToken": "kubelet_trio.token.manager",
    "TokenError": "kubelet_trio.token.manager",
    "TokenManager": "kubelet_trio.token.manager",
    "TokenRequest": "kubelet_trio.token.manager",
}

__all__ = ["STANDALONE_ERROR", "IssuedToken", "TokenError", "TokenManager", "TokenRequest"]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
