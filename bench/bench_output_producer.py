"""Benchmark: the processor's output producer against Faust's ``Topic.send`` and aiokafka, per record, same broker.

Scenario: the outputs of a few worker windows: ``--records`` records (LinkLoad messages, about 150 bytes, keyed by
``--keys`` directed links) to ``--topics`` output topics of ``--partitions`` partitions, in windows of ``--window``
records. Each way of producing sends every window's records, hands them over (awaits what it must before the next
window), and at the end waits for every acknowledgement (acks=all, aiokafka's and Faust's 16 KiB batches, linger 0),
against one Tansu broker started by the script, on fresh topics per run:

* ``faust``: ``await topic.send(key=..., value=...)`` per record on a started Faust app's producer, as the worker
  sends its outputs today (``stream/runtime/app.py``, ``publish``); the partition is aiokafka's partitioner's;
* ``aiokafka_send``: ``await producer.send(topic, value, key=..., partition=p)`` per record, ``p`` from a dict;
* ``aiokafka_batch``: aiokafka's batch builder by hand (``create_batch``, ``append``, ``send_batch`` per full batch
  and per partition at the end of a window), ``p`` from a dict: the raw limit;
* ``output_producer``: :class:`~flowtracer.stream.runtime.output_producer.OutputProducer`, ``send`` per record and
  ``flush`` per window, its key -> partition cache filled (as in a worker past its first windows);
  ``output_producer_cold``: the same with an empty cache (murmur2 of each of the ``--keys`` keys in the clock).

Reported per way (best of ``--repeat`` runs, interleaved so that drift hits all alike): ``cpu_us`` (this process's
CPU per record from the first send to the last acknowledgement: building, handing over and the producer's I/O),
``wall_us`` per record, ``records_per_request`` (records over the produce requests the client sent, counted on the
aiokafka client), ``broker_cpu_us`` per record, and ``cpu_us`` over the raw figures of the same run
(``over_batch``, ``over_send``).

    .venv/bin/python bench/bench_output_producer.py             # ~30 s on 2 cores
    .venv/bin/python bench/bench_output_producer.py --records 20000 --repeat 2
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import faust
from aiokafka import AIOKafkaProducer
from aiokafka.protocol.produce import ProduceRequest
from bench_catchup import cpu_s

from flowtracer.embedded.tansu import TansuBroker
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.runtime.output_producer import KeyPartitions, OutputProducer

SETTINGS = {"acks": "all", "enable_idempotence": False, "max_batch_size": 16384, "linger_ms": 0}
"""What Faust gives its producer by default (acks -1, 16 KiB batches, no linger), for every way alike."""

Record = tuple[str, bytes, bytes]  # topic, key, value


def records(n: int, keys: int, topic_names: list[str]) -> list[Record]:
    """``n`` LinkLoads keyed by ``keys`` links, each link on one topic (as each entity is on one output topic)."""
    out = []
    for i in range(n):
        link = i % keys
        name = f"leaf-{link // 32:02d}:Ethernet1/{link % 32 + 1}>spine-{link % 8:02d}:Ethernet1/{link // 8 + 1}"
        m = analytics_pb2.LinkLoad(schema_version=1, window_start_ns=i // keys, window_end_ns=i // keys + 1,
                                   link=name, src_node=f"leaf-{link // 32:02d}", dst_node=f"spine-{link % 8:02d}",
                                   measured_bytes=10_000_000 * link + i, measured_valid=True,
                                   attributed_bytes=9_000_000 * link, unexplained_bytes=1_000_000 * link + i,
                                   utilization=(i % 1000) / 1000, flow_count=i % 17, resolver="hash")
        out.append((topic_names[link % len(topic_names)], name.encode(), m.SerializeToString()))
    return out


def count_requests(client: Any) -> Counter[str]:
    """Count the produce requests an aiokafka client sends (wraps the client's ``send``)."""
    counts: Counter[str] = Counter()
    send: Callable[..., Awaitable[Any]] = client.send

    async def counting(node_id: int, request: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(request, ProduceRequest):
            counts["requests"] += 1
        return await send(node_id, request, *args, **kwargs)

    client.send = counting
    return counts


class Way:
    """One way of producing: ``start`` it, hand it each window's records (``send`` returns their futures), ``stop``.
    ``client`` is the aiokafka client whose produce requests are counted."""

    client: Any

    def __init__(self, bootstrap: str, parts: dict[bytes, int], cache: KeyPartitions) -> None:
        self.bootstrap, self.parts, self.cache = bootstrap, parts, cache

    async def start(self) -> None:
        self.producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, **SETTINGS)
        await self.producer.start()
        self.client = self.producer.client

    async def send(self, recs: list[Record]) -> list[Any]:
        raise NotImplementedError

    async def stop(self) -> None:
        await self.producer.stop()


class FaustSend(Way):
    """``Topic.send`` on a started Faust app's producer, as the worker sends its outputs today."""

    async def start(self) -> None:
        self.app = faust.App(f"bench-out-{os.getpid()}-{time.monotonic_ns()}", broker=f"kafka://{self.bootstrap}",
                             topic_allow_declare=False, topic_disable_leader=True, producer_acks=-1)
        self.topics: dict[str, Any] = {}
        await self.app.maybe_start_producer()
        self.client = self.app.producer._producer.client  # bench only: the request count of Faust's producer

    async def send(self, recs: list[Record]) -> list[Any]:
        out = []
        for t, k, v in recs:
            topic = self.topics.get(t)
            if topic is None:
                topic = self.topics[t] = self.app.topic(t, key_serializer="raw", value_serializer="raw")
            out.append(await topic.send(key=k, value=v))
        return out

    async def stop(self) -> None:
        await self.app.producer.stop()


class AiokafkaSend(Way):
    """aiokafka's ``send`` per record with the partition given."""

    async def send(self, recs: list[Record]) -> list[Any]:
        return [await self.producer.send(t, v, key=k, partition=self.parts[k]) for t, k, v in recs]


class AiokafkaBatch(Way):
    """aiokafka's batch builder by hand: the raw limit."""

    async def send(self, recs: list[Record]) -> list[Any]:
        out, builders = [], {}
        for t, k, v in recs:
            tp = (t, self.parts[k])
            b = builders.get(tp)
            if b is None:
                b = builders[tp] = self.producer.create_batch()
            if b.append(timestamp=None, key=k, value=v) is None:
                out.append(await self.producer.send_batch(b, t, partition=tp[1]))
                b = builders[tp] = self.producer.create_batch()
                b.append(timestamp=None, key=k, value=v)
        for (t, p), b in builders.items():
            out.append(await self.producer.send_batch(b, t, partition=p))
        return out


class Outputs(Way):
    """The output producer, its key cache filled (as in a worker past its first windows)."""

    async def start(self) -> None:
        self.op = OutputProducer({"bootstrap_servers": self.bootstrap, **SETTINGS}, partitions=self.cache)
        await self.op.start()
        self.client = self.op.producer.client

    async def send(self, recs: list[Record]) -> list[Any]:
        out = [self.op.send(t, k, v) for t, k, v in recs]
        await self.op.flush()
        return out

    async def stop(self) -> None:
        await self.op.stop()


class OutputsCold(Outputs):
    """The output producer with an empty key cache: every key's murmur2 in the clock (a worker's first window)."""

    def __init__(self, bootstrap: str, parts: dict[bytes, int], cache: KeyPartitions) -> None:
        super().__init__(bootstrap, parts, KeyPartitions())


async def measure(way: Way, recs: list[Record], window: int) -> tuple[float, float, int]:
    """(CPU s, wall s, produce requests) from the first send to the last acknowledgement."""
    await way.start()
    counts = count_requests(way.client)
    try:
        started = time.process_time(), time.perf_counter()
        futures: list[Any] = []
        for i in range(0, len(recs), window):
            futures += await way.send(recs[i:i + window])
        await asyncio.gather(*set(futures))  # the output producer's records of a batch share its future
        return time.process_time() - started[0], time.perf_counter() - started[1], counts["requests"]
    finally:
        await way.stop()


WAYS: dict[str, type[Way]] = {"faust": FaustSend, "aiokafka_send": AiokafkaSend, "aiokafka_batch": AiokafkaBatch,
                              "output_producer": Outputs, "output_producer_cold": OutputsCold}


def main() -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--keys", type=int, default=2_000, help="entities (links) the records are keyed by")
    ap.add_argument("--topics", type=int, default=4)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--window", type=int, default=5_000, help="records per window (one flush)")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    load_before = os.getloadavg()
    best: dict[str, dict[str, float]] = {}
    with TansuBroker() as broker:
        cache = KeyPartitions()
        for run in range(a.repeat):
            for way in WAYS:
                names = [f"bench.{way}.{run}.out{t}" for t in range(a.topics)]
                broker.create_topics(dict.fromkeys(names, a.partitions))
                recs = records(a.records, a.keys, names)
                # Every key's partition before the clock starts: the raw ways look it up in a dict, the output
                # producer in its cache, as in a worker past its first windows.
                parts = {k: cache(k, a.partitions) for _, k, _ in recs}
                broker_cpu = cpu_s(broker.pid or 0)
                cpu, wall, requests = asyncio.run(measure(WAYS[way](broker.bootstrap, parts, cache), recs, a.window))
                broker_cpu = cpu_s(broker.pid or 0) - broker_cpu
                got = {"cpu_us": 1e6 * cpu / a.records, "wall_us": 1e6 * wall / a.records,
                       "records_per_request": a.records / max(requests, 1),
                       "broker_cpu_us": 1e6 * broker_cpu / a.records}
                if way not in best or got["cpu_us"] < best[way]["cpu_us"]:
                    best[way] = got
    result: dict[str, Any] = {"records": a.records, "keys": a.keys, "topics": a.topics, "partitions": a.partitions,
                              "window": a.window, "repeat": a.repeat,
                              "load_before": [round(x, 2) for x in load_before],
                              "load_after": [round(x, 2) for x in os.getloadavg()]}
    for way, got in best.items():
        result[way] = {k: round(v, 2) for k, v in got.items()}
        result[way]["over_batch"] = round(got["cpu_us"] / best["aiokafka_batch"]["cpu_us"], 2)
        result[way]["over_send"] = round(got["cpu_us"] / best["aiokafka_send"]["cpu_us"], 3)
    for way in WAYS:
        print(f"{way:16s} {result[way]}")
    print({k: v for k, v in result.items() if k not in WAYS})
    return result


if __name__ == "__main__":
    main()
