"""Switch ECMP hash models: which member of an equal-cost group a flow's headers select.

A switch packs the configured header fields, hashes them with a seeded function and maps the
hash onto the group's members. The simulator forwards with these models and the stream
processor's ``hash`` resolver predicts paths with them, each from its own topology file.

Fields are packed big-endian in the configured order: IPv4 addresses 4 bytes (IPv6 16),
ip_proto 1 byte, UDP ports 2 bytes, dst_qpn 3 bytes. All three algorithms are affine over GF(2)
in the packed bits, which is what makes source-port planning possible (RePaC).
"""

from __future__ import annotations

import binascii
import ipaddress
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


class HashField(StrEnum):
    SRC_IP = "src_ip"
    DST_IP = "dst_ip"
    IP_PROTO = "ip_proto"
    UDP_SRC_PORT = "udp_src_port"
    UDP_DST_PORT = "udp_dst_port"
    DST_QPN = "dst_qpn"


class HashAlgorithm(StrEnum):
    CRC16_CCITT = "crc16-ccitt"
    CRC32 = "crc32"
    XOR_FOLD = "xor-fold"


class HashMode(StrEnum):
    """How a switch spreads flows over an ECMP group's members.

    ``5tuple``: the configured hash fields (by default the IP/UDP 5-tuple); ``5tuple+bth_dqp``: those fields plus
    the RoCEv2 BTH destination QP (Junos EVO's default for RoCEv2, Meta's E-ECMP via UDF); ``spray``: every flow's
    packets go round robin over the members; ``adaptive``: each packet goes to the least-loaded member (adaptive
    routing / dynamic load balancing). The last two have no per-flow member: see ``sim/fabric/spray.py``.
    """

    FIVE_TUPLE = "5tuple"
    FIVE_TUPLE_BTH_DQP = "5tuple+bth_dqp"
    SPRAY = "spray"
    ADAPTIVE = "adaptive"


SPREAD_MODES: frozenset[HashMode] = frozenset({HashMode.SPRAY, HashMode.ADAPTIVE})
"""Modes that spread one flow's packets over several members (no single hashed member)."""


class MemberSelection(StrEnum):
    MODULO = "modulo"  # member = hash mod k
    THRESHOLD = "threshold"  # hash-threshold (RFC 2992): member = hash * k >> hash bits


DEFAULT_FIELDS: tuple[HashField, ...] = (
    HashField.SRC_IP, HashField.DST_IP, HashField.IP_PROTO, HashField.UDP_SRC_PORT, HashField.UDP_DST_PORT,
)

_HASH_BITS = {HashAlgorithm.CRC16_CCITT: 16, HashAlgorithm.CRC32: 32, HashAlgorithm.XOR_FOLD: 16}


@dataclass(frozen=True)
class HeaderFields:
    """The header values a switch may hash on, for one flow direction."""

    src_ip: str
    dst_ip: str
    udp_src_port: int
    udp_dst_port: int = 4791
    ip_proto: int = 17
    dst_qpn: int = 0


def pack_fields(headers: HeaderFields, fields: Sequence[HashField]) -> bytes:
    """Bytes a switch feeds its hash: the selected fields, big-endian, in the given order."""
    out = bytearray()
    for f in fields:
        if f is HashField.SRC_IP:
            out += ipaddress.ip_address(headers.src_ip).packed
        elif f is HashField.DST_IP:
            out += ipaddress.ip_address(headers.dst_ip).packed
        elif f is HashField.IP_PROTO:
            out += headers.ip_proto.to_bytes(1, "big")
        elif f is HashField.UDP_SRC_PORT:
            out += headers.udp_src_port.to_bytes(2, "big")
        elif f is HashField.UDP_DST_PORT:
            out += headers.udp_dst_port.to_bytes(2, "big")
        elif f is HashField.DST_QPN:
            out += (headers.dst_qpn & 0xFFFFFF).to_bytes(3, "big")
    return bytes(out)


def hash_bytes(data: bytes, algorithm: HashAlgorithm, seed: int) -> int:
    """Seeded hash of packed header bytes; 16 or 32 bits wide depending on the algorithm."""
    if algorithm is HashAlgorithm.CRC16_CCITT:
        return binascii.crc_hqx(data, seed & 0xFFFF)
    if algorithm is HashAlgorithm.CRC32:
        return zlib.crc32(data, seed & 0xFFFFFFFF)
    # XOR-fold: XOR of the 16-bit big-endian words (odd length padded with a zero byte), then seed.
    if len(data) % 2:
        data += b"\x00"
    acc = 0
    for i in range(0, len(data), 2):
        acc ^= (data[i] << 8) | data[i + 1]
    return acc ^ (seed & 0xFFFF)


def select_member(hash_value: int, members: int, algorithm: HashAlgorithm, selection: MemberSelection) -> int:
    """Index in [0, members) of the group member a hash value selects."""
    if members <= 0:
        raise ValueError("an ECMP group needs at least one member")
    if selection is MemberSelection.MODULO:
        return hash_value % members
    return (hash_value * members) >> _HASH_BITS[algorithm]


@dataclass(frozen=True)
class EcmpHash:
    """One switch's ECMP hash configuration: fields, algorithm, seed and member selection."""

    fields: tuple[HashField, ...] = DEFAULT_FIELDS
    algorithm: HashAlgorithm = HashAlgorithm.CRC16_CCITT
    seed: int = 0
    selection: MemberSelection = MemberSelection.MODULO

    def member(self, headers: HeaderFields, members: int) -> int:
        """Index of the member (in the group's member order) this flow is sent to."""
        h = hash_bytes(pack_fields(headers, self.fields), self.algorithm, self.seed)
        return select_member(h, members, self.algorithm, self.selection)


def hash_for_mode(base: EcmpHash, mode: HashMode) -> EcmpHash:
    """The hash a switch in ``mode`` applies: ``5tuple+bth_dqp`` appends the BTH destination QP to the configured
    fields (the same packing, algorithm, seed and selection: one rule); other modes keep ``base`` unchanged."""
    if mode is HashMode.FIVE_TUPLE_BTH_DQP and HashField.DST_QPN not in base.fields:
        return EcmpHash((*base.fields, HashField.DST_QPN), base.algorithm, base.seed, base.selection)
    return base
