"""Where the processor's line-protocol points go: one small contract, and the registry of sinks.

A sink takes InfluxDB line-protocol lines (made by :mod:`flowtracer.stream.sinks.line_protocol`) and
says, per ticket, when they are stored. The processor commits a Kafka offset only once every line
made from the records before it is durable, so a crash or a store outage never loses a point: the
uncommitted records are read again and their points rewritten (same series, same timestamp, so
the rewrite overwrites).

Lifecycle, as the processor drives it (Telegraf ``Output``: Connect / Write / Close):

1. ``sink = SINKS[name](config)`` (``sinks/registry.py``): validate the config and set up. No network
   round trip: a store that is down shows up as backpressure, not as a failed start.
2. ``ticket = sink.write(lines)``, from one thread, for every finalized window. It returns at once;
   the ticket counts the lines accepted so far. :class:`SinkBackpressure` means "too much is
   pending": nothing of this call was accepted; wait ``retry_after_s`` and call again with the
   same lines (never drop them). :class:`SinkFailed` means the sink is broken (see step 4).
3. ``sink.durable(ticket)``: True once every line up to *ticket* is stored; only then commit the
   offsets of the input behind those lines. Cheap; poll it.
4. ``sink.raise_if_failed()`` in every loop turn: raises :class:`SinkFailed` when a batch failed
   for good (retries exhausted, an I/O error). The processor then stops without committing; after
   a restart it replays from the last commit, so the failed points are rewritten.
4a. ``sink.take_rejected()`` in every loop turn: the batches the store refused for good with an
   answer that replaying cannot change (InfluxDB 400, 401, 403, 404, 413, 422), as
   :class:`Rejected`. A rejected batch is settled but holds ``durable`` back at its first line
   until it is taken: the processor publishes the lines as dead letters first, and only then may
   it commit past them (:mod:`flowtracer.stream.runtime.commit`). Throttling (429) and server
   errors (5xx) are never rejections: they are retried and show up as backpressure.
5. ``sink.close(timeout)``: write what is pending, waiting at most *timeout* seconds, then release
   threads and files. What is not durable by then stays uncommitted and is replayed. ``close``
   never raises for a failed batch: check ``raise_if_failed`` / ``durable`` first.

Sinks: ``none`` (:class:`~flowtracer.stream.sinks.null.NullSink`, Kafka outputs only), ``influx``
(:class:`~flowtracer.stream.sinks.influx.InfluxSink`, InfluxDB 2 or anything
that speaks ``/api/v2/write``) and ``file`` (:class:`~flowtracer.stream.sinks.file.FileSink`, a
line-protocol file that ``influx write --file`` loads; the demo's output without InfluxDB).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar, NamedTuple, Protocol, runtime_checkable

if TYPE_CHECKING:
    from pydantic import BaseModel


class SinkError(RuntimeError):
    """Base of the errors a sink raises."""


class SinkBackpressure(SinkError):
    """Too many points are waiting for the store: this write was not accepted. Wait and retry.

    Args:
        pending: points accepted but not yet stored.
        limit: the sink's bound on pending points.
        retry_after_s: a reasonable wait before retrying, in seconds.
    """

    def __init__(self, pending: int, limit: int, retry_after_s: float) -> None:
        super().__init__(f"{pending} points waiting for the store (limit {limit}); retry in {retry_after_s:g} s")
        self.pending, self.limit, self.retry_after_s = pending, limit, retry_after_s


class SinkFailed(SinkError):
    """Points were lost to the sink for good (rejected, retries exhausted, closed, I/O error): stop
    without committing offsets past them, and replay."""


class Rejected(NamedTuple):
    """A batch the store refused for good: it goes to the dead-letter topic, not back to the store."""

    lines: list[str]
    """The refused lines, as they were written."""
    reason: str
    """Why, for a person: the store's answer, one line."""
    status: int
    """The HTTP status of the refusal (0 when there was none)."""


@runtime_checkable
class Sink(Protocol):
    """A line-protocol sink; the module docstring gives the lifecycle."""

    name: ClassVar[str]
    """Registry name, e.g. ``influx``."""
    Config: ClassVar[type[BaseModel]]
    """Its pydantic config model: ``SINKS[name](SINKS[name].Config.model_validate(data))``."""

    def write(self, lines: Sequence[str]) -> int:
        """Accept *lines* (no line breaks inside) and return the ticket of the last one; raises
        :class:`SinkBackpressure` (nothing accepted) or :class:`SinkFailed`."""
        ...

    def durable(self, ticket: int) -> bool:
        """Whether every line up to *ticket* is stored."""
        ...

    def raise_if_failed(self) -> None:
        """Raise :class:`SinkFailed` if any batch was lost for good."""
        ...

    def take_rejected(self) -> list[Rejected]:
        """The batches refused for good since the last call, oldest first (step 4a)."""
        ...

    def close(self, timeout: float = 10.0) -> None:
        """Store what is pending within *timeout* seconds and release resources; idempotent."""
        ...


def check_lines(lines: Sequence[str]) -> None:
    """Raise ValueError naming the first entry that is not one non-empty line of text."""
    for i, line in enumerate(lines):
        if not isinstance(line, str) or not line or "\n" in line or "\r" in line:
            raise ValueError(f"line {i} is not a single non-empty line of text: {str(line)[:120]!r}")
