"""Faust's consumer hands fetched records to the streams without a task per record.

Faust's ``Consumer._drain_messages`` (faust/transport/consumer.py, faust-streaming 0.15) delivers each fetched
record through ``await self.wait_first(callback(message), self.suspend_flow.wait())``: mode's ``wait_first``
(mode/services.py) wraps the delivery, the flow-suspension event and the service's stopped and crashed events in
four tasks and an ``asyncio.wait`` per record, and yields to the event loop each time, so an agent woke for every
record and the worker's batches (stream_batches.py) held one record each. :func:`drain_messages` is the same loop
with one change, in :func:`deliver`: the delivery (the conductor's ``on_message``: flow control, producer buffer,
decode, ``put`` into the stream's queue) is run directly for its first step; almost always it completes there
(nothing to wait for), and the record is delivered without a task or a turn of the event loop. When it would wait
(a full stream buffer, flow control suspended by a rebalance) the rest of it runs under ``wait_first`` exactly as
Faust runs it, so a rebalance still abandons a delivery that is stuck. While the flow is suspended, Faust's own path
is taken from the start. The loop still yields to the event loop every ``YIELD_EVERY`` records, as Faust's does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from typing import Any

from faust.transport.consumer import CONSUMER_FETCHING, Consumer

YIELD_EVERY = 100
"""Records delivered between two turns of the event loop (Faust's ``yield_every``)."""


class Yield:
    """Awaiting it yields ``item`` to the task running the awaiting coroutine, as the coroutine it stands for would."""

    __slots__ = ("item",)

    def __init__(self, item: Any) -> None:
        self.item = item

    def __await__(self) -> Generator[Any, Any, Any]:
        return (yield self.item)


async def resume(coro: Coroutine[Any, Any, Any], yielded: Any) -> Any:
    """Finish a coroutine that already took its first step and yielded ``yielded`` (the future it waits for), as an
    asyncio Task would: what the task sends back is sent on, what it throws in (a cancellation, which also cancels
    the future waited for) is thrown on."""
    while True:
        try:
            sent = await Yield(yielded)
        except BaseException as exc:
            try:
                yielded = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                yielded = coro.send(sent)
            except StopIteration as stop:
                return stop.value


async def deliver(consumer: Consumer, delivery: Coroutine[Any, Any, Any]) -> None:
    """Run one record's delivery; under ``wait_first`` with the flow-suspension event only if it has to wait."""
    suspend = consumer.suspend_flow
    if suspend.is_set():
        await consumer.wait_first(delivery, suspend.wait())
        return
    try:
        yielded = delivery.send(None)
    except StopIteration:
        return
    await consumer.wait_first(resume(delivery, yielded), suspend.wait())


async def drain_messages(self: Consumer, fetcher: Any) -> None:  # pragma: no cover - runs in every worker
    """Faust's ``Consumer._drain_messages``, its fetch loop, with :func:`deliver` per record (module docstring);
    everything else (read offsets, gaps, commits every ``broker_commit_every`` acks, errors) as Faust has it."""
    callback = self.callback
    getmany = self.getmany
    consumer_should_stop = self._stopped.is_set
    fetcher_should_stop = fetcher._stopped.is_set
    get_read_offset = self._read_offset.__getitem__
    set_read_offset = self._read_offset.__setitem__
    set_flag = self.diag.set_flag
    unset_flag = self.diag.unset_flag
    commit_every = self._commit_every
    acks_enabled_for = self.app.topics.acks_enabled_for
    num_since_yield = 0
    try:
        while not (consumer_should_stop() or fetcher_should_stop()):
            set_flag(CONSUMER_FETCHING)
            ait = getmany(timeout=1.0)
            await self.sleep(0)
            if not self.should_stop:
                async for tp, message in ait:
                    num_since_yield += 1
                    if num_since_yield > YIELD_EVERY:
                        await asyncio.sleep(0)
                        num_since_yield = 0
                    offset = message.offset
                    r_offset = get_read_offset(tp)
                    if r_offset is None or offset >= r_offset:
                        gap = offset - (r_offset or 0)
                        if gap > 1 and r_offset and acks_enabled_for(message.topic):  # a gap in the offsets
                            await self._add_gap(tp, r_offset + 1, offset)
                        if commit_every is not None and self._n_acked >= commit_every:
                            self._n_acked = 0
                            await self.commit()
                        await deliver(self, callback(message))
                        set_read_offset(tp, offset)
                    else:
                        self.log.dev("DROPPED MESSAGE ROFF %r: k=%r v=%r", offset, message.key, message.value)
                unset_flag(CONSUMER_FETCHING)
    except self.consumer_stopped_errors:
        if self.transport.app.should_stop:
            self.log.info("Broker stopped consumer, shutting down...")
            return
        raise
    except asyncio.CancelledError:
        if self.transport.app.should_stop:
            self.log.info("Consumer shutting down for user cancel.")
            return
        raise
    except Exception as exc:
        self.log.exception("Drain messages raised: %r", exc)
        raise
    finally:
        unset_flag(CONSUMER_FETCHING)


def install() -> None:
    """Patch Faust's consumer (idempotent; the processor calls it before building its app)."""
    Consumer._drain_messages = drain_messages  # type: ignore[method-assign]
