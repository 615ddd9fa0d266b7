"""The envtest tier: a real etcd + kube-apiserver from ``KUBEBUILDER_ASSETS`` (skipped when absent, never
faked). The binaries are the ones ``setup-envtest`` installs (``etcd``, ``kube-apiserver``).

The API server gets a serving certificate from a throwaway CA (so the kubeconfig verifies TLS), a static
token with ``system:masters``, AlwaysAllow authorization and no ServiceAccount admission (no controller
manager creates service accounts here).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import httpx
import pytest
import trustme
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

TOKEN = "envtest-admin-token"
START_TIMEOUT = 60.0


@attrs.frozen
class EnvtestCluster:
    url: str
    kubeconfig: Path
    ca_file: Path
    token: str = TOKEN


def assets() -> Path | None:
    """The directory with ``etcd`` and ``kube-apiserver``, or None when this tier cannot run."""
    directory = os.environ.get("KUBEBUILDER_ASSETS")
    if not directory:
        return None
    path = Path(directory)
    if all(os.access(path / b, os.X_OK) for b in ("etcd", "kube-apiserver")):
        return path
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(url: str, ca_file: Path, procs: list[subprocess.Popen[bytes]], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    with httpx.Client(verify=str(ca_file), headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in procs):
                break
            try:
                if client.get(f"{url}/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
    raise RuntimeError(f"kube-apiserver did not become ready:\n{log.read_text()[-4000:]}")


@pytest.fixture(scope="session")
def envtest() -> Iterator[EnvtestCluster]:
    directory = assets()
    if directory is None:
        pytest.skip("envtest tier: KUBEBUILDER_ASSETS does not point at etcd + kube-apiserver")
    work = Path(tempfile.mkdtemp(prefix="kubelet-trio-envtest-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        ca = trustme.CA()
        ca_file = work / "ca.crt"
        ca.cert_pem.write_to_path(str(ca_file))
        serving = ca.issue_cert("127.0.0.1", "localhost")
        serving.cert_chain_pems[0].write_to_path(str(work / "apiserver.crt"))
        serving.private_key_pem.write_to_path(str(work / "apiserver.key"))
        sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        (work / "sa.key").write_bytes(
            sa_key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        (work / "tokens.csv").write_text(f'{TOKEN},admin,admin,"system:masters"\n')
        etcd_port, peer_port, api_port = _free_port(), _free_port(), _free_port()
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        log = work / "envtest.log"
        out = log.open("wb")
        procs.append(
            subprocess.Popen(
                [
                    str(directory / "etcd"),
                    f"--data-dir={work / 'etcd'}",
                    f"--listen-client-urls={etcd_url}",
                    f"--advertise-client-urls={etcd_url}",
                    f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                    "--unsafe-no-fsync=true",
                ],
                stdout=out,
                stderr=out,
            )
        )
        url = f"https://127.0.0.1:{api_port}"
        procs.append(
            subprocess.Popen(
                [
                    str(directory / "kube-apiserver"),
                    f"--etcd-servers={etcd_url}",
                    "--bind-address=127.0.0.1",
                    "--advertise-address=127.0.0.1",
                    f"--secure-port={api_port}",
                    f"--cert-dir={work / 'certs'}",
                    f"--tls-cert-file={work / 'apiserver.crt'}",
                    f"--tls-private-key-file={work / 'apiserver.key'}",
                    f"--token-auth-file={work / 'tokens.csv'}",
                    "--authorization-mode=AlwaysAllow",
                    "--disable-admission-plugins=ServiceAccount",
                    "--service-cluster-ip-range=10.0.0.0/24",
                    "--allow-privileged=true",
                    f"--service-account-issuer={url}",
                    f"--service-account-key-file={work / 'sa.key'}",
                    f"--service-account-signing-key-file={work / 'sa.key'}",
                ],
                stdout=out,
                stderr=out,
            )
        )
        _wait_ready(url, ca_file, procs, log)
        kubeconfig = work / "kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "envtest",
                    "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": "admin"}}],
                    "clusters": [
                        {"name": "envtest", "cluster": {"server": url, "certificate-authority": str(ca_file)}}
                    ],
                    "users": [{"name": "admin", "user": {"token": TOKEN}}],
                }
            )
        )
        yield EnvtestCluster(url, kubeconfig, ca_file)
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)
