"""Reading a kubeconfig file (``clientcmd``) into what the API client needs, for its current context.

Supported: ``current-context`` (or an explicit context), the cluster's ``server``,
``certificate-authority`` / ``certificate-authority-data``, ``insecure-skip-tls-verify`` and
``tls-server-name``; the user's ``client-certificate`` / ``client-key`` (files or ``-data``), ``token`` and
``tokenFile``. Relative paths are relative to the kubeconfig file, as in client-go. Exec and auth-provider
plugins are not supported (a clear error says so).
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from pathlib import Path
from typing import Any

import attrs
import yaml

__all__ = [
    "KubeConfig",
    "KubeConfigError",
    "load_kubeconfig",
    "make_ssl_context",
    "write_client_cert_kubeconfig",
]


class KubeConfigError(Exception):
    """The kubeconfig is missing, malformed, or names something it does not define."""


@attrs.frozen
class KubeConfig:
    """One resolved context: where the API server is and how to authenticate to it."""

    server: str
    ca_data: bytes | None = None  # PEM
    client_cert_data: bytes | None = None  # PEM
    client_key_data: bytes | None = None  # PEM
    token: str | None = None
    token_file: str | None = None
    insecure_skip_tls_verify: bool = False
    tls_server_name: str | None = None
    namespace: str = "default"
    context: str | None = None

    @property
    def uses_tls(self) -> bool:
        return self.server.startswith("https://")


def _named(entries: Any, name: str, kind: str, path: Path) -> dict[str, Any]:
    for entry in entries or ():
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(kind)
            if not isinstance(body, dict):
                raise KubeConfigError(f"{path}: {kind} {name!r} has no {kind!r} section")
            return body
    raise KubeConfigError(f"{path}: no {kind} named {name!r}")


def _read_pem(section: dict[str, Any], key: str, base: Path, path: Path) -> bytes | None:
    """``<key>-data`` (base64 PEM) wins over ``<key>`` (a file path, relative to the kubeconfig)."""
    data = section.get(f"{key}-data")
    if data:
        try:
            return base64.b64decode(data, validate=True)
        except ValueError as err:
            raise KubeConfigError(f"{path}: {key}-data is not valid base64: {err}") from None
    file = section.get(key)
    if file:
        file_path = Path(file) if os.path.isabs(file) else base / file
        try:
            return file_path.read_bytes()
        except OSError as err:
            raise KubeConfigError(f"{path}: cannot read {key} {file_path}: {err}") from None
    return None


def load_kubeconfig(path: str | os.PathLike[str], *, context: str | None = None) -> KubeConfig:
    """Load ``path`` and resolve ``context`` (default: its ``current-context``). Reads referenced files."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as err:
        raise KubeConfigError(f"cannot read kubeconfig {path}: {err}") from None
    except yaml.YAMLError as err:
        raise KubeConfigError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(doc, dict):
        raise KubeConfigError(f"{path}: not a kubeconfig (expected a mapping)")
    base = path.parent
    context_name = context or doc.get("current-context")
    if not context_name:
        raise KubeConfigError(f"{path}: no current-context and no context given")
    ctx = _named(doc.get("contexts"), context_name, "context", path)
    cluster = _named(doc.get("clusters"), str(ctx.get("cluster")), "cluster", path)
    user: dict[str, Any] = {}
    if ctx.get("user"):
        user = _named(doc.get("users"), str(ctx.get("user")), "user", path)
    if user.get("exec") or user.get("auth-provider"):
        raise KubeConfigError(f"{path}: exec and auth-provider credentials are not supported")
    server = cluster.get("server")
    if not server:
        raise KubeConfigError(f"{path}: cluster {ctx.get('cluster')!r} has no server")
    token_file = user.get("tokenFile")
    if token_file and not os.path.isabs(token_file):
        token_file = str(base / token_file)
    return KubeConfig(
        server=str(server).rstrip("/"),
        ca_data=_read_pem(cluster, "certificate-authority", base, path),
        client_cert_data=_read_pem(user, "client-certificate", base, path),
        client_key_data=_read_pem(user, "client-key", base, path),
        token=user.get("token") or None,
        token_file=token_file or None,
        insecure_skip_tls_verify=bool(cluster.get("insecure-skip-tls-verify", False)),
        tls_server_name=cluster.get("tls-server-name") or None,
        namespace=str(ctx.get("namespace") or "default"),
        context=str(context_name),
    )


def make_ssl_context(config: KubeConfig) -> ssl.SSLContext:
    """Verification is on unless the kubeconfig says ``insecure-skip-tls-verify``; the CA is the
    kubeconfig's when given, else the system store."""
    if config.insecure_skip_tls_verify:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif config.ca_data:
        ctx = ssl.create_default_context(cadata=config.ca_data.decode("ascii", "replace"))
    else:
        ctx = ssl.create_default_context()
    if config.client_cert_data:
        # The ssl module loads chains from files only: write them to a private directory briefly.
        with tempfile.TemporaryDirectory(prefix="kubelet-trio-tls-") as tmp:
            cert = Path(tmp) / "client.crt"
            key = Path(tmp) / "client.key"
            cert.write_bytes(config.client_cert_data)
            cert.chmod(0o600)
            if config.client_key_data:
                key.write_bytes(config.client_key_data)
                key.chmod(0o600)
            try:
                ctx.load_cert_chain(str(cert), str(key) if config.client_key_data else None)
            except ssl.SSLError as err:
                raise KubeConfigError(f"client certificate/key do not load: {err}") from None
    return ctx


def write_client_cert_kubeconfig(config: KubeConfig, path: str | os.PathLike[str], pem_path: str) -> None:
    """Write a kubeconfig for ``config``'s cluster (server, CA, TLS options) that authenticates with the
    certificate and key in ``pem_path`` (one file holding both), as the Go kubelet writes after TLS
    bootstrap: cluster ``default-cluster``, user ``default-auth``, context ``default-context``. The file
    is replaced atomically and readable by its owner only. Blocking."""
    cluster: dict[str, Any] = {"server": config.server}
    if config.insecure_skip_tls_verify:
        cluster["insecure-skip-tls-verify"] = True
    if config.ca_data:
        cluster["certificate-authority-data"] = base64.b64encode(config.ca_data).decode()
    if config.tls_server_name:
        cluster["tls-server-name"] = config.tls_server_name
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "default-cluster", "cluster": cluster}],
        "users": [{"name": "default-auth", "user": {"client-certificate": pem_path, "client-key": pem_path}}],
        "contexts": [
            {
                "name": "default-context",
                "context": {"cluster": "default-cluster", "user": "default-auth", "namespace": "default"},
            }
        ],
        "current-context": "default-context",
        "preferences": {},
    }
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        yaml.safe_dump(doc, out, sort_keys=False)
    tmp.replace(target)
