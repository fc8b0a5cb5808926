"""``flowtracer diagnose``: the diagnosis as a service over the processor's output topics.

One kafka-python consumer, manually assigned every partition of the output topics (no consumer group: one
diagnosis sees the whole fabric, and its state is not in Kafka), starting at the end (``latest``: what
happens from now on; the incidents a previous run left open are taken over, resume.py) or the beginning
(``earliest``: replay what the topics hold; incident ids are deterministic, so replayed snapshots overwrite the
same keys). Records are folded into windows by the one
assembly rule (``assembly.WindowAssembler``), each complete window goes through the pure
:class:`~flowtracer.stream.diagnosis.incidents.Diagnoser`, and every open or just-closed incident is published
(``publisher.IncidentPublisher``). Runs until ``stop`` is set (SIGTERM/SIGINT in the CLI).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError
from prometheus_client import CollectorRegistry, Counter, Gauge

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology import Topology
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.diagnosis.assembly import TOPICS, WindowAssembler
from flowtracer.stream.diagnosis.incidents import Diagnoser, State
from flowtracer.stream.diagnosis.publisher import IncidentPublisher
from flowtracer.stream.diagnosis.resume import open_incidents
from flowtracer.stream.diagnosis.snapshots import NewestSnapshots
from flowtracer.stream.diagnosis.window import FabricModel

log = logging.getLogger(__name__)


class DiagnoseError(Exception):
    """The service cannot start (topics missing, broker unreachable): one line for the operator."""


@dataclass(frozen=True)
class DiagnoseConfig:
    """``hop_ns``: the processor's window, ns; ``grace_ns``: a window without a fabric FimSample is complete
    this long after its first record reached us, ns; ``start``: ``latest`` or ``earliest``; ``topic_wait_s``:
    how long to wait for the output topics to exist."""

    bootstrap: str
    topology: Topology
    hop_ns: int = 1_000_000_000
    grace_ns: int = 10_000_000_000
    start: str = "latest"
    client_config: dict[str, Any] = field(default_factory=dict)
    poll_ms: int = 200
    topic_wait_s: float = 30.0
    #: on a ``latest`` start, the incidents topic is read until this many polls in a row bring nothing
    resume_idle_polls: int = 3


class DiagnoseMetrics:
    """The service's self-metrics (docs/operations.md, Self-metrics, Diagnosis)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry or CollectorRegistry()
        self.records = Counter("flowtracer_diagnose_records", "Output records read", ["topic"], registry=r)
        self.windows = Counter("flowtracer_diagnose_windows", "Windows diagnosed, by what made them complete",
                               ["complete"], registry=r)
        self.late = Gauge("flowtracer_diagnose_late_records", "Records for windows already diagnosed", registry=r)
        self.open = Gauge("flowtracer_diagnose_open_incidents", "Incidents open", ["kind"], registry=r)
        self.published = Counter("flowtracer_diagnose_incident_records", "Incident snapshots sent", registry=r)
        self.errors = Gauge("flowtracer_diagnose_publish_errors", "Incident snapshots or points not delivered",
                            registry=r)
        self.last_window = Gauge("flowtracer_diagnose_last_window_end_seconds",
                                 "End of the newest diagnosed window (Unix seconds)", registry=r)


