"""Subscribe semantics without a server: validation, sampling schedule, on-change, deletes."""

from __future__ import annotations

import json

import pytest
from pygnmi.create_gnmi_path import gnmi_path_generator
from pygnmi.spec.v080 import gnmi_pb2

from flowtracer.sim.switches.encode import JSON_IETF, PROTO, UpdateEncoder
from flowtracer.sim.switches.schema import read_tick
from flowtracer.sim.switches.state import InterfaceState, NextHop, NextHopGroup, SwitchState
from flowtracer.sim.switches.subscription import (
    ON_CHANGE,
    ONCE,
    POLL,
    SAMPLE,
    STREAM,
    TARGET_DEFINED,
    GnmiError,
    Subscription,
    plan_subscription,
)

T0 = 1_767_225_600_000_000_000
TICK = 100_000_000  # 100 ms engine tick
SEC = 1_000_000_000
NI = "/network-instances/network-instance[name=default]/afts"


def sub_list(*entries: dict[str, object], mode: int = STREAM, encoding: int = PROTO,
             updates_only: bool = False, target: str = "") -> gnmi_pb2.SubscriptionList:
    subs = []
    for e in entries:
        e = dict(e)
        subs.append(gnmi_pb2.Subscription(path=gnmi_path_generator(str(e.pop("path"))), **e))  # type: ignore[arg-type]
    return gnmi_pb2.SubscriptionList(subscription=subs, mode=mode, encoding=encoding, updates_only=updates_only,
                                     prefix=gnmi_pb2.Path(target=target))


def switch() -> SwitchState:
    st = SwitchState("leaf1")
    for i in (1, 2):
        st.interfaces[f"Ethernet{i}"] = InterfaceState(f"Ethernet{i}", 400 * 10**9)
    st.next_hops = {1: NextHop(1, "10.0.0.1", "Ethernet1"), 2: NextHop(2, "10.0.0.3", "Ethernet2")}
    st.groups = {5: NextHopGroup(5, {1: 1, 2: 1})}
    st.timestamp_ns = T0
    return st


def advance(st: SwitchState, ns: int = TICK, octets: int = 1000) -> None:
    for i in st.interfaces.values():
        i.counters["in-octets"] += octets
    st.timestamp_ns += ns


def decode(responses: list[bytes]) -> list[tuple[int, dict[str, object], list[str]]]:
    """(timestamp, {path: value}, [deleted paths]) per notification."""
    out = []
    for raw in responses:
        n = gnmi_pb2.SubscribeResponse.FromString(raw).update

        def text(p: gnmi_pb2.Path) -> str:
            return "/" + "/".join(e.name + "".join(f"[{k}={v}]" for k, v in e.key.items()) for e in p.elem)

        vals = {}
        for u in n.update:
            kind = u.val.WhichOneof("value")
            v = getattr(u.val, kind)
            vals[text(u.path)] = json.loads(v) if kind.startswith("json") else v
        out.append((n.timestamp, vals, [text(d) for d in n.delete]))
    return out


def start(st: SwitchState, sl: gnmi_pb2.SubscriptionList) -> tuple[Subscription, list[bytes]]:
    sub = Subscription(plan_subscription(sl), UpdateEncoder(), st.boot_epoch)
    return sub, sub.initial(read_tick(st))


IN_OCTETS = "/interfaces/interface[name=Ethernet1]/state/counters/in-octets"


