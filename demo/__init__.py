"""The demo and the local pipeline runner: start the embedded broker, simulator and every stage as real
subprocesses, show their status and score the outputs against the simulator's ground truth."""
