"""When an input offset may be committed: the processor's offset-commit protocol (no Faust in it).

A finalization publishes outputs (Kafka sends, whose futures resolve when the broker acknowledges
them) and line-protocol lines (a sink ticket, durable once the store has them). Its input records
(ack-ledger holds) may be released only once, in this order:

1. every output send of the finalization is acknowledged and its sink ticket is durable;
2. the stage states it changed (which windows were published, rolling history) are saved, and
   those saves are acknowledged too;
3. every earlier finalization has been released (finalizations release strictly in publish order).

Only then are its holds released in the :class:`~flowtracer.stream.runtime.ack_ledger.AckLedger`,
which acks records in offset order per partition, and Faust commits past them. A new owner of a
partition therefore never skips a window whose outputs were lost, and never replays one whose state
it was given. A failed send, a failed state save or a failed sink raises: nothing more is released,
so nothing more is committed, and the records are replayed after a restart (the outputs are
idempotent).

A sink under backpressure (:class:`~flowtracer.stream.sinks.base.SinkBackpressure`) is waited out:
the same lines are offered again every ``backpressure_wait_s`` seconds, never dropped, while Kafka
lag grows.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from flowtracer.stream.runtime.ack_ledger import AckLedger, Hold
from flowtracer.stream.sinks.base import Sink, SinkBackpressure

StageState = tuple[int, str, dict[str, Any]]
"""(partition, key, state) of one stage to save."""


class Ack(Protocol):
    """What the protocol needs of a send's future (an ``asyncio.Future``)."""

    def done(self) -> bool: ...

    def exception(self) -> BaseException | None: ...


SaveState = Callable[[int, str, dict[str, Any]], Ack]
"""Start saving one stage's state (partition, key, state); returns the save's future."""


@dataclass
class Finalization:
    """A published finalization waiting to be released: its outputs, then its state saves."""

    ticket: int
    outputs: list[Ack]
    holds: list[Hold]
    states: list[StageState] = field(default_factory=list)
    saving: list[Ack] | None = None  # the state saves, once started


class CommitProtocol:
    """The finalizations published and not yet released, in publish order, and the ledger they release into.

    Args:
        sink: where the lines go (its tickets say when they are durable).
        save_state: starts saving one stage's state; called only once the outputs before it are durable.
        ledger: the ack ledger the input records were registered in.
        backpressure_wait_s: wait between offers of the same lines to a sink under backpressure, in seconds.
        sleep: the wait (``asyncio.sleep``; tests pass a fake).
    """

    def __init__(self, sink: Sink, save_state: SaveState, ledger: AckLedger | None = None, *,
                 backpressure_wait_s: float = 0.2,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> None:
        self.sink = sink
        self.save_state = save_state
        self.ledger = ledger if ledger is not None else AckLedger()
        self.backpressure_wait_s = backpressure_wait_s
        self.sleep = sleep
        self.pending: deque[Finalization] = deque()

    async def write(self, lines: Sequence[str]) -> int:
        """Write *lines* to the sink, waiting out backpressure; returns their ticket (0 when no lines).

        Raises the sink's :class:`~flowtracer.stream.sinks.base.SinkFailed` (or any other error it raises).
        """
        while lines:
            try:
                return self.sink.write(lines)
            except SinkBackpressure:
                await self.sleep(self.backpressure_wait_s)
                self.sink.raise_if_failed()
        return 0

    def published(self, ticket: int, outputs: list[Ack], holds: list[Hold],
                  states: list[StageState] | None = None) -> None:
        """Queue a finalization: its sink ticket (0: no lines), output futures, the input holds it
        releases and the stage states to save once its outputs are durable."""
        self.pending.append(Finalization(ticket, outputs, holds, list(states or [])))

    def release(self) -> list[Any]:
        """Release, in publish order, every finalization whose outputs are durable and whose states
        are saved (starting the saves of the first one whose outputs just became durable); return the
        events that may be acked now, in offset order per partition.

        Raises :class:`~flowtracer.stream.sinks.base.SinkFailed` if the sink lost lines, and
        RuntimeError if an output send or a state save failed.
        """
        self.sink.raise_if_failed()
        while self.pending:
            head = self.pending[0]
            if not all(f.done() for f in head.outputs) or not self.sink.durable(head.ticket):
                break
            for f in head.outputs:
                if f.exception() is not None:
                    raise RuntimeError(f"output send failed: {f.exception()}")
            if head.saving is None:
                head.saving = [self.save_state(p, key, value) for p, key, value in head.states]
            if not all(f.done() for f in head.saving):
                break
            for f in head.saving:
                if f.exception() is not None:
                    raise RuntimeError(f"saving stage state failed: {f.exception()}")
            self.pending.popleft()
            for hold in head.holds:
                self.ledger.release(hold)
        return self.ledger.ackable()
