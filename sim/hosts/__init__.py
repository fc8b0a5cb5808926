"""Simulated hosts: RDMA NIC and QP state, and the host views (sysfs, ``rdma -j``, NCCL logs) agents read."""
