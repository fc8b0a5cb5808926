"""Where the host agent reads QPs and counters: ``rdma -j``, sysfs, NCCL logs, the simulator; one registry."""
