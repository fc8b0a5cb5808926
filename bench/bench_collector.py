"""Benchmark: gNMI collector throughput (counter updates/s into Kafka) and memory with 200 targets.

Scenario: a separate process serves T simulated switches on one loopback port. Every Subscribe
gets, per sample, three Notifications laid out as the simulator sends them (prefix = origin
only, full paths): I interfaces x 10 counters + last-clear, and N next hops in both AFT counter
trees; next-hop attributes and group membership come once before sync_response. The server
writes pre-encoded bytes with a fresh timestamp per sample as fast as the client reads
(``--paced`` = one sample per second, as a switch would), so the client side is what is measured.

Measured in the same run, same process (this one), same targets:

* ``raw``: a bare grpc.aio client per target that only receives and decodes SubscribeResponses
  (grpc's protobuf deserializer) and counts the updates: the library limit;
* ``pygnmi_parse``: raw + pygnmi's ``telemetryParser`` on every response (what a pygnmi-based
  collector pays just to read values);
* ``receive_only``: the same client taking the responses as bytes, not decoded: the transport's
  floor (what the collector's fast path starts from);
* ``collector``: ``CollectorService`` decoding, computing deltas, assembling CounterBatches and
  producing them to Kafka (a Tansu broker started here, acks=all), with the compiled hot loops
  (collectors/gnmi/counters/native.pyx) when they are built; ``collector_numpy``: the same on numpy.

Each counts sample instants (one per target per sample: 3 messages read, or one CounterBatch
emitted) and reports them as counter updates (the counter leaves a switch sends per sample,
both next-hop trees included) per second (wall) and per CPU-second of this process (all threads),
and ``ratio`` = collector / raw for both. Above 1 is possible: raw parses every response with
protobuf, while the collector reads a known layout's values straight from the bytes
(fast_decode). The server process shares the 2 cores; when both reach the rate it can send, the
wall ratio is capped near 1 and the per-CPU-second ratio is the one that tells. Then ``memory``:
200 targets (``--memory-interfaces`` ports each) paced at 1 s as switches sample: does the
collector keep up with the offered updates/s, at what CPU share, and the RSS of this process
before and after they all stream.

    .venv/bin/python bench/bench_collector.py              # ~60 s on 2 cores
    .venv/bin/python bench/bench_collector.py --targets 20 --seconds 8 --interfaces 64 --next-hops 32

``--queues Q --pfc-priorities P`` turn the congestion counters on (``gnmi.congestion``): a fourth notification
per sample with Q egress queues x 7 openconfig-qos leaves and P PFC priorities x 2 leaves per interface, counted
as counter updates like the others (raw decodes them too), so the ratios say what they cost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import multiprocessing as mp
import os
import time
from typing import Any

import grpc
from pygnmi.client import telemetryParser
from pygnmi.spec.v080 import gnmi_pb2

from flowtracer.collectors.gnmi.config import Backoff, CollectorConfig, Gnmi, Kafka, Subscription, Target
from flowtracer.collectors.gnmi.counters import native_loader
from flowtracer.collectors.gnmi.counters.paths import parse_path
from flowtracer.collectors.gnmi.service import CollectorService
from flowtracer.embedded.tansu import TansuBroker
from flowtracer.schemas.wire import varint

SUBSCRIBE = "/gnmi.gNMI/Subscribe"
CAPS = "/gnmi.gNMI/Capabilities"
NI = "/network-instances/network-instance[name=default]/afts"
COUNTERS = ("in-octets", "out-octets", "in-pkts", "out-pkts", "in-unicast-pkts", "out-unicast-pkts",
            "in-discards", "out-discards", "in-errors", "out-errors")
T0 = 1_767_225_600_000_000_000



def _template(updates: list[tuple[str, int | str]]) -> tuple[bytes, bytes]:
    """(head, rest): a SubscribeResponse is head + varint(timestamp) + rest (9-byte timestamps)."""
    n = gnmi_pb2.Notification()
    n.prefix.origin = "openconfig"
    for path, v in updates:
        u = n.update.add()
        u.path.CopyFrom(parse_path(path))
        if isinstance(v, int):
            u.val.uint_val = v
        else:
            u.val.string_val = v
    rest = n.SerializeToString()
    body_len = 1 + 9 + len(rest)
    return b"\x0a" + varint(body_len) + b"\x08", rest


QUEUE_LEAVES = ("transmit-pkts", "transmit-octets", "dropped-pkts", "dropped-octets", "ecn-marked-pkts",
                "ecn-marked-octets", "max-queue-len")


def _priorities(count: int) -> list[int]:
    """``count`` PFC priorities (at most the 8 there are), RoCE's 3 first: a priority above 7 is an error the
    collector counts and it sends the whole notification the general way, so the fast path would go unmeasured."""
    if not 0 <= count <= 8:
        raise SystemExit(f"--pfc-priorities {count}: PFC has 8 priorities (0-7)")
    return [(3 + k) % 8 for k in range(count)]


def _payload(interfaces: int, next_hops: int, queues: int = 0,
             priorities: int = 0) -> tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]], int]:
    """(state templates, per-sample templates, counter updates per sample)."""
    ifc = [(f"/interfaces/interface[name=Ethernet{i}]/state/counters/{c}", 10**12 + i)
           for i in range(1, interfaces + 1) for c in COUNTERS]
    ifc += [(f"/interfaces/interface[name=Ethernet{i}]/state/counters/last-clear", T0 - 10**12)
            for i in range(1, interfaces + 1)]
    legacy = [(f"{NI}/next-hops/next-hop[index={k}]/state/counters/{c}", 10**9 + k)
              for k in range(next_hops) for c in ("octets-forwarded", "packets-forwarded")]
    newer = [(f"{NI}/counters/next-hops/next-hop[index={k}]/state/{c}", 10**9 + k)
             for k in range(next_hops) for c in ("octets-forwarded", "packets-forwarded")]
    state = [(f"{NI}/next-hops/next-hop[index={k}]/state/ip-address", f"10.0.{k // 250}.{k % 250 + 1}")
             for k in range(next_hops)]
    state += [(f"{NI}/next-hops/next-hop[index={k}]/interface-ref/state/interface", f"Ethernet{k % interfaces + 1}")
              for k in range(next_hops)]
    state += [(f"{NI}/next-hop-groups/next-hop-group[id={k // 8}]/next-hops/next-hop[index={k}]/state/weight", 1)
              for k in range(next_hops)]
    per_sample = interfaces * len(COUNTERS) + 4 * next_hops
    samples = [_template(ifc), _template(legacy), _template(newer)]
    if queues or priorities:
        qos = "/qos/interfaces/interface[interface-id=Ethernet{}]"
        cong: list[tuple[str, int | str]] = [
            (f"{qos.format(i)}/output/queues/queue[name={q}]/state/{c}", 10**9 + q)
            for i in range(1, interfaces + 1) for q in range(queues) for c in QUEUE_LEAVES]
        cong += [(f"{qos.format(i)}/pfc/statistics/pfc-priority[index={p}]/pfc-pause-frames-{d}", 10**6 + p)
                 for i in range(1, interfaces + 1) for p in _priorities(priorities) for d in ("received", "generated")]
        samples.append(_template(cong))
        per_sample += len(cong)
    return [_template(state)], samples, per_sample


# -- the server process ------------------------------------------------------------------------


def _serve(port_q: Any, interfaces: int, next_hops: int, paced: bool, queues: int, priorities: int) -> None:
    state, sample, _ = _payload(interfaces, next_hops, queues, priorities)
    sync = gnmi_pb2.SubscribeResponse(sync_response=True).SerializeToString()
    caps = gnmi_pb2.CapabilityResponse(supported_encodings=[gnmi_pb2.PROTO]).SerializeToString()

    async def capabilities(raw: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return caps

    async def subscribe(requests: Any, context: grpc.aio.ServicerContext) -> None:
        await anext(requests)
        ts = time.time_ns()
        for head, rest in state:
            await context.write(head + varint(ts) + rest)
        seq = 0
        while True:
            ts = T0 + seq * 1_000_000 if not paced else time.time_ns()
            for head, rest in sample:
                await context.write(head + varint(ts) + rest)
            if seq == 0:
                await context.write(sync)
            seq += 1
            if paced:
                await asyncio.sleep(1.0 - (time.time_ns() - ts) / 1e9)

    async def main() -> None:
        server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("gnmi.gNMI", {
            "Capabilities": grpc.unary_unary_rpc_method_handler(capabilities),
            "Subscribe": grpc.stream_stream_rpc_method_handler(subscribe),
        }),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        port_q.put(port)
        await server.wait_for_termination()

    asyncio.run(main())


# -- clients -----------------------------------------------------------------------------------


def _request() -> bytes:
    sl = gnmi_pb2.SubscriptionList(mode=gnmi_pb2.SubscriptionList.STREAM, encoding=gnmi_pb2.PROTO)
    sl.subscription.add(path=parse_path("/interfaces"), mode=gnmi_pb2.SAMPLE, sample_interval=10**9)
    return gnmi_pb2.SubscribeRequest(subscribe=sl).SerializeToString()


def _rates(samples: int, cpu_s: float, wall_s: float, per_sample: int) -> dict[str, float]:
    """Sample instants received/emitted, as counter updates (leaves the switch sent) per s."""
    return {"samples_per_s": samples / wall_s, "updates_per_s": samples * per_sample / wall_s,
            "updates_per_cpu_s": samples * per_sample / cpu_s, "cpu_share": cpu_s / wall_s}


async def _raw(port: int, targets: int, seconds: float, parse: bool, per_sample: int,
               decode: bool = True, messages: int = 3) -> dict[str, float]:
    """Receive + decode (grpc's deserializer; ``decode=False``: bytes only) on ``targets`` streams;
    count sample instants."""
    counts = [0] * targets
    stop = asyncio.Event()
    req = _request()

    async def one(i: int) -> None:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            call = ch.stream_stream(SUBSCRIBE, request_serializer=None,
                                    response_deserializer=gnmi_pb2.SubscribeResponse.FromString if decode else None)()
            await call.write(req)
            while not stop.is_set():
                resp = await call.read()
                if parse:
                    telemetryParser(resp)
                counts[i] += 1  # messages: ``messages`` per sample instant
            call.cancel()

    tasks = [asyncio.create_task(one(i)) for i in range(targets)]
    await asyncio.sleep(1.0)  # warm up: connections, sync
    n0, c0, w0 = sum(counts), time.process_time(), time.monotonic()
    await asyncio.sleep(seconds)
    n1, c1, w1 = sum(counts), time.process_time(), time.monotonic()
    stop.set()
    await asyncio.wait(tasks, timeout=5)
    for t in tasks:
        t.cancel()
    return _rates((n1 - n0) // messages, c1 - c0, w1 - w0, per_sample)


def _gnmi(interval_s: float, congestion: bool = False) -> Gnmi:
    return Gnmi(subscriptions=[Subscription(name="all", path="/interfaces", sample_interval=interval_s)],
                start_spread=1.0, liveness_timeout=30.0, backoff=Backoff(base=0.5, cap=2.0), congestion=congestion)


async def _collector(port: int, targets: int, seconds: float, kafka: TansuBroker, topic: str,
                     interval_s: float, per_sample: int, congestion: bool = False
                     ) -> tuple[dict[str, float], CollectorService]:
    cfg = CollectorConfig(collector_id="bench", gnmi=_gnmi(interval_s, congestion),
                          kafka=Kafka(bootstrap=kafka.bootstrap, topic=topic, idempotence=False))
    svc = CollectorService(cfg, [Target(name=f"sw{i:03d}", address="127.0.0.1", port=port) for i in range(targets)])
    task = asyncio.create_task(svc.run())

    await asyncio.sleep(2.0)
    n0, c0, w0, k0 = _batches(svc), time.process_time(), time.monotonic(), svc.sink.sent_ok
    await asyncio.sleep(seconds)
    n1, c1, w1, k1 = _batches(svc), time.process_time(), time.monotonic(), svc.sink.sent_ok
    svc.stop()
    await task
    return {**_rates(n1 - n0, c1 - c0, w1 - w0, per_sample), "batches_to_kafka_per_s": (k1 - k0) / (w1 - w0),
            "kafka_dropped": svc.sink.dropped, "late_samples": sum(s.assembler.stats.late for s in svc.sessions)}, svc


def _batches(svc: CollectorService) -> int:
    """CounterBatches emitted: one per target per sample instant (late parts would add more)."""
    return sum(s.assembler.stats.batches for s in svc.sessions)


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def _memory(port: int, targets: int, kafka: TansuBroker, topic: str, seconds: float,
                  per_sample: int, congestion: bool = False) -> dict[str, float]:
    """``targets`` switches sampling once per second (a real fabric): keeps up? CPU? RSS?"""
    before = _rss_mib()
    cfg = CollectorConfig(collector_id="bench-mem",
                          gnmi=_gnmi(1.0, congestion).model_copy(update={"start_spread": 3.0}),
                          kafka=Kafka(bootstrap=kafka.bootstrap, topic=topic, idempotence=False))
    svc = CollectorService(cfg, [Target(name=f"m{i:03d}", address="127.0.0.1", port=port) for i in range(targets)])
    task = asyncio.create_task(svc.run())

    await asyncio.sleep(8.0)  # all connected (3 s spread) and a few samples in
    n0, c0, w0, k0 = _batches(svc), time.process_time(), time.monotonic(), svc.sink.sent_ok
    await asyncio.sleep(seconds)
    n1, c1, w1, k1 = _batches(svc), time.process_time(), time.monotonic(), svc.sink.sent_ok
    up = sum(s.stats.batches > 3 for s in svc.sessions)
    after = _rss_mib()
    svc.stop()
    await task
    r = _rates(n1 - n0, c1 - c0, w1 - w0, per_sample)
    return {"targets": targets, "streaming": up, "offered_updates_per_s": targets * per_sample,
            "updates_per_s": round(r["updates_per_s"]), "cpu_share": round(r["cpu_share"], 3),
            "batches_to_kafka_per_s": round((k1 - k0) / (w1 - w0), 1), "kafka_dropped": svc.sink.dropped,
            "rss_before_mib": round(before, 1), "rss_after_mib": round(after, 1),
            "mib_per_target": round((after - before) / targets, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--targets", type=int, default=20, help="targets for the throughput runs")
    ap.add_argument("--seconds", type=float, default=8.0, help="measured seconds per run")
    ap.add_argument("--interfaces", type=int, default=64)
    ap.add_argument("--next-hops", type=int, default=32)
    ap.add_argument("--memory-targets", type=int, default=200, help="targets of the memory run (0: skip it)")
    ap.add_argument("--memory-interfaces", type=int, default=32,
                    help="interfaces per target in the 200-target run (64 offers more than one process takes)")
    ap.add_argument("--queues", type=int, default=0, help="egress queues per interface (congestion counters on)")
    ap.add_argument("--pfc-priorities", type=int, default=0, help="PFC priorities per interface (congestion on)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("kafka").setLevel(logging.CRITICAL)

    ctx = mp.get_context("spawn")
    results: dict[str, Any] = {"targets": args.targets, "interfaces": args.interfaces, "next_hops": args.next_hops,
                               "queues": args.queues, "pfc_priorities": args.pfc_priorities, "cpus": os.cpu_count()}
    cong = (args.queues, args.pfc_priorities)
    on = any(cong)
    _, templates, per_sample = _payload(args.interfaces, args.next_hops, *cong)
    msgs = len(templates)
    results["counter_updates_per_sample"] = per_sample
    procs = []
    try:
        ports = {}
        for paced, ifaces in ((False, args.interfaces), (True, args.memory_interfaces)):
            q = ctx.Queue()
            p = ctx.Process(target=_serve, args=(q, ifaces, args.next_hops, paced, *cong), daemon=True)
            p.start()
            procs.append(p)
            ports[paced] = q.get(timeout=30)
        with TansuBroker() as kafka:
            topic = "bench-counters"
            kafka.create_topics({topic: 8, "bench-memory": 8})
            results["raw"] = asyncio.run(_raw(ports[False], args.targets, args.seconds, False, per_sample,
                                              messages=msgs))
            results["pygnmi_parse"] = asyncio.run(_raw(ports[False], args.targets, args.seconds / 2, True, per_sample,
                                                       messages=msgs))
            results["receive_only"] = asyncio.run(_raw(ports[False], args.targets, args.seconds / 2, False, per_sample,
                                                       decode=False, messages=msgs))
            results["collector"], _ = asyncio.run(
                _collector(ports[False], args.targets, args.seconds, kafka, topic, 1.0, per_sample, on))
            results["ratio"] = {k: round(results["collector"][k] / results["raw"][k], 3)
                                for k in ("updates_per_s", "updates_per_cpu_s")}
            results["kernels"] = native_loader.describe()
            native, native_loader.native = native_loader.native, None
            try:
                results["collector_numpy"], _ = asyncio.run(
                    _collector(ports[False], args.targets, args.seconds / 2, kafka, topic, 1.0, per_sample, on))
            finally:
                native_loader.native = native
            results["ratio"]["to_receive_only_per_cpu_s"] = round(
                results["collector"]["updates_per_cpu_s"] / results["receive_only"]["updates_per_cpu_s"], 3)
            results["ratio"]["numpy_updates_per_cpu_s"] = round(
                results["collector_numpy"]["updates_per_cpu_s"] / results["raw"]["updates_per_cpu_s"], 3)
            if args.memory_targets > 0:  # 0 = throughput runs only
                results["memory"] = asyncio.run(_memory(ports[True], args.memory_targets, kafka, "bench-memory",
                                                        args.seconds,
                                                        _payload(args.memory_interfaces, args.next_hops, *cong)[2],
                                                        on))
    finally:
        for p in procs:
            p.terminate()
            p.join(5)
    for section in ("raw", "pygnmi_parse", "receive_only", "collector", "collector_numpy"):
        results[section] = {k: round(v, 3) if isinstance(v, float) else v for k, v in results[section].items()}
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
