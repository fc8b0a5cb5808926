"""The linearity source-port planning relies on, checked against the real hash functions."""

from __future__ import annotations

import random

import numpy as np
import pytest

from flowtracer.fabric.ecmp_hash import (
    EcmpHash,
    HashAlgorithm,
    HashField,
    HeaderFields,
    MemberSelection,
    hash_bytes,
    pack_fields,
)
from flowtracer.whatif.source_ports import SPORT_RANGE, Hop, LinearField, Planner, flow_label_for

FIELDS = (HashField.SRC_IP, HashField.DST_IP, HashField.IP_PROTO, HashField.UDP_SRC_PORT, HashField.UDP_DST_PORT,
          HashField.DST_QPN)


@pytest.mark.parametrize("algorithm", list(HashAlgorithm))
@pytest.mark.parametrize("f", [HashField.UDP_SRC_PORT, HashField.DST_QPN])
@pytest.mark.parametrize("ipv6", [False, True])
def test_linear_map_gives_the_real_hash_for_every_candidate(algorithm: HashAlgorithm, f: HashField,
                                                            ipv6: bool) -> None:
    rng = random.Random(f"{algorithm}{f}{ipv6}")
    model = EcmpHash(FIELDS, algorithm, seed=rng.randrange(1 << 16))
    lin = LinearField(model, f, ipv6)
    src, dst = ("fd00::1", "fd00::2") if ipv6 else ("10.1.2.3", "10.4.5.6")
    h = HeaderFields(src, dst, rng.randrange(0xC000, 0x10000), dst_qpn=rng.randrange(1 << 24))
    bits = 16 if f is HashField.UDP_SRC_PORT else 24
    values = np.array([rng.randrange(1 << bits) for _ in range(300)], dtype=np.int64)
    got = lin.hashes(h, values)
    for v, g in zip(values.tolist(), got.tolist(), strict=True):
        hv = HeaderFields(src, dst, v, dst_qpn=h.dst_qpn) if f is HashField.UDP_SRC_PORT else \
            HeaderFields(src, dst, h.udp_src_port, dst_qpn=v)
        assert g == hash_bytes(pack_fields(hv, model.fields), model.algorithm, model.seed)


@pytest.mark.parametrize("selection", list(MemberSelection))
@pytest.mark.parametrize("k", [2, 3, 4])
def test_members_match_the_switch_model(selection: MemberSelection, k: int) -> None:
    model = EcmpHash(algorithm=HashAlgorithm.CRC32, seed=99, selection=selection)
    lin = LinearField(model, HashField.UDP_SRC_PORT)
    h = HeaderFields("10.0.0.1", "10.0.1.1", 0xC123)
    values = np.arange(0xC000, 0xC400, dtype=np.int64)
    got = lin.members(h, values, k)
    want = [model.member(HeaderFields("10.0.0.1", "10.0.1.1", int(v)), k) for v in values]
    assert got.tolist() == want


def test_a_seed_xors_one_constant_into_every_hash() -> None:
    """Why ECMP over many seeds does not separate colliding flows (docs/whatif.md)."""
    for algorithm in HashAlgorithm:
        base, seeded = EcmpHash(algorithm=algorithm), EcmpHash(algorithm=algorithm, seed=0x1234)
        consts = set()
        for i in range(50):
            data = pack_fields(HeaderFields(f"10.0.0.{i}", "10.0.9.9", 0xC000 + 7 * i), base.fields)
            consts.add(hash_bytes(data, algorithm, base.seed) ^ hash_bytes(data, algorithm, seeded.seed))
        assert len(consts) == 1, algorithm


def test_planner_finds_a_port_for_every_hop_and_starts_from_the_current_one() -> None:
    a = EcmpHash(seed=1)
    b = EcmpHash(algorithm=HashAlgorithm.CRC32, seed=2)
    h = HeaderFields("10.0.0.1", "10.0.3.1", 0xD000)
    planner = Planner(HashField.UDP_SRC_PORT)
    for wanted in [(0, 0), (0, 1), (1, 0), (1, 1), (2, 1)]:
        port = planner.find(h, [Hop(a, 3, wanted[0]), Hop(b, 2, wanted[1])])
        assert port is not None and SPORT_RANGE[0] <= port <= SPORT_RANGE[1]
        hp = HeaderFields(h.src_ip, h.dst_ip, port)
        assert (a.member(hp, 3), b.member(hp, 2)) == wanted
    current = a.member(h, 2)
    assert planner.find(h, [Hop(a, 2, current)]) == h.udp_src_port  # already right: unchanged


def test_flow_label_gives_the_port_back_with_linux_folding() -> None:
    for sport in (SPORT_RANGE[0], 0xD00D, SPORT_RANGE[1]):
        fl = flow_label_for(sport)
        assert fl != 0
        assert ((fl & 0x3FFF) ^ ((fl & 0xFC000) >> 14)) | 0xC000 == sport  # rdma_flow_label_to_udp_sport
    with pytest.raises(ValueError, match="outside"):
        flow_label_for(0xC000)
