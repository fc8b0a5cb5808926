"""Poisoned input records through the Processor class, serialized as Kafka delivers them: each is dead-lettered
with the field named (BadRecord, which the app turns into a DeadLetter), the window still finalizes without it,
and every output of the window can be written (issue 29: one bad record once crash-looped the worker)."""

from __future__ import annotations

from typing import Any

import pytest

from flowtracer.schemas import topics
from flowtracer.schemas.topics import partition_for
from flowtracer.schemas.v1 import common_pb2, counters_pb2, flows_pb2, traces_pb2
from flowtracer.stream.runtime.inputs import BadRecord
from flowtracer.stream.runtime.processor import Processor
from flowtracer.stream.runtime.worker import emitted_lines
from flowtracer.stream.stages.emitted import Emitted

S = 1_000_000_000
P = 2  # conftest.PARTITIONS: the ``proc`` fixture's
END = 1_900_000_000 * S  # the window (END - S, END]
NOW = END + S // 10  # the worker's clock when the records arrive
LATER = END + 40 * S  # past the required-source grace (30 s): a window missing a dead-lettered batch is released
GB = 25_000_000_000  # 200 Gbit/s for one second: half a 400G NIC
POISON = 2**63 + 1


def flow(proc: Processor, src: str, dst: str, lqpn: int, tx_bytes: int) -> flows_pb2.Flow:
    s, d = proc.fabric.nics[f"{src}:mlx5_0"], proc.fabric.nics[f"{dst}:mlx5_0"]
    return flows_pb2.Flow(rdma_device="mlx5_0", port=1, lqpn=lqpn, rqpn=lqpn + 1, src_ip=s.nic.ip, dst_ip=d.nic.ip,
                          udp_src_port=50000 + lqpn, udp_dst_port=4791, tx_bytes=tx_bytes, tx_packets=tx_bytes // 4096,
                          job_id="job7")


def batch(proc: Processor, host: str, flows: list[flows_pb2.Flow] = (),  # type: ignore[assignment]
          collectives: list[flows_pb2.CollectiveProfile] = ()) -> flows_pb2.FlowBatch:  # type: ignore[assignment]
    return flows_pb2.FlowBatch(schema_version=1, host=host, leaf=proc.fabric.nics[f"{host}:mlx5_0"].leaf,
                               window_start_ns=END - S, window_end_ns=END, received_ns=END, flows=flows,
                               collectives=collectives)


def counters(proc: Processor, switch: str, out_delta: dict[str, int] | None = None) -> counters_pb2.CounterBatch:
    cb = counters_pb2.CounterBatch(schema_version=1, switch=switch, timestamp_ns=END, received_ns=END,
                                   collector_id="c1", session=1, sequence=7)
    for port in sorted({lk.src_port for lk in proc.fabric.out_links[switch]}):
        d = (out_delta or {}).get(port, 0)
        cb.interfaces.add(name=port, interval_ns=S, out_octets=common_pb2.Counter(value=d, delta=d, status=1),
                          in_octets=common_pb2.Counter(value=0, delta=0, status=1))
    return cb


def run(proc: Processor, records: list[tuple[str, str, Any]]) -> tuple[Emitted, list[str], list[str]]:
    """Deliver ``records`` (topic, key, message) as the app does, feed attributions back, finalize past every grace;
    the outputs, their lines and the dead-letter reasons."""
    dead: list[str] = []
    for topic, key, msg in records:
        try:
            proc.accept(topic, partition_for(key, P), msg.SerializeToString(), object(), NOW)
        except BadRecord as e:
            dead.append(str(e))
    out = Emitted()
    for clock in (NOW, LATER):
        e = proc.finalize(clock)
        for dest, ab in e.attributions:
            proc.accept(topics.ATTRIBUTIONS.name, dest, ab.SerializeToString(), object(), clock)
        out.extend(e)
        out.extend(proc.finalize(clock))
    return out, emitted_lines(out), dead


def window(proc: Processor, poisoned: dict[str, flows_pb2.FlowBatch] | None = None,
           leaf_out: dict[str, int] | None = None) -> list[tuple[str, str, Any]]:
    """One window of every switch's counters and every host's FlowBatch (host01 sends a healthy flow to host03,
    unless ``poisoned`` replaces a host's batch)."""
    recs: list[tuple[str, str, Any]] = [(topics.COUNTERS.name, sw, counters(proc, sw, leaf_out if sw == "leaf01"
                                                                           else None))
                                        for sw in sorted(proc.fabric.switch_names)]
    for host in ("host01", "host02", "host03", "host04"):
        fb = (poisoned or {}).get(host) or batch(proc, host, [flow(proc, host, "host03", 0x100, GB)]
                                                 if host == "host01" else [])
        recs.append((topics.FLOWS.name, fb.leaf, fb))
    return recs


