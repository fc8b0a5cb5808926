"""ECMP hash models: standard check values, field packing, member selection and determinism."""

from __future__ import annotations

from flowtracer.fabric.ecmp_hash import (
    DEFAULT_FIELDS,
    EcmpHash,
    HashAlgorithm,
    HashField,
    HashMode,
    HeaderFields,
    MemberSelection,
    hash_bytes,
    hash_for_mode,
    pack_fields,
    select_member,
)


def test_crc_check_values() -> None:
    # The catalogue check value of each CRC over b"123456789".
    assert hash_bytes(b"123456789", HashAlgorithm.CRC16_CCITT, 0) == 0x31C3  # CRC-16/XMODEM
    assert hash_bytes(b"123456789", HashAlgorithm.CRC16_CCITT, 0xFFFF) == 0x29B1  # CRC-16/CCITT-FALSE
    assert hash_bytes(b"123456789", HashAlgorithm.CRC32, 0) == 0xCBF43926


def test_xor_fold_by_hand() -> None:
    assert hash_bytes(bytes([0x12, 0x34, 0x56, 0x78, 0x9A]), HashAlgorithm.XOR_FOLD, 0) == 0x1234 ^ 0x5678 ^ 0x9A00
    assert hash_bytes(b"\x00\x01", HashAlgorithm.XOR_FOLD, 0xFF00) == 0xFF01


def test_packing_order_and_widths() -> None:
    h = HeaderFields("10.0.0.1", "10.0.0.2", udp_src_port=0xC1F0, dst_qpn=0x123456)
    assert pack_fields(h, (HashField.SRC_IP, HashField.UDP_SRC_PORT)) == bytes([10, 0, 0, 1, 0xC1, 0xF0])
    assert pack_fields(h, (HashField.DST_QPN, HashField.IP_PROTO)) == bytes([0x12, 0x34, 0x56, 17])
    assert len(pack_fields(HeaderFields("fd00::1", "fd00::2", 1), (HashField.SRC_IP, HashField.DST_IP))) == 32


def test_member_selection() -> None:
    assert select_member(10, 4, HashAlgorithm.CRC16_CCITT, MemberSelection.MODULO) == 2
    # Hash-threshold splits the 16-bit space into equal regions.
    assert select_member(0x3FFF, 4, HashAlgorithm.CRC16_CCITT, MemberSelection.THRESHOLD) == 0
    assert select_member(0x4000, 4, HashAlgorithm.CRC16_CCITT, MemberSelection.THRESHOLD) == 1
    assert select_member(0xFFFF, 4, HashAlgorithm.CRC16_CCITT, MemberSelection.THRESHOLD) == 3


def test_seed_changes_placement_and_model_is_deterministic() -> None:
    flows = [HeaderFields("10.0.0.1", "10.0.1.1", sport) for sport in range(49152, 49152 + 64)]
    a = [EcmpHash(seed=0).member(f, 4) for f in flows]
    assert a == [EcmpHash(seed=0).member(f, 4) for f in flows]
    assert a != [EcmpHash(seed=7).member(f, 4) for f in flows]
    assert set(a) == {0, 1, 2, 3}


def test_crc_is_affine_so_sport_planning_works() -> None:
    # h(x ^ y ^ z) == h(x) ^ h(y) ^ h(z) for equal-length inputs: the property RePaC exploits.
    x, y, z = b"\x0a\x00\x00\x01\xc0\x01", b"\x0a\x00\x00\x01\xc0\x02", b"\x0a\x00\x00\x01\xc0\x07"
    xyz = bytes(i ^ j ^ k for i, j, k in zip(x, y, z, strict=True))
    for alg in HashAlgorithm:
        assert hash_bytes(xyz, alg, 5) == hash_bytes(x, alg, 5) ^ hash_bytes(y, alg, 5) ^ hash_bytes(z, alg, 5)


def test_bth_mode_is_the_plain_rule_over_the_five_tuple_plus_dst_qpn() -> None:
    base = EcmpHash(seed=7, algorithm=HashAlgorithm.CRC32)
    bth = hash_for_mode(base, HashMode.FIVE_TUPLE_BTH_DQP)
    assert bth.fields == (*DEFAULT_FIELDS, HashField.DST_QPN)
    assert (bth.algorithm, bth.seed, bth.selection) == (base.algorithm, base.seed, base.selection)
    plain = EcmpHash((*DEFAULT_FIELDS, HashField.DST_QPN), HashAlgorithm.CRC32, 7)
    seen = set()
    for qpn in range(0x100, 0x140):
        h = HeaderFields("10.0.0.1", "10.0.0.2", udp_src_port=0xC000, dst_qpn=qpn)
        # The plain rule, written out: pack, hash, select.
        want = select_member(hash_bytes(pack_fields(h, plain.fields), HashAlgorithm.CRC32, 7), 4,
                             HashAlgorithm.CRC32, MemberSelection.MODULO)
        assert bth.member(h, 4) == want
        seen.add(want)
    assert len(seen) > 1  # the destination QP moves flows of one 5-tuple
    # The 5-tuple mode ignores the QP; the spreading modes leave the hash as configured; no field twice.
    assert hash_for_mode(base, HashMode.FIVE_TUPLE) is base
    assert hash_for_mode(base, HashMode.SPRAY) is base
    assert hash_for_mode(bth, HashMode.FIVE_TUPLE_BTH_DQP).fields.count(HashField.DST_QPN) == 1
