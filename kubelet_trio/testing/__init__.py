"""The test harness: embeddable nodes on the simulated runtime (``node``, ``apinode``), the fake API
server (``fakeapi``), the pytest plugin (``pytest_plugin``); and for the CRI path, busybox OCI images, a
loopback registry and a private containerd (``images``, ``registry``, ``containerd``, ``env``).

Used by the test suite, the benchmarks, the demo and ``kubelet-trio fake-apiserver`` / ``sim-nodes``.
Nothing here is imported by the kubelet itself.
"""
