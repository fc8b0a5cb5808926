"""Typed samples -> one CounterBatch per switch per sample instant (pure assembler)."""

from __future__ import annotations

from flowtracer.collectors.gnmi.counters.assembly import BatchAssembler
from flowtracer.collectors.gnmi.counters.decode import INTERFACE_COUNTERS
from flowtracer.collectors.gnmi.counters.samples import LAST_CLEAR_NS, NH_INTERFACE, NH_IP, Samples
from flowtracer.schemas.v1.common_pb2 import DeltaStatus

S = 1_000_000_000
T0 = 1_767_225_600 * S
OK, BASELINE, RESET = DeltaStatus.DELTA_STATUS_OK, DeltaStatus.DELTA_STATUS_BASELINE, DeltaStatus.DELTA_STATUS_RESET
IN_OCTETS = INTERFACE_COUNTERS.index("in-octets")


def asm() -> BatchAssembler:
    a = BatchAssembler("leaf1", collector_id="c1", if_interval_ns=S, nh_interval_ns=S)
    a.start_session(1)
    return a


def ifc(ts: int, *vals: tuple[str, int]) -> Samples:
    return Samples(ts, if_counters=[(name, IN_OCTETS, v) for name, v in vals])


def nh_setup(a: BatchAssembler, index: int, ip: str, intf: str, group: str = "1") -> None:
    a.add(Samples(T0 - S, nh_info=[("default", index, NH_IP, ip), ("default", index, NH_INTERFACE, intf)],
                  nhg_members=[("default", group, index, 1)]), 0)


def test_one_instant_in_several_messages_is_one_batch() -> None:
    a = asm()
    assert a.add(ifc(T0, ("E1", 10)), 111) == []
    assert a.add(ifc(T0, ("E2", 20)), 222) == []
    out = a.add(ifc(T0 + S, ("E1", 15)), 333)  # a newer instant closes the open one
    assert len(out) == 1
    b = out[0]
    assert (b.switch, b.timestamp_ns, b.sequence, b.session, b.received_ns) == ("leaf1", T0, 1, 1, 111)
    assert [i.name for i in b.interfaces] == ["E1", "E2"]
    assert all(i.in_octets.status == BASELINE for i in b.interfaces)
    assert not b.interfaces[0].HasField("out_octets")  # not reported -> not set
    b2 = a.flush()[0]
    assert (b2.sequence, b2.interfaces[0].in_octets.delta, b2.interfaces[0].in_octets.status) == (2, 5, OK)
    assert b2.interfaces[0].interval_ns == S


