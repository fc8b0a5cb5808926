"""Queue and PFC leaves: decoding (table of cases, fuzz: never raises) and CongestionBatch deltas, exact against
the per-counter oracle of the delta rule, including resets, duplicates and out-of-order samples."""

from __future__ import annotations

import json

import pytest
from delta_oracle import DeltaTracker
from hypothesis import given, settings
from hypothesis import strategies as st
from pygnmi.spec.v080 import gnmi_pb2 as g

from flowtracer.collectors.gnmi.counters.column_deltas import BASELINE, OK, RESET
from flowtracer.collectors.gnmi.counters.congestion import CongestionAssembler
from flowtracer.collectors.gnmi.counters.decode import Decoder, decode_notification
from flowtracer.collectors.gnmi.counters.paths import parse_path
from flowtracer.schemas.v1.counters_pb2 import CongestionBatch

T0 = 1_767_225_600_000_000_000
S = 1_000_000_000
Q = "/qos/interfaces/interface[interface-id=Ethernet1/1]/output/queues/queue[name=3]/state"
P = "/qos/interfaces/interface[interface-id=Ethernet1/1]/pfc/statistics/pfc-priority[index=3]"
QUEUE_FIELDS = ("transmit_pkts", "transmit_octets", "dropped_pkts", "dropped_octets", "ecn_marked_pkts",
                "ecn_marked_octets")


def notification(ts: int, updates: list[tuple[str, object]], *, json_ietf: bool = False) -> g.Notification:
    n = g.Notification(timestamp=ts)
    n.prefix.origin = "openconfig"
    for path, v in updates:
        u = n.update.add()
        u.path.CopyFrom(parse_path(path))
        if json_ietf:
            u.val.json_ietf_val = json.dumps(v).encode()
        elif isinstance(v, int):
            u.val.uint_val = v
        else:
            u.val.string_val = str(v)
    return n


# -- decoding ----------------------------------------------------------------------------------

CASES = [
    # (updates, json_ietf, queue_counters, queue_watermarks, pfc_counters, errors)
    ([(f"{Q}/transmit-pkts", 7), (f"{Q}/ecn-marked-octets", 9)], False,
     [("Ethernet1/1", "3", 0, 7), ("Ethernet1/1", "3", 5, 9)], [], [], 0),
    ([(f"{Q}/dropped-octets", "18446744073709551615")], True, [("Ethernet1/1", "3", 3, 2**64 - 1)], [], [], 0),
    ([(f"{Q}/max-queue-len", 1_048_576)], False, [], [("Ethernet1/1", "3", 1_048_576)], [], 0),
    ([(f"{P}/pfc-pause-frames-received", 5), (f"{P}/pfc-pause-frames-generated", 6)], False, [], [],
     [("Ethernet1/1", 3, 0, 5), ("Ethernet1/1", 3, 1, 6)], 0),
    # a container value (JSON_IETF): interfaces keyed by interface-id, queues by name, priorities by index
    ([("/qos/interfaces", {"openconfig-qos:interface": [{"interface-id": "Eth2", "output": {"queues": {"queue": [
        {"name": "0", "state": {"name": "0", "transmit-octets": "123", "max-queue-len": "64"}}]}},
        "pfc": {"statistics": {"pfc-priority": [{"index": 3, "pfc-pause-frames-generated": "4"}]}}}]})], True,
     [("Eth2", "0", 1, 123)], [("Eth2", "0", 64)], [("Eth2", 3, 1, 4)], 0),
    ([(P.replace("index=3", "index=9") + "/pfc-pause-frames-received", 1)], False, [], [], [], 1),  # no priority 9
    ([(P.replace("index=3", "index=x") + "/pfc-pause-frames-received", 1)], False, [], [], [], 1),
    ([(Q.replace("name=3", "name=*") + "/transmit-pkts", 1)], False, [], [], [], 1),  # wildcard in a response
    ([(f"{Q}/transmit-pkts", "-1")], True, [], [], [], 1),
    ([(f"{Q}/transmit-pkts", "18446744073709551616")], True, [], [], [], 1),  # past uint64
    ([("/qos/interfaces", {"interface": [{"output": {}}]})], True, [], [], [], 1),  # list entry without its key
]


