"""Volume plugins that reach outside the node (Go: ``pkg/volume``): CSI drivers."""
