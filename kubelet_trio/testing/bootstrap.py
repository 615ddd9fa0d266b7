"""A cluster nodes can join by TLS bootstrap: an envtest API server with bootstrap tokens, Node+RBAC
authorization and NodeRestriction, a kube-controller-manager that approves and signs kubelet CSRs, a
bootstrap token and the RBAC bindings kubeadm makes for it.

The controller manager runs only ``csrapproving`` and ``csrsigning`` (what a join needs), signs with the
envtest CA (which the API server trusts for client certificates) and for ``signing_duration``: short in
tests, so that rotation is seen. Its signer backdates ``notBefore`` by 5 minutes, so a certificate of
duration ``d`` lives ``d + 5m`` and is rotated 70-90 % into that.
"""

from __future__ import annotations

import base64
import datetime as dt
import os
import secrets
import subprocess
from pathlib import Path

import attrs
import httpx
import yaml

from kubelet_trio.api.timefmt import rfc3339
from kubelet_trio.testing.envtest import DEFAULT_ASSETS, EnvtestCluster, assets, start_envtest

__all__ = [
    "BUILD_ALL_HINT",
    "BootstrapCluster",
    "bootstrap_assets",
    "start_bootstrap_cluster",
]

CONTROLLER_MANAGER = "kube-controller-manager"
BUILD_ALL_HINT = (
    "build it with `BUILD_ALL=1 bash ../shared/tools/build-envtest.sh "
    "<git dir of github.com/kubegc/liteKube>` "
    f"(adds kube-controller-manager to {DEFAULT_ASSETS}), or point KUBEBUILDER_ASSETS at it"
)
#: The bindings ``kubeadm init`` creates so that nodes join and renew without a human.
RBAC_BINDINGS = {
    "kubeadm:kubelet-bootstrap": ("system:node-bootstrapper", "system:bootstrappers"),
    "kubeadm:node-autoapprove-bootstrap": (
        "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
        "system:bootstrappers",
    ),
    "kubeadm:node-autoapprove-certificate-rotation": (
        "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
        "system:nodes",
    ),
}


def bootstrap_assets() -> Path | None:
    """The envtest directory when it also has kube-controller-manager."""
    directory = assets()
    if directory is not None and os.access(directory / CONTROLLER_MANAGER, os.X_OK):
        return directory
    return None


@attrs.define(eq=False)
class BootstrapCluster:
    envtest: EnvtestCluster
    token: str  # <id>.<secret>
    controller_manager: subprocess.Popen[bytes]
    cm_log: Path

    @property
    def token_id(self) -> str:
        return self.token.split(".")[0]

    def write_bootstrap_kubeconfig(self, path: Path) -> Path:
        """What a node is given to join: the server, its CA, the bootstrap token. Nothing else."""
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "tls-bootstrap-token-user@kubernetes",
                    "contexts": [
                        {
                            "name": "tls-bootstrap-token-user@kubernetes",
                            "context": {"cluster": "kubernetes", "user": "tls-bootstrap-token-user"},
                        }
                    ],
                    "clusters": [
                        {
                            "name": "kubernetes",
                            "cluster": {
                                "server": self.envtest.url,
                                "certificate-authority-data": base64.b64encode(
                                    self.envtest.ca_file.read_bytes()
                                ).decode(),
                            },
                        }
                    ],
                    "users": [{"name": "tls-bootstrap-token-user", "user": {"token": self.token}}],
                }
            )
        )
        return path

    def controller_manager_log(self, chars: int = 4000) -> str:
        try:
            return self.cm_log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        self.controller_manager.terminate()
        try:
            self.controller_manager.wait(10)
        except subprocess.TimeoutExpired:
            self.controller_manager.kill()
            self.controller_manager.wait()
        self.envtest.stop()

    def __enter__(self) -> BootstrapCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _apply(client: httpx.Client, path: str, body: dict[str, object]) -> None:
    answer = client.post(path, json=body)
    if answer.status_code not in (201, 409):
        raise RuntimeError(f"POST {path}: {answer.status_code} {answer.text}")


def _create_token(client: httpx.Client) -> str:
    token_id, secret = secrets.token_hex(3), secrets.token_hex(8)
    expires = rfc3339(dt.datetime.now(dt.UTC) + dt.timedelta(hours=2))
    _apply(
        client,
        "/api/v1/namespaces/kube-system/secrets",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"bootstrap-token-{token_id}", "namespace": "kube-system"},
            "type": "bootstrap.kubernetes.io/token",
            "stringData": {
                "token-id": token_id,
                "token-secret": secret,
                "expiration": expires,
                "usage-bootstrap-authentication": "true",
                "usage-bootstrap-signing": "true",
                "auth-extra-groups": "system:bootstrappers:kubeadm:default-node-token",
            },
        },
    )
    return f"{token_id}.{secret}"


def _bind_rbac(client: httpx.Client) -> None:
    for name, (role, group) in RBAC_BINDINGS.items():
        _apply(
            client,
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}],
            },
        )


def start_bootstrap_cluster(directory: Path, *, signing_duration: str = "3m") -> BootstrapCluster:
    """The control plane, the token and the bindings; the controller manager signing for
    ``signing_duration`` (a Go duration)."""
    envtest = start_envtest(
        directory,
        extra_args=[
            "--enable-bootstrap-token-auth=true",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
        ],
    )
    try:
        with envtest.http_client() as client:
            token = _create_token(client)
            _bind_rbac(client)
        work = envtest.workdir
        cm_log = work / "controller-manager.log"
        with cm_log.open("wb") as out:  # the child keeps its own descriptor
            controller_manager = subprocess.Popen(
                [
                    str(directory / CONTROLLER_MANAGER),
                    f"--kubeconfig={envtest.kubeconfig}",
                    "--controllers=csrapproving,csrsigning",
                    f"--cluster-signing-cert-file={envtest.ca_file}",
                    f"--cluster-signing-key-file={work / 'ca.key'}",
                    f"--cluster-signing-duration={signing_duration}",
                    "--leader-elect=false",
                    "--secure-port=0",
                ],
                stdout=out,
                stderr=out,
            )
    except BaseException:
        envtest.stop()
        raise
    return BootstrapCluster(envtest, token, controller_manager, cm_log)
