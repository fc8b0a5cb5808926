"""A discrete, packet-level model of packet spraying on a two-tier leaf-spine fabric (pure, seeded).

Why a separate model: the what-if replay (``replay``) is a fluid model over recorded flows; reordering,
queue depth and flow-completion tails only exist with packets and queues. This module is that, on a
small abstract fabric, not on a recording.

The model (time in slots; one slot = one packet's serialization time at line rate,
``packet_bytes * 8 / line_rate_bps`` s):

- Fabric: ``leaves`` leaves, ``spines`` spines, ``hosts_per_leaf`` hosts; every leaf has one uplink to
  every spine. Directed links: leaf->spine ``up``, spine->leaf ``down``, leaf->host ``host``. Every link
  is a FIFO queue served at its capacity (1 packet per slot at line rate, a degraded link a fraction of
  that through a credit counter), without buffer limit (lossless, as RoCE with PFC; the queue depth is
  the metric). A host's NIC sends at most one packet per slot.
- Transport: each flow has a window of ``window`` packets in flight (ACK-clocked, no other congestion
  control). The receiver sends one ACK every ``ack_every`` packets (ACK coalescing); it reaches the
  sender ``ack_delay`` slots later. ACKs echo congestion: a packet is marked when a queue it joins holds
  more than ``ecn_min`` packets, with severity rising linearly to 1 at ``ecn_max``. With
  ``deaggregate`` the ACK carries every packet's (spine, severity) (PRIME's ACK de-aggregation);
  without, one echo (the highest severity) attributed to the spine of the packet that triggered it.
- Path choice at the source, per packet (``spray_paths``); ``ordered`` flows are pinned to one spine by
  a hash (they must not be reordered) and only the others spray.
- Failures: a link failing at slot f drops what it holds and what reaches it afterwards; each drop is
  retransmitted ``rto`` slots later (a loss is a severity-1 signal to the sender); routing withdraws the
  link's paths ``detect`` slots after f (f = 0 and detect = 0: withdrawn from the start).

Not modelled: PFC pauses and buffer limits, DCQCN rate control, switch-local adaptive routing, ACK
queueing on the reverse path, host-link contention within a leaf (permutation traffic crosses leaves).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from flowtracer.stream.analytics.fim import fabric_fim, fim
from flowtracer.whatif.reproductions.spray_paths import KINDS, ChooserConfig, PathChooser


@dataclass(frozen=True)
class LeafSpine:
    """The abstract two-tier fabric; link ids: up ``leaf*S+spine``, down ``L*S + spine*L+leaf``, host after."""

    leaves: int = 4
    spines: int = 4
    hosts_per_leaf: int = 4
    line_rate_bps: float = 400e9
    packet_bytes: int = 4096

    @property
    def hosts(self) -> int:
        return self.leaves * self.hosts_per_leaf

    @property
    def links(self) -> int:
        return 2 * self.leaves * self.spines + self.hosts

    @property
    def slot_s(self) -> float:
        """One packet's serialization time at line rate, seconds."""
        return self.packet_bytes * 8 / self.line_rate_bps

    def leaf_of(self, host: int) -> int:
        return host // self.hosts_per_leaf

    def up(self, leaf: int, spine: int) -> int:
        return leaf * self.spines + spine

    def down(self, spine: int, leaf: int) -> int:
        return self.leaves * self.spines + spine * self.leaves + leaf

    def host_link(self, host: int) -> int:
        return 2 * self.leaves * self.spines + host

    def name(self, link: int) -> str:
        """``leaf0>spine1``, ``spine1>leaf0`` or ``leaf0>host3``."""
        ls = self.leaves * self.spines
        if link < ls:
            return f"leaf{link // self.spines}>spine{link % self.spines}"
        if link < 2 * ls:
            s, leaf = divmod(link - ls, self.leaves)
            return f"spine{s}>leaf{leaf}"
        h = link - 2 * ls
        return f"leaf{self.leaf_of(h)}>host{h}"


@dataclass(frozen=True)
class Flow:
    """``packets`` from host ``src`` to host ``dst`` starting at slot ``start``; ``ordered``: pinned to one path."""

    src: int
    dst: int
    packets: int
    start: int = 0
    ordered: bool = False


