"""The HTTP/1.1 server layer under every kubelet port and the CRI streaming server: a small h11 server
on Trio that can hand an upgraded connection (exec, attach, port-forward) to the app, and the minimal
ASGI-style routing used by the handlers. It sits below ``server`` and ``cri`` so both can use it."""
