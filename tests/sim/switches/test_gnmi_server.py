"""The simulated switches' gNMI servers over real gRPC on loopback, driven like the fabric engine would.

Clients: pygnmi (what the collectors use) for the behaviour a collector relies on, and the raw
gRPC stub where pygnmi cannot send the request (malformed ones, half-close, exact status codes).
"""

from __future__ import annotations

import datetime
import ipaddress
import itertools
import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from pygnmi.client import gNMIclient, gNMIException
from pygnmi.create_gnmi_path import gnmi_path_generator
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc
from waiting import wait_for

from flowtracer.sim.fabric.congestion_counters import SWITCH_QUEUE_COUNTERS, published
from flowtracer.sim.fabric.congestion_scenarios import scenario
from flowtracer.sim.fabric.engine import Engine as FabricEngine
from flowtracer.sim.switches.server import GnmiServer, TlsFiles
from flowtracer.sim.switches.state import Event, EventKind, InterfaceState, NextHop, NextHopGroup, SwitchState

# pygnmi's reader thread re-raises the status every stream ends with (CANCELLED when the client
# closes its channel, UNAVAILABLE on a reboot); that is the client's way, not a failure here.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")

TICK_S = 0.05
OCTETS_PER_TICK = 1_000_000
COUNTERS = "/interfaces/interface[name=*]/state/counters"
IN_OCTETS_E1 = "interfaces/interface[name=Ethernet1]/state/counters/in-octets"
SAMPLE_MS = 100_000_000  # 100 ms in ns


def make_switch(name: str = "leaf1", interfaces: int = 4) -> SwitchState:
    st = SwitchState(name)
    with st.lock:
        for i in range(1, interfaces + 1):
            st.interfaces[f"Ethernet{i}"] = InterfaceState(f"Ethernet{i}", 400 * 10**9)
        st.next_hops = {1: NextHop(1, "10.0.0.1", "Ethernet1"), 2: NextHop(2, "10.0.0.3", "Ethernet2")}
        st.groups = {5: NextHopGroup(5, {1: 1, 2: 1})}
        st.timestamp_ns = st.last_clear_ns = time.time_ns()
    return st


class Engine:
    """Drives a SwitchState as the fabric engine does: counters, timestamp and SAMPLE every tick.

    ``history`` maps every tick's timestamp_ns to Ethernet1's in-octets then (ground truth).
    """

    def __init__(self, st: SwitchState) -> None:
        self.st = st
        self.history: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Engine:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(TICK_S):
            with self.st.lock:
                if not self.st.available:
                    continue
                for i in self.st.interfaces.values():
                    i.counters["in-octets"] += OCTETS_PER_TICK
                    i.counters["in-pkts"] += 1000
                self.st.timestamp_ns = ts = time.time_ns()
                self.history[ts] = self.st.interfaces["Ethernet1"].counters["in-octets"]
            self.st.emit(Event(EventKind.SAMPLE, ts))

    def set_oper(self, name: str, up: bool) -> int:
        with self.st.lock:
            ts = time.time_ns()
            self.st.interfaces[name].oper_up = up
            self.st.interfaces[name].last_change_ns = ts
        self.st.emit(Event(EventKind.OPER_STATUS, ts, name))
        return ts

    def reboot(self, down_s: float = 0.3) -> None:
        with self.st.lock:
            self.st.available = False
            ts = time.time_ns()
        self.st.emit(Event(EventKind.REBOOT, ts))
        time.sleep(down_s)
        with self.st.lock:
            self.st.boot_epoch += 1
            for i in self.st.interfaces.values():
                i.counters = dict.fromkeys(i.counters, 0)
            self.st.last_clear_ns = self.st.timestamp_ns = time.time_ns()
            self.st.available = True


@pytest.fixture
def switch() -> SwitchState:
    return make_switch()


@pytest.fixture
def server(switch: SwitchState) -> Iterator[GnmiServer]:
    srv = GnmiServer({"leaf1": switch})
    srv.start()
    yield srv
    srv.stop()


def client(port: int, **kw: object) -> gNMIclient:
    return gNMIclient(target=("127.0.0.1", port), insecure=True, gnmi_timeout=5, **kw)


def stub(port: int) -> tuple[grpc.Channel, gnmi_pb2_grpc.gNMIStub]:
    ch = grpc.insecure_channel(f"127.0.0.1:{port}")
    return ch, gnmi_pb2_grpc.gNMIStub(ch)


