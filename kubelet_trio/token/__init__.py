"""Service account tokens from the TokenRequest API (Go: ``pkg/kubelet/token``)."""

from kubelet_trio.token.manager import (
    STANDALONE_ERROR,
    IssuedToken,
    TokenError,
    TokenManager,
    TokenRequest,
)

__all__ = ["STANDALONE_ERROR", "IssuedToken", "TokenError", "TokenManager", "TokenRequest"]
