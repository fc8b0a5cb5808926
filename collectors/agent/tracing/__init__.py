"""Hop-by-hop tracing of each flow's own 5-tuple (docs/tracing.md): planner, budget, prober, transports."""