def stream_request(path: str = COUNTERS, **sub: object) -> gnmi_pb2.SubscribeRequest:
    s = gnmi_pb2.Subscription(path=gnmi_path_generator(path), mode=gnmi_pb2.SubscriptionMode.SAMPLE,
                              sample_interval=SAMPLE_MS)
    for k, v in sub.items():
        setattr(s, k, v)
    return gnmi_pb2.SubscribeRequest(subscribe=gnmi_pb2.SubscriptionList(subscription=[s]))


def values(resp: dict[str, object]) -> dict[str, object]:
    return {u["path"]: u["val"] for u in resp["update"]["update"]}  # type: ignore[index]


# -- Capabilities and Get -------------------------------------------------------------------------


def test_capabilities(server: GnmiServer) -> None:
    with client(server.port) as gc:
        caps = gc.capabilities()
    assert set(caps["supported_encodings"]) == {"json", "json_ietf", "proto"}
    assert {"openconfig-interfaces", "openconfig-if-ethernet", "openconfig-network-instance"} <= {
        m["name"] for m in caps["supported_models"]}
    assert caps["gnmi_version"] == "0.8.0"


def test_get(server: GnmiServer, switch: SwitchState) -> None:
    with switch.lock:
        switch.interfaces["Ethernet1"].counters["in-octets"] = 2**63 + 5
        ts = switch.timestamp_ns
    with client(server.port) as gc:
        r = gc.get(path=["/interfaces/interface[name=Ethernet1]/state/counters",
                         "/network-instances/network-instance[name=default]/afts/next-hop-groups/next-hop-group"
                         "[id=5]/next-hops/next-hop[index=*]/state/weight"], encoding="json_ietf")
        n_counters, n_weights = r["notification"]
        assert n_counters["timestamp"] == ts
        got = {u["path"]: u["val"] for u in n_counters["update"]}
        assert got[IN_OCTETS_E1] == str(2**63 + 5)  # RFC 7951: uint64 as a JSON string
        assert len(got) == 11
        assert [u["val"] for u in n_weights["update"]] == ["1", "1"]
        speed = gc.get(path=["/interfaces/interface[name=Ethernet2]/ethernet/state/port-speed"], encoding="proto")
        assert speed["notification"][0]["update"][0]["val"] == "SPEED_400GB"


def test_get_qos_queues_of_the_congestion_model() -> None:
    """With the congestion model on, every interface serves 8 OpenConfig QoS queues (RoCE in queue 3) and 8 PFC
    priorities in SR Linux's layout, with the counters the engine published."""
    sc = scenario("incast")
    e = FabricEngine(sc.topology, sc.workload, start_ns=1_700_000_000 * 10**9)
    e.advance(2)
    st = e.switch_states["leaf04"]
    cong = [c for q in range(8) if (c := published(st, "Ethernet4", q)) is not None]
    assert len(cong) == 8
    with GnmiServer({"leaf04": st}) as srv, client(srv.port) as gc:
        r = gc.get(path=["/qos/interfaces/interface[interface-id=Ethernet4]/output/queues/queue[name=*]/state",
                         "/qos/interfaces/interface[interface-id=Ethernet4]/pfc/statistics"], encoding="json_ietf")
    got = {u["path"]: u["val"] for n in r["notification"] for u in n["update"]}
    base = "qos/interfaces/interface[interface-id=Ethernet4]/output/queues/queue[name={q}]/state/{leaf}"
    pfc = "qos/interfaces/interface[interface-id=Ethernet4]/pfc/statistics/pfc-priority[index={q}]/{leaf}"
    assert len(got) == 8 * 8 + 8 * 3
    for leaf in SWITCH_QUEUE_COUNTERS:
        assert [got[base.format(q=q, leaf=leaf)] for q in range(8)] == [str(c[leaf]) for c in cong]
    for leaf, name in (("pfc-pause-frames-received", "pfc-rx-pause-frames"),
                       ("pfc-pause-frames-generated", "pfc-tx-pause-frames")):
        assert [got[pfc.format(q=q, leaf=leaf)] for q in range(8)] == [str(c[name]) for c in cong]
    assert int(got[base.format(q=3, leaf="ecn-marked-pkts")]) > 0
    assert int(got[base.format(q=3, leaf="transmit-octets")]) == st.interfaces["Ethernet4"].counters["out-octets"]


