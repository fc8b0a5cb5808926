"""Each vendor profile end to end: the simulator serves one switch under the platform's paths, origins and value
formats, the collector reads it through the same profile, and every counter it maps equals the switch's own value
and delta at each instant (what it does not map stays unset). One platform per subscription mode, so the modes
are covered on non-OpenConfig paths too."""

from __future__ import annotations

import pytest
from gnmi_session_util import IF_FIELDS, collect_batches, fast_gnmi
from gnmi_switches import Ticker, make_switch

from flowtracer.collectors.gnmi.config import Target
from flowtracer.collectors.gnmi.counters.column_deltas import BASELINE
from flowtracer.collectors.gnmi.session import TargetSession
from flowtracer.fabric.platform_profiles import load_profile
from flowtracer.schemas.v1.counters_pb2 import OPER_STATUS_UP, CounterBatch
from flowtracer.sim.switches.server import GnmiServer
from flowtracer.sim.switches.state import INTERFACE_COUNTERS

CASES = [("openconfig", "stream"), ("nokia_srl", "stream"), ("sonic", "poll"), ("arista_eos", "once"),
         ("cisco_nxos", "get")]


def _collect(platform: str, mode: str, n: int = 6) -> tuple[list[CounterBatch], Ticker, TargetSession]:
    st = make_switch("leaf1")
    with GnmiServer({"leaf1": st}, platforms={"leaf1": platform}) as srv, Ticker([st], 0.1) as ticker:
        target = Target(name="leaf1", address="127.0.0.1", port=srv.port, platform=platform, mode=mode,
                        interval=0.2)
        batches, s = collect_batches(target, fast_gnmi(0.1, batch_grace=0.3), n, timeout=15)
    return batches, ticker, s


@pytest.mark.parametrize(("platform", "mode"), CASES)
def test_each_platform_reads_exactly_what_the_switch_counted(platform: str, mode: str) -> None:
    profile = load_profile(platform)
    batches, ticker, session = _collect(platform, mode)
    assert session.stats.decode_errors == 0
    mapped = {f: f"interface.{c}" in profile.leaves for f, c in zip(IF_FIELDS, INTERFACE_COUNTERS, strict=True)}
    checked = 0
    for b in batches:
        ifs, nhs = ticker.truth[b.timestamp_ns][b.switch]
        assert {i.name for i in b.interfaces} == set(ifs)
        for i in b.interfaces:
            for f, c in zip(IF_FIELDS, INTERFACE_COUNTERS, strict=True):
                if not mapped[f]:
                    assert not i.HasField(f), (platform, f)
                    continue
                got = getattr(i, f)
                assert got.value == ifs[i.name][c], (platform, f)
                if got.status != BASELINE:
                    prev = ticker.truth[b.timestamp_ns - i.interval_ns][b.switch][0]
                    assert got.delta == ifs[i.name][c] - prev[i.name][c], (platform, f)
                    checked += 1
        if "next-hop.octets-forwarded" in profile.leaves:
            assert {n.index: (n.octets_forwarded.value, n.packets_forwarded.value) for n in b.next_hops} == nhs
            assert {n.egress_interface for n in b.next_hops} == {"Ethernet3", "Ethernet4"}
        else:
            assert not b.next_hops
    assert checked >= 8 * sum(mapped.values())
    # State in the platform's own format (SR Linux "up" and "400G", SONiC Mb/s, NX-OS operSt), read back as such.
    last = {i.name: i for b in batches for i in b.interfaces}
    if "interface.oper-status" in profile.leaves:
        assert {i.oper_status for i in last.values()} == {OPER_STATUS_UP}
    if "interface.port-speed" in profile.leaves:
        assert {i.speed_bps for i in last.values()} == {400_000_000_000}


def test_platforms_are_independent_on_one_server() -> None:
    """A mixed fabric on one port (gNMI target picks the switch): each switch answers in its own platform's paths,
    and a request in another platform's paths selects nothing there."""
    from pygnmi.spec.v080 import gnmi_pb2

    from flowtracer.collectors.gnmi.counters.paths import parse_path
    from flowtracer.sim.switches.subscription import GnmiError, plan_subscription

    srl = gnmi_pb2.SubscriptionList(subscription=[gnmi_pb2.Subscription(path=parse_path(
        "/interface[name=*]/statistics"))], mode=gnmi_pb2.SubscriptionList.ONCE)
    assert plan_subscription(srl, "nokia_srl").triggers[0].selectors
    assert not plan_subscription(srl, "openconfig").triggers[0].selectors
    sonic = gnmi_pb2.SubscriptionList(subscription=[gnmi_pb2.Subscription(path=parse_path(
        "sonic-db:/COUNTERS_DB/localhost/COUNTERS/Ethernet*"))], mode=gnmi_pb2.SubscriptionList.ONCE)
    assert plan_subscription(sonic, "sonic").triggers[0].selectors
    with pytest.raises(GnmiError, match="unsupported origin 'sonic-db'"):
        plan_subscription(sonic, "openconfig")
