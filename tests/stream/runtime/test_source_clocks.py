"""Per-source clock readings: skew (event time - producer's received stamp) and transit (worker clock - received
stamp), kept bounded, exported per source and per kind, and measured before a record is dead-lettered."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import counters_pb2, flows_pb2, traces_pb2
from flowtracer.stream.resolvers.registry import RESOLVERS
from flowtracer.stream.runtime.config import ProcessorConfig
from flowtracer.stream.runtime.inputs import BadRecord, Stamps, event_time
from flowtracer.stream.runtime.processor import Processor
from flowtracer.stream.runtime.source_clocks import ClockReading, SourceClocks, reading

S = 1_000_000_000
MS = 1_000_000
T0 = 1_800_000_000 * S


def _r(source: str, skew_ns: int, at_ns: int = T0, partition: int = 0, transit_ns: int = 5 * MS,
       kind: str = "CounterBatch") -> ClockReading:
    return ClockReading(kind, source, "switch", partition, skew_ns, transit_ns, at_ns)


def test_skew_is_the_sources_clock_against_its_producers_and_transit_the_producers_against_ours() -> None:
    # spine02 stamps its sample 90 s ahead; the collector got it 2 ms after the true instant; the processor
    # reads it 30 ms after the collector did.
    got = reading("CounterBatch", 3, Stamps("switch", "spine02", T0 + 90 * S, T0 + 2 * MS), T0 + 32 * MS)
    assert got == ClockReading("CounterBatch", "spine02", "switch", 3, 90 * S - 2 * MS, 30 * MS, T0 + 32 * MS,
                               offset_ns=90 * S - 2 * MS)  # one reading: its skew is the best offset there is
    # an agent reads its host's window 4 ms after the boundary: a host on the agent's clock shows -4 ms
    got = reading("FlowBatch", 0, Stamps("host", "h1", T0, T0 + 4 * MS), T0 + 10 * MS)
    assert got is not None and (got.skew_ns, got.transit_ns) == (-4 * MS, 6 * MS)
    # no received stamp (path traces, older agents): nothing to measure against
    assert reading("FlowBatch", 0, Stamps("host", "h1", T0, 0), T0) is None


def test_event_time_reads_both_stamps_of_every_input_kind() -> None:
    cb = counters_pb2.CounterBatch(switch="leaf01", timestamp_ns=T0, received_ns=T0 + MS)
    fb = flows_pb2.FlowBatch(host="h1", leaf="leaf01", window_end_ns=T0, received_ns=T0 + 2 * MS)
    tr = traces_pb2.PathTrace(host="h2", finished_ns=T0)
    assert event_time(cb) == Stamps("switch", "leaf01", T0, T0 + MS)
    assert event_time(fb) == Stamps("host", "h1", T0, T0 + 2 * MS)
    assert event_time(tr) == Stamps("host", "h2", T0, 0)
    assert event_time(cb).source == "switch leaf01"


def test_newest_reading_per_source_and_the_bound_drops_the_least_recently_heard() -> None:
    c = SourceClocks(max_sources=2)
    assert c.observe(_r("a", 1)) == [] and c.observe(_r("b", 2)) == []
    assert c.observe(_r("a", 3)) == []  # a again: newest reading replaces, a is now the most recent
    assert c.get("CounterBatch", "a").skew_ns == 3
    dropped = c.observe(_r("c", 4))
    assert [r.source for r in dropped] == ["b"] and c.evicted == 1 and len(c) == 2
    # the same name in another kind is another source
    c2 = SourceClocks()
    c2.observe(_r("x", 1))
    c2.observe(_r("x", 2, kind="FlowBatch"))
    assert len(c2) == 2


def test_stale_sources_and_revoked_partitions_are_forgotten() -> None:
    c = SourceClocks(forget_after_ns=60 * S)
    c.observe(_r("old", 0, at_ns=T0, partition=0))
    c.observe(_r("p1", 0, at_ns=T0 + 30 * S, partition=1))
    c.observe(_r("p2", 0, at_ns=T0 + 40 * S, partition=2))
    assert c.forget_stale(T0 + 59 * S) == []
    assert [r.source for r in c.forget_stale(T0 + 60 * S)] == ["old"]
    assert [r.source for r in c.forget_partitions({1})] == ["p1"]
    assert [r.source for r in c.forget_stale(T0 + 200 * S)] == ["p2"] and len(c) == 0


def test_view_lists_the_settled_clocks_off_by_the_threshold_worst_first_and_the_slowest_delivery() -> None:
    c = SourceClocks(settle_ns=10 * S)
    assert c.view(T0, S // 2) == {"sources": 0, "skewed_over_s": 0.5, "skewed_count": 0, "skewed": [],
                                  "max_abs_offset": None, "max_delay": None, "max_transit": None, "evicted": 0}
    for t in (T0 - 10 * S, T0):  # two readings 10 s apart: every source is settled
        c.observe(_r("spine02", 90 * S, at_ns=t))
        c.observe(_r("spine01", -120 * S, at_ns=t + S))
        c.observe(_r("leaf01", -3 * MS, at_ns=t, transit_ns=2 * S))
        c.observe(_r("leaf02", 499 * MS, at_ns=t))
    c.observe(_r("leaf03", -700 * MS, at_ns=T0 - 10 * S))  # one late delivery, then a prompt one:
    c.observe(_r("leaf03", -1 * MS, at_ns=T0 - 9 * S))  # its clock is right
    c.observe(_r("leaf03", -800 * MS, at_ns=T0))  # and late again: 0.8 s of delay, not a clock 0.8 s off
    v = c.view(T0 + 2 * S, S // 2, top=1)
    assert (v["sources"], v["skewed_count"]) == (5, 2)
    assert v["skewed"] == [{"source": "switch spine01", "kind": "CounterBatch", "offset_s": -120.0, "delay_s": 0.0,
                            "skew_s": -120.0, "transit_s": 0.005, "age_s": 1.0}]
    assert v["max_abs_offset"]["source"] == "switch spine01"
    assert v["max_delay"]["source"] == "switch leaf03" and v["max_delay"]["delay_s"] == 0.799
    assert v["max_transit"]["source"] == "switch leaf01" and v["max_transit"]["transit_s"] == 2.0


def test_offset_is_the_lowest_delay_reading_so_delivery_delay_is_never_a_clock_off() -> None:
    """skew = offset - delay: a busy machine delays most deliveries (0.4-0.9 s), one prompt delivery in the window
    gives the offset, and each reading's delay is the rest."""
    c = SourceClocks(offset_window_ns=30 * S, settle_ns=10 * S)
    delays_ms = [600, 700, 2, 900, 650, 800, 400, 750, 5, 880] * 6  # one minute at one reading a second
    for i, d in enumerate(delays_ms):
        c.observe(_r("leaf01", -d * MS, at_ns=T0 + i * S))
        got = c.get("CounterBatch", "leaf01")
        assert got.offset_ns in (-2 * MS, -5 * MS, -600 * MS, -700 * MS)  # the best reading so far, in the window
        assert got.delay_ns == got.offset_ns + d * MS and got.delay_ns >= 0
        if i >= 10:
            assert got.settled and abs(got.offset_ns) <= 5 * MS
    assert c.view(T0 + 60 * S, S // 2)["skewed_count"] == 0


def test_a_clock_two_seconds_off_is_judged_within_a_minute_whichever_way_it_steps() -> None:
    """A source that starts 2 s off is listed once settled (10 s); one whose clock steps 2 s ahead is listed at
    the step, 2 s back once the readings before the step have left the 30 s window. Deliveries stay noisy."""
    delays_ms = [300, 5, 900, 40, 700]

    def feed(c: SourceClocks, offset_ns: int, start_s: int, seconds: int) -> None:
        for i in range(start_s, start_s + seconds):
            c.observe(_r("spine01", offset_ns - delays_ms[i % 5] * MS, at_ns=T0 + i * S))

    def listed(c: SourceClocks, at_s: int) -> list[float]:
        return [r["offset_s"] for r in c.view(T0 + at_s * S, S // 2)["skewed"]]

    born_off = SourceClocks()
    feed(born_off, 2 * S, 0, 9)
    assert listed(born_off, 9) == []  # not judged on its first readings
    feed(born_off, 2 * S, 9, 3)
    assert listed(born_off, 12) == [1.995]
    for step_ns in (2 * S, -2 * S):
        c = SourceClocks()
        feed(c, 0, 0, 60)
        assert listed(c, 60) == []
        first = None
        for t in range(60, 120):  # the step at 60 s, a reading a second
            feed(c, step_ns, t, 1)
            if first is None and listed(c, t):
                first = t
        assert first is not None and first - 60 <= 31, (step_ns, first)
        assert listed(c, 120) == [round((step_ns - 5 * MS) / 1e9, 3)]


@pytest.fixture
def proc(tmp_path: Path) -> Processor:
    fabric = Fabric(generate(FabricSpec(hosts=4, leaves=2, spines=2, name="clk4")))
    topo = tmp_path / "fabric.yaml"
    topo.write_text(fabric.topology.to_yaml())
    cfg = ProcessorConfig(topology=topo, kafka="127.0.0.1:9", partitions=2, data_dir=tmp_path)
    return Processor(cfg, fabric, RESOLVERS["hash"])


def test_processor_exports_skew_per_source_even_for_a_record_it_dead_letters(proc: Processor) -> None:
    reg = proc.metrics.registry
    now = T0 + 20 * MS
    ahead = counters_pb2.CounterBatch(schema_version=1, switch="spine02", timestamp_ns=T0 + 90 * S, received_ns=T0)
    with pytest.raises(BadRecord, match=r"90\.0 s ahead"):
        proc.accept(topics.COUNTERS.name, 1, ahead.SerializeToString(), object(), now)
    fine = counters_pb2.CounterBatch(schema_version=1, switch="leaf01", timestamp_ns=T0 - 2 * MS, received_ns=T0)
    proc.accept(topics.COUNTERS.name, 0, fine.SerializeToString(), object(), now)
    flows = flows_pb2.FlowBatch(schema_version=1, host="host01", leaf="leaf01", window_start_ns=T0 - S,
                                window_end_ns=T0 - S // 2, received_ns=T0 - S // 2 + 3 * MS)
    proc.accept(topics.FLOWS.name, 0, flows.SerializeToString(), object(), now)
    old_agent = flows_pb2.FlowBatch(schema_version=1, host="host02", leaf="leaf01", window_start_ns=T0 - S,
                                    window_end_ns=T0 - S // 2)
    proc.accept(topics.FLOWS.name, 0, old_agent.SerializeToString(), object(), now)

    def skew(kind: str, source: str) -> float | None:
        return reg.get_sample_value("flowtracer_processor_source_skew_seconds", {"kind": kind, "source": source})

    assert skew("CounterBatch", "spine02") == pytest.approx(90.0)
    assert skew("CounterBatch", "leaf01") == pytest.approx(-0.002)
    assert skew("FlowBatch", "host01") == pytest.approx(-0.003)
    assert skew("FlowBatch", "host02") is None  # not stamped: not measured, not guessed
    assert reg.get_sample_value("flowtracer_processor_source_transit_seconds",
                                {"kind": "CounterBatch", "source": "spine02"}) == pytest.approx(0.02)
    # one reading each: its skew is the offset so far, and no delay is taken out yet
    assert reg.get_sample_value("flowtracer_processor_source_clock_offset_seconds",
                                {"kind": "CounterBatch", "source": "spine02"}) == pytest.approx(90.0)
    assert reg.get_sample_value("flowtracer_processor_source_delivery_delay_seconds",
                                {"kind": "FlowBatch", "source": "host01"}) == 0
    # a later prompt delivery of leaf01 (1 ms): the 2 ms one before is 1 ms of delay, the clock is 1 ms behind
    again = counters_pb2.CounterBatch(schema_version=1, switch="leaf01", timestamp_ns=T0 + S - MS, received_ns=T0 + S)
    proc.accept(topics.COUNTERS.name, 0, again.SerializeToString(), object(), now + S)
    assert reg.get_sample_value("flowtracer_processor_source_clock_offset_seconds",
                                {"kind": "CounterBatch", "source": "leaf01"}) == pytest.approx(-0.001)
    # per kind: |skew| and transit histograms
    assert reg.get_sample_value("flowtracer_processor_skew_abs_seconds_count", {"kind": "CounterBatch"}) == 3
    assert reg.get_sample_value("flowtracer_processor_skew_abs_seconds_bucket",
                                {"kind": "CounterBatch", "le": "60.0"}) == 2
    assert reg.get_sample_value("flowtracer_processor_transit_seconds_count", {"kind": "FlowBatch"}) == 1
    # the partition goes to another worker: its sources' series go with it
    proc.drop_partitions({1})
    assert skew("CounterBatch", "spine02") is None and skew("CounterBatch", "leaf01") == pytest.approx(-0.001)
    assert reg.get_sample_value("flowtracer_processor_source_clock_offset_seconds",
                                {"kind": "CounterBatch", "source": "spine02"}) is None
    # a source not heard from for FORGET_AFTER_NS is dropped at the next finalization
    proc.finalize(now + S + proc.clocks.forget_after_ns)
    assert skew("CounterBatch", "leaf01") is None and len(proc.clocks) == 0
