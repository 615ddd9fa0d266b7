"""Harness helpers: build busybox OCI images, run a loopback registry and a private containerd.

Used by the test suite, the benchmarks and the demo so that the CRI path is exercised for real on a
machine with no internet access. Nothing here is imported by the kubelet itself.
"""
