"""A Linux-kernel data plane for the simulator: network namespaces, veths, kernel ECMP (docs/kernel-dataplane.md)."""