def test_a_flow_of_2_63_bytes_is_dead_lettered_and_the_window_is_written(proc: Processor) -> None:
    bad = batch(proc, "host02", [flow(proc, "host02", "host04", 0x200, POISON)])
    out, lines, dead = run(proc, window(proc, {"host02": bad}))
    assert len(dead) == 1 and "host host02" in dead[0] and "flows[0].tx_bytes" in dead[0], dead
    assert out.path_loads and all(p.src_host == "host01" for p in out.path_loads)  # host01's flow still counted
    assert any(t.startswith("path_load,") for t in lines)


def test_two_flows_whose_sum_overflows_64_bits_are_dead_lettered(proc: Processor) -> None:
    bad = batch(proc, "host02", [flow(proc, "host02", "host04", 0x200, POISON),
                                 flow(proc, "host02", "host04", 0x200, POISON)])
    out, lines, dead = run(proc, window(proc, {"host02": bad}))
    assert len(dead) == 1 and "flows[0].tx_bytes" in dead[0], dead
    assert out.windows and lines


def test_a_flow_faster_than_its_nic_is_dead_lettered(proc: Processor) -> None:
    # 400G for one second is 50 GB; 4x that cannot have left the NIC in the window.
    bad = batch(proc, "host02", [flow(proc, "host02", "host04", 0x200, 4 * 50_000_000_000)])
    _, _, dead = run(proc, window(proc, {"host02": bad}))
    assert len(dead) == 1 and "flows[0].tx_bytes" in dead[0] and "mlx5_0" in dead[0], dead


@pytest.mark.parametrize("field", ["tx_bytes", "rx_bytes", "tx_packets", "rx_packets"])
def test_a_port_total_beyond_its_nic_is_dead_lettered_naming_the_field(proc: Processor, field: str) -> None:
    bad = batch(proc, "host02")
    port = bad.ports.add(rdma_device="mlx5_0", port=1)
    setattr(port, field, 4 * 50_000_000_000)  # 4x what a 400G NIC moves in the second: beyond bytes and packets
    _, _, dead = run(proc, window(proc, {"host02": bad}))
    assert len(dead) == 1 and f"ports[0] (mlx5_0).{field}" in dead[0], dead


def test_a_collective_profile_of_2_63_call_bytes_is_dead_lettered(proc: Processor) -> None:
    prof = flows_pb2.CollectiveProfile(schema_version=1, job_id="job7", comm_id="c0ffee", operation="AllReduce",
                                       datatype=7, datatype_bytes=8, count=2**60, call_bytes=2**63, calls=1,
                                       nranks=8, ranks=[0])
    bad = batch(proc, "host02", collectives=[prof])
    out, lines, dead = run(proc, window(proc, {"host02": bad}))
    assert len(dead) == 1 and "collectives[0].call_bytes" in dead[0], dead
    assert not out.collective_profiles and lines


def test_a_counter_delta_of_2_63_octets_is_dead_lettered(proc: Processor) -> None:
    out, lines, dead = run(proc, window(proc, leaf_out={"Ethernet3": POISON}))
    assert len(dead) == 1 and "switch leaf01" in dead[0] and "interfaces[" in dead[0] and "out_octets" in dead[0], \
        dead
    assert out.windows and lines


def test_a_flow_batch_from_an_unknown_leaf_is_dead_lettered(proc: Processor) -> None:
    bad = batch(proc, "host02")
    bad.leaf = "leaf99"
    _, _, dead = run(proc, [(topics.FLOWS.name, "leaf99", bad)])
    assert len(dead) == 1 and "leaf 'leaf99'" in dead[0], dead


def test_a_path_trace_with_absurd_hop_count_is_dead_lettered(proc: Processor) -> None:
    trace = traces_pb2.PathTrace(schema_version=1, flow_id="f1", src_nic="host01:mlx5_0", host="host01",
                                 finished_ns=END)
    for i in range(300):
        trace.hops.add(ttl=i + 1)
    with pytest.raises(BadRecord, match="hops"):
        proc.accept(topics.PATH_TRACES.name, 0, trace.SerializeToString(), object(), NOW, key=b"f1")


