"""One registry credential (Go: ``credentialprovider.AuthConfig``), safe to print.

A credential is a secret: its ``repr``/``str`` names the user and which secret fields are set, never
their values, so a credential that ends up in a log line, an event or an exception message gives
nothing away. :meth:`AuthConfig.to_cri` is the one place the values leave, into the CRI
``PullImageRequest.auth``.
"""

from __future__ import annotations

import attrs

from kubelet_trio.cri.gen.runtime import v1 as pb

__all__ = ["AuthConfig"]

_SECRET_FIELDS = ("password", "auth", "identity_token", "registry_token")


@attrs.frozen(repr=False)
class AuthConfig:
    """The fields of the CRI ``AuthConfig``.

    The keyring fills ``username``/``password`` (an ``auth`` entry of a docker config is decoded into
    them, as Go does) and, beyond Go, ``identity_token``/``registry_token`` when a docker config entry
    has ``identitytoken``/``registrytoken``. ``auth`` and ``server_address`` stay empty, as in Go.
    """

    username: str = ""
    password: str = ""
    auth: str = ""
    server_address: str = ""
    identity_token: str = ""
    registry_token: str = ""

    def __repr__(self) -> str:
        hidden = [f"{name}=<redacted>" for name in _SECRET_FIELDS if getattr(self, name)]
        shown = [f"username={self.username!r}"]
        if self.server_address:
            shown.append(f"server_address={self.server_address!r}")
        return f"AuthConfig({', '.join(shown + hidden)})"

    __str__ = __repr__

    def to_cri(self) -> pb.AuthConfig:
        """The CRI message for ``PullImage`` (Go: ``kuberuntime_image.go`` ``PullImage``)."""
        return pb.AuthConfig(
            username=self.username,
            password=self.password,
            auth=self.auth,
            server_address=self.server_address,
            identity_token=self.identity_token,
            registry_token=self.registry_token,
        )