@pytest.mark.parametrize(("path", "encoding", "code"), [
    ("/interfaces/interface[name=Ethernet9]/state/counters", "json_ietf", grpc.StatusCode.NOT_FOUND),
    ("/qos/interfaces/interface[interface-id=Ethernet1]/output/queues/queue[name=3]", "json_ietf",
     grpc.StatusCode.NOT_FOUND),  # the congestion model is off: no queues
    ("/system/state/hostname", "json_ietf", grpc.StatusCode.NOT_FOUND),
    ("/interfaces/interface[name=Ethernet1]/bad name", "json_ietf", grpc.StatusCode.INVALID_ARGUMENT),
])
def test_get_errors(server: GnmiServer, path: str, encoding: str, code: grpc.StatusCode) -> None:
    with client(server.port) as gc, pytest.raises(gNMIException) as e:
        gc.get(path=[path], encoding=encoding)
    assert e.value.orig_exc.code() == code


def test_set_ascii_and_garbage(server: GnmiServer) -> None:
    ch, gnmi = stub(server.port)
    with ch:
        with pytest.raises(grpc.RpcError) as e:
            gnmi.Get(gnmi_pb2.GetRequest(encoding=gnmi_pb2.Encoding.ASCII))
        assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED and "encoding ASCII" in e.value.details()
        with pytest.raises(grpc.RpcError) as e:
            gnmi.Set(gnmi_pb2.SetRequest())
        assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
        raw_get = ch.unary_unary("/gnmi.gNMI/Get")
        with pytest.raises(grpc.RpcError) as e:
            raw_get(b"\xff\xff\xff")
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "cannot decode GetRequest" in e.value.details()


# -- Subscribe ------------------------------------------------------------------------------------


