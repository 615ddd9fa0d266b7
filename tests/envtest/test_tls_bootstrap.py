"""A node joins a real cluster from a bootstrap token alone and rotates its client certificate.

kube-apiserver (bootstrap tokens, Node+RBAC, NodeRestriction) and kube-controller-manager (csrapproving,
csrsigning; 3-minute certificates) from the envtest binaries; the node is the ``kubelet-trio`` daemon on
the simulated runtime, given only ``--bootstrap-kubeconfig`` (server, CA, token). It gets its CSR
auto-approved, runs a pod, renews its certificate as ``system:node:<name>`` (selfnodeclient) before
expiry without restarting, keeps its pod and goes on following the API server (a pod created after the
rotation runs). Skipped, with the build command, without kube-controller-manager; in CI with the binaries
present it runs (tests/conftest.py fails a skipped envtest test).
"""

from __future__ import annotations

import base64
import datetime as dt
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from kubelet_trio.testing.bootstrap import (
    BUILD_ALL_HINT,
    BootstrapCluster,
    bootstrap_assets,
    start_bootstrap_cluster,
)
from kubelet_trio.testing.pods import pod_manifest
from kubelet_trio.testing.registry import free_port

NODE = "edge-bootstrap-1"
PODS = "/api/v1/namespaces/default/pods"
CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
#: 3m certificates backdated 5m rotate 0.6-2.2 min after they are issued; room for start-up on top.
ROTATION_WAIT = 240.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[BootstrapCluster]:
    directory = bootstrap_assets()
    if directory is None:
        pytest.skip(
            "TLS bootstrap tier skipped: no kube-controller-manager with the envtest binaries; "
            + BUILD_ALL_HINT
        )
    with start_bootstrap_cluster(directory, signing_duration="3m") as cluster:
        yield cluster


def wait_for(
    what: str,
    check: Callable[[], Any],
    proc: subprocess.Popen[bytes],
    logs: Callable[[], str],
    timeout: float,
) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"kubelet exited with {proc.returncode}:\n{logs()}"
        result = check()
        if result:
            return result
        time.sleep(0.5)
    raise AssertionError(f"{what}: not within {timeout:g}s\n{logs()}")


