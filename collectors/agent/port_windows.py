"""Per-port deltas between samples from the ports' sysfs totals (pure); a counter that went down is a reset."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class PortDelta:
    """Bytes and packets one RDMA port moved in one window (from sysfs, bytes already x4).

    ``tx_bytes_lower`` / ``tx_packets_upper`` bracket the port's transmit counters over the span
    of the QP snapshots when the counters were read just before and just after them.
    """

    device: str
    port: int
    tx_bytes: int
    rx_bytes: int
    tx_packets: int
    rx_packets: int
    tx_bytes_lower: int
    tx_packets_upper: int


Totals = dict[tuple[str, int], tuple[int, int, int, int]]  # (tx_bytes, rx_bytes, tx_packets, rx_packets)


class PortTracker:
    """Per-port deltas between samples; a counter that went down is a reset (new baseline)."""

    def __init__(self) -> None:
        self._last: Totals = {}
        self._last_before: Totals = {}
        self.resets = 0

    def update(self, totals: Totals, before: Totals | None = None) -> list[PortDelta]:
        """``totals``: absolute counters per (device, port) read after the QP snapshot; ``before``:
        read just before it (None: at the same instant, as in the simulator's snapshots)."""
        before = totals if before is None else before
        out: list[PortDelta] = []
        for key, now in totals.items():
            prev = self._last.get(key)
            if prev is None:
                continue
            d = tuple(a - b for a, b in zip(now, prev, strict=True))
            if min(d) < 0:
                self.resets += 1
                continue
            now_b = before.get(key, now)
            prev_b = self._last_before.get(key, prev)
            out.append(PortDelta(key[0], key[1], *d, tx_bytes_lower=now_b[0] - prev[0],
                                 tx_packets_upper=now[2] - prev_b[2]))
        self._last, self._last_before = dict(totals), dict(before)
        return out