def test_sample_schedule_follows_tick_timestamps() -> None:
    st = switch()
    sub, first = start(st, sub_list({"path": IN_OCTETS, "mode": SAMPLE, "sample_interval": SEC}))
    assert decode(first) == [(T0, {IN_OCTETS: 0}, [])]
    sent = []
    for _ in range(25):
        # The engine's ticks end 0.25% early: ten of them are 997.5 ms. Without the tolerance the
        # sample would slip to the 11th tick every time (1.1 s intervals); with it, every 10th.
        advance(st, TICK - TICK // 400)
        sent += decode(sub.on_tick(read_tick(st), TICK // 2))
    assert [ts - T0 for ts, _, _ in sent] == [10 * (TICK - TICK // 400), 20 * (TICK - TICK // 400)]
    assert [v[IN_OCTETS] for _, v, _ in sent] == [10_000, 20_000]


def test_sample_interval_not_a_multiple_of_the_tick_keeps_its_average() -> None:
    st = switch()
    sub, _ = start(st, sub_list({"path": IN_OCTETS, "mode": SAMPLE, "sample_interval": 250_000_000}))
    sent = []
    for _ in range(20):
        advance(st)
        sent += [ts - T0 for ts, _, _ in decode(sub.on_tick(read_tick(st), TICK // 2))]
    # due at 250, 500, 750 ... ms minus 50 ms: on 100 ms ticks that is 200, 500, 700, 1000 ...
    assert sent == [k * TICK for k in (2, 5, 7, 10, 12, 15, 17, 20)]


def test_sample_interval_zero_sends_every_tick_and_never_twice() -> None:
    st = switch()
    sub, _ = start(st, sub_list({"path": IN_OCTETS, "mode": SAMPLE}))
    advance(st)
    t = read_tick(st)
    assert len(sub.on_tick(t, 0)) == 1
    assert sub.on_tick(t, 0) == []  # the same tick again (a spurious wake-up)


def test_suppress_redundant_with_heartbeat() -> None:
    st = switch()
    path = "/interfaces/interface[name=Ethernet1]/state/counters"
    sub, first = start(st, sub_list({"path": path, "mode": SAMPLE, "sample_interval": TICK,
                                     "suppress_redundant": True, "heartbeat_interval": 5 * TICK}))
    assert len(decode(first)[0][1]) == 11
    advance(st, octets=0)
    assert sub.on_tick(read_tick(st), 0) == []  # nothing changed
    advance(st, octets=7)
    assert decode(sub.on_tick(read_tick(st), 0))[0][1] == {IN_OCTETS: 7}  # only the changed leaf
    for _ in range(2):
        advance(st, octets=0)
        assert sub.on_tick(read_tick(st), 0) == []
    advance(st, octets=0)  # 5 ticks after the initial full update: the heartbeat sends everything
    assert len(decode(sub.on_tick(read_tick(st), 0))[0][1]) == 11


def test_on_change_initial_then_changes_and_oper_events() -> None:
    st = switch()
    path = "/interfaces/interface[name=*]/state/oper-status"
    sub, first = start(st, sub_list({"path": path, "mode": ON_CHANGE}))
    assert sub.wants_oper_events
    assert decode(first)[0][1] == {"/interfaces/interface[name=Ethernet1]/state/oper-status": "UP",
                                   "/interfaces/interface[name=Ethernet2]/state/oper-status": "UP"}
    advance(st)
    assert sub.on_tick(read_tick(st), 0) == []  # counters changed, oper-status did not
    # The engine's event carries the change right away, stamped with the event time.
    out = decode(sub.on_oper(T0 + 123, "Ethernet2", "DOWN", T0 + 123))
    assert out == [(T0 + 123, {"/interfaces/interface[name=Ethernet2]/state/oper-status": "DOWN"}, [])]
    st.interfaces["Ethernet2"].oper_up = False
    advance(st)
    assert sub.on_tick(read_tick(st), 0) == []  # already sent by the event
    st.interfaces["Ethernet1"].oper_up = False  # a change without an event is found by the tick's diff
    advance(st)
    assert decode(sub.on_tick(read_tick(st), 0))[0][1] == {
        "/interfaces/interface[name=Ethernet1]/state/oper-status": "DOWN"}


def test_updates_only_sends_nothing_first_then_changes() -> None:
    st = switch()
    sub, first = start(st, sub_list({"path": "/interfaces/interface/state/oper-status", "mode": ON_CHANGE},
                                    {"path": IN_OCTETS, "mode": SAMPLE, "sample_interval": 2 * TICK},
                                    updates_only=True))
    assert first == []
    advance(st)
    assert sub.on_tick(read_tick(st), 0) == []
    advance(st)
    assert decode(sub.on_tick(read_tick(st), 0)) == [(T0 + 2 * TICK, {IN_OCTETS: 2000}, [])]


def test_target_defined_samples_counters_and_watches_the_rest() -> None:
    plan = plan_subscription(sub_list({"path": "/interfaces/interface[name=Ethernet1]/state",
                                       "mode": TARGET_DEFINED, "sample_interval": 2 * SEC}))
    sampled, changing = plan.triggers
    assert not sampled.on_change and sampled.interval_ns == 2 * SEC
    assert {leaf.path[-1] for s in sampled.selectors for leaf in s.leaves} >= {"in-octets", "out-errors"}
    assert changing.on_change
    assert {leaf.path[-1] for s in changing.selectors for leaf in s.leaves} >= {"oper-status", "last-change"}


def test_vanished_entries_are_deleted() -> None:
    st = switch()
    path = f"{NI}/next-hop-groups/next-hop-group[id=*]/next-hops/next-hop[index=*]/state/weight"
    sub, first = start(st, sub_list({"path": path, "mode": SAMPLE, "sample_interval": TICK}, encoding=JSON_IETF))
    assert set(decode(first)[0][1].values()) == {"1"}  # uint64 weights are strings in JSON_IETF
    st.groups = {6: NextHopGroup(6, {2: 3})}
    advance(st)
    (deleted, updated) = decode(sub.on_tick(read_tick(st), 0))
    base = "/network-instances/network-instance[name=default]/afts/next-hop-groups"
    assert deleted[2] == [f"{base}/next-hop-group[id=5]/next-hops/next-hop[index=1]",
                          f"{base}/next-hop-group[id=5]/next-hops/next-hop[index=2]"]
    assert updated[1] == {f"{base}/next-hop-group[id=6]/next-hops/next-hop[index=2]/state/weight": "3"}


def test_reboot_ends_the_subscription() -> None:
    st = switch()
    sub, _ = start(st, sub_list({"path": IN_OCTETS, "mode": SAMPLE}))
    st.boot_epoch += 1
    advance(st)
    with pytest.raises(GnmiError) as e:
        sub.on_tick(read_tick(st), 0)
    assert e.value.code == "UNAVAILABLE"


def test_poll_and_once_ignore_stream_fields() -> None:
    st = switch()
    for mode in (POLL, ONCE):
        sl = sub_list({"path": IN_OCTETS, "mode": SAMPLE, "sample_interval": 5}, mode=mode)  # 5 ns: fine here
        sub = Subscription(plan_subscription(sl), UpdateEncoder(), 0)
        assert decode(sub.poll(read_tick(st))) == [(T0, {IN_OCTETS: 0}, [])]


@pytest.mark.parametrize(("sl", "code", "message"), [
    (sub_list(), "INVALID_ARGUMENT", "subscription is empty"),
    (sub_list(*[{"path": IN_OCTETS}] * 1001), "INVALID_ARGUMENT", "at most 1000"),
    (sub_list({"path": IN_OCTETS}, mode=7), "INVALID_ARGUMENT", "mode 7 is not STREAM"),
    (sub_list({"path": IN_OCTETS, "mode": 9}), "INVALID_ARGUMENT", "mode 9 is not TARGET_DEFINED"),
    (sub_list({"path": IN_OCTETS, "mode": SAMPLE, "sample_interval": 2**64 - 1}), "INVALID_ARGUMENT",
     "out of range"),
    (sub_list({"path": IN_OCTETS, "mode": SAMPLE, "sample_interval": 10}), "INVALID_ARGUMENT", "below the minimum"),
    (sub_list({"path": IN_OCTETS, "mode": ON_CHANGE, "heartbeat_interval": 2**63}), "INVALID_ARGUMENT",
     "heartbeat_interval"),
    (sub_list({"path": "/interfaces/inter face"}), "INVALID_ARGUMENT", r"subscription\[0\]: path element 1"),
    (sub_list({"path": IN_OCTETS}, encoding=gnmi_pb2.Encoding.ASCII), "UNIMPLEMENTED", "encoding ASCII"),
    (sub_list({"path": IN_OCTETS}, encoding=42), "UNIMPLEMENTED", "encoding 42"),
])
def test_invalid_subscription_lists(sl: gnmi_pb2.SubscriptionList, code: str, message: str) -> None:
    with pytest.raises(GnmiError, match=message) as e:
        plan_subscription(sl)
    assert e.value.code == code


def test_unknown_path_is_accepted_and_silent() -> None:
    st = switch()
    sub, first = start(st, sub_list({"path": "/system/state/hostname", "mode": SAMPLE}))
    assert first == []
    advance(st)
    assert sub.on_tick(read_tick(st), 0) == []


def test_on_change_heartbeat_resends_everything() -> None:
    st = switch()
    path = "/interfaces/interface[name=*]/state/oper-status"
    sub, _ = start(st, sub_list({"path": path, "mode": ON_CHANGE, "heartbeat_interval": 3 * TICK}))
    sent = []
    for _ in range(7):
        advance(st)
        sent.append(len(decode(sub.on_tick(read_tick(st), 0))))
    assert sent == [0, 0, 1, 0, 0, 1, 0]  # one notification with both interfaces every 3 ticks


def test_sampled_only_subscriptions_ignore_oper_events() -> None:
    st = switch()
    sub, _ = start(st, sub_list({"path": "/interfaces/interface/state", "mode": SAMPLE, "sample_interval": SEC}))
    assert not sub.wants_oper_events
    assert sub.on_oper(T0 + 1, "Ethernet1", "DOWN", T0 + 1) == []


def test_a_late_tick_does_not_bunch_two_samples() -> None:
    st = switch()
    sub, _ = start(st, sub_list({"path": IN_OCTETS, "mode": SAMPLE, "sample_interval": 5 * TICK}))
    sent = []
    for dt in (TICK, TICK, TICK, TICK, 4 * TICK, TICK, TICK, TICK, TICK, TICK):  # one tick 300 ms late
        advance(st, dt)
        sent += [ts - T0 for ts, _, _ in decode(sub.on_tick(read_tick(st), TICK // 2))]
    assert sent == [8 * TICK, 13 * TICK]  # 5 ticks apart again, not right after the late one
