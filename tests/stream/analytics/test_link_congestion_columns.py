"""The column tally of link_congestion (stream/analytics/congestion_columns.py) gives exactly the LinkCongestion
records of the plain per-row Tally version kept here as the reference: field by field, validity included, on
random windows with resets, baselines, gaps, wrapped deltas, missing counters, other intervals, RoCE and other
queues, PFC rows on host ports (both directions) and ports that measure no link."""

from __future__ import annotations

from collections.abc import Iterable

from hypothesis import given, settings
from hypothesis import strategies as st

from flowtracer.fabric.roce import ROCE_PRIORITY
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas.topics import SCHEMA_VERSION
from flowtracer.schemas.v1 import analytics_pb2, common_pb2, counters_pb2
from flowtracer.stream.analytics.congestion import Tally, link_congestion, queue_priority
from flowtracer.stream.analytics.link_index import LinkIndex

HOP = 1_000_000_000
START, END = 9 * HOP, 10 * HOP
LINKS = LinkIndex(Fabric(generate(FabricSpec(hosts=2, leaves=2, spines=2))))
SWITCHES = sorted(LINKS.owned)


def cells(msg: object, names: tuple[str, ...]) -> list[common_pb2.Counter | None]:
    return [getattr(msg, n) if msg.HasField(n) else None for n in names]  # type: ignore[attr-defined]


class LinkAcc:
    """One link's tallies in one window: PFC (received, sent), ECN marks, drops (pkts, octets), watermark."""

    def __init__(self) -> None:
        self.pfc, self.ecn, self.drops = Tally(2), Tally(1), Tally(2)
        self.watermark = [0, 0]
        self.has_watermark = False


def reference(batches: Iterable[counters_pb2.CongestionBatch], links: LinkIndex, hop_ns: int,
              window_start_ns: int, window_end_ns: int) -> list[analytics_pb2.LinkCongestion]:
    """link_congestion as it was before the column tally: one Tally.add per queue and PFC row."""
    acc: dict[str, LinkAcc] = {}
    reported: set[str] = set()

    def of(lid: str) -> LinkAcc:
        a = acc.get(lid)
        if a is None:
            a = acc[lid] = LinkAcc()
        return a

    for batch in batches:
        sw = batch.switch
        reported.add(sw)
        for p in batch.pfc:
            roce = p.priority == ROCE_PRIORITY
            rx, tx = cells(p, ("pause_frames_rx", "pause_frames_tx"))
            out = links.out_link.get((sw, p.interface))
            if out is not None:
                of(out).pfc.add((rx, tx), p.interval_ns, hop_ns, roce)
            up = links.in_host_link.get((sw, p.interface))
            if up is not None:
                of(up).pfc.add((tx, rx), p.interval_ns, hop_ns, roce)
        for q in batch.queues:
            out = links.out_link.get((sw, q.interface))
            if out is None:
                continue
            a = of(out)
            roce = queue_priority(q.queue) == ROCE_PRIORITY
            a.ecn.add(cells(q, ("ecn_marked_pkts",)), q.interval_ns, hop_ns, roce)
            a.drops.add(cells(q, ("dropped_pkts", "dropped_octets")), q.interval_ns, hop_ns, roce)
            if q.has_max_queue_len:
                a.has_watermark = True
                a.watermark[0] = max(a.watermark[0], q.max_queue_len_bytes)
                if roce:
                    a.watermark[1] = max(a.watermark[1], q.max_queue_len_bytes)
    out_msgs = []
    empty = LinkAcc()
    for lid in sorted({lk.id for sw in reported for lk in links.owned.get(sw, ())}):
        link = links.fabric.links[lid]
        a = acc.get(lid, empty)
        pfc, ecn, drops = a.pfc.values(), a.ecn.values(), a.drops.values()
        wm = a.watermark if a.has_watermark else [0, 0]
        out_msgs.append(analytics_pb2.LinkCongestion(
            schema_version=SCHEMA_VERSION, window_start_ns=window_start_ns, window_end_ns=window_end_ns, link=lid,
            src_node=link.src_node, src_port=link.src_port, dst_node=link.dst_node, dst_port=link.dst_port,
            pfc_pauses_received=pfc[0], pfc_pauses_received_roce=pfc[1], pfc_pauses_sent=pfc[2],
            pfc_pauses_sent_roce=pfc[3], pfc_valid=a.pfc.valid,
            ecn_marked_pkts=ecn[0], ecn_marked_pkts_roce=ecn[1], ecn_valid=a.ecn.valid,
            dropped_pkts=drops[0], dropped_pkts_roce=drops[1], dropped_octets=drops[2], dropped_octets_roce=drops[3],
            drops_valid=a.drops.valid,
            queue_watermark_bytes=wm[0], queue_watermark_bytes_roce=wm[1], watermark_valid=a.has_watermark))
    return out_msgs


