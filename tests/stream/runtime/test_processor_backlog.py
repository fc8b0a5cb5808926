"""A backlog read in an unlucky order gives the same windows as one read window by window.

On a backlog the consumer reads each topic-partition in fetches of its own: a partition's counters for many windows
can be read minutes before the same windows' flows. The records are replayed through the real Processor as Kafka
would deliver them, with the worker's clock running 10 s per record (a slow worker on a long backlog), and the
attributions and group FIMs fed back as its own consumer would read them. With the consumer's lag (which input
partitions still have unread records: ``ReadPositions`` over the recorded logs) no window is released without a
source, no record comes late, and every output equals that of the same records read window by window. Without it,
the window rules wait the unread hosts out by the clock: the old behaviour, checked so that the test can fail.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from flowtracer.fabric.ecmp_hash import HeaderFields
from flowtracer.fabric.roce import rocev2_udp_sport
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas import topics
from flowtracer.schemas.topics import partition_for
from flowtracer.schemas.v1 import common_pb2, counters_pb2, flows_pb2
from flowtracer.stream.analytics.link_index import LinkIndex
from flowtracer.stream.resolvers.registry import RESOLVERS
from flowtracer.stream.runtime.config import ProcessorConfig
from flowtracer.stream.runtime.processor import Processor
from flowtracer.stream.runtime.read_positions import ReadPositions
from flowtracer.stream.stages.emitted import Emitted

S = 1_000_000_000
P = 2
WINDOWS = 8
T0 = 1_900_000_000 * S  # the recording's windows end at T0 + k s; the replay starts 60 s after the last
BYTES = 10_000_000_000  # per flow and window
Log = dict[tuple[str, int], list[bytes]]


def _counter(delta: int) -> common_pb2.Counter:
    return common_pb2.Counter(value=delta, delta=delta, status=common_pb2.DELTA_STATUS_OK)


def _recording(fabric: Fabric) -> Log:
    """Every input record of ``WINDOWS`` windows, per (topic, partition), in production order: host0k sends to
    host0(k+4) (another leaf) every window; every switch's counters agree with the hash paths."""
    links = LinkIndex(fabric)
    hosts = sorted({n.host for n in fabric.nics.values()})
    log: Log = defaultdict(list)
    for k in range(1, WINDOWS + 1):
        end = T0 + k * S
        truth: dict[str, int] = defaultdict(int)
        for i, src in enumerate(hosts):
            s = fabric.nics[f"{src}:mlx5_0"]
            d = fabric.nics[f"{hosts[(i + len(hosts) // 2) % len(hosts)]}:mlx5_0"]
            lqpn, rqpn = 0x100 + i, 0x1100 + i
            sport = rocev2_udp_sport(lqpn, rqpn)
            for lid in fabric.hash_path(HeaderFields(s.nic.ip, d.nic.ip, sport), s.name, d.name):
                truth[lid] += BYTES
            fb = flows_pb2.FlowBatch(schema_version=1, host=src, leaf=s.leaf, window_start_ns=end - S,
                                     window_end_ns=end, received_ns=end, flows=[flows_pb2.Flow(
                                         rdma_device="mlx5_0", lqpn=lqpn, rqpn=rqpn, src_ip=s.nic.ip,
                                         dst_ip=d.nic.ip, udp_src_port=sport, udp_dst_port=4791, tx_bytes=BYTES,
                                         job_id="job7")])
            log[(topics.FLOWS.name, partition_for(s.leaf, P))].append(fb.SerializeToString())
        for sw in sorted(fabric.switch_names):
            cb = counters_pb2.CounterBatch(schema_version=1, switch=sw, timestamp_ns=end, received_ns=end,
                                           collector_id="c1", session=1, sequence=k)
            for port in sorted({lk.src_port for lk in fabric.out_links[sw]}):
                host_in = links.in_host_link.get((sw, port))
                cb.interfaces.append(counters_pb2.InterfaceCounters(
                    name=port, interval_ns=S, out_octets=_counter(truth.get(links.out_link[(sw, port)], 0)),
                    in_octets=_counter(truth.get(host_in, 0) if host_in else 0)))
            log[(topics.COUNTERS.name, partition_for(sw, P))].append(cb.SerializeToString())
    return log


