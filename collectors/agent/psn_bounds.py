"""Bytes from PSNs: packets between two 24-bit PSNs, and the error bound (bytes) of a PSN estimate,
narrowed by the port's exact sysfs totals (pure)."""

from __future__ import annotations

import numpy as np

from flowtracer.collectors.agent.int_columns import INT64_SAFE, exact_sum
from flowtracer.collectors.agent.sources.rdma_json import QPN_MASK


def psn_delta(now: int, before: int) -> int:
    """Packets between two 24-bit PSNs, modulo 2^24 (one wrap per interval is handled)."""
    return (now - before) & QPN_MASK


EXT_HEADER_BYTES = 20
"""RETH (16) + ImmDt (4): extension headers some packets carry beyond ``frame_overhead``."""


def psn_bounds(tx_bytes: np.ndarray, tx_packets: np.ndarray, estimated: np.ndarray, mtu: int, frame_overhead: int,
               port_bytes_lower: int | None, port_packets_upper: int | None) -> np.ndarray:
    """``error_bound`` (bytes) of the PSN-estimated deltas (``estimated``) of one port's QPs; returns the bounds of
    the estimated rows.

    Per QP, the estimate ``e_i = p_i x (MTU + H)`` can exceed the true frame bytes ``t_i`` by at
    most ``p_i x (MTU - 1)`` (all payload 1 byte) and fall short by at most ``p_i x 20`` (extension
    headers). The port counters tighten the first: the port sent at least ``B`` bytes (lower
    bracket of its sysfs delta, ``port_bytes_lower``) in at most ``P`` packets (``port_packets_upper``), so QPs
    plus unseen traffic satisfy ``sum(t) >= B - (P - sum(p)) x (MTU + H) - 4`` (4: sysfs counts 4-byte words),
    hence every ``e_i - t_i <= sum(e) - sum(t) + 20 x sum(p)``. Exact-counter QPs on the port count with their
    true bytes in these sums.
    """
    frame = mtu + frame_overhead
    slack = None
    if port_bytes_lower is not None and port_packets_upper is not None:
        pk_all = exact_sum(tx_packets)
        if port_packets_upper >= pk_all:
            other = (port_packets_upper - pk_all) * frame
            slack = max(0, exact_sum(tx_bytes) - port_bytes_lower + other + 4) + EXT_HEADER_BYTES * pk_all
    p = tx_packets[estimated]
    over = p * (mtu - 1)
    if slack is not None:
        over = np.minimum(over, slack if slack < INT64_SAFE or over.dtype == object else INT64_SAFE)
    return np.maximum(over, p * EXT_HEADER_BYTES)

