"""The Worker without Faust: a batch of records is one step, outputs go through send/flush, and each record is acked
only once every output made from it is acknowledged (in offset order per partition); a bad record is dead-lettered
alone; revoked partitions' records are never acked here."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import Any

from flowtracer.schemas import topics
from flowtracer.schemas.topics import partition_for
from flowtracer.schemas.v1 import common_pb2, counters_pb2, flows_pb2
from flowtracer.stream.runtime.batch_worker import Worker
from flowtracer.stream.runtime.commit import CommitProtocol
from flowtracer.stream.runtime.processor import Processor
from flowtracer.stream.sinks.null import NullSink

S = 1_000_000_000
P = 2  # conftest.PARTITIONS
ATTRIBUTIONS = "app-attributions"  # the internal topic's name with an app id


class Message:
    def __init__(self, topic: str, partition: int, offset: int, key: bytes, value: bytes) -> None:
        self.topic, self.partition, self.offset, self.key, self.value = topic, partition, offset, key, value
        self.headers: list[Any] = []
        self.refcount = 1

    def incref(self) -> None:
        self.refcount += 1


class Event:
    def __init__(self, message: Message, acked: list[tuple[str, int, int]]) -> None:
        self.message = message
        self._acked = acked

    def ack(self) -> None:
        m = self.message
        m.refcount -= 1
        self._acked.append((m.topic, m.partition, m.offset))


class Outputs:
    """Sends queued until flush; each future resolves when the test says the broker acknowledged it."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes | None, bytes, int | None, asyncio.Future[Any]]] = []
        self.queued = 0
        self.flushes = 0
        self.started = 0

    def send(self, topic: str, key: bytes | None, value: bytes, partition: int | None = None) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.sent.append((topic, key, value, partition, fut))
        self.queued += 1
        return fut

    def send_keyed(self, topic: str, records: Iterable[tuple[bytes, bytes]]) -> list[asyncio.Future[Any]]:
        return [self.send(topic, key, value) for key, value in records]

    async def flush(self) -> None:
        self.flushes += 1
        self.queued = 0

    async def start(self) -> None:
        self.started += 1

    def acknowledge(self) -> None:
        for *_, fut in self.sent:
            if not fut.done():
                fut.set_result(None)


def saved(partition: int, key: str, value: dict[str, Any]) -> asyncio.Future[Any]:
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    fut.set_result(None)
    return fut


