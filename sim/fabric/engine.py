"""The simulated fabric engine: NCCL-like traffic forwarded hop by hop, max-min fair, in ticks. It is over 500
lines because it is one state machine (set-up, faults at tick boundaries, forwarding, publication) over state
every part of it changes; its pure parts live apart (``initial_state``, ``event_loop``, ``rates``, ``flows``,
``truth_records``).

Time advances in ticks of ``tick_ns`` whose ends are multiples of the tick (wall-clock aligned in
real time, or from a chosen start in virtual time). Inside a tick the engine is a fluid
simulation: between events (an op starting, a transfer finishing, a compute gap ending) every
active transfer moves at its max-min fair rate (``flowtracer.fabric.maxmin``), recomputed at each
event. Faults act at tick boundaries, so a flow has one path per tick.

Forwarding (``dataplane``): by default ("model") each flow direction's path is ``Fabric.hash_path`` with the
simulator's own topology hash models, the current out-of-service links and the next hops' AFT weights
(``nh_weight``: weighted ECMP); a path changes only when those change. With a kernel data plane
(``flowtracer.sim.kernel.dataplane``) the paths are the ones the Linux kernel chooses (``paths``), rates are the
same max-min model over them, the data plane sends real packets at those rates and the switches' interface counters
are the kernel's (scaled), read at every tick end; host views, next-hop counters and ground truth count what the
kernel's senders really sent by then (``restate_tick``), not the model's intent.

Bytes on the wire: every counter (host QP and port counters, switch interface and next-hop
counters, ground truth) counts the same thing, RoCEv2 frames: payload plus ``header_bytes`` per
packet (default 62 = Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 + FCS 4). A data flow's
packets in a tick are ceil(payload / MTU); a clear-to-send message (64 payload bytes, one per
``cts_every`` data bytes, on the reverse direction of the QP pair) is one packet. So for every link
and tick, switch bytes == the sum of the frame bytes of the flows crossing it, exactly. Link
capacity is enforced on payload at line rate x MTU / (MTU + header_bytes); the ceil can put at
most one header per flow per tick above line rate, and CTS traffic (about 0.02% of data) is not
rate-limited.

Threading: ``advance(n)`` runs ticks in the caller's thread (virtual time, no sleeping);
``run(stop)`` runs in real time until ``stop`` is set. ``inject`` may be called from any thread;
the fault applies at the current tick boundary.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from flowtracer.fabric.addressing import p2p_addresses
from flowtracer.fabric.ecmp_hash import HeaderFields
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology import Topology
from flowtracer.sim.fabric.congestion import CongestionModel
from flowtracer.sim.fabric.congestion_math import ActiveFlows, CongestionParams
from flowtracer.sim.fabric.congestion_publish import CongestionPublisher
from flowtracer.sim.fabric.counters import CounterBook
from flowtracer.sim.fabric.event_loop import simulate_plain, simulate_vector
from flowtracer.sim.fabric.faults import FaultError, FaultState, OperChange
from flowtracer.sim.fabric.flows import (
    CTS_BYTES,
    CTS_EVERY,
    HEADER_BYTES,
    Flow,
    TickStats,
    Transfer,
    account_tick,
    active_flows,
    apply_extras,
    apply_to_hosts,
    nh_deltas,
)
from flowtracer.sim.fabric.ground_truth import GroundTruthWriter
from flowtracer.sim.fabric.initial_state import (
    check_background,
    host_states,
    hosts_of,
    job_nics,
    node_group_limits,
    switch_states,
)
from flowtracer.sim.fabric.jobs import COMM_NAME, JobRun
from flowtracer.sim.fabric.rates import fair_rates, transfer_links
from flowtracer.sim.fabric.rdma import NicEnd, QpPair, random_psn
from flowtracer.sim.fabric.spread import SpreadRoute, ecmp_hops, spread_modes, spread_route
from flowtracer.sim.fabric.truth_records import flow_record, tick_record
from flowtracer.sim.fabric.workload import FAULT_KINDS, Workload, WorkloadError
from flowtracer.sim.hosts.state import HostState, QpState
from flowtracer.sim.switches.state import Event, EventKind, SwitchState

log = logging.getLogger(__name__)
_clock = time.thread_time_ns  # CPU of the engine's thread: what a tick costs, whatever else the machine runs

#: The parts of a tick ``Engine.phase_ns`` times.
PHASES = ("traffic", "maxmin", "congestion", "accounting", "counters", "hosts", "ground_truth", "listeners")


class Engine:
    """The fabric simulator. Construct, then ``advance(n)`` (virtual time) or ``run(stop)`` (real time).

    ``switch_states`` / ``host_states`` are the contracts the gNMI servers and host-view writers read.
    ``counter32``: True (every switch) or the names of switches whose counters wrap at 2**32.
    ``ground_truth``: directory for ground-truth JSON lines, or None to write none.
    ``event_loop``: "vector" (default) or "plain", the same rule one transfer at a time (the reference).
    """

    def __init__(self, topology: Topology, workload: Workload, *, tick_s: float = 1.0, start_ns: int | None = None,
                 counter32: bool | Collection[str] = False, header_bytes: int = HEADER_BYTES,
                 cts_every: int = CTS_EVERY, ground_truth: Path | None = None, qpn_reuse: bool = False,
                 coll_log: bool = True, dataplane: Any = None, event_loop: str = "vector") -> None:
        if tick_s <= 0:
            raise ValueError("tick_s must be positive")
        if event_loop not in ("vector", "plain"):
            raise ValueError(f"event_loop must be 'vector' or 'plain', not {event_loop!r}")
        #: "vector": the events inside a tick over numpy arrays of the transfers; "plain": the reference loop, one
        #: transfer at a time (tests check both give the same bytes, bit for bit).
        self.event_loop = event_loop
        self.topology = topology
        self.workload = workload
        self.fabric = Fabric(topology)
        self.tick_ns = round(tick_s * 1e9)
        if start_ns is None:
            start_ns = time.time_ns() // self.tick_ns * self.tick_ns
        self.start_ns = start_ns
        self.now_ns = start_ns
        self.mtu = workload.mtu
        self.header_bytes = header_bytes
        self.cts_every = cts_every
        self.coll_log = coll_log
        #: None: the model forwards (``Fabric.hash_path``); else a data plane such as ``KernelDataplane``.
        self.dataplane = dataplane
        self.rng = random.Random(workload.seed)

        self.link_ids = list(self.fabric.links)
        self.link_index = {lid: i for i, lid in enumerate(self.link_ids)}
        self._line_rate = np.array([self.fabric.links[lid].speed_bps for lid in self.link_ids], dtype=np.float64)
        self._nic_cap = np.full(len(self.link_ids), np.inf)
        self.faults = FaultState(self.fabric)
        self._down: frozenset[str] = frozenset()
        #: AFT weight of next hops (directed link id -> weight, 1 absent) the model hashes with.
        self._weights: dict[str, int] = {}
        self._capacity = self._compute_capacity()

        p2p = p2p_addresses(topology)
        self.counters = CounterBook(self.fabric, self.link_ids, p2p, workload.seed)
        self.switch_states: dict[str, SwitchState] = switch_states(topology, self.counters, counter32, start_ns)
        self.nics: dict[str, NicEnd]
        self.host_states: dict[str, HostState]
        self.nics, self.host_states, self._qpn = host_states(topology, self.rng, qpn_reuse, start_ns)
        self._nic_index = {name: i for i, name in enumerate(self.nics)}
        self._link_to_nic = {lid.partition(">")[2]: i for i, lid in enumerate(self.link_ids)
                             if lid.partition(">")[2] in self.nics}
        #: The RoCE congestion model (docs/congestion.md), None when the workload has it off.
        self.cc: CongestionModel | None = None
        self._cc_publisher: CongestionPublisher | None = None
        #: Switches that spray or route adaptively (hash_mode spray/adaptive), by name.
        self._spread_modes = spread_modes(topology)
        if workload.congestion is not None and self._spread_modes:
            sw, mode = next(iter(self._spread_modes.items()))
            raise WorkloadError(f"congestion: switch {sw} has hash_mode {mode.value}; the congestion model queues "
                                "each flow on one path, so it runs only on fabrics whose switches hash")
        if workload.congestion is not None:
            if dataplane is not None:  # its switch counters are the kernel's: no queues to add bytes to
                raise WorkloadError("congestion: the congestion model runs on the model data plane only")
            self.cc = CongestionModel(self.fabric, self.link_ids, list(self.nics),
                                      CongestionParams(**workload.congestion.model_dump()), self.mtu + header_bytes)
            self._cc_publisher = CongestionPublisher(self.cc, self.counters)
        self._cc_flows: ActiveFlows | None = None
        self._cc_capacity = np.zeros(0)

        self.flows: dict[int, Flow] = {}
        self.pairs: dict[int, QpPair] = {}
        self.transfers: list[Transfer] = []
        self._next_flow = 1
        self._next_pair = 1
        self.rates_dirty = True
        self._route_version = 0
        self._path_cache: dict[tuple[HeaderFields, str, str], tuple[str, ...] | None] = {}
        self._spread_cache: dict[tuple[HeaderFields, str, str], SpreadRoute | None] = {}
        self._pending_add: dict[str, list[tuple[QpPair, QpState]]] = {}
        self._closed_pairs: list[QpPair] = []
        self._logs: dict[str, list[str]] = {}
        #: Held while a tick is computed; ``inject`` waits for it, so a fault lands on a boundary.
        self._step_lock = threading.RLock()
        self._listeners: list[Callable[[int], None]] = []
        #: Process time (ns, this thread) spent in each part of the ticks so far: "traffic" (jobs, events,
        #: max-min rates), "maxmin" (the part of traffic in rate computation), "congestion", "accounting"
        #: (whole bytes per flow and link), "counters" (switch totals and their SwitchStates), "hosts"
        #: (HostStates), "ground_truth", "listeners" (e.g. the runner's host-view snapshots). For benchmarks.
        self.phase_ns: dict[str, int] = dict.fromkeys(PHASES, 0)

        self.gt: GroundTruthWriter | None = None
        self._group_sizes = {gid: len(g.members) for gid, g in self.fabric.ecmp_groups.items()}
        self.jobs = self._make_jobs()
        self._scheduled = sorted(
            ((start_ns + math.ceil(f.at * 1e9 / self.tick_ns) * self.tick_ns, i, f)
             for i, f in enumerate(workload.faults)), key=lambda x: (x[0], x[1]))
        for i, f in enumerate(workload.faults):
            try:
                self.faults.check(f.kind, f.target)
            except FaultError as e:
                raise WorkloadError(f"faults[{i}].{f.kind}: {e}") from None
        check_background(topology, workload)
        for i, sf in enumerate(workload.flows):
            for end in (sf.src, sf.dst):
                if end not in self.nics:
                    raise WorkloadError(f"flows[{i}]: unknown NIC {end!r} (give host:rdma_device)")
        if ground_truth is not None:  # only once the workload is known to be good
            self.gt = GroundTruthWriter(ground_truth)
            self.gt.write_meta(self._meta())
        self._make_background()
        for sf in workload.flows:
            self.add_steady_flow(sf.src, sf.dst, math.inf if sf.rate is None else sf.rate, job=sf.job)
        self._publish(start_ns, None)

    # -- set-up -----------------------------------------------------------------------------------

    def _meta(self) -> dict[str, object]:
        return {
            "version": 1, "topology": self.topology.name, "tick_ns": self.tick_ns, "start_ns": self.start_ns,
            "mtu": self.mtu, "header_bytes": self.header_bytes, "cts_bytes": CTS_BYTES, "cts_every": self.cts_every,
            "links": {lid: self.fabric.links[lid].speed_bps for lid in self.link_ids},
            "ecmp_groups": {gid: [m.id for m in g.members] for gid, g in self.fabric.ecmp_groups.items()},
            "counter_bits": {n: s.counter_bits for n, s in self.switch_states.items()},
            "dataplane": self.dataplane.meta() if self.dataplane is not None else {"kind": "model"},
            "congestion": self.workload.congestion.model_dump() if self.workload.congestion is not None else None,
        }

    def _make_jobs(self) -> list[JobRun]:
        scale, nic_rate = node_group_limits(self.topology, self.workload)
        for i, lid in enumerate(self.link_ids):
            dl = self.fabric.links[lid]
            for node in (dl.src_node, dl.dst_node):
                if dl.host_link and node in nic_rate:
                    self._nic_cap[i] = nic_rate[node]
        self._capacity = self._compute_capacity()
        return [JobRun(spec, nics, max(scale.get(node[0].host, 1.0) for node in nics), self.rng, self, self.start_ns)
                for spec, nics in zip(self.workload.jobs, job_nics(self.topology, self.workload, self.nics),
                                      strict=True)]

    def _make_background(self) -> None:
        for bi, bg in enumerate(self.workload.background):
            hosts = hosts_of(self.topology, bg.hosts, f"background[{bi}].hosts")
            ends = [e for e in self.nics.values() if e.host in hosts]
            rng = random.Random(f"{self.workload.seed}:bg:{bi}:{bg.seed}")
            for _ in range(bg.flows):
                src = rng.choice(ends)
                dst = rng.choice([e for e in ends if e.host != src.host])
                pid = rng.randrange(2000, 4_000_000)
                pair = self.open_pairs(src, dst, 1, pid, pid + 1, self.start_ns,
                                       {"job": f"background{bi}", "kind": "background"}, comm="ib_write_bw")[0]
                self._start(Transfer([self.flows[pair.meta["fwd"]]], math.inf, demand=float(bg.rate)))

    def add_steady_flow(self, src_nic: str, dst_nic: str, rate_bps: float = math.inf, *,
                        job: str = "") -> QpPair:
        """One QP pair sending from ``src_nic`` to ``dst_nic`` (``host:rdma_device``) for ever, asking
        for ``rate_bps`` of payload (inf: as much as max-min fairness gives). For tests and what-ifs.
        ``job``: the scheduler's job of its processes, "" for none (no name is made up)."""
        for n in (src_nic, dst_nic):
            if n not in self.nics:
                raise WorkloadError(f"unknown NIC {n!r} (give host:rdma_device)")
        with self._step_lock:
            pid = self.rng.randrange(2000, 4_000_000)
            pair = self.open_pairs(self.nics[src_nic], self.nics[dst_nic], 1, pid, pid + 1, self.now_ns,
                                   {"job": job, "kind": "background"}, comm="ib_write_bw")[0]
            self._start(Transfer([self.flows[pair.meta["fwd"]]], math.inf, demand=float(rate_bps)))
        return pair

    # -- JobEnv: what jobs call ---------------------------------------------------------------------

    def open_pairs(self, src: NicEnd, dst: NicEnd, count: int, a_pid: int, b_pid: int, t_ns: int,
                   meta: dict[str, Any], comm: str = COMM_NAME) -> list[QpPair]:
        """Create ``count`` QP pairs between two NICs (QPs appear in the hosts' state at the tick end)."""
        out = []
        new: list[Flow] = []
        for _ in range(count):
            a_qpn, b_qpn = self._qpn[src.name].allocate(), self._qpn[dst.name].allocate()
            pair = QpPair(self._next_pair, src, dst, a_qpn, b_qpn, a_pid, b_pid, comm, t_ns,
                          random_psn(self.rng), random_psn(self.rng),
                          job=str(meta.get("job", "")), kind=str(meta.get("kind", "")),
                          channel=int(meta.get("channel", -1)), a_rank=int(meta.get("a_rank", -1)),
                          b_rank=int(meta.get("b_rank", -1)), comm_id=int(meta.get("comm_id", 0)))
            self._next_pair += 1
            self.pairs[pair.id] = pair
            qa = QpState(src.rdma_device, src.port, src.netdev, a_qpn, b_qpn, src.ip, dst.ip, pair.udp_src_port,
                         a_pid, comm, t_ns, sq_psn=pair.a_psn0, rq_psn=pair.b_psn0, mtu=self.mtu,
                         peer_host=dst.host, peer_device=dst.rdma_device, job=pair.job)
            qb = QpState(dst.rdma_device, dst.port, dst.netdev, b_qpn, a_qpn, dst.ip, src.ip, pair.udp_src_port,
                         b_pid, comm, t_ns, sq_psn=pair.b_psn0, rq_psn=pair.a_psn0, mtu=self.mtu,
                         peer_host=src.host, peer_device=src.rdma_device, job=pair.job)
            self._pending_add.setdefault(src.host, []).append((pair, qa))
            self._pending_add.setdefault(dst.host, []).append((pair, qb))
            fwd = Flow(self._next_flow, pair, True, src, dst, pair.headers(True), qa, qb)
            rev = Flow(self._next_flow + 1, pair, False, dst, src, pair.headers(False), qb, qa)
            fwd.reverse = rev
            self._next_flow += 2
            pair.meta.update(fwd=fwd.id, rev=rev.id)
            for f in (fwd, rev):
                self.flows[f.id] = f
                new.append(f)
                if self.gt is not None:
                    self.gt.flow(flow_record(f))
            out.append(pair)
        self._route_many(new)
        return out

    def close_pairs(self, pairs: Sequence[QpPair], t_ns: int) -> None:
        """Destroy QP pairs: the NIC frees their numbers now; their last bytes are accounted at this
        tick's end, when they vanish from the hosts' state."""
        for p in pairs:
            p.destroyed_ns = t_ns
            self._closed_pairs.append(p)
            self._qpn[p.a.name].free(p.a_qpn)
            self._qpn[p.b.name].free(p.b_qpn)

    def start_transfer(self, pairs: Sequence[QpPair], bytes_per_qp: int, on_done: Callable[[int], None]) -> None:
        flows = [self.flows[p.meta["fwd"]] for p in pairs]  # type: ignore[index]
        self._start(Transfer(flows, float(bytes_per_qp), on_done=on_done))

    def log(self, host: str, lines: Sequence[str]) -> None:
        self._logs.setdefault(host, []).extend(lines)

    def iteration_done(self, job: str, iteration: int, t_ns: int) -> None:
        """Ground truth only: a job finished an iteration at ``t_ns``."""
        if self.gt is not None:
            self.gt.iteration(job, iteration, t_ns)

    # -- faults -----------------------------------------------------------------------------------

    def inject(self, kind: str, target: str, *, capacity: float = 0.5, down_for_s: float = 2.0,
               weight: int = 1) -> None:
        """Apply a fault now, at the last tick boundary (``now_ns``): kind is link_down, link_up,
        degrade (``capacity`` = fraction left), restore, reboot (unavailable ``down_for_s``), nic_stall
        and nic_resume (``host:rdma_device`` stops / resumes draining what it receives), nh_withdraw,
        nh_restore and nh_weight (a switch's next hop ``switch:port`` leaves / rejoins its ECMP groups, or gets
        AFT ``weight``), gnmi_silent and gnmi_resume (a switch's gNMI server stops / resumes sending), agent_stop
        and agent_resume (a host's view stops / resumes being written).

        The next tick's traffic sees it; events and ground truth are stamped ``now_ns``. Called while
        a tick is being computed (real time), it waits for that tick and lands on its end.
        """
        if kind not in FAULT_KINDS:
            raise FaultError(f"unknown fault {kind!r}")
        self.faults.check(kind, target)
        with self._step_lock:
            self._apply_faults(self.now_ns, [(kind, target, capacity, down_for_s, weight)])

    def _apply_faults(self, t_ns: int, due: list[tuple[str, str, float, float, int]] | None = None) -> None:
        due = list(due or [])
        while self._scheduled and self._scheduled[0][0] <= t_ns:
            _, _, f = self._scheduled.pop(0)
            due.append((f.kind, f.target, f.capacity, f.down_for, f.weight))
        boots = self.faults.due_boots(t_ns)
        if not due and not boots:
            return
        events: dict[str, list[Event]] = {}
        changes: list[OperChange] = []
        for sw in boots:
            changes += self.faults.apply("boot", sw, t_ns)
            st = self.switch_states[sw]
            with st.lock:
                st.available = True
                st.last_clear_ns = t_ns
            self._record_event(t_ns, "boot", sw)
        for kind, target, capacity, down_for, weight in due:
            changes += self.faults.apply(kind, target, t_ns, capacity, round(down_for * 1e9), weight)
            self._record_event(t_ns, kind, target, capacity=capacity if kind == "degrade" else None,
                               weight=weight if kind == "nh_weight" else None)
            if kind == "reboot":
                st = self.switch_states[target]
                self.counters.reset(target)
                if self.cc is not None:
                    self.cc.reset_switch(target)
                if self.dataplane is not None:
                    self.dataplane.reset(target)
                with st.lock:
                    st.boot_epoch += 1
                    st.available = False
                    st.last_clear_ns = t_ns
                self.counters.renumber(target, st.boot_epoch)
                events.setdefault(target, []).append(Event(EventKind.REBOOT, t_ns))
            elif kind in ("gnmi_silent", "gnmi_resume"):
                st = self.switch_states[target]
                with st.lock:
                    st.silent = target in self.faults.silent
        oper = self.faults.oper_up()
        for ch in changes:
            st = self.switch_states[ch.switch]
            with st.lock:
                st.interfaces[ch.port].oper_up = oper[(ch.switch, ch.port)]
                st.interfaces[ch.port].last_change_ns = t_ns
            self._record_event(t_ns, "oper-status", f"{ch.switch}:{ch.port}", up=ch.up)
            if ch.switch not in self.faults.rebooting and ch.switch not in self.faults.silent:
                events.setdefault(ch.switch, []).append(Event(EventKind.OPER_STATUS, t_ns, ch.port))
        self._capacity = self._compute_capacity()
        down = self.faults.down_links()
        weights = dict(self.faults.weights)
        if down != self._down or weights != self._weights:
            # A weight change rehashes like a withdrawal: the switch reprograms the group's hash table.
            self._down, self._weights = down, weights
            self._path_cache.clear()
            self._spread_cache.clear()
            self._route_version += 1
            if self.dataplane is not None:
                self.dataplane.link_state(down)
            self._route_many(list(self.flows.values()))
        self.rates_dirty = True
        for st in self.switch_states.values():
            with st.lock:
                self._publish_switch(st, oper)
        for name, evs in events.items():
            for ev in evs:
                self.switch_states[name].emit(ev)

    def _record_event(self, t_ns: int, kind: str, target: str, **extra: object) -> None:
        if self.gt is not None:
            self.gt.event({"t_ns": t_ns, "kind": kind, "target": target,
                           **{k: v for k, v in extra.items() if v is not None}})

    def _compute_capacity(self) -> np.ndarray:
        """Payload capacity of every link, bit/s: line rate (or NIC cap) x degrade x MTU share."""
        eff = self.mtu / (self.mtu + self.header_bytes)
        factor = np.array([self.faults.capacity_factor(lid) for lid in self.link_ids])
        return np.minimum(self._line_rate, self._nic_cap) * factor * eff

    # -- forwarding -------------------------------------------------------------------------------

    def _route_many(self, flows: Sequence[Flow]) -> None:
        """Resolve flows' paths: the model's ECMP hashes hop by hop over the links in service, or the
        data plane's answer (one batch for all of them)."""
        keys = [(f.headers, f.src.name, f.dst.name) for f in flows]
        missing = [k for k in dict.fromkeys(keys) if k not in self._path_cache]
        if missing and self.dataplane is not None:
            self._path_cache.update(zip(missing, self.dataplane.paths(missing), strict=True))
        for k in missing:
            if k not in self._path_cache:
                self._path_cache[k] = self.fabric.hash_path(k[0], k[1], k[2], down=self._down, weights=self._weights)
            if self._spread_modes:
                self._spread_cache[k] = spread_route(self.fabric, self._spread_modes, *k, self.link_index, self._down)
        for f, k in zip(flows, keys, strict=True):
            self._set_path(f, self._path_cache[k])
            if self._spread_modes and (tree := self._spread_cache.get(k)) is not None:
                # rates see every link of the tree (weighted by share), counters the dealt bytes
                f.spread, f.path, f.nh_hops, f.group_hops = tree, tree.links, (), ()
            else:
                f.spread = None

    def _set_path(self, f: Flow, ids: tuple[str, ...] | None) -> None:
        """Set a flow's path (directed link ids, None: unreachable) and the ECMP hops on it."""
        if ids is None:
            f.path, f.nh_hops, f.group_hops = None, (), ()
            return
        f.path = tuple(self.link_index[i] for i in ids)
        f.nh_hops, f.group_hops = ecmp_hops(self.fabric, ids, self.fabric.nics[f.dst.name].leaf, self.link_index)

    def _start(self, t: Transfer) -> None:
        for f in t.flows:
            f.transfer = t
        self.transfers.append(t)
        self.rates_dirty = True

    def _compute_rates(self) -> None:
        arrs = [transfer_links(t, self._route_version, bool(self._spread_modes)) for t in self.transfers]
        capacity = self._capacity
        wire = (self.mtu + self.header_bytes) / self.mtu
        fs = None
        if self.cc is not None:  # PFC's pause tree holds its links at 0
            fs = active_flows(self.transfers, self._nic_index, self._capacity * wire, wire)
            stalled = {self._link_to_nic[n] for n in self.faults.stalled}
            capacity = np.where(self.cc.plan(fs, stalled), 0.0, capacity)
        rates = fair_rates(self.transfers, arrs, capacity, bool(self._spread_modes))
        for t, r in zip(self.transfers, rates.tolist(), strict=True):
            t.rate = r
        if fs is not None:
            fs.rate = np.array([f.transfer.rate * wire for f in (self.flows[i] for i in fs.ids)  # type: ignore[union-attr]
                                ], dtype=np.float64)
            self._cc_flows, self._cc_capacity = fs, capacity * wire
        self.rates_dirty = False

    # -- the tick ---------------------------------------------------------------------------------

    def add_tick_listener(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(tick_end_ns)`` after every tick, in the engine's thread."""
        self._listeners.append(listener)

    def advance(self, ticks: int = 1) -> None:
        """Run ``ticks`` ticks as fast as possible (virtual time)."""
        for _ in range(ticks):
            self.step()

    def run(self, stop: threading.Event, until_ns: int | None = None) -> None:
        """Run in real time: each tick is computed at its wall-clock end; returns when ``stop`` is set
        or the tick ending at or after ``until_ns`` is done."""
        while not stop.is_set():
            target = self.now_ns + self.tick_ns
            delay = (target - time.time_ns()) / 1e9
            if delay > 0 and stop.wait(delay):
                break
            self.step()
            if until_ns is not None and self.now_ns >= until_ns:
                break
            behind = (time.time_ns() - self.now_ns) // self.tick_ns
            if behind > 2:
                log.warning("engine is %d ticks behind real time (tick %.3f s)", behind, self.tick_ns / 1e9)

    def step(self) -> TickStats:
        """Simulate one tick, publish counters and host state, emit events, apply due faults."""
        ph = self.phase_ns
        with self._step_lock:
            t0, t1 = self.now_ns, self.now_ns + self.tick_ns
            c0 = _clock()
            self._simulate(t0, t1)
            c1 = _clock()
            ph["traffic"] += c1 - c0
            stats = account_tick(self.flows.values(), t0, t1, len(self.link_ids), self.mtu, self.header_bytes,
                                 self.cts_every)
            c2 = _clock()
            ph["accounting"] += c2 - c1
            if self.dataplane is not None:  # a real data plane restates the tick as what it really carried
                self.dataplane.tick(self, stats)
                ph["counters"] += _clock() - c2
            nh_b, nh_p = nh_deltas(stats, self.flows, len(self.link_ids))
            c2 = _clock()
            if self.cc is not None:
                extras, stats.congestion = self.cc.end_tick()
                stats.congestion["extras"] = [[x.flow, x.first, x.last, x.bytes, x.packets] for x in extras]
                apply_extras(stats, extras, self.flows, nh_b, nh_p)
            c3 = _clock()
            ph["congestion"] += c3 - c2
            self.counters.add(stats.link_bytes, stats.link_pkts, nh_b, nh_p, set(self.faults.rebooting))
            ph["counters"] += _clock() - c3
            self.now_ns = t1
            self._publish(t1, stats)
            self._apply_faults(t1)
        c4 = _clock()
        for listener in self._listeners:
            listener(t1)
        ph["listeners"] += _clock() - c4
        return stats

    def _simulate(self, t0: int, t1: int) -> None:
        (simulate_plain if self.event_loop == "plain" else simulate_vector)(self, t0, t1)

    def refresh_rates(self) -> None:
        """Recompute every transfer's rate, timed as the "maxmin" phase."""
        c0 = _clock()
        self._compute_rates()
        self.phase_ns["maxmin"] += _clock() - c0

    def congestion_interval(self, dt: float) -> None:
        """Run the congestion model over the step ``dt`` (s), timed as its own phase, not as traffic."""
        if self._cc_flows is not None and self.cc is not None:
            c0 = _clock()
            self.cc.interval(dt, self._cc_flows, self._cc_capacity)
            cc_ns = _clock() - c0
            self.phase_ns["congestion"] += cc_ns
            self.phase_ns["traffic"] -= cc_ns

    def finish_transfers(self, finished: list[Transfer], done_ns: int) -> None:
        """Transfers that moved all their bytes: their flows keep the payload, their ``on_done`` runs (in order)."""
        for tr in finished:
            self.transfers.remove(tr)
            for f in tr.flows:
                f.base_payload += int(tr.bytes_per_flow)
                f.transfer = None
            if tr.on_done is not None:
                tr.on_done(done_ns)
        self.rates_dirty = True

    # -- publishing -------------------------------------------------------------------------------

    def _publish(self, t_ns: int, stats: TickStats | None) -> None:
        ph, c0 = self.phase_ns, _clock()
        oper = self.faults.oper_up()
        records: dict[str, dict[str, object]] = {}
        for st in self.switch_states.values():
            with st.lock:
                self._publish_switch(st, oper)
                st.timestamp_ns = t_ns
                if self.gt is not None:
                    records[st.name] = self.counters.record(st)
        c1 = _clock()
        closed = self._publish_hosts(t_ns, stats)
        c2 = _clock()
        for st in self.switch_states.values():
            if st.available and not st.silent:  # a silent gNMI server sends nothing, heartbeats included
                st.emit(Event(EventKind.SAMPLE, t_ns))
        c3 = _clock()
        ph["counters"] += c1 - c0 + c3 - c2
        ph["hosts"] += c2 - c1
        if self.gt is not None:
            if stats is not None:
                self.gt.tick(tick_record(stats, self.flows, self.link_ids, self._group_sizes, self.gt.path_id))
                if stats.congestion is not None:
                    self.gt.congestion({"start_ns": stats.start_ns, "end_ns": stats.end_ns, **stats.congestion})
            self.gt.counters(t_ns, records)
        self._reap(closed, t_ns)
        ph["ground_truth"] += _clock() - c3

    def _publish_switch(self, st: SwitchState, oper: dict[tuple[str, str], bool]) -> None:
        """Counters, data-plane and congestion figures into one SwitchState (its lock held by the caller)."""
        down_idx = {self.link_index[lid] for lid in self._down}
        weights = {self.link_index[lid]: w for lid, w in self.faults.weights.items()}
        self.counters.publish(st, oper, down_idx, weights)
        if self.dataplane is not None:
            self.dataplane.publish(st)
        if self._cc_publisher is not None:
            self._cc_publisher.switch(st)

    def _publish_hosts(self, t_ns: int, stats: TickStats | None) -> list[QpPair]:
        """Apply the tick to every HostState; return the QP pairs destroyed in it (removed from hosts)."""
        closed = self._closed_pairs
        self._closed_pairs = []
        if self._cc_publisher is not None:
            self._cc_publisher.nics(self.nics.values(), self.host_states)
        for hs in self.host_states.values():
            with hs.lock:
                hs.reporting = hs.name not in self.faults.agents_stopped
        apply_to_hosts(self.host_states, self.flows, stats, closed, self._pending_add, self._logs, t_ns)
        self._pending_add, self._logs = {}, {}
        return closed

    def _reap(self, closed: list[QpPair], t_ns: int) -> None:
        """Forget destroyed QP pairs and free their QP numbers (after their last tick is recorded)."""
        for p in closed:
            for fid in (p.meta["fwd"], p.meta["rev"]):
                f = self.flows.pop(fid)  # type: ignore[call-overload]
                tr = f.transfer
                if tr is not None:  # destroyed mid-transfer: the QP's share of it is gone
                    tr.flows.remove(f)
                    if not tr.flows:
                        self.transfers.remove(tr)
                        self.rates_dirty = True
                        if tr.on_done is not None:
                            tr.on_done(t_ns)
            self.pairs.pop(p.id, None)
            if self.gt is not None:
                self.gt.destroyed(p.meta["fwd"], p.meta["rev"], p.destroyed_ns)  # type: ignore[arg-type]

    def close(self) -> None:
        """Flush and close the ground-truth files."""
        if self.gt is not None:
            self.gt.close()

