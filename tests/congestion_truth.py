"""The simulator's congestion causes (ground truth, docs/congestion.md "Causes") as the processor names them
(stream/analytics/congestion_cause.py), for the end-to-end tests that compare the two."""

from __future__ import annotations

GT_CAUSE = {"nic_stall": "pause_spread", "pause": "pause_spread", "incast": "incast", "collision": "collision",
            "degraded_link": "degraded_link", "oversubscribed": "unknown"}
"""Ground-truth cause -> CongestionCause.cause: a stalled NIC's port and a paused port are both the spread of a
pause (the first is the chain's last link); an oversubscribed port matches none of the processor's rules."""