def window(proc: Processor, end: int) -> list[tuple[str, str, bytes]]:
    """(topic, key, value) of one window of every switch's counters and every host's (empty) FlowBatch."""
    out = []
    for sw in sorted(proc.fabric.switch_names):
        cb = counters_pb2.CounterBatch(schema_version=1, switch=sw, timestamp_ns=end, received_ns=end,
                                       collector_id="c1", session=1, sequence=end // S)
        for port in sorted({lk.src_port for lk in proc.fabric.out_links[sw]}):
            cb.interfaces.add(name=port, interval_ns=S, out_octets=common_pb2.Counter(value=0, delta=0, status=1),
                              in_octets=common_pb2.Counter(value=0, delta=0, status=1))
        out.append((topics.COUNTERS.name, sw, cb.SerializeToString()))
    for host in sorted({n.host for n in proc.fabric.nics.values()}):
        leaf = proc.fabric.nics[f"{host}:mlx5_0"].leaf
        fb = flows_pb2.FlowBatch(schema_version=1, host=host, leaf=leaf, window_start_ns=end - S, window_end_ns=end,
                                 received_ns=end)
        out.append((topics.FLOWS.name, leaf, fb.SerializeToString()))
    return out


class Feed:
    """Kafka as the worker sees it: offsets per partition, and the events it was given."""

    def __init__(self) -> None:
        self.next: dict[tuple[str, int], int] = {}
        self.acked: list[tuple[str, int, int]] = []

    def events(self, records: list[tuple[str, int, bytes, bytes]]) -> list[Event]:
        out = []
        for topic, partition, key, value in records:
            offset = self.next.get((topic, partition), 0)
            self.next[(topic, partition)] = offset + 1
            out.append(Event(Message(topic, partition, offset, key, value), self.acked))
        return out


def recent_window(proc: Processor) -> list[tuple[str, int, bytes, bytes]]:
    """The window that ended 2 s ago, as (topic, partition, key, value) records."""
    end = (time.time_ns() // S - 2) * S
    return [(t, partition_for(k, P), topics.key(k), v) for t, k, v in window(proc, end)]


def worker(proc: Processor, outputs: Outputs) -> Worker:
    commits = CommitProtocol(NullSink(), saved, flush=outputs.flush)
    w = Worker(proc, commits, outputs, lambda e: [], contract_topic={ATTRIBUTIONS: topics.ATTRIBUTIONS.name})
    commits.dead_letter = w.dead_letter_rejected
    return w


def test_a_batch_is_one_step_and_its_records_are_acked_once_their_outputs_are(proc: Processor) -> None:
    async def main() -> None:
        outputs, feed = Outputs(), Feed()
        w = worker(proc, outputs)
        steps = 0
        finalize = proc.finalize

        def counted(*args: Any) -> Any:
            nonlocal steps
            steps += 1
            return finalize(*args)

        proc.finalize = counted  # type: ignore[method-assign]
        batch = feed.events(recent_window(proc))
        await w.receive(batch)
        assert steps == 1 and outputs.started == 1
        # The flows stages completed the window: its attributions went out, flushed, not yet acknowledged.
        attributions = [s for s in outputs.sent if s[0] == ATTRIBUTIONS]
        assert attributions and outputs.queued == 0 and outputs.flushes >= 1
        assert feed.acked == [] and all(e.message.refcount == 2 for e in batch)  # held: Faust's ref and ours
        outputs.acknowledge()
        await w.step()  # outputs acknowledged: the stage states are saved
        await w.step()  # saved: the flows batches go; counters wait for the links stage too
        flows_acked = {(t, p, o) for t, p, o in feed.acked if t == topics.FLOWS.name}
        assert flows_acked == {(e.message.topic, e.message.partition, e.message.offset) for e in batch
                               if e.message.topic == topics.FLOWS.name}
        assert not [a for a in feed.acked if a[0] == topics.COUNTERS.name]
        # The attributions come back through Kafka: the links stages complete the window.
        back = feed.events([(ATTRIBUTIONS, p, b"", v) for _, _, v, p, _ in attributions])
        await w.receive(back)
        outputs.acknowledge()
        await w.step()
        await w.step()
        everything = batch + back
        assert sorted(feed.acked) == sorted((e.message.topic, e.message.partition, e.message.offset)
                                            for e in everything)
        for tp in {(t, p) for t, p, _ in feed.acked}:  # in offset order per partition
            offsets = [o for t, p, o in feed.acked if (t, p) == tp]
            assert offsets == sorted(offsets)
        assert any(s[0] == topics.LINK_LOADS.name for s in outputs.sent)

    asyncio.run(main())


def test_a_bad_record_is_dead_lettered_alone_and_acked_once_the_dead_letter_is(proc: Processor) -> None:
    async def main() -> None:
        outputs, feed = Outputs(), Feed()
        w = worker(proc, outputs)
        good = recent_window(proc)[:2]
        batch = feed.events([(topics.COUNTERS.name, 0, b"leaf01", b"\xff not protobuf"), *good])
        await w.receive(batch)
        dead = [s for s in outputs.sent if s[0] == topics.DEAD_LETTER.name]
        assert len(dead) == 1 and dead[0][1] == b"leaf01" and outputs.queued == 0
        assert w.ledger.held() == 3 and feed.acked == []
        dead[0][4].set_result(None)
        await w.step()
        assert feed.acked == [(topics.COUNTERS.name, 0, 0)]  # the good records stay held by their window

    asyncio.run(main())


def test_revoked_partitions_are_never_acked_here(proc: Processor) -> None:
    async def main() -> None:
        outputs, feed = Outputs(), Feed()
        w = worker(proc, outputs)
        await w.receive(feed.events([r for r in recent_window(proc) if r[0] == topics.COUNTERS.name]))
        assert w.ledger.held() and proc.partitions()
        w.on_revoked((topics.COUNTERS.name, p) for p in range(P))
        assert not proc.partitions() and w.ledger.held() == 0
        outputs.acknowledge()
        await w.step()
        assert feed.acked == []

    asyncio.run(main())


def test_the_start_hook_runs_once_when_the_first_batches_arrive_together(proc: Processor) -> None:
    """Both agents may bring the first batch at once: the producer starts once and ``on_started`` (where the worker
    process settles its heap) runs once, before any record is taken."""
    async def main() -> None:
        outputs, feed = Outputs(), Feed()
        calls: list[int] = []
        commits = CommitProtocol(NullSink(), saved, flush=outputs.flush)
        w = Worker(proc, commits, outputs, lambda e: [], contract_topic={ATTRIBUTIONS: topics.ATTRIBUTIONS.name},
                   on_started=lambda: calls.append(outputs.started))
        commits.dead_letter = w.dead_letter_rejected
        records = recent_window(proc)
        half = len(records) // 2
        await asyncio.gather(w.receive(feed.events(records[:half])), w.receive(feed.events(records[half:])))
        assert calls == [1] and outputs.started == 1  # once, after the producer started
        await w.receive(feed.events(recent_window(proc)))
        assert calls == [1]

    asyncio.run(main())