def test_state_only_notifications_never_close_a_batch() -> None:
    a = asm()
    a.add(ifc(T0, ("E1", 10)), 0)
    # an ON_CHANGE event stamped after the sample instant, arriving in the middle of the sample
    assert a.add(Samples(T0 + S // 2, if_state=[("E1", LAST_CLEAR_NS, T0 - 10 * S)]), 0) == []
    assert a.add(ifc(T0, ("E2", 20)), 0) == []
    (b,) = a.sync()
    assert [i.name for i in b.interfaces] == ["E1", "E2"]
    assert b.interfaces[0].last_clear_ns == 0  # the clear came after this instant ...
    a.add(ifc(T0 + S, ("E1", 12)), 0)
    (b,) = a.flush()
    assert b.interfaces[0].last_clear_ns == T0 - 10 * S  # ... and shows from the next one


def test_late_parts_of_an_instant_go_out_on_their_own_and_nothing_is_counted_twice() -> None:
    a = asm()
    a.add(ifc(T0, ("E1", 10)), 0)
    a.add(ifc(T0 + S, ("E1", 20)), 0)  # emits T0, opens T0 + S
    (late,) = a.add(ifc(T0, ("E2", 5)), 0)  # E2 of instant T0, after T0 went out
    assert (late.timestamp_ns, late.sequence, [i.name for i in late.interfaces]) == (T0, 2, ["E2"])
    (b,) = a.flush()
    assert (b.timestamp_ns, b.sequence) == (T0 + S, 3)
    assert a.add(ifc(T0 + S, ("E1", 20)), 0) == []  # the emitted instant again: already counted
    assert a.add(ifc(T0, ("E1", 10)), 0) == []  # and an older one
    assert (a.stats.late, a.if_deltas.duplicates, a.if_deltas.out_of_order) == (3, 1, 1)


def test_new_session_means_baselines() -> None:
    a = asm()
    a.add(ifc(T0, ("E1", 10)), 0)
    a.add(ifc(T0 + S, ("E1", 20)), 0)
    out = a.start_session(2)  # emits what was open
    assert out[0].interfaces[0].in_octets.delta == 10
    a.add(ifc(T0 + 2 * S, ("E1", 5)), 0)
    (b,) = a.flush()
    assert (b.session, b.interfaces[0].in_octets.status, b.interfaces[0].in_octets.delta) == (2, BASELINE, 0)
    assert b.sequence == 3  # sequence continues across sessions


def test_next_hops_are_keyed_by_egress_and_ip_and_the_newer_tree_wins() -> None:
    a = asm()
    nh_setup(a, 7, "10.0.0.1", "Ethernet3", group="100")
    a.add(Samples(T0, nh_counters=[("default", 7, 0, 1000, False), ("default", 7, 0, 1001, True)]), 0)
    a.add(Samples(T0 + S, nh_counters=[("default", 7, 0, 1500, False), ("default", 7, 0, 1501, True),
                                       ("default", 7, 1, 9, False)]), 0)
    (b,) = a.flush()
    (nh,) = b.next_hops
    assert (nh.egress_interface, nh.next_hop_ip, nh.group, nh.index, nh.weight) == ("Ethernet3", "10.0.0.1",
                                                                                    "100", 7, 1)
    assert (nh.octets_forwarded.value, nh.octets_forwarded.delta) == (1501, 500)
    assert nh.packets_forwarded.status == BASELINE


def test_unmapped_next_hops_are_counted_not_emitted() -> None:
    a = asm()
    a.add(Samples(T0, nh_counters=[("default", 9, 0, 1000, True)]), 0)
    assert a.flush() == []
    assert a.stats.unmapped == 1


def test_reindexed_next_hop_with_same_egress_is_a_baseline_not_a_reset() -> None:
    a = asm()
    nh_setup(a, 7, "10.0.0.1", "Ethernet3")
    a.add(Samples(T0, nh_counters=[("default", 7, 0, 5000, True)]), 0)
    a.add(Samples(T0 + S // 2, deletes=[("next-hop", "default", 7)]), 0)
    nh_setup(a, 8, "10.0.0.1", "Ethernet3")
    a.add(Samples(T0 + S, nh_counters=[("default", 8, 0, 100, True)]), 0)
    (b,) = a.flush()
    assert (b.next_hops[0].index, b.next_hops[0].octets_forwarded.status) == (8, BASELINE)


def test_counter_reset_while_connected() -> None:
    a = asm()
    a.add(ifc(T0, ("E1", 10_000)), 0)
    a.add(ifc(T0 + S, ("E1", 3)), 0)
    (b,) = a.flush()
    c = b.interfaces[0].in_octets
    assert (c.value, c.delta, c.status) == (3, 0, RESET)


def test_next_hops_of_any_network_instance_are_read_and_kept_apart() -> None:
    """The same next-hop index in ``default`` and in a VRF: two next hops, each with its own counters."""
    a = asm()
    for ni, ip, intf in (("default", "10.0.0.1", "Ethernet3"), ("vrf-red", "10.9.0.1", "Ethernet4")):
        a.add(Samples(T0 - S, nh_info=[(ni, 7, NH_IP, ip), (ni, 7, NH_INTERFACE, intf)],
                      nhg_members=[(ni, "1", 7, 1)]), 0)
    for ts, red in ((T0, 100), (T0 + S, 250)):
        a.add(Samples(ts, nh_counters=[("default", 7, 0, 1000 + red // 10, False), ("vrf-red", 7, 0, red, False)]),
              0)
        out = a.sync()
    (b,) = out
    nhs = {n.next_hop_ip: n for n in b.next_hops}
    assert (nhs["10.9.0.1"].egress_interface, nhs["10.9.0.1"].octets_forwarded.value,
            nhs["10.9.0.1"].octets_forwarded.delta) == ("Ethernet4", 250, 150)
    assert (nhs["10.0.0.1"].egress_interface, nhs["10.0.0.1"].octets_forwarded.delta) == ("Ethernet3", 15)


def test_a_next_hop_in_several_groups_carries_its_weight_in_each_and_loses_a_withdrawn_membership() -> None:
    a = asm()
    a.add(Samples(T0 - S, nh_info=[("default", 7, NH_IP, "10.0.0.1"), ("default", 7, NH_INTERFACE, "Ethernet3")],
                  nhg_members=[("default", "22", 7, 3), ("default", "1", 7, 1)]), 0)
    a.add(Samples(T0, nh_counters=[("default", 7, 0, 1000, False)]), 0)
    (b,) = a.sync()
    (nh,) = b.next_hops
    assert (nh.group, nh.weight, list(nh.group_weights)) == ("1,22", 1, [1, 3])
    a.add(Samples(T0 + S // 2, deletes=[("member", "default", "1", 7)]), 0)  # withdrawn from group 1
    a.add(Samples(T0 + S, nh_counters=[("default", 7, 0, 1500, False)]), 0)
    (b,) = a.sync()
    (nh,) = b.next_hops
    assert (nh.group, nh.weight, list(nh.group_weights), nh.octets_forwarded.delta) == ("22", 3, [], 500)