@pytest.mark.parametrize(("updates", "json_ietf", "queues", "watermarks", "pfc", "errors"), CASES)
def test_decode_table(updates: list[tuple[str, object]], json_ietf: bool, queues: list[object],
                      watermarks: list[object], pfc: list[object], errors: int) -> None:
    s = decode_notification(notification(T0, updates, json_ietf=json_ietf))
    assert (s.queue_counters, s.queue_watermarks, s.pfc_counters, len(s.errors)) == (queues, watermarks, pfc, errors)
    assert s.counter_updates == 0  # congestion notifications never reach the fast path's layouts


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20) | st.just("²"),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["interface", "interface-id", "queue", "name", "state", "transmit-pkts", "pfc",
                         "statistics", "pfc-priority", "index", "max-queue-len", "output", "queues"]), inner,
        max_size=4),
    max_leaves=24)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["/qos/interfaces", "/qos", f"{Q}/transmit-pkts", f"{Q}", f"{P}", f"{Q}/max-queue-len"]),
       json_values)
def test_json_values_never_raise(path: str, value: object) -> None:
    s = decode_notification(notification(T0, [(path, value)], json_ietf=True))
    assert all(0 <= c[3] < 2**64 for c in s.queue_counters + s.pfc_counters)  # type: ignore[operator]


# -- deltas ------------------------------------------------------------------------------------


def _sample(ts: int, tx: int, ecn: int, rx_pause: int, wm: int | None = None) -> g.Notification:
    ups: list[tuple[str, object]] = [(f"{Q}/transmit-pkts", tx), (f"{Q}/ecn-marked-pkts", ecn),
                                     (f"{P}/pfc-pause-frames-received", rx_pause)]
    if wm is not None:
        ups.append((f"{Q}/max-queue-len", wm))
    return notification(ts, ups)


def _run(samples: list[g.Notification], interval_ns: int = S) -> list[CongestionBatch]:
    d = Decoder()
    a = CongestionAssembler("leaf1", collector_id="t", interval_ns=interval_ns)
    a.start_session(1)
    out: list[CongestionBatch] = []
    for n in samples:
        out += a.add(d.decode(n), 1)
    return [b.message() for b in out + a.flush(2)]


def test_deltas_exact_with_a_reset_and_watermark_passed_through() -> None:
    seq = [(100, 10, 1), (150, 30, 4), (20, 2, 0), (70, 9, 6)]  # a clear between the 2nd and 3rd sample
    batches = _run([_sample(T0 + k * S, *v, wm=4096 * k) for k, v in enumerate(seq)])
    assert [b.sequence for b in batches] == [0, 1, 2, 3]
    got = [(b.queues[0].transmit_pkts.delta, b.queues[0].transmit_pkts.status, b.queues[0].ecn_marked_pkts.delta,
            b.pfc[0].pause_frames_rx.delta, b.pfc[0].pause_frames_rx.status, b.queues[0].max_queue_len_bytes,
            b.queues[0].interval_ns) for b in batches]
    assert got == [(0, BASELINE, 0, 0, BASELINE, 0, 0), (50, OK, 20, 3, OK, 4096, S),
                   (0, RESET, 0, 0, RESET, 8192, 0), (50, OK, 7, 6, OK, 12288, S)]
    assert all(b.queues[0].has_max_queue_len for b in batches)
    assert not batches[0].queues[0].HasField("dropped_pkts")  # not sent: absent, not 0


def test_an_instant_split_over_notifications_is_one_batch_and_a_new_session_is_a_baseline() -> None:
    d = Decoder()
    a = CongestionAssembler("leaf1", collector_id="t")
    a.start_session(1)
    out = a.add(d.decode(notification(T0, [(f"{Q}/transmit-pkts", 5)])), 1)
    out += a.add(d.decode(notification(T0, [(f"{P}/pfc-pause-frames-generated", 2)])), 1)
    out += a.add(d.decode(notification(T0 + S, [(f"{Q}/transmit-pkts", 9)])), 1)
    (m,) = [b.message() for b in out]
    assert len(m.queues) == 1 and m.pfc[0].pause_frames_tx.value == 2
    m = a.start_session(2)[0].message()  # the open instant goes out with the old session, then deltas start over
    assert m.queues[0].transmit_pkts.delta == 4 and m.session == 1
    m = (a.add(d.decode(notification(T0 + 2 * S, [(f"{Q}/transmit-pkts", 12)])), 1) + a.flush(2))[0].message()
    assert m.queues[0].transmit_pkts.status == BASELINE and m.session == 2


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3), st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1)),
                min_size=1, max_size=25))