def test_stream_sample_sync_then_rising_counters_stamped_with_ticks(server: GnmiServer, switch: SwitchState) -> None:
    with Engine(switch) as engine, client(server.port) as gc:
        sub = gc.subscribe2(subscribe={"subscription": [
            {"path": COUNTERS, "mode": "sample", "sample_interval": SAMPLE_MS}], "encoding": "proto"})
        first = sub.get_update(timeout=5)
        assert first["sync_response"] is True
        assert len(values(first)) == 4 * 11
        seen = []
        while len(seen) < 4:
            upd = sub.get_update(timeout=5)
            ts, val = upd["update"]["timestamp"], values(upd)[IN_OCTETS_E1]
            assert engine.history[ts] == val  # the tick's own timestamp and counters, never wall clock
            seen.append((ts, val))
        sub.close()
    ts_list = [ts for ts, _ in seen]
    assert [v for _, v in seen] == sorted(v for _, v in seen) and seen[-1][1] > seen[0][1]
    gaps = [b - a for a, b in itertools.pairwise(ts_list)]
    # At most one sample per interval, less the tolerance for engine jitter (half a tick, at most
    # half the interval): this test's engine sleeps, so its ticks are irregular on a busy machine.
    assert all(g >= SAMPLE_MS // 2 for g in gaps), gaps


def test_json_ietf_delivers_64_bit_counters_as_strings(server: GnmiServer, switch: SwitchState) -> None:
    with Engine(switch), client(server.port) as gc:
        sub = gc.subscribe2(subscribe={"subscription": [
            {"path": COUNTERS, "mode": "sample", "sample_interval": SAMPLE_MS}], "encoding": "json_ietf"})
        vals = values(sub.get_update(timeout=5))
        sub.close()
    assert isinstance(vals[IN_OCTETS_E1], str) and int(vals[IN_OCTETS_E1]) >= 0


def test_once(server: GnmiServer, switch: SwitchState) -> None:
    with Engine(switch), client(server.port) as gc:
        once = gc.subscribe2(subscribe={"mode": "once", "subscription": [{"path": COUNTERS}], "encoding": "proto"})
        got = list(once)  # ONCE: updates, then sync_response, then the server closes the call
    assert got[-1] == {"sync_response": True}
    assert sum(len(g["update"]["update"]) for g in got if "update" in g) == 4 * 11


def test_poll(server: GnmiServer, switch: SwitchState) -> None:
    """Raw stub: pygnmi's PollSubscriber sends a Poll before reading the initial data + sync_response
    that the spec has the target send when the subscription is created, so each of its next() returns
    the previous poll's answer."""
    polls: queue.Queue[bool] = queue.Queue()

    def requests() -> Iterator[gnmi_pb2.SubscribeRequest]:
        yield gnmi_pb2.SubscribeRequest(subscribe=gnmi_pb2.SubscriptionList(
            mode=gnmi_pb2.SubscriptionList.POLL, encoding=gnmi_pb2.PROTO,
            subscription=[gnmi_pb2.Subscription(path=gnmi_path_generator(COUNTERS))]))
        while polls.get():
            yield gnmi_pb2.SubscribeRequest(poll=gnmi_pb2.Poll())

    def until_sync(it: Iterator[gnmi_pb2.SubscribeResponse]) -> tuple[int, int]:
        n = ts = 0
        for resp in it:
            if resp.sync_response:
                return ts, n
            ts = resp.update.timestamp
            n += len(resp.update.update)
        raise AssertionError("stream ended before sync_response")

    with Engine(switch) as engine:
        ch, gnmi = stub(server.port)
        with ch:
            call = gnmi.Subscribe(requests(), timeout=10)
            answers = [until_sync(call)]  # the initial data, without a poll
            for _ in range(3):
                ticks = len(engine.history)
                wait_for(lambda: len(engine.history) >= ticks + 2, 5, "new ticks to answer")  # noqa: B023
                polls.put(True)
                answers.append(until_sync(call))
            polls.put(False)  # half-close: a POLL call then ends (no more polls can come)
            assert list(call) == [] and call.code() == grpc.StatusCode.OK
    assert [n for _, n in answers] == [4 * 11] * 4
    stamps = [ts for ts, _ in answers]
    assert stamps == sorted(set(stamps)) and all(ts in engine.history for ts in stamps[1:])


def test_on_change_oper_status(server: GnmiServer, switch: SwitchState) -> None:
    path = "/interfaces/interface[name=*]/state/oper-status"
    with Engine(switch) as engine, client(server.port) as gc:
        sub = gc.subscribe2(subscribe={"subscription": [{"path": path, "mode": "on_change"}], "encoding": "proto"})
        first = values(sub.get_update(timeout=5))
        assert set(first.values()) == {"UP"} and len(first) == 4
        time.sleep(3 * TICK_S)
        assert not sub.peek()  # counters moved, oper-status did not: nothing sent
        ts = engine.set_oper("Ethernet3", up=False)
        change = sub.get_update(timeout=5)
        sub.close()
    assert change["update"]["timestamp"] == ts
    assert values(change) == {"interfaces/interface[name=Ethernet3]/state/oper-status": "DOWN"}


def test_reboot_ends_streams_unavailable_and_counters_restart(server: GnmiServer, switch: SwitchState) -> None:
    with Engine(switch) as engine, client(server.port) as gc:
        sub = gc.subscribe2(subscribe={"subscription": [
            {"path": COUNTERS, "mode": "sample", "sample_interval": SAMPLE_MS}], "encoding": "proto"})
        sub.get_update(timeout=5)
        before = 0
        while before < 20 * OCTETS_PER_TICK:  # counted for a while (1 s) before the reboot
            before = values(sub.get_update(timeout=5))[IN_OCTETS_E1]
        done = threading.Thread(target=engine.reboot, kwargs={"down_s": 3.0})  # long enough for the checks below
        done.start()
        sub._subscribe_thread.join(timeout=5)  # pygnmi's reader thread ends with the RPC
        assert sub.error is not None and sub.error.code() == grpc.StatusCode.UNAVAILABLE
        for call in (lambda: gc.get(path=[COUNTERS]), gc.capabilities):  # new calls too, while it is down
            with pytest.raises(gNMIException) as e:
                call()
            assert e.value.orig_exc.code() == grpc.StatusCode.UNAVAILABLE
        done.join()
        again = gc.subscribe2(subscribe={"subscription": [
            {"path": COUNTERS, "mode": "sample", "sample_interval": SAMPLE_MS}], "encoding": "proto"})
        first = again.get_update(timeout=5)
        again.close()
    after = values(first)
    assert after[IN_OCTETS_E1] < before
    assert engine.history.get(first["update"]["timestamp"], 0) == after[IN_OCTETS_E1]
    assert after["interfaces/interface[name=Ethernet1]/state/counters/last-clear"] == switch.last_clear_ns


def _status(gnmi: gnmi_pb2_grpc.gNMIStub, *requests: gnmi_pb2.SubscribeRequest | bytes) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as e:
        for _ in gnmi.Subscribe(iter(requests), timeout=5):
            pass
    return e.value


@pytest.mark.parametrize(("requests", "message"), [
    ((gnmi_pb2.SubscribeRequest(subscribe=gnmi_pb2.SubscriptionList()),), "subscription is empty"),
    ((stream_request("/interfaces/interface[name=*]/state/bad element"),), "not a valid node name"),
    ((stream_request(sample_interval=2**64 - 1),), "out of range"),
    ((stream_request(mode=7),), "mode 7"),
    ((gnmi_pb2.SubscribeRequest(poll=gnmi_pb2.Poll()),), "must carry a SubscriptionList, not poll"),
    ((stream_request(), gnmi_pb2.SubscribeRequest(poll=gnmi_pb2.Poll())), "Poll on a STREAM subscription"),
    ((stream_request(), stream_request()), "second SubscriptionList"),
    ((gnmi_pb2.SubscribeRequest(),), "not nothing"),
])
def test_malformed_subscribe_is_invalid_argument(server: GnmiServer, switch: SwitchState,
                                                 requests: tuple[gnmi_pb2.SubscribeRequest, ...],
                                                 message: str) -> None:
    with Engine(switch):
        ch, gnmi = stub(server.port)
        with ch:
            err = _status(gnmi, *requests)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err
    assert message in err.details()


def test_bad_requests_leave_other_streams_running(server: GnmiServer, switch: SwitchState) -> None:
    with Engine(switch), client(server.port) as gc:
        good = gc.subscribe2(subscribe={"subscription": [
            {"path": COUNTERS, "mode": "sample", "sample_interval": SAMPLE_MS}], "encoding": "proto"})
        good.get_update(timeout=5)
        ch, gnmi = stub(server.port)
        with ch:
            raw = ch.stream_stream("/gnmi.gNMI/Subscribe")
            with pytest.raises(grpc.RpcError) as e:
                list(raw(iter([b"\x0a\xff\xff\xff\x0f"]), timeout=5))  # a truncated message
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            for req in (stream_request("/a/../b"), stream_request(sample_interval=1)):
                assert _status(gnmi, req).code() == grpc.StatusCode.INVALID_ARGUMENT
        got = [values(good.get_update(timeout=5))[IN_OCTETS_E1] for _ in range(3)]
        good.close()
    assert got == sorted(got)


def test_unknown_path_subscription_stays_open_and_silent(server: GnmiServer, switch: SwitchState) -> None:
    with Engine(switch), client(server.port) as gc:
        sub = gc.subscribe2(subscribe={"subscription": [{"path": "/system/state/hostname", "mode": "sample"}],
                                       "encoding": "proto"})
        assert sub.get_update(timeout=5) == {"update": {}, "sync_response": True}
        time.sleep(4 * TICK_S)
        assert not sub.peek() and sub.error is None
        sub.close()


def test_cancel_on_half_close(switch: SwitchState) -> None:
    for cancel in (True, False):
        with GnmiServer({"leaf1": switch}, cancel_on_half_close=cancel) as srv, Engine(switch):
            ch, gnmi = stub(srv.port)
            with ch:
                # half-closes after the request; the 1 s deadline is what the non-cancelling server runs into
                call = gnmi.Subscribe(iter([stream_request()]), timeout=5 if cancel else 1)
                responses = []
                try:
                    responses = list(call)
                    code = call.code()
                except grpc.RpcError as e:
                    code = e.code()
        if cancel:
            assert code == grpc.StatusCode.OK and any(r.sync_response for r in responses)
        else:
            assert code == grpc.StatusCode.DEADLINE_EXCEEDED  # kept streaming until the client gave up


def test_shared_port_selects_the_switch_by_target() -> None:
    a, b = make_switch("leaf1"), make_switch("leaf2")
    with b.lock:
        b.interfaces["Ethernet1"].counters["in-octets"] = 42
    with GnmiServer({"leaf1": a, "leaf2": b}) as srv, client(srv.port) as gc:
        r = gc.get(target="leaf2", path=["/interfaces/interface[name=Ethernet1]/state/counters/in-octets"],
                   encoding="proto")
        assert r["notification"][0]["update"][0]["val"] == 42
        sub = gc.subscribe2(target="leaf2", subscribe={"subscription": [
            {"path": COUNTERS, "mode": "sample", "sample_interval": SAMPLE_MS}], "encoding": "proto"})
        assert values(sub.get_update(timeout=5))[IN_OCTETS_E1] == 42
        sub.close()
        for target, code in (("", grpc.StatusCode.INVALID_ARGUMENT), ("spine9", grpc.StatusCode.NOT_FOUND)):
            with pytest.raises(gNMIException) as e:
                gc.get(target=target or None, path=[COUNTERS])
            assert e.value.orig_exc.code() == code
    ch_state = make_switch("leaf3")
    with GnmiServer({"leaf2": b, "leaf3": ch_state}, default_target="leaf2") as srv:
        ch, gnmi = stub(srv.port)
        with ch:
            resp = gnmi.Get(gnmi_pb2.GetRequest(path=[gnmi_path_generator(
                "/interfaces/interface[name=Ethernet1]/state/counters/in-octets")], encoding=gnmi_pb2.PROTO))
            assert resp.notification[0].update[0].val.uint_val == 42
            assert not resp.notification[0].prefix.target  # not set by the client: not set in the answer
            resp = gnmi.Get(gnmi_pb2.GetRequest(prefix=gnmi_pb2.Path(target="leaf3"), path=[gnmi_path_generator(
                "/interfaces/interface[name=Ethernet1]/state/counters/in-octets")], encoding=gnmi_pb2.PROTO))
            assert resp.notification[0].prefix.target == "leaf3"
            assert resp.notification[0].prefix.origin == "openconfig"


def self_signed(tmp: Path) -> TlsFiles:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "leaf1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    (tmp / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                    serialization.NoEncryption()))
    return TlsFiles(tmp / "cert.pem", tmp / "key.pem")


def test_tls_and_credentials(switch: SwitchState, tmp_path: Path) -> None:
    tls = self_signed(tmp_path)
    with GnmiServer({"leaf1": switch}, tls=tls, credentials=("admin", "s3cret")) as srv:
        target = ("127.0.0.1", srv.port)
        with gNMIclient(target=target, username="admin", password="s3cret", path_cert=str(tls.cert_file),
                        gnmi_timeout=5) as gc:
            assert gc.get(path=[COUNTERS], encoding="proto")["notification"][0]["update"]
        for user, password in (("admin", "wrong"), ("", ""), ("root", "s3cret")):
            with pytest.raises(gNMIException) as e:  # connect() calls Capabilities, which is checked too
                gNMIclient(target=target, username=user, password=password, path_cert=str(tls.cert_file),
                           gnmi_timeout=5).connect()
            assert e.value.orig_exc.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.FutureTimeoutError):  # no plaintext fallback
            client(srv.port).connect(timeout=1)


