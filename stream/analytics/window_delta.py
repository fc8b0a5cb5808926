"""Which counter deltas belong to exactly one window: the one rule for every counter cell the processor reads.

A cell's delta counts for a window only when its status says it is the exact increase over one
sample interval (OK, or WRAPPED corrected) and that interval is the window's hop (within a tenth).
BASELINE and RESET carry no increase; GAP spans several intervals and cannot be placed in one window.
"""

from __future__ import annotations

from flowtracer.schemas.v1 import common_pb2

#: Counter statuses whose delta is the exact increase over exactly one sample interval.
TRUSTED_STATUSES = frozenset((common_pb2.DELTA_STATUS_OK, common_pb2.DELTA_STATUS_WRAPPED))


def interval_fits(interval_ns: int, hop_ns: int) -> bool:
    """Whether deltas over *interval_ns* (ns) cover one window of *hop_ns* (ns), within a tenth of the hop."""
    return abs(interval_ns - hop_ns) <= hop_ns // 10


def window_delta(cell: common_pb2.Counter, interval_ns: int, hop_ns: int) -> int | None:
    """The increase of *cell* in one window (its unit), or None when the delta cannot be placed in it."""
    if cell.status in TRUSTED_STATUSES and interval_fits(interval_ns, hop_ns):
        return cell.delta
    return None