STATUSES = st.sampled_from([common_pb2.DELTA_STATUS_OK] * 6 + [
    common_pb2.DELTA_STATUS_WRAPPED, common_pb2.DELTA_STATUS_BASELINE, common_pb2.DELTA_STATUS_RESET,
    common_pb2.DELTA_STATUS_GAP])
# Mostly the hop; the edges of "within a tenth" on both sides, a gap's multiple, and nonsense.
INTERVALS = st.sampled_from([HOP] * 8 + [HOP + HOP // 10, HOP - HOP // 10, HOP + HOP // 10 + 1, HOP // 2, 3 * HOP,
                                          0, -HOP])
# Mostly cells that are there; None is a counter the platform does not serve.
CELLS = st.one_of(st.none(), st.builds(lambda d, s: common_pb2.Counter(value=d + 7, delta=d, status=s),
                                       st.integers(0, 2**40), STATUSES),
                  st.builds(lambda d: common_pb2.Counter(value=d, delta=d), st.integers(0, 2**40)))
PORTS = st.sampled_from([f"Ethernet{i}" for i in range(1, 6)])


@st.composite
def pfc_rows(draw: st.DrawFn) -> counters_pb2.PfcCounters:
    p = counters_pb2.PfcCounters(interface=draw(PORTS), priority=draw(st.integers(0, 7)),
                                 interval_ns=draw(INTERVALS))
    for name in ("pause_frames_rx", "pause_frames_tx"):
        cell = draw(CELLS)
        if cell is not None:
            getattr(p, name).CopyFrom(cell)
    return p


@st.composite
def queue_rows(draw: st.DrawFn) -> counters_pb2.QueueCounters:
    q = counters_pb2.QueueCounters(interface=draw(PORTS), queue=draw(st.sampled_from(["3", "UC3", "0", "fc7", "be"])),
                                   interval_ns=draw(INTERVALS))
    for name in ("ecn_marked_pkts", "dropped_pkts", "dropped_octets", "transmit_pkts"):
        cell = draw(CELLS)
        if cell is not None:
            getattr(q, name).CopyFrom(cell)
    if draw(st.booleans()):
        q.max_queue_len_bytes, q.has_max_queue_len = draw(st.integers(0, 2**40)), True
    return q


BATCHES = st.lists(st.builds(
    lambda sw, queues, pfcs: counters_pb2.CongestionBatch(schema_version=1, switch=sw, timestamp_ns=END,
                                                          queues=queues, pfc=pfcs),
    st.sampled_from([*SWITCHES, "not-in-fabric"]), st.lists(queue_rows(), max_size=12),
    st.lists(pfc_rows(), max_size=12)), max_size=4)


@settings(max_examples=200, deadline=None)
@given(BATCHES)
def test_columns_equal_the_per_row_tally(batches: list[counters_pb2.CongestionBatch]) -> None:
    got = link_congestion(iter(batches), LINKS, HOP, START, END)
    want = reference(batches, LINKS, HOP, START, END)
    assert [m.link for m in got] == [m.link for m in want]
    for g, w in zip(got, want, strict=True):
        assert g == w, (g.link, {f.name for f, _ in g.ListFields()} ^ {f.name for f, _ in w.ListFields()})


def test_the_reference_sees_what_the_columns_see() -> None:
    """One hand-made window on which both give a valid PFC sum and an unknown drop group: the property above
    compares more than two lists of unknowns."""
    ok = common_pb2.DELTA_STATUS_OK
    b = counters_pb2.CongestionBatch(switch="leaf01", pfc=[counters_pb2.PfcCounters(
        interface="Ethernet2", priority=ROCE_PRIORITY, interval_ns=HOP,
        pause_frames_rx=common_pb2.Counter(delta=5, status=ok), pause_frames_tx=common_pb2.Counter(delta=1))],
        queues=[counters_pb2.QueueCounters(interface="Ethernet2", queue="3", interval_ns=HOP,
                                           dropped_pkts=common_pb2.Counter(delta=2))])
    for fn in (link_congestion, reference):
        (m,) = [m for m in fn([b], LINKS, HOP, START, END) if m.link == "leaf01:Ethernet2>spine01:Ethernet1"]
        assert (m.pfc_valid, m.pfc_pauses_received_roce, m.pfc_pauses_sent, m.drops_valid, m.dropped_pkts) == (
            True, 5, 1, False, 0)
