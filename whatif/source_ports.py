"""Source-port (or QP-number) planning: pick header values that land flows on chosen ECMP members.

Why it is cheap: every hash model here (CRC16-CCITT, CRC32, XOR-fold, seeded) is affine over
GF(2) in the packed header bits for a fixed layout, so with one field v varied and the others
fixed, ``H(v) = H(v0) xor L(v xor v0)`` where L is linear: the xor of one column per set bit of
``v xor v0``. Knowing L's columns (one hash per bit of the field, computed once per hash model) a
flow's hash for all 16384 RoCE source ports is a handful of vector xors, and a port that selects
the wanted member at every hop of a path is a vector mask. This is the observation RePaC builds on.

A corollary the what-if reports: a CRC seed only xors a constant into every hash of one packet
layout, so with a power-of-two group width and modulo or hash-threshold selection, changing the
seed relabels the members but never separates two flows that collided.

Pure; ``plan_values`` is the search, ``LinearField`` the algebra.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from flowtracer.fabric.ecmp_hash import (
    EcmpHash,
    HashAlgorithm,
    HashField,
    HeaderFields,
    MemberSelection,
    hash_bytes,
    pack_fields,
)

#: Bits of each plannable field.
FIELD_BITS = {HashField.UDP_SRC_PORT: 16, HashField.DST_QPN: 24}
_HASH_BITS = {HashAlgorithm.CRC16_CCITT: 16, HashAlgorithm.CRC32: 32, HashAlgorithm.XOR_FOLD: 16}

#: RoCEv2 source ports Linux uses: 0xC000-0xFFFF. 0xC000 is left out because it needs flow label 0,
#: which tells the NIC to derive the port from the QP numbers instead.
SPORT_RANGE = (0xC001, 0xFFFF)


def _value(headers: HeaderFields, f: HashField) -> int:
    return headers.udp_src_port if f is HashField.UDP_SRC_PORT else headers.dst_qpn & 0xFFFFFF


def _with(headers: HeaderFields, f: HashField, value: int) -> HeaderFields:
    name = "udp_src_port" if f is HashField.UDP_SRC_PORT else "dst_qpn"
    return dataclasses.replace(headers, **{name: value})


def _hash(model: EcmpHash, headers: HeaderFields) -> int:
    return hash_bytes(pack_fields(headers, model.fields), model.algorithm, model.seed)


class LinearField:
    """The linear part of one hash model in one header field (module docstring)."""

    def __init__(self, model: EcmpHash, f: HashField, ipv6: bool = False) -> None:
        if f not in model.fields:
            raise ValueError(f"the hash does not read {f.value}")
        self.model = model
        self.field = f
        zero_ip = "::" if ipv6 else "0.0.0.0"
        zero = HeaderFields(zero_ip, zero_ip, 0, 0, 0, 0)
        h0 = _hash(model, zero)
        self.columns = np.array([_hash(model, _with(zero, f, 1 << b)) ^ h0 for b in range(FIELD_BITS[f])],
                                dtype=np.uint64)

    def hashes(self, headers: HeaderFields, values: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
        """Hash of ``headers`` with the field set to each of ``values``."""
        base = np.uint64(_hash(self.model, headers))
        delta = values.astype(np.uint64) ^ np.uint64(_value(headers, self.field))
        out = np.full(values.shape, base, dtype=np.uint64)
        for b, col in enumerate(self.columns):
            out ^= np.where((delta >> np.uint64(b)) & np.uint64(1), col, np.uint64(0))
        return out

    def members(self, headers: HeaderFields, values: npt.NDArray[np.int64], k: int) -> npt.NDArray[np.int64]:
        """Member index (of a k-way group) each candidate value selects, as ``EcmpHash.member`` would."""
        h = self.hashes(headers, values)
        if self.model.selection is MemberSelection.MODULO:
            return (h % np.uint64(k)).astype(np.int64)
        return ((h * np.uint64(k)) >> np.uint64(_HASH_BITS[self.model.algorithm])).astype(np.int64)


@dataclass(frozen=True)
class Hop:
    """One ECMP decision on a wanted path: the switch's hash model, its live group width, the member wanted."""

    model: EcmpHash
    width: int
    member: int


class Planner:
    """Finds field values that steer flows onto wanted paths; caches the linear maps per hash model."""

    def __init__(self, f: HashField, value_range: tuple[int, int] | None = None) -> None:
        self.field = f
        if value_range is None:
            value_range = SPORT_RANGE if f is HashField.UDP_SRC_PORT else (1, (1 << 24) - 1)
        self.lo, self.hi = value_range
        self._maps: dict[tuple[EcmpHash, bool], LinearField] = {}

    def candidates(self, current: int, limit: int = 1 << 14) -> npt.NDArray[np.int64]:
        """Up to ``limit`` values of the range, starting at ``current`` (or the range start) and wrapping."""
        span = self.hi - self.lo + 1
        start = current - self.lo if self.lo <= current <= self.hi else 0
        n = min(span, limit)
        return (self.lo + (start + np.arange(n, dtype=np.int64)) % span).astype(np.int64)

    def find(self, headers: HeaderFields, hops: list[Hop]) -> int | None:
        """The first candidate value (from the flow's current one on) that selects every wanted member."""
        values = self.candidates(_value(headers, self.field))
        ok = np.ones(values.shape, dtype=bool)
        ipv6 = ipaddress.ip_address(headers.src_ip).version == 6
        for hop in hops:
            if hop.width < 2:
                continue
            key = (hop.model, ipv6)
            lin = self._maps.get(key)
            if lin is None:
                lin = self._maps[key] = LinearField(hop.model, self.field, ipv6)
            ok &= lin.members(headers, values, hop.width) == hop.member
        idx = np.flatnonzero(ok)
        return int(values[idx[0]]) if idx.size else None

    def apply(self, headers: HeaderFields, value: int) -> HeaderFields:
        return _with(headers, self.field, value)


def flow_label_for(sport: int) -> int:
    """An IPv6/GRH flow label that makes Linux RoCE use UDP source port ``sport`` (0xC001-0xFFFF).

    ``rdma_flow_label_to_udp_sport(fl) = ((fl & 0x3FFF) ^ ((fl & 0xFC000) >> 14)) | 0xC000``, so
    the label ``sport & 0x3FFF`` (upper bits 0) gives it back; label 0 means "derive from QPNs".
    """
    if not SPORT_RANGE[0] <= sport <= SPORT_RANGE[1]:
        raise ValueError(f"source port {sport:#x} is outside 0xC001-0xFFFF")
    return sport & 0x3FFF