@dataclass(frozen=True)
class LinkFaults:
    """``capacity``: fraction (0, 1] of line rate per link id; ``failed``: link id -> slot it fails at."""

    capacity: Mapping[int, float] = field(default_factory=dict)
    failed: Mapping[int, int] = field(default_factory=dict)
    label: str = "healthy"


@dataclass(frozen=True)
class Transport:
    """Sender and receiver parameters (packets, slots)."""

    window: int = 32
    ack_every: int = 1
    ack_delay: int = 8
    deaggregate: bool = True
    ecn_min: int = 8
    ecn_max: int = 64
    rto: int = 64
    detect: int = 128


@dataclass
class SprayResult:
    """What one run gives. FCT in slots (``fct_us`` converts); ``throughput``: mean over flows of
    packets / FCT, as a fraction of line rate."""

    kind: str
    label: str
    fct_slots: np.ndarray
    throughput: float
    max_queue: int
    max_queue_link: str
    reorder_fraction: float
    reorder_p99: float
    reorder_max: int
    lost: int
    duplicates: int
    unfinished: int  # flows not complete when ``max_slots`` ran out (not in ``fct_slots``)
    delivered: np.ndarray  # per flow, distinct packets delivered
    link_packets: np.ndarray  # per link, packets sent over it
    offered_after_withdraw: np.ndarray  # per link, packets offered to it once routing had withdrawn it
    last_sent_slot: np.ndarray  # per link, the last slot it sent a packet in (-1: never)
    fim: float
    slots: int
    slot_s: float

    def fct_us(self, q: float) -> float:
        """The q-th percentile (0..100) of flow completion time, microseconds; NaN when no flow finished."""
        if self.fct_slots.size == 0:
            return float("nan")
        return float(np.percentile(self.fct_slots, q)) * self.slot_s * 1e6

    def summary(self) -> dict[str, float | int | str]:
        return {"kind": self.kind, "conditions": self.label, "throughput": round(self.throughput, 4),
                "fct_p50_us": round(self.fct_us(50), 2), "fct_p99_us": round(self.fct_us(99), 2),
                "max_queue": self.max_queue, "max_queue_link": self.max_queue_link,
                "reorder_fraction": round(self.reorder_fraction, 4), "reorder_p99": self.reorder_p99,
                "reorder_max": self.reorder_max, "lost": self.lost, "unfinished": self.unfinished,
                "fim": round(self.fim, 4)}


