"""The dashboard's incident list: what ``flowtracer diagnose`` (or the demo) published to ``flowtracer.incidents.v1``.

The processor does not diagnose (the diagnosis needs the whole fabric, a worker has some partitions), so its
dashboard reads the incidents back: :class:`IncidentFeed` is a thread with a kafka-python consumer of the topic
(no group, every partition, from an hour back), folding each snapshot into an :class:`IncidentBoard`, which is
pure (tests feed it records) and keeps the newest snapshot per incident id, at most ``MAX_INCIDENTS`` ids (the
rest let go and counted, ``stream/diagnosis/snapshots.py``; shown with the list). When Kafka cannot be read the
dashboard goes on without incidents (the reason is shown).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.diagnosis.snapshots import NewestSnapshots

log = logging.getLogger(__name__)
_MS = 1_000_000
LOOKBACK_S = 3600
"""How far back the feed starts reading (s): incidents opened within the last hour and still open are listed."""


@dataclass
class IncidentBoard:
    """Newest snapshot per incident id, bounded (``snapshots``). ``closed_keep_ns``: how long a closed incident
    stays listed, ns."""

    closed_keep_ns: int = 600 * 1_000_000_000
    snapshots: NewestSnapshots = field(default_factory=NewestSnapshots)
    undecodable: int = 0
    error: str | None = None

    def add(self, value: bytes | None) -> None:
        """Fold one record of the topic in; a record that does not decode is counted, never raised."""
        try:
            inc = analytics_pb2.Incident.FromString(value or b"")
        except Exception:  # DecodeError: one odd record must not stop the list
            self.undecodable += 1
            return
        before = self.snapshots.dropped
        self.snapshots.add(inc)
        if self.snapshots.dropped > before and str(self.snapshots.dropped).strip("0") == "1":  # 1, 10, 100, ...
            log.warning("dashboard: %s names more than %d incidents; %d let go so far, closed and oldest first",
                        topics.INCIDENTS.name, self.snapshots.limit, self.snapshots.dropped)

    def json(self, now_ns: int, top: int = 20) -> list[dict[str, Any]]:
        """Open incidents (newest start first), then those closed within ``closed_keep_ns``; times in ms."""
        keep = [i for i in self.snapshots.newest.values()
                if i.state == "open" or now_ns - i.window_end_ns <= self.closed_keep_ns]
        keep.sort(key=lambda i: (i.state != "open", -i.start_ns))
        return [{"id": i.id, "kind": i.kind, "state": i.state, "start_ms": i.start_ns // _MS,
                 "detected_ms": i.detected_ns // _MS, "end_ms": i.end_ns // _MS or None,
                 "snapshot_ms": i.window_end_ns // _MS, "windows": i.windows,
                 "suspects": [{"component": s.component, "score": s.score, "evidence": list(s.evidence)}
                              for s in i.suspects[:3]],
                 "flow_count": len(i.flows), "hosts": list(i.hosts), "jobs": list(i.jobs)} for i in keep[:top]]


class IncidentFeed(threading.Thread):
    """Reads ``flowtracer.incidents.v1`` into ``board`` until stopped; ``lock`` guards ``board``."""

    def __init__(self, bootstrap: str, client_config: dict[str, Any] | None = None,
                 board: IncidentBoard | None = None, poll_ms: int = 500) -> None:
        super().__init__(name="dashboard-incident-feed", daemon=True)
        self.bootstrap = bootstrap
        self.client_config = dict(client_config or {})
        self.board = board or IncidentBoard()
        self.lock = threading.Lock()
        self.poll_ms = poll_ms
        self.stop_event = threading.Event()

    def run(self) -> None:
        try:
            from kafka import KafkaConsumer, TopicPartition

            consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                                     client_id="flowtracer-dashboard-incidents", auto_offset_reset="earliest",
                                     **self.client_config)
        except Exception as e:  # the dashboard goes on without incidents
            self._failed(f"cannot read {topics.INCIDENTS.name}: {type(e).__name__}: {e}")
            return
        try:
            parts = [TopicPartition(topics.INCIDENTS.name, p)
                     for p in sorted(consumer.partitions_for_topic(topics.INCIDENTS.name) or ())]
            if not parts:
                self._failed(f"topic {topics.INCIDENTS.name} does not exist")
                return
            consumer.assign(parts)
            since = consumer.offsets_for_times({tp: (time.time() - LOOKBACK_S) * 1000 for tp in parts})
            for tp in parts:
                found = since.get(tp)
                if found is None:
                    consumer.seek_to_end(tp)  # nothing that recent
                else:
                    consumer.seek(tp, found.offset)
            while not self.stop_event.is_set():
                batch = consumer.poll(timeout_ms=self.poll_ms)
                with self.lock:
                    for records in batch.values():
                        for r in records:
                            self.board.add(r.value)
        except Exception as e:  # the dashboard goes on without incidents
            self._failed(f"incident feed stopped: {type(e).__name__}: {e}")
        finally:
            consumer.close()

    def _failed(self, why: str) -> None:
        with self.lock:
            self.board.error = why
        log.warning("dashboard: %s", why)

    def stop(self, timeout: float = 5.0) -> None:
        self.stop_event.set()
        if self.is_alive():
            self.join(timeout)
