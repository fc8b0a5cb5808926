"""Test helpers: hand-driven simulated switches (SwitchState + the sim's real gNMI server) and
throw-away TLS certificates."""

from __future__ import annotations

import datetime
import ipaddress
import threading
import time
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

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


def make_ca(tmp: Path, name: str) -> tuple[Path, ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    path = tmp / f"{name}.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path, key, cert


def make_server_cert(tmp: Path, ca_key: ec.EllipticCurvePrivateKey, ca: x509.Certificate,
                     name: str = "switch.test") -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    cert_path, key_path = tmp / f"{name}.pem", tmp / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path
