"""Test helpers: hand-driven simulated switches (SwitchState + the sim's real gNMI server); the
throw-away TLS certificates come from tests/tls_certs.py (re-exported)."""

from __future__ import annotations

import threading
import time

from tls_certs import make_ca as make_ca
from tls_certs import make_server_cert as make_server_cert

from flowtracer.sim.switches.state import Event, EventKind, InterfaceState, NextHop, NextHopGroup, SwitchState


def make_switch(name: str, ifaces: int = 4) -> SwitchState:
    """A switch with ``ifaces`` 400G ports and two next hops (one ECMP group) on the last two."""
    st = SwitchState(name)
    with st.lock:
        for i in range(1, ifaces + 1):
            st.interfaces[f"Ethernet{i}"] = InterfaceState(f"Ethernet{i}", 400_000_000_000)
        st.next_hops[10] = NextHop(10, "10.0.0.1", f"Ethernet{ifaces - 1}")
        st.next_hops[11] = NextHop(11, "10.0.0.3", f"Ethernet{ifaces}")
        st.groups[1] = NextHopGroup(1, {10: 1, 11: 1})
        st.timestamp_ns = time.time_ns()
    return st


class Ticker:
    """Advances switches every ``tick_s``: every counter +step, tick time = now; SAMPLE events."""

    def __init__(self, states: list[SwitchState], tick_s: float = 0.1) -> None:
        self.states = states
        self.tick_s = tick_s
        self.paused = threading.Event()
        #: tick timestamp (ns) -> switch -> interface -> counter -> value, and next-hop index -> (octets, pkts)
        self.truth: dict[int, dict[str, tuple[dict[str, dict[str, int]], dict[int, tuple[int, int]]]]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Ticker:
        for st in self.states:
            with st.lock:
                self._record(st)
        self._thread.start()
        return self

    def _record(self, st: SwitchState) -> None:
        self.truth.setdefault(st.timestamp_ns, {})[st.name] = (
            {n: dict(i.counters) for n, i in st.interfaces.items()},
            {k: (nh.octets_forwarded, nh.packets_forwarded) for k, nh in st.next_hops.items()})

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        n = 0
        while not self._stop.wait(self.tick_s):
            if self.paused.is_set():
                continue
            n += 1
            for st in self.states:
                with st.lock:
                    for itf in st.interfaces.values():
                        for c in itf.counters:
                            itf.counters[c] += 1000 + n
                    for nh in st.next_hops.values():
                        nh.octets_forwarded += 4096 * n
                        nh.packets_forwarded += n
                    st.timestamp_ns = ts = time.time_ns()
                    self._record(st)
                st.emit(Event(EventKind.SAMPLE, ts))