def test_an_output_no_encoder_can_write_is_dead_lettered_alone(proc: Processor) -> None:
    """Behind the input checks: an output that still cannot be written (here a profile built by hand) becomes a
    DeadLetter naming its field and topic; the rest of the window is written."""
    from flowtracer.stream.runtime.dead_letters import drop_unwritable

    out, _, dead = run(proc, window(proc))
    assert not dead and out.path_loads
    out.collective_profiles.append(flows_pb2.CollectiveProfile(
        schema_version=1, window_start_ns=END - S, window_end_ns=END, host="host02", job_id="job7", comm_id="c0ffee",
        operation="AllReduce", datatype=7, datatype_bytes=8, count=2**60, call_bytes=2**63, calls=1, nranks=8))
    with pytest.raises(ValueError, match="call_bytes"):
        emitted_lines(out)
    [letter] = drop_unwritable(out, "w1", NOW)
    assert letter.topic == topics.COLLECTIVE_PROFILE.name and letter.window_end_ns == END
    assert "call_bytes" in letter.reason and flows_pb2.CollectiveProfile.FromString(letter.value).call_bytes == 2**63
    assert not out.collective_profiles and any(t.startswith("path_load,") for t in emitted_lines(out))


def test_the_flows_stage_saturates_sums_of_bytes_it_was_given(proc: Processor) -> None:
    """Behind the input checks: two flows of 2^63 + 1 bytes handed to the stage directly (no plausibility check)
    give a PathLoad of 2^63 - 1 bytes instead of a ValueError from protobuf in finalize."""
    stage = proc.flows_stage(partition_for("leaf01", P))
    both = [flow(proc, "host01", "host03", 0x100, POISON), flow(proc, "host01", "host03", 0x101, POISON)]
    fb = batch(proc, "host01", both)
    stage.add_flows(fb, object(), NOW)
    out = stage.finalize(LATER)
    assert out.path_loads and max(p.bytes for p in out.path_loads) == 2**63 - 1


