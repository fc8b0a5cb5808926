"""Many targets in one process: sessions, shard selection, Kafka output, self-metrics.

``CollectorService`` runs one ``TargetSession`` per target of its shard on one asyncio loop
(a session is a coroutine, not a thread: 200+ targets per process), with at most
``gnmi.max_concurrent_connects`` connecting at once and the first connects spread over
``gnmi.start_spread``. Every CounterBatch goes to one ``KafkaSink`` (topic
``flowtracer.counters.v1``, key = switch name), every CongestionBatch to the same sink (topic
``flowtracer.switch-congestion.v1``, same key). ``run()`` returns after ``stop()``: sessions
cancel their calls, open batches are emitted, and the sink is flushed.

Metrics (own registry; /metrics and /healthz when ``metrics.port`` is set), per target label
``target``: ``flowtracer_gnmi_target_up``, ``..._seconds_since_last_update``,
``..._updates_total`` (counter values received), ``..._updates_per_second`` (process, last
10 s), ``..._reconnects_total``, ``..._connection_failures_total{reason}``, ``..._decode_errors_total``,
``..._ignored_updates_total{shape}`` (decoded, not read),
``..._malformed_messages_total{reason}`` (messages skipped, the stream kept), ``..._batches_total``,
``..._samples_dropped_total{reason}``, ``..._target_info{state,error_class}``,
``..._congestion_updates_total``, ``..._congestion_batches_total``; Kafka:
``flowtracer_kafka_sent_ok_total``, ``..._send_failed_total``, ``..._dropped_total{reason}``,
``..._buffered``.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from flowtracer.collectors.gnmi.config import CollectorConfig, Target
from flowtracer.collectors.gnmi.counters import native_loader
from flowtracer.collectors.gnmi.counters.assembly import Batch
from flowtracer.collectors.gnmi.counters.columns import EncodedBatch
from flowtracer.collectors.gnmi.counters.decode import Decoder
from flowtracer.collectors.gnmi.session import State, TargetSession
from flowtracer.collectors.gnmi.sharding import select
from flowtracer.collectors.kafka_sink import KafkaSink
from flowtracer.collectors.self_metrics import SelfMetrics
from flowtracer.fabric.platform_profiles import load_profile
from flowtracer.plumbing.kafka_security import kafka_python_kwargs
from flowtracer.schemas import topics

log = logging.getLogger(__name__)

_RATE_WINDOW_S = 10.0


class CollectorService:
    """The gNMI collector of one process (one shard).

    Args:
        cfg: validated configuration.
        targets: all targets (from ``resolve_targets``); this process keeps its shard's share.
        sink: where batches go; default: a ``KafkaSink`` from ``cfg.kafka``.
        metrics: the process's metrics registry; default: a new one.
    """

    def __init__(self, cfg: CollectorConfig, targets: list[Target], *, sink: KafkaSink | None = None,
                 metrics: SelfMetrics | None = None) -> None:
        self.cfg = cfg
        self.all_targets = targets
        self.targets = select(targets, cfg.shard.index, cfg.shard.count)
        self.metrics = metrics or SelfMetrics()
        k = cfg.kafka
        self.sink = sink or KafkaSink(
            k.bootstrap, client_id=f"flowtracer-collect-{cfg.collector_id}", max_buffer=k.max_buffer,
            max_buffer_bytes=k.max_buffer_bytes, acks=k.acks, linger_ms=int(k.linger * 1000),
            enable_idempotence=k.idempotence, metrics=self.metrics.sink_metrics(),
            producer_config={"batch_size": k.batch_size, **kafka_python_kwargs(k.security)})
        self._own_sink = sink is None
        self.topic = k.topic
        self.congestion_topic = k.congestion_topic
        # One decoder per platform, shared: the switches of a fabric repeat the same paths.
        decoders = {p: Decoder(profile=load_profile(p)) for p in {t.platform for t in self.targets}}
        self.sessions = [TargetSession(t, cfg.gnmi, collector_id=cfg.collector_id, emit=self._emit,
                                       decoder=decoders[t.platform], emit_congestion=self._emit_congestion)
                         for t in self.targets]
        self._rates: collections.deque[tuple[float, int]] = collections.deque()
        self._stopping: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._last_tick = time.monotonic()
        self.metrics.registry.register(_GnmiMetrics(self))
        self.metrics_port = 0

    # -- output --------------------------------------------------------------------------------

    def _emit(self, batch: Batch) -> None:
        self.sink.send(self.topic, topics.key(batch.switch), batch.SerializeToString())

    def _emit_congestion(self, batch: EncodedBatch) -> None:
        self.sink.send(self.congestion_topic, topics.key(batch.switch), batch.SerializeToString())

    # -- lifecycle -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Run every session until ``stop()``; then flush Kafka (``kafka.close_timeout``)."""
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        if self.cfg.metrics.port:
            self.metrics_port = self.metrics.serve(self.cfg.metrics.port, self.cfg.metrics.host, self.health)
        n = len(self.sessions)
        log.info("collecting from %d of %d targets (shard %d/%d) into %s topic %s, %s", n, len(self.all_targets),
                 self.cfg.shard.index, self.cfg.shard.count, self.cfg.kafka.bootstrap, self.topic,
                 native_loader.describe())
        slots = asyncio.Semaphore(self.cfg.gnmi.max_concurrent_connects)
        spread = self.cfg.gnmi.start_spread
        tasks = [asyncio.create_task(s.run(slots, spread * i / n if n else 0.0), name=f"gnmi-{s.name}")
                 for i, s in enumerate(self.sessions)]
        ticker = asyncio.create_task(self._tick())
        try:
            await self._stopping.wait()
        finally:
            for s in self.sessions:
                s.stop()
            done, pending = await asyncio.wait(tasks, timeout=10) if tasks else (set(), set())
            for t in pending:
                t.cancel()
            for t in done:
                if not t.cancelled() and t.exception() is not None:
                    log.error("session task %s failed: %r", t.get_name(), t.exception())
            ticker.cancel()
            if self._own_sink:
                await asyncio.to_thread(self.sink.close, self.cfg.kafka.close_timeout)
            else:
                await asyncio.to_thread(self.sink.flush, self.cfg.kafka.close_timeout)
            self.metrics.stop()
            log.info("collector stopped: %d sent to Kafka, %d dropped", self.sink.sent_ok, self.sink.dropped)

    def stop(self) -> None:
        """Ask ``run`` to finish (thread-safe)."""
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)

    async def _tick(self) -> None:
        while True:
            now = time.monotonic()
            self._last_tick = now
            self._rates.append((now, self.total_updates()))
            while self._rates and now - self._rates[0][0] > _RATE_WINDOW_S:
                self._rates.popleft()
            await asyncio.sleep(1.0)

    # -- views ---------------------------------------------------------------------------------

    def total_updates(self) -> int:
        """Counter values received by all sessions so far."""
        return sum(s.stats.counter_updates for s in self.sessions)

    def updates_per_second(self) -> float:
        """Counter values received per second over the last ~10 s."""
        if len(self._rates) < 2:
            return 0.0
        (t0, n0), (t1, n1) = self._rates[0], self._rates[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 else 0.0

    def health(self) -> tuple[bool, dict[str, Any]]:
        """Healthy while the loop runs (ticked within 5 s); details for /healthz."""
        up = sum(s.stats.state is State.UP for s in self.sessions)
        loop_ok = time.monotonic() - self._last_tick < 5.0
        return loop_ok, {
            "targets": len(self.sessions), "targets_up": up, "kafka_connected": self.sink.connected,
            "kafka_buffered": self.sink.buffered, "kafka_dropped": self.sink.dropped,
            "kafka_last_error": self.sink.last_error,
        }


class _GnmiMetrics(Collector):
    """Reads session stats at scrape time: no lock or prometheus call on the hot path."""

    def __init__(self, svc: CollectorService) -> None:
        self.svc = svc

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        p = "flowtracer_gnmi"
        now = time.monotonic()
        up = GaugeMetricFamily(f"{p}_target_up", "1 while the target streams (synced).", labels=["target"])
        since = GaugeMetricFamily(f"{p}_seconds_since_last_update", "Seconds since the last message.",
                                  labels=["target"])
        info = GaugeMetricFamily(f"{p}_target_info", "Session state and last error class.",
                                 labels=["target", "state", "error_class"])
        upd = CounterMetricFamily(f"{p}_updates", "Counter values received.", labels=["target"])
        rec = CounterMetricFamily(f"{p}_reconnects", "Sessions that ended and were retried.", labels=["target"])
        fail = CounterMetricFamily(f"{p}_connection_failures", "Failed connection attempts and ended sessions, "
                                   "by reason (credentials, server_cert_untrusted, client_cert_*, ...).",
                                   labels=["target", "reason"])
        dec = CounterMetricFamily(f"{p}_decode_errors", "Updates that could not be decoded.", labels=["target"])
        ign = CounterMetricFamily(f"{p}_ignored_updates", "Updates decoded but not read (no leaf flowtracer uses), "
                                  "by path shape.", labels=["target", "shape"])
        bad = CounterMetricFamily(f"{p}_malformed_messages", "Messages skipped because they could not be read, "
                                  "by reason (unparseable, undecodable); the stream goes on.",
                                  labels=["target", "reason"])
        bat = CounterMetricFamily(f"{p}_batches", "CounterBatches emitted.", labels=["target"])
        drop = CounterMetricFamily(f"{p}_samples_dropped", "Counter samples not emitted, by reason.",
                                   labels=["target", "reason"])
        late = CounterMetricFamily(f"{p}_samples_late", "Counter samples that came after their instant was "
                                   "emitted (sent in an extra batch for it).", labels=["target"])
        for s in self.svc.sessions:
            st, t = s.stats, s.name
            up.add_metric([t], 1.0 if st.state is State.UP else 0.0)
            since.add_metric([t], now - st.last_rx if st.last_rx else float("nan"))
            info.add_metric([t, st.state.value, st.last_error_class], 1.0)
            upd.add_metric([t], st.counter_updates)
            rec.add_metric([t], st.reconnects)
            for reason, n in sorted(st.failures.items()):
                fail.add_metric([t, reason], n)
            dec.add_metric([t], st.decode_errors)
            for shape, n in sorted(st.ignored.items()):
                ign.add_metric([t, shape], n)
            for reason, n in sorted(st.malformed.items()):
                bad.add_metric([t, reason], n)
            bat.add_metric([t], st.batches)
            a = s.assembler
            for reason, n in (("duplicate", a.if_deltas.duplicates + a.nh_deltas.duplicates),
                              ("out_of_order", a.if_deltas.out_of_order + a.nh_deltas.out_of_order),
                              ("no_timestamp", a.stats.invalid), ("unmapped_next_hop", a.stats.unmapped)):
                drop.add_metric([t, reason], n)
            late.add_metric([t], a.stats.late)
        cupd = CounterMetricFamily(f"{p}_congestion_updates", "Queue and PFC leaves received (gnmi.congestion).",
                                   labels=["target"])
        cbat = CounterMetricFamily(f"{p}_congestion_batches", "CongestionBatches emitted.", labels=["target"])
        for s in self.svc.sessions:
            cupd.add_metric([s.name], s.stats.congestion_updates)
            cbat.add_metric([s.name], s.stats.congestion_batches)
        yield from (cupd, cbat)
        rate = GaugeMetricFamily(f"{p}_updates_per_second", "Counter values received per second (last 10 s).")
        rate.add_metric([], self.svc.updates_per_second())
        yield from (up, since, info, upd, rec, fail, dec, ign, bad, bat, drop, late, rate)
