"""The RDMA sysfs tree (drivers/infiniband/core/sysfs.c formats) -> ports, counters, GIDs."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowtracer.collectors.agent.sources.sysfs import Gid, read_sysfs, roce_path_mtu


def test_fixture_tree_reads_to_exactly_these_ports(fixtures: Path) -> None:
    view = read_sysfs(fixtures / "sysfs" / "class" / "infiniband")
    assert view.root_exists and set(view.ports) == {("mlx5_0", 1), ("mlx5_1", 1)}
    assert view.malformed == 1  # mlx5_1 hw_counters/local_ack_timeout_err holds "garbage"
    p = view.ports[("mlx5_0", 1)]
    assert p.counters == {"port_xmit_data": 123456789, "port_rcv_data": 98765, "port_xmit_packets": 300000,
                          "port_rcv_packets": 2500, "unicast_xmit_packets": 300000, "unicast_rcv_packets": 2500,
                          "port_xmit_discards": 0, "symbol_error": 0}  # VL15_dropped is "N/A (no PMA)": absent
    assert p.hw_counters == {"out_of_sequence": 3, "rx_write_requests": 40012, "np_cnp_sent": 17,
                             "rp_cnp_handled": 9}  # lifespan is a refresh period, not a counter
    ll = "fe80:0000:0000:0000:ba3f:d2ff:fe6a:1c40"
    v4 = "0000:0000:0000:0000:0000:ffff:0a00:010b"
    assert sorted(p.gids, key=lambda g: g.index) == [
        Gid(0, ll, "IB/RoCE v1", "ens1f0np0"), Gid(1, ll, "RoCE v2", "ens1f0np0"),
        Gid(2, v4, "IB/RoCE v1", "ens1f0np0"), Gid(3, v4, "RoCE v2", "ens1f0np0")]  # 4, 5: empty slots
    assert p.roce_v2_ips() == ["10.0.1.11"]
    assert p.netdev == "ens1f0np0" and p.netdev_mtu == 9000
    assert (p.tx_bytes, p.rx_bytes) == (123456789 * 4, 98765 * 4)  # port_*_data counts 4-byte words
    q = view.ports[("mlx5_1", 1)]
    assert q.roce_v2_ips() == ["10.0.2.11"] and q.netdev_mtu == 1500


@pytest.mark.parametrize(("gid", "ip"), [
    ("0000:0000:0000:0000:0000:ffff:c0a8:0101", "192.168.1.1"),
    ("fe80:0000:0000:0000:ba3f:d2ff:fe6a:1c40", None),
    ("2001:0db8:0000:0000:0000:0000:0000:0007", "2001:db8::7"),
    ("garbage", None),
])
def test_gid_to_ip(gid: str, ip: str | None) -> None:
    assert Gid(0, gid, "RoCE v2", "eth0").ip == ip


@pytest.mark.parametrize(("mtu", "path"), [(9000, 4096), (4200, 4096), (4000, 2048), (1500, 1024), (1000, 512),
                                           (500, 256)])
def test_roce_path_mtu_as_linux_derives_it(mtu: int, path: int) -> None:
    assert roce_path_mtu(mtu) == path


def test_missing_root(tmp_path: Path) -> None:
    view = read_sysfs(tmp_path / "nope")
    assert not view.root_exists and not view.ports
