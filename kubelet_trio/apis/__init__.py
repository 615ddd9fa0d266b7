"""The kubelet's own gRPC APIs served to node-local clients (Go: ``pkg/kubelet/apis``)."""