def test_a_node_joins_with_a_bootstrap_token_and_rotates_its_certificate(
    cluster: BootstrapCluster, tmp_path: Path
) -> None:
    boot = cluster.write_bootstrap_kubeconfig(tmp_path / "bootstrap-kubelet.conf")
    kubeconfig, cert_dir = tmp_path / "kubelet.conf", tmp_path / "pki"
    log = tmp_path / "kubelet.log"
    kubelet_port = free_port()

    def logs() -> str:  # the last lines first: a failure report may keep only a message's two ends
        text = log.read_text(errors="replace")
        return (
            "--- the kubelet's last lines ---\n"
            + "\n".join(text.splitlines()[-6:])
            + "\n--- kubelet ---\n"
            + text[-6000:]
            + "\n--- controller manager ---\n"
            + cluster.controller_manager_log(2000)
        )

    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kubelet_trio", "--kubeconfig", str(kubeconfig),
             "--bootstrap-kubeconfig", str(boot), "--cert-dir", str(cert_dir), "--rotate-certificates",
             "--runtime", "sim", "--hostname-override", NODE, "--node-ip", "127.0.0.1",
             "--root-dir", str(tmp_path / "root"), "--pod-logs-dir", str(tmp_path / "logs"),
             "--rotate-server-certificates", "--address", "127.0.0.1", "--port", str(kubelet_port),
             "--healthz-port", "0", "--read-only-port", "0", "--sync-frequency", "5s"],
            stdout=out, stderr=out,
        )  # fmt: skip
    try:
        with cluster.envtest.http_client() as admin:

            def get(path: str) -> Any:
                answer = admin.get(path)
                return answer.json() if answer.status_code == 200 else None

            def node_csrs() -> list[dict[str, Any]]:
                items = (get(CSRS) or {}).get("items", [])
                return [
                    c
                    for c in items
                    if c["spec"]["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet"
                ]

            # joined: the bootstrap CSR was made by the token's user and approved by the controller manager
            node = wait_for("node registered", lambda: get(f"/api/v1/nodes/{NODE}"), proc, logs, 90)
            (first_csr,) = node_csrs()
            assert first_csr["spec"]["username"] == f"system:bootstrap:{cluster.token_id}"
            assert "system:bootstrappers" in first_csr["spec"]["groups"]
            assert [c["reason"] for c in first_csr["status"]["conditions"]] == ["AutoApproved"]
            assert node["metadata"]["name"] == NODE
            first_cert = x509.load_pem_x509_certificate(base64.b64decode(first_csr["status"]["certificate"]))
            assert first_cert.subject.rfc4514_string() == f"CN=system:node:{NODE},O=system:nodes"
            assert (cert_dir / "kubelet-client-current.pem").is_symlink()
            assert kubeconfig.exists() and "token" not in kubeconfig.read_text()

            def ready() -> bool:
                conditions = (get(f"/api/v1/nodes/{NODE}") or {}).get("status", {}).get("conditions", [])
                return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

            wait_for("node Ready", ready, proc, logs, 60)

            # the serving certificate: requested by the node, approved here (as an operator would; the
            # controller manager never approves kubelet-serving), signed by the controller manager, served
            def serving_csr() -> dict[str, Any] | None:
                items = (get(CSRS) or {}).get("items", [])
                mine = [c for c in items if c["spec"]["signerName"] == "kubernetes.io/kubelet-serving"]
                return mine[0] if mine else None

            csr = wait_for("serving CSR", serving_csr, proc, logs, 60)
            assert csr["spec"]["username"] == f"system:node:{NODE}"
            csr["status"]["conditions"] = [
                {
                    "type": "Approved",
                    "status": "True",
                    "reason": "TestApproved",
                    "message": "addresses checked",
                }
            ]
            approval = admin.put(f"{CSRS}/{csr['metadata']['name']}/approval", json=csr)
            assert approval.status_code == 200, approval.text

            def issued() -> bytes | None:
                cert = ((get(f"{CSRS}/{csr['metadata']['name']}") or {}).get("status") or {}).get(
                    "certificate"
                )
                return base64.b64decode(cert) if cert else None

            serving = x509.load_pem_x509_certificate(wait_for("serving certificate", issued, proc, logs, 60))
            trust = ssl.create_default_context(cafile=str(cluster.envtest.ca_file))
            trust.check_hostname = False

            def served_serial() -> int | None:
                try:
                    with (
                        socket.create_connection(("127.0.0.1", kubelet_port), timeout=5) as raw,
                        trust.wrap_socket(raw) as tls,
                    ):
                        der = tls.getpeercert(binary_form=True)
                except (ssl.SSLError, OSError):
                    return None
                return x509.load_der_x509_certificate(der).serial_number if der else None

            assert wait_for("issued serving certificate served", served_serial, proc, logs, 30) == (
                serving.serial_number
            )
            created = admin.post(PODS, json=pod_manifest("before", {"app": "run"}, node=NODE))
            assert created.status_code == 201, created.text

            def running(name: str) -> dict[str, Any] | None:
                pod = get(f"{PODS}/{name}") or {}
                statuses = pod.get("status", {}).get("containerStatuses", [])
                if (
                    pod.get("status", {}).get("phase") == "Running"
                    and statuses
                    and "running" in statuses[0]["state"]
                ):
                    return pod
                return None

            before = wait_for("pod before rotation running", lambda: running("before"), proc, logs, 60)

            # rotation: a second CSR, this time by the node itself, auto-approved as selfnodeclient
            def rotated() -> dict[str, Any] | None:
                mine = [c for c in node_csrs() if c["spec"]["username"] == f"system:node:{NODE}"]
                return mine[0] if mine and (mine[0].get("status") or {}).get("certificate") else None

            renewal = wait_for("client certificate rotated", rotated, proc, logs, ROTATION_WAIT)
            assert [c["reason"] for c in renewal["status"]["conditions"]] == ["AutoApproved"]
            new_cert = x509.load_pem_x509_certificate(base64.b64decode(renewal["status"]["certificate"]))
            assert new_cert.serial_number != first_cert.serial_number
            assert new_cert.not_valid_before_utc > first_cert.not_valid_before_utc
            # the signer backdates notBefore by 5 minutes: the renewal was issued at its notBefore + 5m
            issued = new_cert.not_valid_before_utc + dt.timedelta(minutes=5)
            fraction_used = (issued - first_cert.not_valid_before_utc) / (
                first_cert.not_valid_after_utc - first_cert.not_valid_before_utc
            )
            assert 0.7 <= fraction_used < 0.95  # issued at 70-90 % of the old lifetime (plus signing time)

            def current_is_new() -> bool:
                pem = (cert_dir / "kubelet-client-current.pem").read_bytes()
                return x509.load_pem_x509_certificates(pem)[0].serial_number == new_cert.serial_number

            wait_for("the new pair stored", current_is_new, proc, logs, 30)
            # the node goes on without a restart: its pod kept, a new pod seen through the watch and run
            created = admin.post(PODS, json=pod_manifest("after", {"app": "run"}, node=NODE))
            assert created.status_code == 201, created.text
            wait_for("pod after rotation running", lambda: running("after"), proc, logs, 60)
            still = running("before")
            assert still is not None
            assert (
                still["status"]["containerStatuses"][0]["containerID"]
                == before["status"]["containerStatuses"][0]["containerID"]
            )
            assert still["status"]["containerStatuses"][0]["restartCount"] == 0
            assert "certificate rotated" in log.read_text()
            assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, logs()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
