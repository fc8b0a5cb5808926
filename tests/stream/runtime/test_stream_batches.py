"""Batches from a stream: the first event as Faust delivers it, with what is queued behind it, each queued event given
the bookkeeping Faust's stream iterator gives it (tracked, sensors, the stream's reference acked after the batch);
events of an old consumer generation are left out, unacked."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

from flowtracer.stream.runtime.stream_batches import batches


class Message:
    def __init__(self, offset: int, generation: int = 1) -> None:
        self.topic, self.partition, self.offset = "t", 0, offset
        self.tp = ("t", 0)
        self.generation_id = generation
        self.tracked = False
        self.refcount = 1


class Event:
    def __init__(self, message: Message, log: list[str]) -> None:
        self.message, self.log = message, log

    def ack(self) -> bool:
        self.message.refcount -= 1
        self.log.append(f"ack {self.message.offset}")
        return self.message.refcount == 0


class Stream:
    """What ``batches`` uses of a Faust stream: its channel's queue, its app, its sensors, and ``events()``."""

    def __init__(self, first: list[Event], queued: list[Event], log: list[str]) -> None:
        self.channel = SimpleNamespace(queue=asyncio.Queue())
        for e in queued:
            self.channel.queue.put_nowait(e)
        self._first = first
        self.log = log
        self.enable_acks = True
        self.events_total = 0
        consumer = SimpleNamespace(track_message=lambda m: log.append(f"track {m.offset}"))
        self.app = SimpleNamespace(topics=SimpleNamespace(acking_topics={"t"}), consumer=consumer,
                                   flow_control=SimpleNamespace(is_active=lambda: True), consumer_generation_id=1)

    async def events(self) -> AsyncIterator[Event]:
        for e in self._first:
            yield e
            self.log.append(f"faust acks {e.message.offset}")  # Faust's iterator acks its own event

    def _on_stream_event_in(self, tp: Any, offset: int, stream: Any, event: Any) -> str:
        self.log.append(f"in {offset}")
        return f"state {offset}"

    def _on_stream_event_out(self, tp: Any, offset: int, stream: Any, event: Any, state: Any) -> None:
        self.log.append(f"out {offset} {state}")

    def _on_message_out(self, tp: Any, offset: int, message: Any) -> None:
        self.log.append(f"message out {offset}")


def test_a_batch_is_the_first_event_and_what_is_queued_behind_it() -> None:
    async def main() -> None:
        log: list[str] = []
        queued = [Event(Message(1), log), Event(Message(2, generation=0), log), Event(Message(3), log)]
        stream = Stream([Event(Message(0), log)], queued, log)
        got = []
        async for batch in batches(stream):
            got.append([e.message.offset for e in batch])
            for e in batch:
                e.message.refcount += 1  # the worker holds every record it keeps
            log.append("handled")
        assert got == [[0, 1, 3]]  # offset 2 is of an old generation: dropped, unacked
        assert log == ["track 1", "in 1", "track 3", "in 3", "handled",
                       "ack 1", "out 1 state 1", "ack 3", "out 3 state 3", "faust acks 0"]
        assert [e.message.refcount for e in queued] == [1, 1, 1] and stream.events_total == 2

    asyncio.run(main())


def test_a_batch_is_capped() -> None:
    async def main() -> None:
        log: list[str] = []
        stream = Stream([Event(Message(0), log)], [Event(Message(i), log) for i in range(1, 6)], log)
        async for batch in batches(stream, max_events=3):
            assert [e.message.offset for e in batch] == [0, 1, 2]
        assert stream.channel.queue.qsize() == 3

    asyncio.run(main())
