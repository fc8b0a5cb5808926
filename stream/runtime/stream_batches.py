"""Batches of events from a Faust agent's stream: what the consumer has already fetched, handed over in one go.

Faust's stream iterator hands an agent one event at a time, with an event-loop turn (``await sleep(0)``) and a
coroutine call to the channel per event (``faust/_cython/streams.pyx``, ``StreamIterator.next``; the pure-Python twin
is ``Stream._py_aiter`` in ``faust/streams.py``). :func:`batches` waits for one event that way, then takes every
event already queued in the stream's channel without awaiting (up to ``max_events``) and yields them together, so
that the worker checks its windows once per batch instead of once per record.

The events taken from the queue get the bookkeeping the iterator gives each event, in the same order:

* before: an event of an old consumer generation, or read while flow control is suspended (a rebalance), is dropped
  unacked and untracked, as the compiled iterator drops it (``StreamIterator._prepare_event`` returns no event for
  it, so ``after`` acks nothing): the consumer reads it again from the committed offset; a message of an acking
  topic is tracked as unacked (``Consumer.track_message``: the set a clean shutdown waits on, and the
  ``on_message_in`` sensor); the ``on_stream_event_in`` sensor is called;
* after the batch was handled: the stream's reference on the message is acked (``Event.ack`` ->
  ``Message.ack`` -> ``Consumer.ack`` on the last reference, as ``StreamIterator.after`` inlines it) and the
  ``on_stream_event_out`` / ``on_message_out`` sensors are called.

The first event is left to the iterator, which does both itself. Taking from the queue with ``get_nowait`` keeps
Faust's flow control: the queue resumes the partitions it paused once it drains (``FlowControlQueue``, in
``mode/utils/queues.py``). An agent that keeps a record beyond the batch takes a reference of its own
(``Message.incref``) before the batch ends, exactly as with Faust's iterator.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

MAX_EVENTS = 2000
"""Events handed over at most in one batch (the stream's buffer holds up to ``stream_buffer_maxsize``, 4096 by
default)."""


async def batches(stream: Any, max_events: int = MAX_EVENTS) -> AsyncIterator[list[Any]]:
    """Lists of events: the next event as Faust's stream delivers it, with every event already queued behind it."""
    queue = stream.channel.queue
    async for first in stream.events():
        taken = take_queued(stream, queue, max_events - 1)
        try:
            yield [first, *(event for event, _ in taken)]
        finally:
            for event, sensor_state in taken:
                done(stream, event, sensor_state)


def take_queued(stream: Any, queue: Any, limit: int) -> list[tuple[Any, Any]]:
    """Up to ``limit`` events already in the stream's queue, each with its ``on_stream_event_in`` sensor state;
    events Faust's iterator would skip are left out."""
    app = stream.app
    acking = app.topics.acking_topics
    out: list[tuple[Any, Any]] = []
    while len(out) < limit and not queue.empty():
        event = queue.get_nowait()  # raises what was thrown into the channel, as the iterator does
        message = event.message
        if not app.flow_control.is_active() or message.generation_id != app.consumer_generation_id:
            continue  # read before a rebalance: dropped, as Faust's iterator drops it
        if message.topic in acking and not message.tracked:
            message.tracked = True
            app.consumer.track_message(message)
        out.append((event, stream._on_stream_event_in(message.tp, message.offset, stream, event)))
    stream.events_total += len(out)
    return out


def done(stream: Any, event: Any, sensor_state: Any) -> None:
    """The stream is done with ``event``: ack its reference (when the stream acks) and call the sensors."""
    if not stream.enable_acks:
        return
    message = event.message
    last = event.ack()
    stream._on_stream_event_out(message.tp, message.offset, stream, event, sensor_state)
    if last:
        stream._on_message_out(message.tp, message.offset, message)
