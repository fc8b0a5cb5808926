"""Switch emulation: each simulated switch's state served by a real gRPC gNMI server."""