def test_what_healthy_sources_send_at_line_rate_is_accepted(proc: Processor) -> None:
    """The bounds leave room: a leaf's uplink and its next hop at 400G line rate for the second, and a flow at line
    rate with its NIC's port totals, are accepted (a next hop's ``octets_forwarded`` was once held to the packet
    bound: its name does not end in octets)."""
    line_rate = 50_000_000_000  # 400 Gbit/s for 1 s
    cb = counters(proc, "leaf01", {"Ethernet3": line_rate})
    cb.next_hops.add(interval_ns=S, octets_forwarded=common_pb2.Counter(value=line_rate, delta=line_rate, status=1),
                     packets_forwarded=common_pb2.Counter(value=line_rate // 4096, delta=line_rate // 4096, status=1))
    fb = batch(proc, "host01", [flow(proc, "host01", "host03", 0x100, line_rate)])
    fb.ports.add(rdma_device="mlx5_0", port=1, tx_bytes=line_rate, tx_packets=line_rate // 4096)
    _, _, dead = run(proc, [(topics.COUNTERS.name, "leaf01", cb), (topics.FLOWS.name, fb.leaf, fb)])
    assert dead == []


def test_a_window_whose_computation_raises_is_dead_lettered_and_the_next_one_is_published(
        proc: Processor, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Behind every check: whatever still makes a window's computation raise (here the resolver, once) costs that
    window (its input records become DeadLetters naming the stage, window and error, and are released for acking),
    never the worker; the next window is computed as usual."""
    stage = proc.flows_stage(partition_for("leaf01", P))
    resolve = stage.resolver.resolve
    calls = []

    def once(*a: Any, **kw: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("Value out of range: 18446744073709551618")
        return resolve(*a, **kw)

    monkeypatch.setattr(stage.resolver, "resolve", once)
    out, _, dead = run(proc, window(proc))
    assert not dead
    mine = [d for d in out.dead_letters if d.window_end_ns == END]
    assert {d.topic for d in mine} == {topics.FLOWS.name, topics.COUNTERS.name}
    assert all(f"flows stage of partition {stage.partition}: window ending {END} failed: ValueError" in d.reason
               for d in mine)
    assert flows_pb2.FlowBatch.FromString(next(d.value for d in mine if d.topic == topics.FLOWS.name)).host
    assert out.tokens and "records are dead-lettered and the worker goes on" in caplog.text
    assert not [p for p in out.path_loads if p.src_host == "host01"]  # leaf01's window: no outputs
    nxt = batch(proc, "host01", [flow(proc, "host01", "host03", 0x100, GB)])
    nxt.window_start_ns, nxt.window_end_ns = END, END + S
    stage.add_flows(nxt, object(), NOW + S)
    assert [p.src_host for p in stage.finalize(LATER + S).path_loads] == ["host01"]  # the next window as usual


def test_a_flow_from_another_hosts_address_is_dead_lettered(proc: Processor) -> None:
    forged = flow(proc, "host05" if "host05:mlx5_0" in proc.fabric.nics else "host04", "host03", 0x200, GB)
    forged.rdma_device = "mlx5_7"  # a device host02 does not have: the processor would place it by its source IP
    bad = batch(proc, "host02", [forged])
    _, _, dead = run(proc, window(proc, {"host02": bad}))
    assert len(dead) == 1 and "flows[0].src_ip" in dead[0] and "not a NIC of host host02" in dead[0], dead


def test_a_record_that_trips_a_bug_before_the_stages_is_a_dead_letter(proc: Processor,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing is held before the stages, so any exception up to them (here in the checks themselves) makes the
    record a dead letter naming the error, never a worker that exits."""
    def broken(msg: Any) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(proc.plausible, "check", broken)
    fb = batch(proc, "host01")
    with pytest.raises(BadRecord, match=r"cannot check this flowtracer\.flows\.v1 record: RecursionError"):
        proc.accept(topics.FLOWS.name, partition_for(fb.leaf, P), fb.SerializeToString(), object(), NOW)


def test_long_intervals_after_an_outage_are_accepted_with_their_bounds_and_negative_ones_are_not(
        proc: Processor) -> None:
    """An agent's window after it was stopped 15 minutes, and a switch's first delta after a 15-minute outage, span
    the gap at line rate: accepted (the bound grows with the interval, never beyond 2^63 - 1). A negative interval
    is nothing a collector measures."""
    gap = 900 * S
    cb = counters(proc, "leaf01", {"Ethernet3": 50_000_000_000 * 900})
    for itf in cb.interfaces:
        itf.interval_ns = gap
    fb = batch(proc, "host01", [flow(proc, "host01", "host03", 0x100, 50_000_000_000 * 900)])
    fb.window_start_ns = END - gap
    _, _, dead = run(proc, [(topics.COUNTERS.name, "leaf01", cb), (topics.FLOWS.name, fb.leaf, fb)])
    assert dead == []
    cb.interfaces[0].interval_ns = -S
    with pytest.raises(BadRecord, match=r"interfaces\[0\] \(\S+\)\.interval_ns = -1000000000 ns is not an interval"):
        proc.accept(topics.COUNTERS.name, partition_for("leaf01", P), cb.SerializeToString(), object(), NOW)
    cb.interfaces[0].interval_ns = 2**62  # a forged interval cannot let a value through that no encoder writes
    cb.interfaces[0].out_octets.delta = 2**63
    with pytest.raises(BadRecord, match=r"out_octets\.delta = 9223372036854775808 exceeds 9223372036854775807"):
        proc.accept(topics.COUNTERS.name, partition_for("leaf01", P), cb.SerializeToString(), object(), NOW)


def test_a_batch_with_more_entries_than_any_device_has_is_dead_lettered(proc: Processor) -> None:
    from flowtracer.stream.runtime.plausibility import MAX_FLOWS_PER_BATCH, MAX_ITEMS_PER_BATCH

    cb = counters_pb2.CounterBatch(schema_version=1, switch="leaf01", timestamp_ns=END, received_ns=END)
    cb.interfaces.extend(counters_pb2.InterfaceCounters(name="Ethernet1") for _ in range(MAX_ITEMS_PER_BATCH + 1))
    with pytest.raises(BadRecord, match=rf"len\(interfaces\) = {MAX_ITEMS_PER_BATCH + 1} exceeds"):
        proc.accept(topics.COUNTERS.name, partition_for("leaf01", P), cb.SerializeToString(), object(), NOW)
    fb = batch(proc, "host01", [flows_pb2.Flow(rdma_device="mlx5_0")] * (MAX_FLOWS_PER_BATCH + 1))
    with pytest.raises(BadRecord, match=rf"len\(flows\) = {MAX_FLOWS_PER_BATCH + 1} exceeds"):
        proc.accept(topics.FLOWS.name, partition_for(fb.leaf, P), fb.SerializeToString(), object(), NOW)
