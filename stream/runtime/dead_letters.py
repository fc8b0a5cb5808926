"""DeadLetter records for points a sink refused for good (pure): one record per window.

A refused batch may span windows (a batch holds up to ``batch_size`` points of consecutive
finalizations); every point is stamped with its window end, so the lines are grouped by their
timestamp and each group becomes one DeadLetter with ``window_end_ns`` set.
"""

from __future__ import annotations

from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.sinks.base import Rejected


def line_timestamp_ns(line: str) -> int:
    """The timestamp of one line-protocol line (its last field, ns); 0 when it has none."""
    last = line.rsplit(" ", 1)[-1]
    return int(last) if last.isdigit() and len(last) <= 19 else 0


def rejected_dead_letters(rejected: Rejected, sink: str, worker: str, now_ns: int) -> list[analytics_pb2.DeadLetter]:
    """The DeadLetters of one refused batch, oldest window first; ``value`` holds the window's lines."""
    windows: dict[int, list[str]] = {}
    for line in rejected.lines:
        windows.setdefault(line_timestamp_ns(line), []).append(line)
    return [analytics_pb2.DeadLetter(schema_version=topics.SCHEMA_VERSION, value="\n".join(lines).encode(),
                                     reason=rejected.reason, received_ns=now_ns, worker=worker, sink=sink,
                                     http_status=rejected.status, window_end_ns=end)
            for end, lines in sorted(windows.items())]