def simulate(fabric: LeafSpine, flows: Sequence[Flow], kind: str, faults: LinkFaults | None = None,
             transport: Transport | None = None, config: ChooserConfig | None = None, seed: int = 0,
             max_slots: int = 1_000_000) -> SprayResult:
    """Run ``flows`` under the spraying ``kind`` until every packet is delivered (or ``max_slots``)."""
    if kind not in KINDS:
        raise ValueError(f"unknown spraying kind {kind!r}; known: {', '.join(KINDS)}")
    faults = faults or LinkFaults()
    tp = transport or Transport()
    n_links, S = fabric.links, fabric.spines
    for link, frac in faults.capacity.items():
        if not 0 <= link < n_links or not 0.0 < frac <= 1.0:
            raise ValueError(f"degraded link {link}: needs a link id below {n_links} and a fraction in (0, 1], "
                             f"got {frac}")
    cap = np.ones(n_links)
    for link, frac in faults.capacity.items():
        cap[link] = frac
    fail_at = np.full(n_links, np.iinfo(np.int64).max, dtype=np.int64)
    for link, slot in faults.failed.items():
        fail_at[link] = slot
    credit = np.zeros(n_links)
    queues: list[deque[list[int]]] = [deque() for _ in range(n_links)]
    sent = np.zeros(n_links, dtype=np.int64)
    offered_after = np.zeros(n_links, dtype=np.int64)
    last_sent = np.full(n_links, -1, dtype=np.int64)
    max_q = np.zeros(n_links, dtype=np.int64)

    nf = len(flows)
    def chooser_of(i: int, f: Flow, now: int) -> PathChooser:
        a, b = fabric.leaf_of(f.src), fabric.leaf_of(f.dst)
        live = [s for s in range(S) if a == b or not _gone(fabric, faults, a, b, s, now, tp.detect)]
        # An ordered flow is hashed onto one live path (rehashed over the paths left when routing withdraws it).
        pinned = [live[(f.src * 7919 + f.dst * 104729) % len(live)]] if live else []
        return PathChooser("round-robin" if f.ordered else kind, pinned if f.ordered else live,
                           np.random.default_rng([seed, i]), start=f.src % max(1, len(live)), config=config)

    choosers = [chooser_of(i, f, 0) for i, f in enumerate(flows)]
    next_seq = np.zeros(nf, dtype=np.int64)
    inflight = np.zeros(nf, dtype=np.int64)
    retx: list[deque[int]] = [deque() for _ in range(nf)]
    got = [np.zeros(f.packets, dtype=bool) for f in flows]
    delivered = np.zeros(nf, dtype=np.int64)
    high = np.full(nf, -1, dtype=np.int64)
    displacement: list[int] = []
    arrivals = 0
    duplicates = lost = 0
    fct = np.full(nf, -1, dtype=np.int64)
    pending: list[list[tuple[int, float]]] = [[] for _ in range(nf)]
    events: dict[int, list[tuple]] = {}
    by_host: dict[int, list[int]] = {}
    for i, f in enumerate(flows):
        by_host.setdefault(f.src, []).append(i)
    host_turn = dict.fromkeys(by_host, 0)
    withdraw_at = {slot + tp.detect for slot in faults.failed.values() if slot + tp.detect > 0}
    remaining = sum(f.packets for f in flows)
    last_start = max((f.start for f in flows), default=0)

    def drop(pkt: list[int], t: int) -> None:
        nonlocal lost
        lost += 1
        events.setdefault(t + tp.rto, []).append(("loss", pkt[0], pkt[1], pkt[2]))

    def enqueue(link: int, pkt: list[int], t: int) -> None:
        if t >= fail_at[link]:
            if t >= fail_at[link] + tp.detect:
                offered_after[link] += 1
            drop(pkt, t)
            return
        q = queues[link]
        q.append(pkt)
        n = len(q)
        max_q[link] = max(max_q[link], n)
        if n > tp.ecn_min:
            pkt[3] = max(pkt[3], min(1000, (n - tp.ecn_min) * 1000 // max(1, tp.ecn_max - tp.ecn_min)))

    def deliver(pkt: list[int], t: int) -> None:
        nonlocal duplicates, remaining, arrivals
        i, seq = pkt[0], pkt[1]
        if got[i][seq]:
            duplicates += 1
            return
        got[i][seq] = True
        delivered[i] += 1
        remaining -= 1
        arrivals += 1
        if seq < high[i]:
            displacement.append(int(high[i] - seq))
        high[i] = max(high[i], seq)
        pending[i].append((pkt[2], pkt[3] / 1000.0))
        done = delivered[i] == flows[i].packets
        if done:
            fct[i] = t + 1 - flows[i].start
        if len(pending[i]) >= tp.ack_every or done:
            echoes = pending[i] if tp.deaggregate else [(pending[i][-1][0], max(s for _, s in pending[i]))]
            events.setdefault(t + tp.ack_delay, []).append(("ack", i, len(pending[i]), echoes))
            pending[i] = []

    L = fabric.leaves
    host_links = range(2 * L * S, n_links)
    down_links = range(L * S, 2 * L * S)
    up_links = range(L * S)
    t = 0
    while remaining > 0 and t < max_slots:
        if t in withdraw_at:
            for i, f in enumerate(flows):
                a, b = fabric.leaf_of(f.src), fabric.leaf_of(f.dst)
                for s in range(S):
                    if a != b and _gone(fabric, faults, a, b, s, t, tp.detect):
                        choosers[i].withdraw(s)
                if f.ordered and not choosers[i].members:
                    choosers[i] = chooser_of(i, f, t)
        # Downstream first, so that a packet moves at most one hop per slot.
        for stage, links in ((0, host_links), (1, down_links), (2, up_links)):
            for link in links:
                q = queues[link]
                if t >= fail_at[link]:
                    while q:
                        drop(q.popleft(), t)
                    continue
                credit[link] = min(1.0, credit[link] + cap[link])
                while credit[link] >= 1.0 - 1e-9 and q:
                    credit[link] -= 1.0
                    pkt = q.popleft()
                    sent[link] += 1
                    last_sent[link] = t
                    if stage == 0:
                        deliver(pkt, t)
                    elif stage == 1:
                        enqueue(fabric.host_link(flows[pkt[0]].dst), pkt, t)
                    else:
                        enqueue(fabric.down(pkt[2], fabric.leaf_of(flows[pkt[0]].dst)), pkt, t)
                if not q:
                    credit[link] = min(credit[link], 1.0)
        for ev in events.pop(t, ()):
            i = ev[1]
            if ev[0] == "ack":
                inflight[i] -= ev[2]
                for spine, sev in ev[3]:
                    choosers[i].signal(spine, sev, t)
            else:
                inflight[i] -= 1
                retx[i].append(ev[2])
                choosers[i].signal(ev[3], 1.0, t)
        for host, ids in by_host.items():
            # One packet per slot per NIC, its flows taking turns.
            for k in range(len(ids)):
                i = ids[(host_turn[host] + k) % len(ids)]
                f = flows[i]
                if t < f.start or inflight[i] >= tp.window or not (retx[i] or next_seq[i] < f.packets):
                    continue
                spine = choosers[i].next(t) if fabric.leaf_of(f.src) != fabric.leaf_of(f.dst) else -1
                if spine < 0 and fabric.leaf_of(f.src) != fabric.leaf_of(f.dst):
                    continue  # unreachable
                seq = retx[i].popleft() if retx[i] else int(next_seq[i])
                if seq == next_seq[i]:
                    next_seq[i] += 1
                inflight[i] += 1
                pkt = [i, seq, spine, 0]  # flow, sequence, spine (-1: same leaf), ECN severity in 1/1000
                if spine < 0:
                    enqueue(fabric.host_link(f.dst), pkt, t)
                else:
                    enqueue(fabric.up(fabric.leaf_of(f.src), spine), pkt, t)
                host_turn[host] = (host_turn[host] + k + 1) % len(ids)
                break
        t += 1
        if not events and t > last_start and not any(queues) and all(
                fct[i] >= 0 or not choosers[i].members for i in range(nf)):
            break  # only flows without a path are left: nothing will move again
    done = fct >= 0
    sizes = np.array([f.packets for f in flows], dtype=np.float64)
    fct_done = fct[done].astype(np.float64)
    throughput = float(np.mean(sizes[done] / fct_done)) if done.any() else 0.0
    disp = np.array(displacement or [0])
    busiest = int(np.argmax(max_q))
    group_fims, group_bytes = [], []
    for a in range(L):
        loads = [sent[fabric.up(a, s)] for s in range(S) if fail_at[fabric.up(a, s)] > 0]
        group_fims.append(fim(loads))
        group_bytes.append(float(sum(loads)))
    return SprayResult(kind=kind, label=faults.label, fct_slots=fct_done, throughput=throughput,
                       max_queue=int(max_q[busiest]), max_queue_link=fabric.name(busiest),
                       reorder_fraction=len(displacement) / max(1, arrivals),
                       reorder_p99=float(np.percentile(disp, 99)), reorder_max=int(disp.max()),
                       lost=lost, duplicates=duplicates, unfinished=int((~done).sum()),
                       delivered=delivered, link_packets=sent,
                       offered_after_withdraw=offered_after, last_sent_slot=last_sent,
                       fim=fabric_fim(group_fims, group_bytes), slots=t, slot_s=fabric.slot_s)


def _gone(fabric: LeafSpine, faults: LinkFaults, a: int, b: int, spine: int, now: int, detect: int) -> bool:
    """True when routing has withdrawn the path leaf a -> spine -> leaf b at slot ``now``."""
    for link in (fabric.up(a, spine), fabric.down(spine, b)):
        f = faults.failed.get(link)
        if f is not None and now >= f + detect:
            return True
    return False
