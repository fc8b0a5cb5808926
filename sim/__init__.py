"""The simulated fabric: a fabric model with ground truth, gNMI switches and RDMA host views; the embedded
default and the test bed. Imported by tests, benchmarks and the demo only, never by the pipeline."""
