"""The Kafka clients' repeated log records are rate-limited per (logger, template); other loggers untouched."""

from __future__ import annotations

import logging
import threading

from prometheus_client import CollectorRegistry, Counter

from flowtracer.plumbing.log_rate_limit import RepeatFilter, register_suppressed

CONNECT = "Unable connect to node with id %s: %s"


def record(name: str, msg: str, args: tuple[object, ...], created: float) -> logging.LogRecord:
    r = logging.LogRecord(name, logging.ERROR, __file__, 1, msg, args, None)
    r.created = created
    return r


def counted(registry: CollectorRegistry, logger: str) -> float:
    return registry.get_sample_value("flowtracer_log_suppressed_total", {"logger": logger}) or 0.0


def fresh(interval_s: float = 30.0) -> tuple[RepeatFilter, CollectorRegistry]:
    registry = CollectorRegistry()
    counter = Counter("flowtracer_log_suppressed", "test", ["logger"], registry=registry)
    return RepeatFilter(interval_s=interval_s, counter=counter), registry


def test_a_burst_of_identical_records_is_one_line_then_a_summary() -> None:
    f, registry = fresh()
    # 1000 records 10 ms apart (10 s), then one 30 s after the first: it passes with the count.
    burst = [record("aiokafka", CONNECT, (1, "refused"), 1000.0 + i * 0.01) for i in range(1000)]
    passed = [r for r in burst if f.filter(r)]
    assert [r.getMessage() for r in passed] == ["Unable connect to node with id 1: refused"]
    assert counted(registry, "aiokafka") == 999
    later = record("aiokafka", CONNECT, (2, "refused"), 1030.0)
    assert f.filter(later)
    assert later.getMessage() == "Unable connect to node with id 2: refused (999 similar suppressed)"
    # The next interval starts from the summary: suppressed again until 30 s after it, no count carried over.
    assert not f.filter(record("aiokafka", CONNECT, (1, "refused"), 1059.9))
    last = record("aiokafka", CONNECT, (1, "refused"), 1060.0)
    assert f.filter(last) and last.getMessage().endswith("refused (1 similar suppressed)")
    assert counted(registry, "aiokafka") == 1000


def test_a_record_after_a_quiet_interval_passes_without_a_count() -> None:
    f, _ = fresh()
    assert f.filter(record("kafka.cluster", "No node available", (), 0.0))
    again = record("kafka.cluster", "No node available", (), 100.0)
    assert f.filter(again) and again.getMessage() == "No node available"


def test_distinct_templates_and_loggers_pass_independently() -> None:
    f, registry = fresh()
    firsts = [record("aiokafka", CONNECT, (1, "x"), 0.0),
              record("aiokafka", "Unable to update metadata from %s", (1,), 0.1),
              record("aiokafka.consumer.fetcher", CONNECT, (1, "x"), 0.2),
              record("kafka.net.manager", "Connection failed: %s", ("refused",), 0.3)]
    assert all(f.filter(r) for r in firsts)
    assert not any(f.filter(record(r.name, str(r.msg), r.args or (), 1.0)) for r in firsts)
    assert [counted(registry, n) for n in ("aiokafka", "aiokafka.consumer.fetcher", "kafka.net.manager")] == [2, 1, 1]


def test_other_loggers_are_untouched() -> None:
    f, registry = fresh()
    for name in ("flowtracer.stream.runtime.stall_clock", "faust", "kafkaesque", "mode.timers"):
        records = [record(name, "cut off from Kafka %s", (i,), 0.0) for i in range(100)]
        assert all(f.filter(r) for r in records)
        assert records[-1].getMessage() == "cut off from Kafka 99"
    assert registry.get_sample_value("flowtracer_log_suppressed_total", {"logger": "faust"}) is None


def test_the_keys_remembered_are_bounded() -> None:
    f, _ = fresh()
    f.max_keys = 10
    for i in range(50):
        assert f.filter(record("aiokafka", f"message {i}", (), 0.0))
    assert len(f.keys) == 10
    assert not f.filter(record("aiokafka", "message 49", (), 1.0)), "the newest are kept"
    assert f.filter(record("aiokafka", "message 0", (), 1.0)), "the oldest forgotten: a first occurrence again"


def test_the_process_wide_counter_can_be_exposed_in_every_stage_registry() -> None:
    a, b = CollectorRegistry(), CollectorRegistry()
    register_suppressed(a)
    register_suppressed(b)
    f = RepeatFilter()
    f.filter(record("aiokafka.test", "repeat", (), 0.0))
    before = counted(a, "aiokafka.test")
    assert not f.filter(record("aiokafka.test", "repeat", (), 1.0))
    assert counted(a, "aiokafka.test") == counted(b, "aiokafka.test") == before + 1


def test_the_filter_on_the_handler_drops_repeats_from_child_loggers() -> None:
    f, _ = fresh(interval_s=1e9)  # records stamped by the clock: an interval no run can outlast
    seen: list[str] = []

    class Collect(logging.Handler):
        def emit(self, r: logging.LogRecord) -> None:
            seen.append(r.getMessage())

    handler = Collect()
    handler.addFilter(f)
    log = logging.getLogger("aiokafka.consumer.group_coordinator")
    log.addHandler(handler)
    try:
        for _ in range(1000):
            log.error("Group Coordinator Request failed: %s", "NodeNotReadyError")
    finally:
        log.removeHandler(handler)
    assert seen == ["Group Coordinator Request failed: NodeNotReadyError"]


def test_records_from_many_threads_are_counted_exactly() -> None:
    """kafka-python logs from its own threads, and handlers call filters outside their lock."""
    f, registry = fresh(interval_s=1e9)
    passed: list[bool] = []

    def burst() -> None:
        ok = [f.filter(record("kafka.net.manager", "Connection failed: %s", ("refused",), 1.0)) for _ in range(500)]
        passed.extend(ok)  # list.extend is atomic under the GIL

    threads = [threading.Thread(target=burst) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert passed.count(True) == 1 and counted(registry, "kafka.net.manager") == 3999
