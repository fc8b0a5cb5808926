"""When an input offset may be committed: the processor's offset-commit protocol (no Faust in it).

Each finalization of windows is one **checkpoint**, taken through one linear sequence (as quix-streams'
``Checkpoint.commit``: produce, flush, save state, commit), of which the worker waits for none: it goes on reading
while the checkpoint advances, and :meth:`CommitProtocol.release` moves every checkpoint as far as it can go.

1. **produce the outputs** (:meth:`CommitProtocol.checkpoint`): the producer's batches are flushed; each output's
   future resolves when the broker acknowledges it;
2. **write the sink**: the line-protocol lines go to the store (a ticket, durable once the store has them). Written
   before the acknowledgements come, on purpose: the store's write and the broker's acks run side by side, and the
   next step waits for both;
3. **wait**: every output acknowledged and the ticket durable;
4. **save the state**: the stage states the finalization changed (which windows were published, rolling history)
   are saved, and those saves acknowledged too;
5. **ack the inputs**: once every earlier checkpoint has been released (strictly in publish order), its holds are
   released in the :class:`~flowtracer.stream.runtime.ack_ledger.AckLedger`, which acks records in offset order per
   partition, and Faust commits past them.

A new owner of a partition therefore never skips a window whose outputs were lost, and never replays one whose
state it was given. A failed send, a failed state save or a failed sink raises: nothing more is released, so
nothing more is committed, and the records are replayed after a restart (the outputs are idempotent).

Lines the store refused for good (:class:`~flowtracer.stream.sinks.base.Rejected`: a bad line, a
revoked token) would be refused again on every replay, so they are not a failure: :meth:`CommitProtocol.drain_rejected`
takes them from the sink and publishes them as dead letters, and nothing is released while a dead
letter is not yet acknowledged. The sink holds ``durable`` at a rejected batch until it is taken,
so no offset is committed past refused lines before their dead letters are in Kafka.

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
from flowtracer.stream.sinks.base import Rejected, Sink, SinkBackpressure

StageState = tuple[int, str, dict[str, Any]]
"""(partition, key, state) of one stage to save."""


class Ack(Protocol):
    """What the protocol needs of a send's future (an ``asyncio.Future``)."""

    def done(self) -> bool: ...

    def exception(self) -> BaseException | None: ...


SaveState = Callable[[int, str, dict[str, Any]], Ack]
"""Start saving one stage's state (partition, key, state); returns the save's future."""

DeadLetterRejected = Callable[[Rejected], Awaitable[list[Ack]]]
"""Publish refused sink lines as dead letters; returns the sends' futures."""

Flush = Callable[[], Awaitable[None]]
"""Send every output the producer holds in its batches (their futures resolve on the broker's acknowledgement)."""


async def nothing_to_flush() -> None:
    """For producers that send at once."""


async def no_dead_letters(rejected: Rejected) -> list[Ack]:
    """For sinks that never reject: refuse to drop lines silently."""
    raise RuntimeError(f"the sink rejected {len(rejected.lines)} points and no dead-letter topic is wired: "
                       f"{rejected.reason}")


@dataclass
class Checkpoint:
    """A published finalization waiting to be released: its outputs and sink ticket, then its state saves."""

    ticket: int
    outputs: list[Ack]
    holds: list[Hold]
    states: list[StageState] = field(default_factory=list)
    saving: list[Ack] | None = None  # the state saves, once started
    at_ns: int = 0  # when it was published (wall clock, ns)


