"""The processor's three stages, wired by hand as Kafka would wire them, on a fabric small enough to
check by hand: two heavy flows hashed onto one uplink of leaf01 while the other idles."""

from __future__ import annotations

from collections import defaultdict

import pytest

from flowtracer.fabric.ecmp_hash import HeaderFields
from flowtracer.fabric.roce import rocev2_udp_sport
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas.topics import partition_for
from flowtracer.schemas.v1 import analytics_pb2, common_pb2, counters_pb2, flows_pb2, internal_pb2
from flowtracer.stream.analytics.link_index import LinkIndex
from flowtracer.stream.resolvers.hash import HashResolver
from flowtracer.stream.stages.emitted import Emitted
from flowtracer.stream.stages.fabric import FabricStage
from flowtracer.stream.stages.flows import FlowsStage
from flowtracer.stream.stages.links import LinksStage

S = 1_000_000_000
P = 2
GB = 25_000_000_000  # 200 Gbit/s for one second: half a 400G link


def _colliding_pair(fabric: Fabric) -> list[tuple[str, str, int, int]]:
    """Two flows host01->host03 and host02->host04 whose QP numbers hash onto the same spine."""
    found: dict[str, list[tuple[str, str, int, int]]] = defaultdict(list)
    for src, dst in (("host01", "host03"), ("host02", "host04")):
        for lqpn in range(0x100, 0x200):
            rqpn = lqpn + 0x1000
            s, d = fabric.nics[f"{src}:mlx5_0"], fabric.nics[f"{dst}:mlx5_0"]
            path = fabric.hash_path(HeaderFields(s.nic.ip, d.nic.ip, rocev2_udp_sport(lqpn, rqpn)),
                                    f"{src}:mlx5_0", f"{dst}:mlx5_0")
            spine = path[1].split(">")[1].split(":")[0]
            if not any(f[0] == src for f in found[spine]):
                found[spine].append((src, dst, lqpn, rqpn))
    return found["spine01"]


def _counter(delta: int) -> common_pb2.Counter:
    return common_pb2.Counter(value=delta, delta=delta, status=common_pb2.DELTA_STATUS_OK)


