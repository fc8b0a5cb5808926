"""The links stage carries each link's oper status into its LinkLoad (``oper_up``, ``oper_valid``): from the
measuring end's interface in the window's CounterBatches, down when any batch of the window said so."""

from __future__ import annotations

import pytest

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas.v1 import analytics_pb2, common_pb2, counters_pb2, internal_pb2
from flowtracer.stream.analytics.link_index import LinkIndex
from flowtracer.stream.stages.links import LinksStage

S = 1_000_000_000
FABRIC = Fabric(generate(FabricSpec(hosts=4, leaves=2, spines=2)))
LINKS = LinkIndex(FABRIC)
UPLINK = "leaf01:Ethernet3>spine01:Ethernet1"  # measured at leaf01's Ethernet3 (out-octets)
HOST_UPLINK = "host01:mlx5_0>leaf01:Ethernet1"  # a host transmits: measured at leaf01's Ethernet1 (in-octets)
UP, DOWN = counters_pb2.OPER_STATUS_UP, counters_pb2.OPER_STATUS_DOWN


def _loads(batches: list[dict[str, int]]) -> dict[str, analytics_pb2.LinkLoad]:
    """One window (ending at 2 s) whose leaf01 batches report these oper statuses per port; other switches none."""
    stage = LinksStage(0, 1, FABRIC, LINKS, S, 5 * S, rolling_hops=10)
    for i, statuses in enumerate(batches):
        for sw in sorted(FABRIC.switch_names):
            cb = counters_pb2.CounterBatch(schema_version=1, switch=sw, timestamp_ns=S + (i + 1) * S // len(batches),
                                           sequence=i + 1)
            for port in ("Ethernet1", "Ethernet3"):
                cb.interfaces.add(name=port, interval_ns=S, out_octets=common_pb2.Counter(delta=1),
                                  in_octets=common_pb2.Counter(delta=1),
                                  oper_status=statuses.get(port, 0) if sw == "leaf01" else 0)
            stage.add_counters(cb, "c", now_ns=2 * S)
    stage.add_attributions(internal_pb2.AttributionBatch(schema_version=1, window_end_ns=2 * S, source_partition=0),
                           "a", now_ns=2 * S)
    out = stage.finalize(now_ns=10 * S)
    assert out.windows == 1
    return {ll.link: ll for ll in out.link_loads}


@pytest.mark.parametrize("name, batches, link, want", [
    ("up", [{"Ethernet3": UP}], UPLINK, (True, True)),
    ("down", [{"Ethernet3": DOWN}], UPLINK, (False, True)),
    ("lower layer down is down", [{"Ethernet3": counters_pb2.OPER_STATUS_LOWER_LAYER_DOWN}], UPLINK, (False, True)),
    ("not reported: invalid", [{}], UPLINK, (False, False)),
    ("a host's uplink: the leaf's port", [{"Ethernet1": DOWN}], HOST_UPLINK, (False, True)),
    ("and the leaf's link to the host, same port", [{"Ethernet1": DOWN}], "leaf01:Ethernet1>host01:mlx5_0",
     (False, True)),
    ("down in one of two batches of the window", [{"Ethernet3": UP}, {"Ethernet3": DOWN}], UPLINK, (False, True)),
    ("another switch's port says nothing of it", [{"Ethernet3": UP}], "spine01:Ethernet1>leaf01:Ethernet3",
     (False, False)),
])
def test_link_load_oper_status(name: str, batches: list[dict[str, int]], link: str, want: tuple[bool, bool]) -> None:
    ll = _loads(batches)[link]
    assert (ll.oper_up, ll.oper_valid) == want, name