class DiagnoseService:
    """Consume, assemble, diagnose, publish (module docstring)."""

    def __init__(self, cfg: DiagnoseConfig, publisher: IncidentPublisher, metrics: DiagnoseMetrics) -> None:
        self.cfg = cfg
        self.publisher = publisher
        self.metrics = metrics
        self.assembler = WindowAssembler(cfg.hop_ns, cfg.grace_ns)
        self.diagnoser = Diagnoser(FabricModel(Fabric(cfg.topology)))
        self.kinds: set[str] = set()
        self.counted_sent = 0

    def run(self, stop: threading.Event) -> None:
        """Until ``stop`` is set. Raises :class:`DiagnoseError` when the topics cannot be read at all."""
        from kafka import KafkaConsumer, TopicPartition
        from kafka.errors import KafkaError

        try:
            consumer = KafkaConsumer(bootstrap_servers=self.cfg.bootstrap, group_id=None, enable_auto_commit=False,
                                     client_id="flowtracer-diagnose", auto_offset_reset=self.cfg.start,
                                     **self.cfg.client_config)
        except KafkaError as e:
            raise DiagnoseError(f"cannot reach Kafka at {self.cfg.bootstrap}: {e}") from e
        try:
            parts: list[Any] = []
            deadline = time.monotonic() + self.cfg.topic_wait_s
            for t in TOPICS:
                ps = consumer.partitions_for_topic(t)
                while not ps and time.monotonic() < deadline and not stop.is_set():
                    stop.wait(0.5)
                    ps = consumer.partitions_for_topic(t)
                if not ps and not stop.is_set():
                    raise DiagnoseError(f"topic {t} does not exist on {self.cfg.bootstrap} (create the topics first:"
                                        " flowtracer-create-topics)")
                parts += [TopicPartition(t, p) for p in sorted(ps or ())]
            consumer.assign(parts)
            if self.cfg.start == "earliest":
                consumer.seek_to_beginning(*parts)  # the replay recomputes the incidents, under the same ids
            else:
                consumer.seek_to_end(*parts)
                for tp in parts:  # the end as of now, not as of the first poll (kafka-python resolves lazily)
                    consumer.position(tp)
                self.resume(stop)
            log.info("diagnosing %d partitions of %s from the %s", len(parts), ", ".join(TOPICS),
                     "beginning" if self.cfg.start == "earliest" else "end")
            while not stop.is_set():
                batch = consumer.poll(timeout_ms=self.cfg.poll_ms)
                self.step(batch, time.monotonic_ns(), reading_behind(consumer, parts))
        finally:
            consumer.close()

    def resume(self, stop: threading.Event) -> int:
        """Take over the incidents a previous run left open (resume.py); how many. Reads the incidents topic from
        its beginning until ``resume_idle_polls`` polls in a row bring nothing (not to its end offsets: the
        embedded broker reports them wrong)."""
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=self.cfg.bootstrap, group_id=None, enable_auto_commit=False,
                                 client_id="flowtracer-diagnose-resume", **self.cfg.client_config)
        board = NewestSnapshots()  # bounded: the topic may hold any number of ids (snapshots.py)
        read = 0
        try:
            ps = consumer.partitions_for_topic(topics.INCIDENTS.name)
            if not ps:
                return 0
            parts = [TopicPartition(topics.INCIDENTS.name, p) for p in sorted(ps)]
            consumer.assign(parts)
            consumer.seek_to_beginning(*parts)
            idle = 0
            while idle < self.cfg.resume_idle_polls and not stop.is_set():
                batch = consumer.poll(timeout_ms=self.cfg.poll_ms)
                idle = 0 if batch else idle + 1
                for recs in batch.values():
                    for r in recs:
                        try:
                            board.add(analytics_pb2.Incident.FromString(r.value))
                            read += 1
                        except DecodeError:  # not ours to judge: skipped, said once
                            log.warning("skipping an undecodable record at %s[%d]@%d", r.topic, r.partition,
                                        r.offset)
        finally:
            consumer.close()
        found = open_incidents(board)
        self.diagnoser.adopt(found)
        if board.dropped:
            log.warning("the incidents topic names more than %d incidents: %d let go, closed and oldest first",
                        board.limit, board.dropped)
        if found:
            log.info("took over %d open incidents from %d snapshots: %s", len(found), read,
                     ", ".join(i.id for i in found[:20]) + (", ..." if len(found) > 20 else ""))
        return len(found)

    def step(self, batch: dict[Any, list[Any]], now_ns: int, behind: bool = False) -> None:
        """Fold one poll's records in, then diagnose and publish every window that is complete by now (none while
        ``behind``: records wait unread on some partition, ``WindowAssembler.complete``)."""
        for records in batch.values():
            for r in records:
                self.assembler.add(r.topic, r.value, now_ns)
                self.metrics.records.labels(r.topic).inc()
        for view, how in self.assembler.complete(now_ns, behind=behind):
            incidents = self.diagnoser.window(view)
            self.publisher(incidents, view.end_ns)
            self.metrics.windows.labels(how).inc()
            self.metrics.last_window.set(view.end_ns / 1e9)
            opened = {}
            for inc in incidents:
                if inc.state is State.OPEN:
                    opened[inc.kind] = opened.get(inc.kind, 0) + 1
                elif inc.state is State.CLOSED:
                    log.info("incident %s closed (last seen in the window ending %d ns)", inc.id, inc.end_ns)
                if inc.state is State.OPEN and inc.detected_ns == view.end_ns:
                    log.warning("incident %s: %s; suspects %s", inc.id, inc.kind,
                                ", ".join(c for c, _ in inc.ranked()[:3]))
            self.kinds |= set(opened)
            for kind in self.kinds:
                self.metrics.open.labels(kind).set(opened.get(kind, 0))
        self.metrics.late.set(self.assembler.late_records)
        self.metrics.published.inc(self.publisher.sent - self.counted_sent)
        self.counted_sent = self.publisher.sent
        self.metrics.errors.set(self.publisher.errors)


def reading_behind(consumer: Any, parts: list[Any]) -> bool:
    """Whether any of ``parts`` has records the consumer has not read: the high watermark of its last fetch is
    beyond the next offset it would read (kafka-python keeps both; the fetch's watermark is right on the embedded
    broker too, unlike its ListOffsets). A partition not fetched yet says nothing."""
    for tp in parts:
        high = consumer.highwater(tp)
        if high is not None and high > consumer.position(tp):
            return True
    return False
