"""Link faults in kernel mode: the veths go down, routes shrink, the kernel's paths avoid the cable."""

from __future__ import annotations

import subprocess

from netns_skip import needs_netns

from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.sim.fabric.engine import Engine
from flowtracer.sim.fabric.workload import preset
from flowtracer.sim.kernel.dataplane import KernelDataplane

UPLINK = "leaf01:Ethernet3"  # leaf01 -> spine01


@needs_netns
def test_link_down_moves_every_flow_off_the_cable_and_back() -> None:
    topo = generate(FabricSpec(hosts=4, leaves=2, spines=2))
    dp = KernelDataplane(topo, traffic=False)
    try:
        e = Engine(topo, preset("alltoall", channels=4), tick_s=0.5, start_ns=0, dataplane=dp)
        e.advance(1)
        cable = {"leaf01:Ethernet3>spine01:Ethernet1", "spine01:Ethernet1>leaf01:Ethernet3"}
        on = lambda: {f.id for f in e.flows.values() if f.path and cable & {e.link_ids[i] for i in f.path}}  # noqa: E731
        assert on()  # 4 channels x 2 members: some flows use the cable
        e.inject("link_down", UPLINK)
        e.advance(1)
        assert not on() and all(f.path is not None for f in e.flows.values())
        state = subprocess.run(["ip", "-n", dp.netns_name("leaf01"), "-br", "link", "show", "Ethernet3"],
                               capture_output=True, text=True, check=True).stdout
        assert "DOWN" in state
        e.inject("link_up", UPLINK)
        e.advance(1)
        assert on()
    finally:
        dp.close()