def test_collision_link_loads_and_fim_end_to_end() -> None:
    fabric = Fabric(generate(FabricSpec(hosts=4, leaves=2, spines=2)))
    links = LinkIndex(fabric)
    flows = _colliding_pair(fabric)
    assert len(flows) == 2
    # Ground truth: both flows' paths, computed with the same hash model as the switches.
    truth: dict[str, int] = defaultdict(int)
    batches = []
    for src, dst, lqpn, rqpn in flows:
        s, d = fabric.nics[f"{src}:mlx5_0"], fabric.nics[f"{dst}:mlx5_0"]
        sport = rocev2_udp_sport(lqpn, rqpn)
        for lid in fabric.hash_path(HeaderFields(s.nic.ip, d.nic.ip, sport), s.name, d.name):
            truth[lid] += GB
        batches.append(flows_pb2.FlowBatch(
            schema_version=1, host=src, leaf=s.leaf, window_start_ns=0, window_end_ns=S,
            flows=[flows_pb2.Flow(rdma_device="mlx5_0", lqpn=lqpn, rqpn=rqpn, src_ip=s.nic.ip, dst_ip=d.nic.ip,
                                  udp_src_port=sport, udp_dst_port=4791, tx_bytes=GB, job_id="job7")]))
    # The other hosts' agents report too, with no flows (as agents do every window), and the receivers' NIC
    # congestion counters: host03 sent CNPs, host04 none.
    for host, cnps in (("host03", 700), ("host04", 0)):
        nic = fabric.nics[f"{host}:mlx5_0"]
        port = flows_pb2.PortTotals(rdma_device="mlx5_0", port=1, congestion=flows_pb2.NicCongestion(
            interval_ns=S, np_cnp_sent=_counter(cnps), np_ecn_marked_roce_packets=_counter(cnps),
            rp_cnp_handled=_counter(0), rp_cnp_ignored=_counter(0)))
        batches.append(flows_pb2.FlowBatch(schema_version=1, host=host, leaf=nic.leaf, window_start_ns=0,
                                           window_end_ns=S, ports=[port]))
    # Every switch reports counters that agree with the truth (0 on idle links).
    counters = []
    for sw in sorted(fabric.switch_names):
        cb = counters_pb2.CounterBatch(schema_version=1, switch=sw, timestamp_ns=S)
        ports = {lk.src_port for lk in fabric.out_links[sw]}
        for port in sorted(ports):
            out_id = links.out_link[(sw, port)]
            host_in = links.in_host_link.get((sw, port))
            cb.interfaces.append(counters_pb2.InterfaceCounters(
                name=port, interval_ns=S, out_octets=_counter(truth.get(out_id, 0)),
                in_octets=_counter(truth.get(host_in, 0) if host_in else 0)))
        counters.append(cb)

    resolver = HashResolver(fabric)
    a = [FlowsStage(p, P, fabric, links, resolver, S, 5 * S, uses_counters=False) for p in range(P)]
    b = [LinksStage(p, P, fabric, links, S, 5 * S, rolling_hops=10) for p in range(P)]
    c = FabricStage(S, 5 * S, rolling_hops=10)
    for fb in batches + batches:  # every batch delivered twice (at-least-once): counted once
        a[partition_for(fb.leaf, P)].add_flows(fb, "flow-token", now_ns=S)
    for cb in counters:
        b[partition_for(cb.switch, P)].add_counters(cb, "counter-token", now_ns=S)
    # leaf01's congestion counters of the same instant: the collided uplink's RoCE queue marked, the idle one not.
    marked = {"Ethernet3": 886, "Ethernet4": 0}
    cong = counters_pb2.CongestionBatch(schema_version=1, switch="leaf01", timestamp_ns=S, queues=[
        counters_pb2.QueueCounters(interface=port, queue="3", interval_ns=S, ecn_marked_pkts=_counter(n),
                                   dropped_pkts=_counter(0), dropped_octets=_counter(0))
        for port, n in marked.items()])
    b[partition_for("leaf01", P)].add_congestion(cong, "congestion-token", now_ns=S)
    out = Emitted()
    for stage in a:
        out.extend(stage.finalize(now_ns=10 * S))  # grace passed: the first window has no history
    assert len(out.attributions) == P  # the one flows partition with leaves marks every destination
    for dest, ab in out.attributions + out.attributions:  # a replayed flows partition re-sends
        b[dest].add_attributions(ab, "attr-token", now_ns=S)
    for stage in b:
        out.extend(stage.finalize(now_ns=100 * S))
    for gb in out.group_fims:
        c.add(gb, "group-token", now_ns=S)
    out.extend(c.finalize(now_ns=100 * S))

    loads = {ll.link: ll for ll in out.link_loads}
    for lid, nbytes in truth.items():
        assert loads[lid].measured_bytes == nbytes and loads[lid].attributed_bytes == nbytes
        assert loads[lid].unexplained_bytes == 0 and loads[lid].measured_valid
    up = "leaf01:Ethernet3>spine01:Ethernet1"
    idle = "leaf01:Ethernet4>spine02:Ethernet1"
    assert loads[up].utilization == pytest.approx(1.0) and loads[up].flow_count == 2
    assert loads[idle].measured_bytes == 0 and loads[idle].measured_valid

    group = {(f.group, f.basis): f for f in out.fims}
    for basis in (analytics_pb2.LOAD_BASIS_MEASURED, analytics_pb2.LOAD_BASIS_ATTRIBUTED):
        g = group[("leaf01:spine01|spine02", basis)]
        assert g.fim == pytest.approx(1.0) and list(g.member_bytes) == [2 * GB, 0]
        assert group[("fabric", basis)].fim == pytest.approx(1.0)  # only leaf01's group carried traffic
    assert group[("leaf01:spine01|spine02", analytics_pb2.LOAD_BASIS_ATTRIBUTED)].fim_flows == pytest.approx(1.0)

    [collision] = out.collisions
    assert (collision.switch, collision.link, collision.idle_link) == ("leaf01", up, idle)
    assert sorted(f.src_host for f in collision.flows) == ["host01", "host02"]
    assert {f.job_id for f in collision.flows} == {"job7"}
    # Judged by the same window's congestion: harmful, with the evidence (host03's CNPs came through the
    # attribution batches from the receivers' flows partition).
    assert (collision.harmful, collision.harm_basis) == (True, "switch")
    assert (collision.link_ecn_marked_pkts, collision.idle_ecn_marked_pkts, collision.receiver_cnps) == (886, 0, 700)
    # host03's CNPs all go to the one flow it receives on the congested uplink; host04 sent none.
    assert {f.dst_host: f.cnp_share for f in collision.flows} == {"host03": 700.0, "host04": 0.0}
    assert len(out.path_loads) == 2 and all(p.bytes == GB and list(p.jobs) == ["job7"] for p in out.path_loads)
    # The congested uplink's cause, decided by the fabric stage from leaf01's partition's evidence.
    [cause] = out.congestion_causes
    assert (cause.link, cause.cause, cause.sibling, cause.ecn_marked_pkts) == (up, "collision", idle, 886)
    assert (cause.flow_count, cause.sources, cause.utilization, cause.sibling_utilization) == (2, 2, 1.0, 0.0)
    assert sorted(set(out.tokens)) == ["attr-token", "congestion-token", "counter-token", "flow-token", "group-token"]


