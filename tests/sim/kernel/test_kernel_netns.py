"""A kernel fabric: real packets take exactly the path the route-get oracle predicts; seeds are private."""

from __future__ import annotations

import re
import socket
import time
from collections import Counter

import pytest
from netns_skip import needs_netns

from flowtracer.fabric.ecmp_hash import HashMode, HeaderFields
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.sim.kernel.netns import KernelFabric, run_in_netns
from flowtracer.sim.kernel.oracle import KernelOracle
from flowtracer.sim.kernel.plan import PlanError, make_plan
from flowtracer.sim.kernel.traffic import frame_payload

FRAME = 4158  # a 4096-byte RoCEv2 frame
SPORTS = range(49152, 49152 + 64)


def test_plan_names_fit_linux_and_map_back() -> None:
    topo = generate(FabricSpec(hosts=4, leaves=2, spines=2))
    plan = make_plan(topo, "ft000000")
    assert plan.namespaces["leaf01"] == "ft000000-leaf01"
    assert all(len(n) <= 15 for n in plan.ifname.values())
    assert plan.ifname[("host01", "mlx5_0")] == "ens1f0np0"  # a NIC's veth carries its netdev name
    assert plan.port_of[("leaf01", "Ethernet3")] == "Ethernet3"
    assert len(plan.cables) == len(topo.links) + 4


@pytest.mark.parametrize("mode", [HashMode.FIVE_TUPLE_BTH_DQP, HashMode.SPRAY, HashMode.ADAPTIVE])
def test_plan_refuses_a_hash_mode_linux_cannot_do(mode: HashMode) -> None:
    topo = generate(FabricSpec(hosts=4, leaves=2, spines=2))
    switches = tuple(s.model_copy(update={"hash_mode": mode}) if s.name == "leaf02" else s for s in topo.switches)
    with pytest.raises(PlanError, match=rf"^switch leaf02: hash_mode {re.escape(mode.value)} is not available on "
                                        r"the kernel data plane \(Linux multipath hashes the 5-tuple only\)"):
        make_plan(topo.model_copy(update={"switches": switches}), "ft000000")


def _send(kf: KernelFabric, host: str, src: str, dst: str, sport: int, n: int) -> None:
    def send(_p: object) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind((src, sport))
            for _ in range(n):
                s.sendto(frame_payload(FRAME, 0), (dst, 4791))
    run_in_netns([kf.netns_path(host)], send)


def _tx(kf: KernelFabric) -> dict[tuple[str, str], int]:
    return {k: v[3] for k, v in kf.read_counters().items()}


@needs_netns
@pytest.mark.parametrize("spines", [2, 4])
def test_every_flow_takes_the_path_the_oracle_predicts(spines: int) -> None:
    topo = generate(FabricSpec(hosts=4, leaves=2, spines=spines))
    with KernelFabric(topo) as kf:
        oracle = KernelOracle(kf)
        src, dst = kf.plan.fabric.nics["host01:mlx5_0"], kf.plan.fabric.nics["host04:mlx5_0"]
        queries = [(HeaderFields(src.nic.ip, dst.nic.ip, sp), src.name, dst.name) for sp in SPORTS]
        paths = oracle.paths(queries)
        assert all(p is not None for p in paths)
        links = kf.plan.fabric.links
        # A bound receiver, else host04 answers every packet with an ICMP port-unreachable (extra counts).
        receiver = run_in_netns([kf.netns_path("host04")], lambda _p: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))[0]
        run_in_netns([kf.netns_path("host04")], lambda _p: receiver.bind(("0.0.0.0", 4791)))
        for sp, path in zip(SPORTS, paths, strict=True):
            before = _tx(kf)
            _send(kf, "host01", src.nic.ip, dst.nic.ip, sp, 3)
            deadline = time.monotonic() + 2
            while True:  # until the last hop counted them
                moved = {k: v - before[k] for k, v in _tx(kf).items() if v != before[k]}
                if moved.get(("leaf02", dst.leaf_port)) == 3 or time.monotonic() > deadline:
                    break
                time.sleep(0.01)
            expected = {(links[lid].src_node, links[lid].src_port): 3 for lid in path[1:]}
            assert moved == expected, f"sport {sp}"
        receiver.close()
        used = Counter(p[1] for p in paths)  # the first ECMP choice, at leaf01
        assert len(used) == spines  # every member carries some of 64 flows (sanity, not a distribution)


@needs_netns
def test_seeds_are_private_and_differ_from_the_hash_model() -> None:
    topo = generate(FabricSpec(hosts=4, leaves=2, spines=4))
    fabric = Fabric(topo)
    src, dst = fabric.nics["host01:mlx5_0"], fabric.nics["host04:mlx5_0"]
    queries = [(HeaderFields(src.nic.ip, dst.nic.ip, sp), src.name, dst.name) for sp in SPORTS]
    choices = []
    for seed in (1, 2):
        seeds = dict.fromkeys((s.name for s in topo.switches), seed)
        with KernelFabric(topo, seeds=seeds) as kf:
            choices.append([p[1] for p in KernelOracle(kf).paths(queries)])  # type: ignore[index]
    model = [fabric.hash_path(*q)[1] for q in queries]  # type: ignore[index]
    assert choices[0] != choices[1]  # another seed spreads the same flows differently
    assert choices[0] != model and choices[1] != model  # the topology's hash model cannot know
    with KernelFabric(topo, seeds=dict.fromkeys((s.name for s in topo.switches), 1)) as kf:
        assert [p[1] for p in KernelOracle(kf).paths(queries)] == choices[0]  # type: ignore[index]