def test_stop_ends_streams_and_twice_is_safe(switch: SwitchState) -> None:
    srv = GnmiServer({"leaf1": switch})
    port = srv.start()
    with Engine(switch), client(port) as gc:
        sub = gc.subscribe2(subscribe={"subscription": [
            {"path": COUNTERS, "mode": "sample", "sample_interval": SAMPLE_MS}], "encoding": "proto"})
        sub.get_update(timeout=5)
        srv.stop()
        srv.stop()
        sub._subscribe_thread.join(timeout=5)
        assert sub.error is not None and sub.error.code() == grpc.StatusCode.UNAVAILABLE
    with pytest.raises(RuntimeError):
        srv.start()


def test_port_in_use_is_an_error(server: GnmiServer, switch: SwitchState) -> None:
    with pytest.raises(OSError, match="cannot bind"):
        GnmiServer({"leaf1": switch}, port=server.port).start()


def test_own_port_and_shared_port_at_once(switch: SwitchState) -> None:
    """The runner may serve a switch on its own port and on the shared one: both stream, and
    stopping one server leaves the other's streams alone."""
    own, shared = GnmiServer({"leaf1": switch}), GnmiServer({"leaf1": switch, "leaf2": make_switch("leaf2")})
    own.start()
    shared.start()
    try:
        with Engine(switch), client(own.port) as a, client(shared.port) as b:
            sa = a.subscribe2(subscribe={"subscription": [
                {"path": COUNTERS, "mode": "sample", "sample_interval": SAMPLE_MS}], "encoding": "proto"})
            sb = b.subscribe2(target="leaf1", subscribe={"subscription": [
                {"path": COUNTERS, "mode": "sample", "sample_interval": SAMPLE_MS}], "encoding": "proto"})
            sa.get_update(timeout=5)
            sb.get_update(timeout=5)
            own.stop()
            got = [values(sb.get_update(timeout=5))[IN_OCTETS_E1] for _ in range(3)]
            sb.close()
    finally:
        own.stop()
        shared.stop()
    assert got == sorted(got) and got[-1] > got[0]