def _uplink_counters(fabric: Fabric, links: LinkIndex, end: int, loads: dict[str, int]) -> list[counters_pb2.CounterBatch]:
    """Every switch's CounterBatch for the window ending ``end``: ``loads`` bytes on the given out-links."""
    out = []
    for sw in sorted(fabric.switch_names):
        cb = counters_pb2.CounterBatch(schema_version=1, switch=sw, timestamp_ns=end, sequence=end // S)
        for port in sorted({lk.src_port for lk in fabric.out_links[sw]}):
            cb.interfaces.append(counters_pb2.InterfaceCounters(
                name=port, interval_ns=S, out_octets=_counter(loads.get(links.out_link[(sw, port)], 0)),
                in_octets=_counter(0)))
        out.append(cb)
    return out


def test_a_stage_restored_from_saved_state_skips_published_windows_and_keeps_its_rolling_history() -> None:
    """A worker taking a partition over replays records of windows the previous owner published (they
    sit after the committed offset): they must be late, and the rolling FIM must span the takeover."""
    import json

    fabric = Fabric(generate(FabricSpec(hosts=4, leaves=2, spines=2)))
    links = LinkIndex(fabric)
    up1, up2 = "leaf01:Ethernet3>spine01:Ethernet1", "leaf01:Ethernet4>spine02:Ethernet1"

    def window(stage: LinksStage, k: int) -> Emitted:
        for cb in _uplink_counters(fabric, links, k * S, {up1: k * GB, up2: GB}):
            stage.add_counters(cb, f"c{k}", now_ns=k * S)
        cong = counters_pb2.CongestionBatch(schema_version=1, switch="leaf01", timestamp_ns=k * S, sequence=k)
        cong.queues.add(interface="Ethernet3", queue="3", interval_ns=S, ecn_marked_pkts=_counter(k))  # up1 queues
        stage.add_congestion(cong, f"g{k}", now_ns=k * S)
        for q in range(P):  # every flows partition's (empty) attribution batch: the end-of-window marker
            stage.add_attributions(internal_pb2.AttributionBatch(schema_version=1, window_end_ns=k * S,
                                                                 source_partition=q), f"a{k}", now_ns=k * S)
        return stage.finalize(now_ns=k * S)

    def new_stage() -> LinksStage:
        return LinksStage(0, P, fabric, links, S, 5 * S, rolling_hops=10)

    first = new_stage()
    assert [window(first, k).windows for k in (1, 2)] == [1, 1]
    saved = json.loads(json.dumps(first.state()))  # what the Faust table holds
    expected = window(first, 3)

    taker = new_stage()
    taker.restore(saved)
    assert taker.last_utilization == (2 * S, {up1: 2 * GB * 8 / 400e9})  # the congested link's, saved
    assert [window(taker, k).windows for k in (1, 2)] == [0, 0], "published windows are not reopened"
    assert taker.tracker.late > 0
    got = window(taker, 3)
    assert got.windows == 1
    fims = {(f.group, f.basis): f for f in got.fims}
    assert fims == {(f.group, f.basis): f for f in expected.fims}
    rolling = fims[("leaf01:spine01|spine02", analytics_pb2.LOAD_BASIS_MEASURED)]
    assert list(rolling.member_bytes) == [6 * GB, 3 * GB], "three windows of history, two of them restored"
