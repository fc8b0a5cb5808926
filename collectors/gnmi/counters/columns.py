"""One sample instant read only from known layouts -> CounterBatch bytes, on columns (pure).

When every notification of an instant was read by ``FastDecoder`` (steady state: the same
notifications every sample), the batch has the same shape every time: the same interfaces and
next hops, the same counters, the same labels while the state tables do not change. An
``InstantPlan`` is that shape, built once per (layouts in order, state tables version) with the
general path's rules (the last value of a counter wins, newer AFT tree over legacy, next hops
keyed by (network instance, egress interface, next-hop IP) with their groups); it computes each
instant's deltas and bytes in one compiled pass (``native.encode_grid``), or with the production
delta rule ``column_deltas`` + ``counter_wire`` on numpy where the extension is not built: no
Python object per counter. The delta state is not the plan's: it stays in the assembler's
``DeltaState`` (the one owner, which the general path updates too); a plan only knows its rows.
``BatchAssembler`` decides when a plan applies.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import numpy as np
from google.protobuf.message import Message

from flowtracer.collectors.gnmi.counters import native_loader
from flowtracer.collectors.gnmi.counters.column_deltas import DeltaState
from flowtracer.collectors.gnmi.counters.decode import INTERFACE_COUNTERS, NEXT_HOP_COUNTERS
from flowtracer.collectors.gnmi.counters.wire import (
    FixedBytes,
    counter_cells,
    repeated_messages,
    scalar_field,
    tag_matrix,
)
from flowtracer.schemas.v1.counters_pb2 import CounterBatch, InterfaceCounters, NextHopCounters

_U64 = np.uint64
_IF_TAGS = tuple(bytes([(7 + i) << 3 | 2]) if 7 + i < 16 else b"\x82\x01" for i in range(len(INTERFACE_COUNTERS)))
_NH_TAGS = tuple(bytes([(7 + i) << 3 | 2]) for i in range(len(NEXT_HOP_COUNTERS)))
_INTERFACES_TAG, _NEXT_HOPS_TAG = 0x42, 0x4A  # CounterBatch fields 8 and 9
_IF_INTERVAL_TAG, _NH_INTERVAL_TAG = 0x20, 0x30  # InterfaceCounters.interval_ns (4), NextHopCounters (6)


class LayoutKeys(Protocol):
    """What a plan reads from a ``fast_decode.Layout``: where each counter is in its values."""

    if_sel: np.ndarray
    if_keys: tuple[tuple[str, ...], tuple[int, ...]]
    nh_sel: np.ndarray
    nh_keys: tuple[tuple[str, ...], tuple[int, ...], tuple[int, ...], tuple[bool, ...]]
    starts: np.ndarray


class IfaceState(Protocol):
    oper_status: int
    speed_bps: int
    last_change_ns: int
    last_clear_ns: int


class NextHopState(Protocol):
    ip: str
    interface: str
    groups: dict[str, int]


class _Grid:
    """Rows of counters of one kind: where each value comes from, labels (the delta state of the
    rows is kept by a ``DeltaState``, under ``keys`` and ``idents``)."""

    def __init__(self, keys: list[object], idents: list[object], src: list[list[int]], pre: list[bytes],
                 mid: list[bytes] | None, clear: list[int], max_rate: list[Sequence[float]] | None,
                 post: list[bytes] | None = None) -> None:
        self.keys, self.idents = keys, idents
        width = len(src[0]) if src else 0
        self.src = np.array(src, np.intp).reshape(len(src), width)
        self.present = self.src >= 0
        self.src[~self.present] = 0
        self.pre = FixedBytes(pre)
        self.mid = FixedBytes(mid) if mid is not None else None
        # Fields numbered after the counters (a next hop's group weights): the compiled pass knows pre and mid only.
        self.post = FixedBytes(post) if post is not None and any(post) else None
        self.clear = np.array(clear, np.int64)  # last-clear ns per row
        self.max_rate = np.array(max_rate, np.float64).reshape(self.src.shape) if max_rate is not None else None
        self._rows: tuple[DeltaState, int, np.ndarray | slice] | None = None  # (state, its epoch, rows)

    def rows(self, deltas: DeltaState) -> np.ndarray | slice:
        """This grid's rows in ``deltas``, found again only when its epoch moved (a reset or a new
        session): the steady state is a dictionary-free slice."""
        cached = self._rows
        if cached is not None and cached[0] is deltas and cached[1] == deltas.epoch:
            return cached[2]
        rows = deltas.block(deltas.rows(self.keys, self.idents))
        self._rows = (deltas, deltas.epoch, rows)
        return rows

    def encode(self, deltas: DeltaState, values: np.ndarray, ts: int, tag: int, interval_tag: int,
               tags: tuple[bytes, ...]) -> tuple[bytes, int]:
        """This instant's repeated field (bytes) and the number of counters not dropped; the rows'
        delta state in ``deltas`` is updated."""
        if not len(self.keys):
            return b"", 0
        rows = self.rows(deltas)
        native = native_loader.native
        if native is not None and self.post is None:  # the same rule and bytes, in one compiled pass
            st, mid = deltas.take(rows), self.mid
            tb, _, tl = tag_matrix(tags)
            data, kept, dup, ooo = native.encode_grid(
                values, self.src, self.present.view(np.uint8), st.values, st.ts, st.clear, ts, self.clear,
                deltas.counter_bits, deltas.gap_ns, self.max_rate, self.pre.bytes, self.pre.lens,
                None if mid is None else mid.bytes, None if mid is None else mid.lens, tb, tl, tag, interval_tag)
            deltas.put(rows, st)
            deltas.count_dropped(dup, ooo)
            return data, kept
        v = values[self.src]
        r = deltas.update(rows, v, self.present, ts, self.clear[:, None], self.max_rate)
        cb, ck, clen = counter_cells(tags, v, r.delta, r.status, r.kept)
        ib, ik, ilen = scalar_field(interval_tag, r.interval_ns.astype(_U64))
        parts = [(self.pre.bytes, self.pre.keep), (ib, ik)]
        body = self.pre.lens + ilen + clen
        if self.mid is not None:
            parts.append((self.mid.bytes, self.mid.keep))
            body = body + self.mid.lens
        parts.append((cb, ck))
        if self.post is not None:
            parts.append((self.post.bytes, self.post.keep))
            body = body + self.post.lens
        emit = r.kept.any(axis=1)
        return repeated_messages(tag, emit, parts, body), int(r.kept.sum())


class InstantPlan:
    """The shape of an instant made of ``layouts`` (in arrival order) under the current tables.

    Built like the general path builds a batch: ``ifaces`` / ``nhs`` are the assembler's tables,
    ``max_rates(speed_bps)`` its line-rate bounds.
    """

    def __init__(self, layouts: Sequence[LayoutKeys], ifaces: Mapping[str, IfaceState],
                 nhs: Mapping[tuple[str, int], NextHopState], none: IfaceState,
                 max_rates: Callable[[int], Sequence[float]]) -> None:
        offsets = np.cumsum([0] + [len(lay.starts) for lay in layouts])
        if_src: dict[str, list[int]] = {}
        nh_src: tuple[dict[tuple[str, int], list[int]], dict[tuple[str, int], list[int]]] = ({}, {})  # legacy, newer
        for lay, off in zip(layouts, offsets.tolist(), strict=False):
            for slot, name, ci in zip(lay.if_sel.tolist(), *lay.if_keys, strict=True):
                if_src.setdefault(name, [-1] * len(INTERFACE_COUNTERS))[ci] = off + slot
            for slot, ni, idx, ci, newer in zip(lay.nh_sel.tolist(), *lay.nh_keys, strict=True):
                nh_src[newer].setdefault((ni, idx), [-1] * len(NEXT_HOP_COUNTERS))[ci] = off + slot
        names = sorted(if_src)
        sts = [ifaces.get(n) or none for n in names]
        self.interfaces = _Grid(
            list(names), [None] * len(names), [if_src[n] for n in names],
            [InterfaceCounters(name=n, oper_status=st.oper_status, speed_bps=st.speed_bps).SerializeToString()
             for n, st in zip(names, sts, strict=True)],
            [InterfaceCounters(last_clear_ns=st.last_clear_ns, last_change_ns=st.last_change_ns).SerializeToString()
             for st in sts],
            [st.last_clear_ns for st in sts], [max_rates(st.speed_bps) for st in sts])
        self.unmapped = 0
        keys: list[object] = []
        idents: list[object] = []
        src: list[list[int]] = []
        pre: list[bytes] = []
        post: list[bytes] = []
        used: set[tuple[str, ...]] = set()
        legacy, newer = nh_src
        for key in sorted(newer.keys() | legacy.keys()):
            nw = newer.get(key) or [-1, -1]
            lg = legacy.get(key) or [-1, -1]
            s = [n if n >= 0 else g for n, g in zip(nw, lg, strict=True)]
            ni, idx = key
            nh = nhs.get(key)
            if nh is None or not nh.interface:
                self.unmapped += sum(x >= 0 for x in s)
                continue
            stable: tuple[str, ...] = (ni, nh.interface, nh.ip)
            if stable in used:  # two indexes with the same egress and IP: keep them apart
                stable = (*stable, str(idx))
            used.add(stable)
            groups = sorted(nh.groups, key=lambda g: (len(g), g))
            keys.append(stable)
            idents.append(idx)
            src.append(s)
            pre.append(NextHopCounters(group=",".join(groups), index=idx, egress_interface=nh.interface,
                                       next_hop_ip=nh.ip, weight=nh.groups[groups[0]] if groups else 1
                                       ).SerializeToString())
            # Only a next hop in two or more groups needs them (else ``weight`` says it all): the steady state of
            # plain fabrics stays on the compiled pass.
            post.append(NextHopCounters(group_weights=[nh.groups[g] for g in groups] if len(groups) > 1 else []
                                        ).SerializeToString())
        self.next_hops = _Grid(keys, idents, src, pre, None, [0] * len(keys), None, post)

    def encode(self, header: CounterBatch, values: np.ndarray, if_deltas: DeltaState,
               nh_deltas: DeltaState) -> tuple[bytes, int]:
        """(CounterBatch bytes, counters not dropped) of one instant; ``values``: the uint64 values
        of the instant's layouts, concatenated in order; ``header`` its scalar fields."""
        ts = header.timestamp_ns
        ib, ni = self.interfaces.encode(if_deltas, values, ts, _INTERFACES_TAG, _IF_INTERVAL_TAG, _IF_TAGS)
        nb, nn = self.next_hops.encode(nh_deltas, values, ts, _NEXT_HOPS_TAG, _NH_INTERVAL_TAG, _NH_TAGS)
        return header.SerializeToString() + ib + nb, ni + nn


class EncodedBatch:
    """A CounterBatch (or ``message_type``) already serialized (``data``). The service only needs ``switch`` and
    ``SerializeToString()``; ``message()`` parses it (tests, logs), and ``==`` compares the parsed message."""

    __slots__ = ("_msg", "_type", "data", "switch")

    def __init__(self, switch: str, data: bytes, message_type: type[Message] = CounterBatch) -> None:
        self.switch = switch
        self.data = data
        self._type = message_type
        self._msg: Message | None = None

    def SerializeToString(self) -> bytes:  # the protobuf name: both kinds of batch read alike
        return self.data

    def message(self) -> Message:
        """The parsed message (a CounterBatch unless told otherwise)."""
        if self._msg is None:
            self._msg = self._type.FromString(self.data)
        return self._msg

    def __eq__(self, other: object) -> bool:
        if isinstance(other, EncodedBatch):
            return self.data == other.data
        return self.message() == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"EncodedBatch({self.message()!r})"