class CommitProtocol:
    """The finalizations published and not yet released, in publish order, and the ledger they release into.

    Args:
        sink: where the lines go (its tickets say when they are durable).
        save_state: starts saving one stage's state; called only once the outputs before it are durable.
        ledger: the ack ledger the input records were registered in.
        flush: sends what the output producer holds (step 1); outputs are only queued before it.
        backpressure_wait_s: wait between offers of the same lines to a sink under backpressure, in seconds.
        sleep: the wait (``asyncio.sleep``; tests pass a fake).
        dead_letter: publishes the lines the sink refused for good (:meth:`drain_rejected`).
    """

    def __init__(self, sink: Sink, save_state: SaveState, ledger: AckLedger | None = None, *,
                 flush: Flush = nothing_to_flush, backpressure_wait_s: float = 0.2,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
                 dead_letter: DeadLetterRejected = no_dead_letters) -> None:
        self.sink = sink
        self.save_state = save_state
        self.ledger = ledger if ledger is not None else AckLedger()
        self.flush = flush
        self.backpressure_wait_s = backpressure_wait_s
        self.sleep = sleep
        self.pending: deque[Checkpoint] = deque()
        self.dead_letter = dead_letter
        #: Dead letters of rejected lines not yet acknowledged: nothing is released until they are.
        self.dead_letters: list[Ack] = []
        #: Points the sink refused for good and that went to the dead-letter topic.
        self.rejected_points = 0
        self._draining = 0

    async def drain_rejected(self) -> int:
        """Publish what the sink refused for good as dead letters; returns how many points.

        Call it before :meth:`release`: the sink's ``durable`` moves past refused lines only once
        they are taken, and ``release`` waits for their dead letters to be acknowledged.
        """
        n = 0
        self._draining += 1  # the sink is past the taken lines already: release nothing until they are sent
        try:
            for rejected in self.sink.take_rejected():
                self.dead_letters.extend(await self.dead_letter(rejected))
                n += len(rejected.lines)
                self.rejected_points += len(rejected.lines)
            if n:
                await self.flush()
        finally:
            self._draining -= 1
        return n

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

    async def checkpoint(self, outputs: list[Ack], lines: Sequence[str], holds: list[Hold],
                         states: list[StageState] | None = None, at_ns: int = 0) -> None:
        """Steps 1 and 2 of a finalization's checkpoint: produce its ``outputs`` (queued in the producer, their
        futures), write its ``lines`` to the sink; then queue it to be released (:meth:`release`) with the input
        ``holds`` it releases, the stage ``states`` to save once its outputs are durable, and when its publishing
        began (``at_ns``, wall clock ns)."""
        await self.flush()
        ticket = await self.write(lines)
        self.published(ticket, outputs, holds, states, at_ns)

    def published(self, ticket: int, outputs: list[Ack], holds: list[Hold],
                  states: list[StageState] | None = None, at_ns: int = 0) -> None:
        """Queue a checkpoint whose outputs are produced (or will be by the next :meth:`checkpoint`'s flush) and
        whose lines are written: its sink ticket (0: no lines), output futures, the input holds it releases, the
        stage states to save once its outputs are durable, and when its publishing began (ns)."""
        # The output producer gives every record of a batch the batch's future: each is checked once.
        self.pending.append(Checkpoint(ticket, list(dict.fromkeys(outputs)), holds, list(states or []), at_ns=at_ns))

    @property
    def oldest_unreleased_ns(self) -> int | None:
        """When publishing of the oldest finalization not yet released began (ns); None when every one is."""
        return self.pending[0].at_ns if self.pending else None

    def release(self) -> list[Any]:
        """Steps 3 to 5: move every checkpoint, in publish order, as far along its sequence as it can go now; return
        the events that may be acked now, in offset order per partition.

        Raises :class:`~flowtracer.stream.sinks.base.SinkFailed` if the sink lost lines, and
        RuntimeError if an output send or a state save failed.
        """
        self.sink.raise_if_failed()
        for f in self.dead_letters:
            if f.done() and f.exception() is not None:
                raise RuntimeError(f"dead letter of rejected sink lines failed: {f.exception()}")
        self.dead_letters = [f for f in self.dead_letters if not f.done()]
        while self.pending and not self.dead_letters and not self._draining:
            head = self.pending[0]
            # 3. every output acknowledged, the lines durable in the store
            if not all(f.done() for f in head.outputs) or not self.sink.durable(head.ticket):
                break
            for f in head.outputs:
                if f.exception() is not None:
                    raise RuntimeError(f"output send failed: {f.exception()}")
            # 4. the stage states saved (started once, now), and the saves acknowledged
            if head.saving is None:
                head.saving = [self.save_state(p, key, value) for p, key, value in head.states]
            if not all(f.done() for f in head.saving):
                break
            for f in head.saving:
                if f.exception() is not None:
                    raise RuntimeError(f"saving stage state failed: {f.exception()}")
            # 5. the inputs released (acked once every lower offset of their partition is)
            self.pending.popleft()
            for hold in head.holds:
                self.ledger.release(hold)
        return self.ledger.ackable()
