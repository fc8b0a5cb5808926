"""Fault ``gnmi_silent``: a fabric engine's switch behind a real gNMI server keeps its sessions and sends nothing
(no samples, no heartbeats, no initial sync to a new session) until ``gnmi_resume``; a raw gRPC client reads it."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import grpc
from pygnmi.create_gnmi_path import gnmi_path_generator
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.sim.fabric.engine import Engine
from flowtracer.sim.fabric.workload import Workload
from flowtracer.sim.switches.server import GnmiServer

COUNTERS = "/interfaces/interface[name=*]/state/counters"
S = 1_000_000_000  # the engine's tick


@contextmanager
def stream(port: int, sample_ns: int = 0, heartbeat_ns: int = S) -> Iterator[
        queue.Queue[gnmi_pb2.SubscribeResponse | grpc.RpcError]]:
    """A STREAM subscription (SAMPLE every ``sample_ns``, 0 = every tick), kept open; its responses in a queue."""
    done = threading.Event()

    def requests() -> Iterator[gnmi_pb2.SubscribeRequest]:
        sub = gnmi_pb2.Subscription(path=gnmi_path_generator(COUNTERS), mode=gnmi_pb2.SubscriptionMode.SAMPLE,
                                    sample_interval=sample_ns, heartbeat_interval=heartbeat_ns)
        yield gnmi_pb2.SubscribeRequest(subscribe=gnmi_pb2.SubscriptionList(subscription=[sub]))
        done.wait()  # no half-close: the session stays as a collector's does

    out: queue.Queue[gnmi_pb2.SubscribeResponse | grpc.RpcError] = queue.Queue()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        call = gnmi_pb2_grpc.gNMIStub(ch).Subscribe(requests())

        def read() -> None:
            try:
                for resp in call:
                    out.put(resp)
            except grpc.RpcError as e:
                out.put(e)

        t = threading.Thread(target=read, daemon=True)
        t.start()
        try:
            yield out
        finally:
            done.set()
            call.cancel()
            t.join(timeout=5)


def next_stamp(q: queue.Queue[gnmi_pb2.SubscribeResponse | grpc.RpcError]) -> int:
    """The timestamp of the next notification, skipping the sync marker (timeout: a safety net, not a check)."""
    while True:
        resp = q.get(timeout=10)
        assert isinstance(resp, gnmi_pb2.SubscribeResponse), resp
        if resp.HasField("update"):
            return resp.update.timestamp


def queued(q: queue.Queue[gnmi_pb2.SubscribeResponse | grpc.RpcError]) -> list[int]:
    """The timestamps of the notifications received and not read yet (sync markers left out)."""
    out = []
    while not q.empty():
        resp = q.get_nowait()
        assert isinstance(resp, gnmi_pb2.SubscribeResponse), resp
        if resp.HasField("update"):
            out.append(resp.update.timestamp)
    return out


def test_silent_switch_keeps_its_sessions_sends_nothing_and_resumes() -> None:
    engine = Engine(generate(FabricSpec(hosts=4, leaves=2, spines=1)), Workload(seed=1),
                    start_ns=time.time_ns() // 10**9 * 10**9)
    engine.add_steady_flow("host01:mlx5_0", "host03:mlx5_0")
    with ExitStack() as stack:
        servers = {}
        for sw in ("leaf01", "leaf02"):
            srv = GnmiServer({sw: engine.switch_states[sw]})
            srv.start()
            stack.callback(srv.stop)
            servers[sw] = srv.port
        silent = stack.enter_context(stream(servers["leaf01"]))
        every2 = stack.enter_context(stream(servers["leaf01"], sample_ns=2 * S, heartbeat_ns=0))
        other = stack.enter_context(stream(servers["leaf02"]))  # the same engine ticks, on the same server loop
        assert next_stamp(silent) == next_stamp(other) == next_stamp(every2) == engine.now_ns  # initial sync
        engine.step()
        assert next_stamp(silent) == next_stamp(other) == engine.now_ns

        engine.inject("gnmi_silent", "leaf01")
        late = stack.enter_context(stream(servers["leaf01"]))  # a new session while silent: accepted, no sync
        for _ in range(3):  # 3 ticks: 3 samples, and heartbeats due, from the other switch
            engine.step()
            assert next_stamp(other) == engine.now_ns
        assert queued(silent) == queued(late) == queued(every2) == []

        engine.inject("gnmi_resume", "leaf01")
        assert queued(silent) == queued(late) == []  # the tick stamped at the resume was not sent either
        t_resume = engine.now_ns
        engine.step()
        assert next_stamp(silent) == next_stamp(other) == engine.now_ns  # the open session goes on
        assert next_stamp(late) == engine.now_ns  # and the new one gets its initial sync
        # A 2 s sample interval: due at once after the silence, then every 2 s again. Each stream reads the
        # switch's latest tick when its turn comes, so the test waits for every2's sample before the next
        # step: on a busy machine its turn can come after another tick, which it would then sample instead.
        assert next_stamp(every2) == t_resume + S
        for _ in range(3):
            engine.step()
            assert next_stamp(other) == next_stamp(silent) == engine.now_ns
            if engine.now_ns == t_resume + 3 * S:
                assert next_stamp(every2) == engine.now_ns  # nothing between: the queue is in order
        engine.step()  # t_resume + 5 s: the next one, and nothing in between
        assert next_stamp(every2) == engine.now_ns == t_resume + 5 * S
    engine.close()
