"""The simulated fabric's model: workload, jobs and collectives, flows, forwarding, faults, ground truth."""