def test_deltas_equal_the_oracle(steps: list[tuple[int, int, int]]) -> None:
    """Random values (resets whenever one goes down) and timestamp steps of 1 to 3 s (GAP past 1.5): every counter's
    value, delta, status and interval equal the per-counter oracle's."""
    oracle = DeltaTracker(expected_interval_ns=S)
    ts, samples, want = T0, [], []
    for step, tx, px in steps:
        ts += step * S
        samples.append(notification(ts, [(f"{Q}/transmit-pkts", tx), (f"{P}/pfc-pause-frames-received", px)]))
        q, p = oracle.update("q", tx, ts), oracle.update("p", px, ts)
        if q is not None:
            want.append((ts, "q", q.value, q.delta, q.status, q.interval_ns))
        if p is not None:
            want.append((ts, "p", p.value, p.delta, p.status, p.interval_ns))
    got = []
    for b in _run(samples):
        for qc in b.queues:
            c = qc.transmit_pkts
            got.append((b.timestamp_ns, "q", c.value, c.delta, c.status, qc.interval_ns))
        for pc in b.pfc:
            c = pc.pause_frames_rx
            got.append((b.timestamp_ns, "p", c.value, c.delta, c.status, pc.interval_ns))
    assert got == want


def test_a_sample_older_than_its_instant_is_late_and_changes_nothing() -> None:
    d = Decoder()
    a = CongestionAssembler("leaf1", collector_id="t")
    a.start_session(1)
    a.add(d.decode(notification(T0 + S, [(f"{Q}/transmit-pkts", 5)])), 1)
    assert len(a.flush(1)) == 1
    assert a.add(d.decode(notification(T0, [(f"{Q}/transmit-pkts", 1)])), 1) + a.flush(1) == []
    assert (a.stats.late, a.queue_deltas.out_of_order) == (1, 1)
    m = (a.add(d.decode(notification(T0 + 2 * S, [(f"{Q}/transmit-pkts", 8)])), 1) + a.flush(1))[0].message()
    assert (m.queues[0].transmit_pkts.delta, m.queues[0].transmit_pkts.status) == (3, OK)


@pytest.mark.parametrize("native", [True, False], ids=["compiled", "numpy"])
def test_the_fast_path_gives_the_general_paths_bytes(native: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Queue and PFC notifications read from a learnt layout (FastDecoder, as the session does) give the same
    CongestionBatch bytes as the general decoder, resets and watermarks included."""
    _fast_and_general(native, monkeypatch)


def _fast_and_general(native: bool, monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    from flowtracer.collectors.gnmi.counters import native_loader
    from flowtracer.collectors.gnmi.counters.layout import FastDecoder
    if not native:
        monkeypatch.setattr(native_loader, "native", None)
    seq = [(100, 10, 1), (150, 30, 4), (151, 31, 5), (20, 2, 0), (70, 9, 6), (71, 9, 6)]
    msgs = [g.SubscribeResponse(update=_sample(T0 + k * S, *v, wm=4096 + k)) for k, v in enumerate(seq)]
    d = Decoder()
    fast = FastDecoder(d)
    general = CongestionAssembler("leaf1", collector_id="t", interval_ns=S)
    columns = CongestionAssembler("leaf1", collector_id="t", interval_ns=S)
    a, b, parts = [], [], 0
    for m in msgs:
        raw = m.SerializeToString()
        a += general.add(d.decode(m.update), 1)
        hit = fast.match(raw)
        if hit is None:
            s = d.decode(m.update)
            fast.learn(raw, m.update, s)
            b += columns.add(s, 1)
        else:
            parts += 1
            assert hit[0].congestion_updates == 4 and hit[0].counter_updates == 0
            b += columns.add_part(hit[0], hit[1], 1)
    a += general.flush(2)
    b += columns.flush(2)
    assert parts >= 3, "the layout was learnt and used"
    assert [x.SerializeToString() for x in a] == [x.SerializeToString() for x in b]
    got = [x.message() for x in b]
    assert [x.queues[0].transmit_pkts.status for x in got] == [BASELINE, OK, OK, RESET, OK, OK]
    assert [x.queues[0].max_queue_len_bytes for x in got] == [4096 + k for k in range(len(seq))]
    return [x.SerializeToString() for x in b]


def test_compiled_and_numpy_write_the_same_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    from flowtracer.collectors.gnmi.counters import native_loader
    if native_loader.native is None:
        pytest.skip("the compiled extension is not built here")
    compiled = _fast_and_general(True, monkeypatch)
    numpy = _fast_and_general(False, monkeypatch)
    assert compiled == numpy