def _replay(proc: Processor, log: Log, order: list[tuple[str, int, int]], step_ns: int, lag: bool
            ) -> dict[tuple[str, str, int, int], bytes]:
    """Deliver the records in ``order`` ((topic, partition, offset)), the clock advancing ``step_ns`` per record;
    the outputs by (kind, entity, window end, basis)."""
    positions = ReadPositions()
    positions.positioned({tp: 0 for tp in log})
    highwater = {tp: len(records) for tp, records in log.items()}
    now = T0 + (WINDOWS + 60) * S
    out: dict[tuple[str, str, int, int], bytes] = {}

    def publish(e: Emitted) -> None:
        """Keep the outputs; read the attributions and group FIMs back at once, as the consumer would."""
        for kind, records, field in (("link", e.link_loads, "link"), ("path", e.path_loads, "path_id"),
                                     ("fim", e.fims, "group")):
            for r in records:
                key = (kind, getattr(r, field), r.window_end_ns, getattr(r, "basis", 0))
                assert key not in out, f"{key} published twice"
                out[key] = r.SerializeToString()
        for dest, ab in e.attributions:
            proc.accept(topics.ATTRIBUTIONS.name, dest, ab.SerializeToString(), object(), now)
        for gb in e.group_fims:
            proc.accept(topics.GROUP_FIM.name, 0, gb.SerializeToString(), object(), now)

    def step() -> None:
        unread = positions.unread(lambda t, p: highwater.get((t, p))) if lag else frozenset()
        while (e := proc.finalize(now, unread)).windows:
            publish(e)

    for topic, p, offset in order:
        proc.accept(topic, p, log[(topic, p)][offset], object(), now, key=None)
        positions.read(topic, p, offset)
        now += step_ns
        step()
    now += 600 * S  # the backlog is read: whatever is left is waited out
    step()
    return out


@pytest.fixture
def fabric() -> Fabric:
    return Fabric(generate(FabricSpec(hosts=8, leaves=4, spines=2, name="backlog8")))


def _processor(fabric: Fabric, tmp_path: Path) -> Processor:
    tmp_path.mkdir()
    topo = tmp_path / "fabric.yaml"
    topo.write_text(fabric.topology.to_yaml())
    cfg = ProcessorConfig(topology=topo, kafka="127.0.0.1:9", partitions=P, data_dir=tmp_path)
    return Processor(cfg, fabric, RESOLVERS["hash"])


def test_counters_read_long_before_the_flows_give_the_windows_read_in_order(fabric: Fabric, tmp_path: Path) -> None:
    log = _recording(fabric)
    by_window = [(t, p, k * len(log[(t, p)]) // WINDOWS + i) for k in range(WINDOWS)
                 for (t, p) in sorted(log) for i in range(len(log[(t, p)]) // WINDOWS)]
    counters_first = [(t, p, i) for t in (topics.COUNTERS.name, topics.FLOWS.name) for p in range(P)
                      for i in range(len(log[(t, p)]))]
    assert sorted(by_window) == sorted(counters_first)  # the same records, in two orders

    reference_proc = _processor(fabric, tmp_path / "ref")
    reference = _replay(reference_proc, log, by_window, step_ns=S // 100, lag=True)
    assert {k[2] for k in reference if k[0] == "fim" and k[1] == "fabric"} == {T0 + k * S for k in
                                                                              range(1, WINDOWS + 1)}
    assert sum(s.tracker.incomplete + s.tracker.late for s in reference_proc._stages()) == 0

    proc = _processor(fabric, tmp_path / "lag")
    got = _replay(proc, log, counters_first, step_ns=10 * S, lag=True)
    incomplete = {s.tracker.name: s.tracker.incomplete for s in proc._stages() if s.tracker.incomplete}
    assert (incomplete, proc.metrics.late._value.get()) == ({}, 0)
    assert set(got) == set(reference)
    assert [k for k in reference if got[k] != reference[k]] == []

    # Without the lag the hosts, never heard from, stop being required after the start-up: windows go without their
    # flows, which then come late.
    blind = _processor(fabric, tmp_path / "blind")
    without = _replay(blind, log, counters_first, step_ns=10 * S, lag=False)
    assert blind.metrics.late._value.get() > 0
    assert [k for k in reference if without.get(k) != reference[k]] != []
