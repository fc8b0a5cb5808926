"""Benchmark: simulated gNMI servers streaming counters in real time.

Scenario (issue #3 goal): one process serves S switches x I interfaces (plus N next hops each)
while a synthetic engine thread ticks every ``--tick-ms`` and emits SAMPLE events; one raw-grpc
client process (grpc.aio, no pygnmi) holds one Subscribe per switch: interface counters and
next-hop counters (both trees) SAMPLE at 1 s and six state paths ON_CHANGE, as the gNMI collector
does by default. Two layouts are measured: a port per
switch (S servers) and one shared port (``prefix.target`` selects the switch).

Reported per layout: updates/s delivered vs expected, server CPU (process time of this process
minus the engine thread's own time) as a share of one core, server CPU per update and per
message, client CPU, and the sample latency (client receive time - notification timestamp).
``raw_grpc_us_per_msg`` is the library limit measured in the same run: a bare grpc.aio server
writing pre-built messages of the same size; ``ratio_to_raw`` = our CPU per message over it.

    .venv/bin/python bench/bench_gnmi_server.py            # ~45 s on 2 cores
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import statistics
import threading
import time
from collections.abc import Sequence

import grpc
from pygnmi.spec.v080 import gnmi_pb2

from flowtracer.sim.switches.server import GnmiServer
from flowtracer.sim.switches.state import (
    INTERFACE_COUNTERS,
    Event,
    EventKind,
    InterfaceState,
    NextHop,
    NextHopGroup,
    SwitchState,
)

SUBSCRIBE = "/gnmi.gNMI/Subscribe"
NI = "/network-instances/network-instance[name=default]/afts"


def make_states(switches: int, interfaces: int, next_hops: int) -> dict[str, SwitchState]:
    states = {}
    for s in range(switches):
        st = SwitchState(f"leaf{s + 1}")
        with st.lock:
            for i in range(interfaces):
                st.interfaces[f"Ethernet{i + 1}"] = InterfaceState(f"Ethernet{i + 1}", 400 * 10**9)
            for n in range(next_hops):
                st.next_hops[n + 1] = NextHop(n + 1, f"10.{s}.{n}.1", f"Ethernet{n + 1}")
            st.groups[1] = NextHopGroup(1, dict.fromkeys(range(1, next_hops + 1), 1))
            st.timestamp_ns = st.last_clear_ns = time.time_ns()
        states[st.name] = st
    return states


class Engine(threading.Thread):
    """Synthetic engine: every tick adds traffic to all counters and emits SAMPLE; tracks its CPU."""

    def __init__(self, states: Sequence[SwitchState], tick_s: float) -> None:
        super().__init__(daemon=True, name="bench-engine")
        self.states, self.tick_s = states, tick_s
        self.stop_event = threading.Event()
        self.cpu_s = 0.0
        self.lag_s = 0.0

    def run(self) -> None:
        nxt = time.monotonic()
        n = 0
        while not self.stop_event.is_set():
            nxt += self.tick_s
            delay = nxt - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                self.lag_s = max(self.lag_s, -delay)
            c0 = time.thread_time()
            n += 1
            for st in self.states:
                with st.lock:
                    for i in st.interfaces.values():
                        c = i.counters
                        c["in-octets"] += 125_000 * n
                        c["out-octets"] += 125_000 * n
                        c["in-pkts"] += 30 + n
                        c["out-pkts"] += 30 + n
                    for nh in st.next_hops.values():
                        nh.octets_forwarded += 4096 * n
                        nh.packets_forwarded += 1
                    st.timestamp_ns = ts = time.time_ns()
                st.emit(Event(EventKind.SAMPLE, ts))
            self.cpu_s += time.thread_time() - c0


def subscribe_request(target: str, interval_ns: int) -> gnmi_pb2.SubscribeRequest:
    def path(text: str) -> gnmi_pb2.Path:
        elems = []
        for part in text.strip("/").split("/"):
            name, _, key = part.partition("[")
            keys = dict([key.rstrip("]").split("=", 1)]) if key else {}
            elems.append(gnmi_pb2.PathElem(name=name, key=keys))
        return gnmi_pb2.Path(elem=elems)

    sample, on_change = gnmi_pb2.SubscriptionMode.SAMPLE, gnmi_pb2.SubscriptionMode.ON_CHANGE
    # What the gNMI collector subscribes to by default (collectors/gnmi/config.py): counters
    # sampled, state on change (its ON_CHANGE entries carry the 1 s sample_interval too).
    sampled = ["/interfaces/interface[name=*]/state/counters", f"{NI}/next-hops/next-hop[index=*]/state/counters",
               f"{NI}/counters/next-hops/next-hop[index=*]/state"]
    changing = ["/interfaces/interface[name=*]/state/oper-status", "/interfaces/interface[name=*]/state/last-change",
                "/interfaces/interface[name=*]/ethernet/state/port-speed",
                f"{NI}/next-hops/next-hop[index=*]/state/ip-address",
                f"{NI}/next-hops/next-hop[index=*]/interface-ref/state/interface",
                f"{NI}/next-hop-groups/next-hop-group[id=*]/next-hops/next-hop[index=*]/state"]
    subs = [gnmi_pb2.Subscription(path=path(p), mode=sample, sample_interval=interval_ns) for p in sampled]
    subs += [gnmi_pb2.Subscription(path=path(p), mode=on_change, sample_interval=interval_ns) for p in changing]
    return gnmi_pb2.SubscribeRequest(subscribe=gnmi_pb2.SubscriptionList(
        prefix=gnmi_pb2.Path(target=target), subscription=subs, encoding=gnmi_pb2.Encoding.PROTO))


def client_main(endpoints: list[tuple[int, str]], interval_ns: int, t0_ns: int, t1_ns: int,
                out: mp.Queue) -> None:
    """Client process: one Subscribe per (port, target); counts updates stamped in [t0, t1)."""
    updates = messages = synced = nbytes = 0
    latencies: list[float] = []
    errors: list[str] = []

    async def one(channel: grpc.aio.Channel, target: str) -> None:
        nonlocal updates, messages, synced, nbytes
        call = channel.stream_stream(SUBSCRIBE, request_serializer=gnmi_pb2.SubscribeRequest.SerializeToString)()
        await call.write(subscribe_request(target, interval_ns))
        try:
            async for raw in call:
                resp = gnmi_pb2.SubscribeResponse.FromString(raw)
                if resp.sync_response:
                    synced += 1
                    continue
                ts = resp.update.timestamp
                if t0_ns <= ts < t1_ns:
                    updates += len(resp.update.update)
                    messages += 1
                    nbytes += len(raw)
                    latencies.append((time.time_ns() - ts) / 1e6)
                if time.time_ns() > t1_ns + 2 * 10**9:
                    call.cancel()
                    return
        except (grpc.aio.AioRpcError, asyncio.CancelledError) as e:
            if not isinstance(e, asyncio.CancelledError):
                errors.append(f"{target}: {e.code().name} {e.details()}")

    async def main() -> None:
        channels = {port: grpc.aio.insecure_channel(f"127.0.0.1:{port}") for port in {p for p, _ in endpoints}}
        tasks = [asyncio.create_task(one(channels[p], t)) for p, t in endpoints]
        deadline = (t1_ns - time.time_ns()) / 1e9 + 5
        await asyncio.wait(tasks, timeout=deadline)
        for t in tasks:
            t.cancel()
        for c in channels.values():
            await c.close()

    c0 = time.process_time()
    asyncio.run(main())
    lat = sorted(latencies) or [float("nan")]
    out.put({"updates": updates, "messages": messages, "bytes": nbytes, "synced": synced, "errors": errors[:5],
             "client_cpu_s": time.process_time() - c0,
             "latency_ms_p50": round(statistics.median(lat), 2),
             "latency_ms_p99": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))], 2)})


def run_layout(layout: str, args: argparse.Namespace, ctx: mp.context.SpawnContext) -> dict[str, object]:
    states = make_states(args.switches, args.interfaces, args.next_hops)
    servers = ([GnmiServer({n: st}) for n, st in states.items()] if layout == "port-per-switch"
               else [GnmiServer(states)])
    ports = [s.start() for s in servers]
    endpoints = ([(p, n) for p, n in zip(ports, states, strict=True)] if layout == "port-per-switch"
                 else [(ports[0], n) for n in states])
    engine = Engine(list(states.values()), args.tick_ms / 1000)
    engine.start()
    interval_ns = 10**9
    t0_ns = time.time_ns() + int(args.warmup * 1e9)
    t1_ns = t0_ns + int(args.seconds * 1e9)
    q: mp.Queue = ctx.Queue()
    client = ctx.Process(target=client_main, args=(endpoints, interval_ns, t0_ns, t1_ns, q))
    client.start()
    time.sleep(max(0.0, (t0_ns - time.time_ns()) / 1e9))
    cpu0, eng0 = time.process_time(), engine.cpu_s
    time.sleep(max(0.0, (t1_ns - time.time_ns()) / 1e9))
    cpu1, eng1 = time.process_time(), engine.cpu_s
    result = q.get(timeout=60)
    client.join(timeout=30)
    engine.stop_event.set()
    engine.join()
    for s in servers:
        s.stop()
    server_cpu = (cpu1 - cpu0) - (eng1 - eng0)
    # interface counters + last-clear, legacy next-hop counters, unified AFT counters (index + 2)
    leaves_per_sample = args.interfaces * (len(INTERFACE_COUNTERS) + 1) + args.next_hops * (2 + 3)
    expected = args.switches * leaves_per_sample * args.seconds / (interval_ns / 1e9)
    updates = int(result["updates"])  # type: ignore[call-overload]
    messages = max(1, int(result["messages"]))  # type: ignore[call-overload]
    return {
        "layout": layout,
        "updates_per_s": round(updates / args.seconds),
        "msgs_per_s": round(messages / args.seconds),
        "delivered_vs_expected": round(updates / expected, 3),
        "server_cpu_share_of_core": round(server_cpu / args.seconds, 3),
        "server_cpu_us_per_update": round(server_cpu / max(1, updates) * 1e6, 2),
        "server_cpu_us_per_msg": round(server_cpu / messages * 1e6, 1),
        "engine_cpu_share_of_core": round((eng1 - eng0) / args.seconds, 3),
        "engine_max_lag_ms": round(engine.lag_s * 1000, 1),
        "client_cpu_share_of_core": round(float(result["client_cpu_s"]) / (args.seconds + args.warmup), 3),  # type: ignore[arg-type]
        "bytes_per_msg": round(int(result["bytes"]) / messages),  # type: ignore[call-overload]
        **{k: result[k] for k in ("latency_ms_p50", "latency_ms_p99", "synced", "errors")},
    }


def raw_grpc_limit(msg_bytes: int, streams: int, per_stream: int, ctx: mp.context.SpawnContext) -> float:
    """Server CPU (us) per streamed message for a bare grpc.aio server writing pre-built bytes."""
    payload = os.urandom(msg_bytes)
    loop = asyncio.new_event_loop()
    started: threading.Event = threading.Event()
    holder: dict[str, object] = {}

    async def handler(request: bytes, context: grpc.aio.ServicerContext) -> None:
        for _ in range(per_stream):
            await context.write(payload)

    async def serve() -> None:
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("raw.S", {
            "Stream": grpc.unary_stream_rpc_method_handler(handler)}),))
        holder["port"] = server.add_insecure_port("127.0.0.1:0")
        holder["server"] = server
        await server.start()
        started.set()
        while not holder.get("stop"):
            await asyncio.sleep(0.05)
        await server.stop(0)

    t = threading.Thread(target=lambda: loop.run_until_complete(serve()), daemon=True)
    t.start()
    started.wait()
    q: mp.Queue = ctx.Queue()
    c0 = time.process_time()
    p = ctx.Process(target=raw_client_main, args=(holder["port"], streams, q))
    p.start()
    n = q.get(timeout=120)
    p.join()
    cpu = time.process_time() - c0
    holder["stop"] = True
    t.join()
    return cpu / n * 1e6


def naive_build_us_per_msg(interfaces: int) -> float:
    """CPU (us) to build one interface-counters SubscribeResponse the usual way: message objects
    with a full path per update, then SerializeToString (what a straightforward server does per
    subscriber and sample)."""
    names = ("in-octets", *[c for c in INTERFACE_COUNTERS if c != "in-octets"], "last-clear")
    paths = [[gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name="interfaces"),
                                  gnmi_pb2.PathElem(name="interface", key={"name": f"Ethernet{i + 1}"}),
                                  gnmi_pb2.PathElem(name="state"), gnmi_pb2.PathElem(name="counters"),
                                  gnmi_pb2.PathElem(name=c)]) for c in names] for i in range(interfaces)]
    n = 50
    c0 = time.process_time()
    for k in range(n):
        resp = gnmi_pb2.SubscribeResponse()
        note = resp.update
        note.timestamp = time.time_ns()
        note.prefix.origin = "openconfig"
        for per_if in paths:
            for j, p in enumerate(per_if):
                u = note.update.add()
                u.path.CopyFrom(p)
                u.val.uint_val = 10**12 + k * 1000 + j
        resp.SerializeToString()
    return (time.process_time() - c0) / n * 1e6


def raw_client_main(port: int, streams: int, out: mp.Queue) -> None:
    async def main() -> int:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            method = ch.unary_stream("/raw.S/Stream")

            async def one() -> int:
                return sum([1 async for _ in method(b"")])

            return sum(await asyncio.gather(*(one() for _ in range(streams))))

    out.put(asyncio.run(main()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--switches", type=int, default=64)
    ap.add_argument("--interfaces", type=int, default=64)
    ap.add_argument("--next-hops", type=int, default=16)
    ap.add_argument("--tick-ms", type=float, default=250.0, help="synthetic engine tick (ms)")
    ap.add_argument("--seconds", type=float, default=12.0, help="measured window per layout (s)")
    ap.add_argument("--warmup", type=float, default=3.0, help="seconds before the window (s)")
    ap.add_argument("--layout", choices=("port-per-switch", "shared-port", "both"), default="both")
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    layouts = ("port-per-switch", "shared-port") if args.layout == "both" else (args.layout,)
    results = [run_layout(layout, args, ctx) for layout in layouts]
    # The library limit for messages of the size we sent (same run, same machine).
    msg_bytes = int(results[0]["bytes_per_msg"])  # type: ignore[call-overload]
    raw = raw_grpc_limit(msg_bytes, streams=args.switches, per_stream=100, ctx=ctx)
    naive = naive_build_us_per_msg(args.interfaces)
    naive_per_update = naive / (args.interfaces * (len(INTERFACE_COUNTERS) + 1))
    for r in results:
        updates_per_msg = int(r["updates_per_s"]) / int(r["msgs_per_s"])  # type: ignore[call-overload]
        library = naive_per_update + raw / updates_per_msg
        r["raw_grpc_write_us_per_msg"] = round(raw, 1)
        r["naive_build_us_per_update"] = round(naive_per_update, 2)
        # Library cost of one update: building it with protobuf message objects plus its share of a
        # bare grpc write. Our CPU per update (sampling, encoding, grpc) over that; < 1 = cheaper.
        r["ratio_to_library"] = round(float(r["server_cpu_us_per_update"]) / library, 2)  # type: ignore[arg-type]
    print(json.dumps({"scenario": {k: v for k, v in vars(args).items()}, "results": results}, indent=1))


if __name__ == "__main__":
    main()
