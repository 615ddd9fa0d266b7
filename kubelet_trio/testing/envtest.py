"""A real etcd + kube-apiserver on loopback ports, for the envtest and conformance tiers.

The binaries are ``$KUBEBUILDER_ASSETS`` (as controller-runtime's envtest looks), else the Kubernetes 1.36
build's ``$K136/bin`` (:data:`DEFAULT_ASSETS`); :data:`BUILD_HINT` says how to build them.

The API server gets a serving certificate from a throwaway CA (so kubeconfigs verify TLS), a static token
with ``system:masters``, AlwaysAllow authorization and no ServiceAccount admission (no controller manager
creates service accounts here), and a client certificate from the same CA for dialling kubelets (so a
kubelet started with ``--client-ca-file`` authenticates it as ``kube-apiserver``).

Synchronous on purpose, like :class:`~kubelet_trio.testing.env.LocalCriEnvironment`: it runs from pytest
session fixtures before any Trio loop exists. ``trustme`` (the test extra) is imported when a cluster starts.
"""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import attrs
import httpx
import yaml

from kubelet_trio.testing.registry import free_port

__all__ = ["BUILD_HINT", "DEFAULT_ASSETS", "EnvtestCluster", "assets", "skip_reason", "start_envtest"]

#: Where ``../shared/tools/k8s/build-k136.sh`` puts the Kubernetes 1.36 binaries (``$K136/bin``): the API
#: server release the tiers run against (the kubelet follows 1.36 and must not be newer than its API server).
DEFAULT_ASSETS = Path(os.environ.get("K136") or "/tmp/k136") / "bin"
BINARIES = ("etcd", "kube-apiserver")
BUILD_HINT = (
    "build them with `bash ../shared/tools/k8s/build-k136.sh <git dir of github.com/openshift/microshift>` "
    f"(Kubernetes 1.36 into {DEFAULT_ASSETS}; the node parts beside them with "
    f"`DEST={DEFAULT_ASSETS} bash ../shared/tools/build-node-parts.sh <git dirs>`), "
    "or point KUBEBUILDER_ASSETS at them"
)
TOKEN = "envtest-admin-token"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0


def assets() -> Path | None:
    """The directory with ``etcd`` and ``kube-apiserver``, or None when these tiers cannot run."""
    configured = os.environ.get("KUBEBUILDER_ASSETS")
    for directory in (Path(configured),) if configured else (DEFAULT_ASSETS,):
        if all(os.access(directory / b, os.X_OK) for b in BINARIES):
            return directory
    return None


def skip_reason(tier: str) -> str:
    """Why ``tier`` cannot run here, with the way to make it run."""
    where = os.environ.get("KUBEBUILDER_ASSETS") or f"{DEFAULT_ASSETS} (KUBEBUILDER_ASSETS unset)"
    return f"{tier} tier skipped: no executable etcd + kube-apiserver in {where}; {BUILD_HINT}"


@attrs.define(eq=False)
class EnvtestCluster:
    """A running control plane; :meth:`stop` ends it and removes its files."""

    url: str
    kubeconfig: Path
    ca_file: Path
    workdir: Path
    log: Path
    token: str = TOKEN
    _procs: list[subprocess.Popen[bytes]] = attrs.Factory(list)

    def ssl_context(self) -> ssl.SSLContext:
        """Verifies the API server's certificate (httpx wants a context, not a path)."""
        return ssl.create_default_context(cafile=str(self.ca_file))

    def http_client(self) -> httpx.Client:
        """A synchronous admin client (set-up and tear-down outside Trio)."""
        return httpx.Client(
            base_url=self.url,
            verify=self.ssl_context(),
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=10,
        )

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        for proc in reversed(self._procs):
            proc.terminate()
            try:
                proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._procs.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> EnvtestCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _write_kubeconfig(path: Path, url: str, ca_file: Path, token: str) -> None:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "envtest",
                "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": "admin"}}],
                "clusters": [
                    {"name": "envtest", "cluster": {"server": url, "certificate-authority": str(ca_file)}}
                ],
                "users": [{"name": "admin", "user": {"token": token}}],
            }
        )
    )


