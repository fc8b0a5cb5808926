"""DeadLetter records for points a sink refused for good, and for outputs no encoder can write (pure).

A refused batch may span windows (a batch holds up to ``batch_size`` points of consecutive
finalizations); every point is stamped with its window end, so the lines are grouped by their
timestamp and each group becomes one DeadLetter with ``window_end_ns`` set.
"""

from __future__ import annotations

from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.sinks.base import Rejected
from flowtracer.stream.sinks.line_protocol import PointError
from flowtracer.stream.stages.emitted import Emitted
from flowtracer.stream.stages.outputs import ENCODERS, WRITTEN


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


def drop_unwritable(e: Emitted, worker: str, now_ns: int) -> list[analytics_pb2.DeadLetter]:
    """Remove from ``e`` every output its line encoder refuses (PointError: a value no InfluxDB integer holds, an
    empty tag) and return one DeadLetter per such output, naming its topic, window and the encoder's reason.

    The rest of the window is written as usual: one implausible record that slipped past the input checks costs
    its own output, never the worker (an exception here would be replayed into every worker of the group).
    """
    letters = []
    for out in WRITTEN:
        kept = []
        for msg in getattr(e, out.kind):
            try:
                ENCODERS[out.message](msg)
            except PointError as err:
                letters.append(analytics_pb2.DeadLetter(
                    schema_version=topics.SCHEMA_VERSION, topic=out.topic.name, value=msg.SerializeToString(),
                    reason=f"output not written: {err}", received_ns=now_ns, worker=worker,
                    window_end_ns=getattr(msg, "window_end_ns", 0)))
                continue
            kept.append(msg)
        setattr(e, out.kind, kept)
    return letters
