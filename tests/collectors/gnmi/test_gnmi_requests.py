"""The requests a target's mode makes (no server): list mode, per-subscription fields, origins, network instances."""

from __future__ import annotations

import pytest

from flowtracer.collectors.gnmi.channel import get_request, gnmi_for, subscribe_request
from flowtracer.collectors.gnmi.config import Gnmi, Mode, Subscription, Target, TargetMode
from flowtracer.collectors.gnmi.counters.paths import format_path

SUBS = [
    Subscription(name="if", path="/interfaces/interface[name=*]/state/counters", sample_interval=2),
    Subscription(name="vrf", path="/network-instances/network-instance[name=vrf-red]/afts/next-hops", mode=Mode.ON_CHANGE),
    Subscription(name="native", path="sonic:/COUNTERS/Ethernet0"),
]


@pytest.mark.parametrize("mode", [TargetMode.STREAM, TargetMode.POLL, TargetMode.ONCE])
def test_subscribe_request_per_mode_keeps_origins_and_network_instances(mode: TargetMode) -> None:
    sl = subscribe_request(SUBS, Gnmi(origin="openconfig", updates_only=True), mode).subscribe
    assert sl.mode == {TargetMode.STREAM: 0, TargetMode.ONCE: 1, TargetMode.POLL: 2}[mode]
    paths = [format_path(s.path) for s in sl.subscription]
    assert paths == ["openconfig:/interfaces/interface[name=*]/state/counters",
                     "openconfig:/network-instances/network-instance[name=vrf-red]/afts/next-hops",
                     "sonic:/COUNTERS/Ethernet0"]  # a path's own origin is kept
    if mode is TargetMode.STREAM:
        assert sl.updates_only and [s.sample_interval for s in sl.subscription] == [2_000_000_000, 0, 1_000_000_000]
    else:  # the collector drives the interval: no per-subscription mode or interval, and every round is full
        assert not sl.updates_only
        assert all(s.mode == 0 and s.sample_interval == 0 for s in sl.subscription)


def test_get_request_has_every_path_with_its_origin() -> None:
    req = get_request(SUBS, Gnmi(origin="openconfig", encoding="json_ietf"))
    assert [format_path(p) for p in req.path][1:] == [
        "openconfig:/network-instances/network-instance[name=vrf-red]/afts/next-hops", "sonic:/COUNTERS/Ethernet0"]
    assert req.encoding == 4  # JSON_IETF
    with pytest.raises(ValueError, match="Get target has no SubscribeRequest"):
        subscribe_request(SUBS, Gnmi(), TargetMode.GET)


def test_a_targets_own_timeout_is_its_connect_timeout() -> None:
    """gnmic's per-target ``timeout`` (mapped to Target.timeout) bounds that target's connect; others keep the default."""
    assert gnmi_for(Target(name="a", address="192.0.2.1", timeout=2.5), Gnmi()).connect_timeout == 2.5
    assert gnmi_for(Target(name="b", address="192.0.2.2"), Gnmi()).connect_timeout == Gnmi().connect_timeout
    assert gnmi_for(Target(name="c", address="192.0.2.3", platform="sonic", timeout="3s"), Gnmi()).connect_timeout == 3