def start_envtest(
    directory: Path,
    *,
    extra_args: Sequence[str] = (),
    authorization_mode: str = "AlwaysAllow",
    service_account_admission: bool = False,
) -> EnvtestCluster:
    """Start etcd and kube-apiserver from ``directory`` and wait until ``/readyz`` answers 200.

    ``extra_args`` are appended to kube-apiserver's command line (a later scalar flag wins; a list flag
    such as ``--authorization-mode`` adds to the earlier value, hence its own parameter).
    ``service_account_admission`` keeps the ServiceAccount admission plugin on (it copies a service
    account's ``imagePullSecrets`` into its pods): nothing creates service accounts here, so a pod's
    namespace then needs its ``default`` ServiceAccount created by the test, and with
    ``automountServiceAccountToken: false`` unless the namespace has a ``kube-root-ca.crt`` ConfigMap.
    """
    import trustme
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    work = Path(tempfile.mkdtemp(prefix="kubelet-trio-envtest-"))
    ca = trustme.CA()
    ca_file = work / "ca.crt"
    ca.cert_pem.write_to_path(str(ca_file))
    ca.private_key_pem.write_to_path(str(work / "ca.key"))  # a controller manager signs CSRs with it
    serving = ca.issue_cert("127.0.0.1", "localhost")
    serving.cert_chain_pems[0].write_to_path(str(work / "apiserver.crt"))
    serving.private_key_pem.write_to_path(str(work / "apiserver.key"))
    kubelet_client = ca.issue_cert("kube-apiserver", common_name="kube-apiserver")
    kubelet_client.cert_chain_pems[0].write_to_path(str(work / "kubelet-client.crt"))
    kubelet_client.private_key_pem.write_to_path(str(work / "kubelet-client.key"))
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (work / "sa.key").write_bytes(
        sa_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    (work / "tokens.csv").write_text(f'{TOKEN},admin,admin,"system:masters"\n')
    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    etcd_url = f"http://127.0.0.1:{etcd_port}"
    url = f"https://127.0.0.1:{api_port}"
    log = work / "envtest.log"
    kubeconfig = work / "kubeconfig"
    _write_kubeconfig(kubeconfig, url, ca_file, TOKEN)
    cluster = EnvtestCluster(url, kubeconfig, ca_file, work, log)
    etcd = [
        str(directory / "etcd"),
        f"--data-dir={work / 'etcd'}",
        f"--listen-client-urls={etcd_url}",
        *((f"--advertise-client-urls={etcd_url}",) if _etcd_needs_advertise(directory / "etcd") else ()),
        f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
        "--unsafe-no-fsync=true",
    ]
    apiserver = [
        str(directory / "kube-apiserver"),
        f"--etcd-servers={etcd_url}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={api_port}",
        f"--cert-dir={work / 'certs'}",
        f"--tls-cert-file={work / 'apiserver.crt'}",
        f"--tls-private-key-file={work / 'apiserver.key'}",
        f"--client-ca-file={ca_file}",
        f"--token-auth-file={work / 'tokens.csv'}",
        f"--kubelet-client-certificate={work / 'kubelet-client.crt'}",
        f"--kubelet-client-key={work / 'kubelet-client.key'}",
        f"--authorization-mode={authorization_mode}",
        *(() if service_account_admission else ("--disable-admission-plugins=ServiceAccount",)),
        "--service-cluster-ip-range=10.0.0.0/24",
        "--allow-privileged=true",
        f"--service-account-issuer={url}",
        f"--service-account-key-file={work / 'sa.key'}",
        f"--service-account-signing-key-file={work / 'sa.key'}",
        *extra_args,
    ]
    try:
        with log.open("wb") as out:  # the children keep their own descriptors
            cluster._procs.append(subprocess.Popen(etcd, stdout=out, stderr=out))
            cluster._procs.append(subprocess.Popen(apiserver, stdout=out, stderr=out))
        _wait_ready(cluster)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _etcd_needs_advertise(etcd: Path) -> bool:
    """A released etcd wants ``--advertise-client-urls`` with explicit listen URLs; the embedded etcd 3.6
    of the 1.36 build advertises what it listens on and refuses the flag."""
    try:
        usage = subprocess.run([str(etcd), "--help"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return True
    return b"advertise-client-urls" in usage.stdout + usage.stderr


def _program(proc: subprocess.Popen[bytes]) -> str:
    """The program a child process runs (its argv[0])."""
    args = proc.args
    if isinstance(args, str | bytes | os.PathLike):
        return os.fsdecode(args)
    return os.fsdecode(args[0])


def _wait_ready(cluster: EnvtestCluster) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    with cluster.http_client() as client:
        while time.monotonic() < deadline:
            exited = [_program(p) for p in cluster._procs if p.poll() is not None]
            if exited:
                raise RuntimeError(f"{exited[0]} exited during start-up:\n{cluster.log_tail()}")
            try:
                if client.get("/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
    raise RuntimeError(f"kube-apiserver not ready within {START_TIMEOUT:g}s:\n{cluster.log_tail()}")
