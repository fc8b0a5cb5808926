"""The processor's Prometheus metrics: instruments updated per window or per step, and the per-record figures (records
read, clock readings per source, skew and transit histograms) kept as plain counts and exported when scraped.

Per record, a labelled Prometheus series costs a label lookup and a lock per update (six series per record, before:
microseconds each, on the worker's hot path). The per-record figures are therefore tallied in plain Python
(:class:`RecordTally`, :class:`~flowtracer.stream.runtime.source_clocks.SourceClocks`) and a custom collector
(:class:`ScrapeCollector`) turns them into the same metric names, labels and meaning when ``/metrics`` is read. The
series of a source the clocks forgot (gone quiet, partition revoked, evicted) disappear with it.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from flowtracer.plumbing.log_rate_limit import register_suppressed
from flowtracer.stream.runtime.source_clocks import ClockReading, SourceClocks

SKEW_BUCKETS_S = (0.001, 0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0)
"""Upper bounds (s) of the |skew| histogram: NTP keeps clocks within ms, half a hop (0.5 s) moves a sample to the
neighbouring window, ``--max-ahead`` (10 s) dead-letters."""
TRANSIT_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
"""Upper bounds (s) of the transit histogram: milliseconds through an idle Kafka, up to minutes of backlog."""


class HistogramCounts:
    """Observations per label in fixed buckets (upper bounds in seconds, inclusive as Prometheus' ``le``), with
    their count and sum: a histogram without a lock or a label lookup per observation."""

    def __init__(self, bounds_s: tuple[float, ...]) -> None:
        self.bounds_s = bounds_s
        self._counts: dict[str, list[int]] = {}  # label -> per bucket, the last one +Inf (not cumulative)
        self._sums: dict[str, float] = {}

    def observe(self, label: str, value_s: float) -> None:
        """Count one observation of ``value_s`` (seconds) under ``label``."""
        counts = self._counts.get(label)
        if counts is None:
            counts = self._counts[label] = [0] * (len(self.bounds_s) + 1)
            self._sums[label] = 0.0
        counts[bisect_left(self.bounds_s, value_s)] += 1
        self._sums[label] += value_s

    def fill(self, out: HistogramMetricFamily) -> HistogramMetricFamily:
        """``out`` (a histogram family with one label) with the counts, as cumulative buckets."""
        for label, counts in tuple(self._counts.items()):  # a copy: the worker's thread adds labels meanwhile
            counts = list(counts)
            cumulative, buckets = 0, []
            for bound, n in zip((*self.bounds_s, float("inf")), counts, strict=True):
                cumulative += n
                buckets.append((floatToGoString(bound), cumulative))
            out.add_metric([label], buckets, sum_value=self._sums.get(label, 0.0))
        return out


@dataclass
class RecordTally:
    """What the processor counts per input record, exported at scrape time (:class:`ScrapeCollector`)."""

    #: Input records consumed, by (contract) topic.
    records: dict[str, int] = field(default_factory=dict)
    #: The newest record's event time minus the worker's clock, by message type (ns; > 0: ahead).
    ahead_ns: dict[str, int] = field(default_factory=dict)
    #: |event time - producer's received stamp| of every record, by message type.
    skew: HistogramCounts = field(default_factory=lambda: HistogramCounts(SKEW_BUCKETS_S))
    #: Worker's clock at reading - producer's received stamp of every record, by message type.
    transit: HistogramCounts = field(default_factory=lambda: HistogramCounts(TRANSIT_BUCKETS_S))

    def record(self, topic: str) -> None:
        """One input record read from ``topic``."""
        self.records[topic] = self.records.get(topic, 0) + 1

    def clock(self, r: ClockReading) -> None:
        """One clock reading, into the per-kind histograms."""
        self.skew.observe(r.kind, abs(r.skew_ns) / 1e9)
        self.transit.observe(r.kind, r.transit_ns / 1e9)


class ScrapeCollector(Collector):
    """The per-record metrics, read from the tally and the clocks when scraped.

    The scrape runs in the metrics server's thread while the worker's thread updates the dicts: each is copied
    first (``tuple(d.items())`` runs in C without releasing the GIL, so it sees one consistent state).
    """

    def __init__(self, tally: RecordTally, clocks: SourceClocks) -> None:
        self.tally = tally
        self.clocks = clocks

    def collect(self) -> Iterator[Metric]:
        records = CounterMetricFamily("flowtracer_processor_records", "Input records consumed", labels=["topic"])
        for topic, n in tuple(self.tally.records.items()):
            records.add_metric([topic], n)
        yield records
        ahead = GaugeMetricFamily("flowtracer_processor_source_ahead_seconds",
                                  "Newest record's event time minus the worker's clock, by source kind (s; > 0: ahead)",
                                  labels=["kind"])
        for kind, ns in tuple(self.tally.ahead_ns.items()):
            ahead.add_metric([kind], ns / 1e9)
        yield ahead
        per_source = {
            "skew_ns": GaugeMetricFamily(
                "flowtracer_processor_source_skew_seconds",
                "Newest record's event time minus its producer's received stamp, by kind and source (s)",
                labels=["kind", "source"]),
            "offset_ns": GaugeMetricFamily(
                "flowtracer_processor_source_clock_offset_seconds",
                "Source's clock minus its producer's, from its lowest-delay readings over the last 30 s, by kind and "
                "source (s; > 0: ahead)", labels=["kind", "source"]),
            "delay_ns": GaugeMetricFamily(
                "flowtracer_processor_source_delivery_delay_seconds",
                "Newest record's delay from its source to its producer (offset - skew), by kind and source (s)",
                labels=["kind", "source"]),
            "transit_ns": GaugeMetricFamily(
                "flowtracer_processor_source_transit_seconds",
                "Worker's clock at reading minus the newest record's received stamp, by kind and source (s)",
                labels=["kind", "source"]),
        }
        for r in self.clocks.readings():
            for attr, family in per_source.items():
                family.add_metric([r.kind, r.source], getattr(r, attr) / 1e9)
        yield from per_source.values()
        # Literal names at each constructor: the docs' metric scanner reads them (tests/deploy).
        yield self.tally.skew.fill(HistogramMetricFamily(
            "flowtracer_processor_skew_abs_seconds",
            "|event time - producer's received stamp| of every record, by kind (s)", labels=["kind"]))
        yield self.tally.transit.fill(HistogramMetricFamily(
            "flowtracer_processor_transit_seconds",
            "Worker's clock at reading - producer's received stamp of every record, by kind (s)", labels=["kind"]))


@dataclass
class Metrics:
    """The processor's Prometheus instruments, in a registry of its own; the per-record ones through ``tally`` and
    ``clocks`` (:class:`ScrapeCollector`)."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    tally: RecordTally = field(default_factory=RecordTally)
    #: The newest clock reading of every switch and host this worker hears from (the health view shows it too).
    clocks: SourceClocks = field(default_factory=SourceClocks)

    def __post_init__(self) -> None:
        r = self.registry
        register_suppressed(r)  # aiokafka's log lines dropped as repeats (process-wide, plumbing/log_rate_limit.py)
        r.register(ScrapeCollector(self.tally, self.clocks))
        self.dead_letters = Counter("flowtracer_processor_dead_letters", "Records sent to the dead-letter topic",
                                    registry=r)
        self.sink_rejected = Counter("flowtracer_processor_sink_rejected_points",
                                     "Points the store refused for good, by HTTP status (dead-lettered)",
                                     ["status"], registry=r)
        self.windows = Counter("flowtracer_processor_windows", "Windows finalized", ["stage"], registry=r)
        self.late = Gauge("flowtracer_processor_late_records", "Records for windows already finalized", registry=r)
        self.unattributed = Gauge("flowtracer_processor_unattributed_flows",
                                  "Flows whose ends are not in the topology (cumulative)", registry=r)
        self.incomplete = Gauge("flowtracer_processor_incomplete_windows",
                                "Windows finalized without a source that was expected (cumulative)", registry=r)
        self.trace_disagreements = Gauge("flowtracer_processor_trace_disagreements",
                                         "Path traces untrusted for contradicting the counters (cumulative)",
                                         registry=r)
        self.ledger_overflows = Gauge("flowtracer_processor_ack_ledger_overflows",
                                      "Records read into a partition already holding the ack ledger's bound "
                                      "(cumulative)", registry=r)
        self.overflowed = Gauge("flowtracer_processor_overflowed_windows",
                                "Windows released unfinished because too many were buffered (cumulative)", registry=r)
        self.pending = Gauge("flowtracer_processor_pending_acks", "Input records held until outputs are durable",
                             registry=r)
        self.last_window = Gauge("flowtracer_processor_last_window_end_seconds",
                                 "End of the newest finalized window (Unix seconds)", registry=r)
