"""The offset-commit protocol on fake futures and a fake sink: an input record is acked (its offset
may be committed) only once every output made from the records before it is acknowledged and durable
and the stage states are saved; failures commit nothing more; backpressure waits, never drops."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, ClassVar

import pytest

from flowtracer.stream.runtime.ack_ledger import AckLedger, Hold
from flowtracer.stream.runtime.commit import CommitProtocol
from flowtracer.stream.sinks.base import SinkBackpressure, SinkFailed


class FakeFuture:
    """A send's future, resolved by the test."""

    def __init__(self) -> None:
        self._done = False
        self._exc: BaseException | None = None

    def resolve(self, exc: BaseException | None = None) -> None:
        self._done, self._exc = True, exc

    def done(self) -> bool:
        return self._done

    def exception(self) -> BaseException | None:
        return self._exc


class FakeSink:
    """Tickets count lines; ``stored`` is how far the store has them; ``full`` writes are refused."""

    name: ClassVar[str] = "fake"

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.stored = 0
        self.full = 0  # how many next writes raise SinkBackpressure
        self.failed: SinkFailed | None = None

    def write(self, lines: Sequence[str]) -> int:
        if self.full:
            self.full -= 1
            raise SinkBackpressure(len(self.lines) - self.stored, 10, 0.0)
        self.lines.extend(lines)
        return len(self.lines)

    def durable(self, ticket: int) -> bool:
        return ticket <= self.stored

    def raise_if_failed(self) -> None:
        if self.failed:
            raise self.failed

    def take_rejected(self) -> list[Any]:
        return []

    def close(self, timeout: float = 10.0) -> None:
        return None


class Saves:
    """The state table: each save returns a future the test resolves."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, str, dict[str, Any]]] = []
        self.futures: list[FakeFuture] = []

    def __call__(self, partition: int, key: str, value: dict[str, Any]) -> FakeFuture:
        self.calls.append((partition, key, value))
        self.futures.append(FakeFuture())
        return self.futures[-1]

    def resolve_all(self) -> None:
        for f in self.futures:
            f.resolve()


class Event:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


@pytest.fixture
def sink() -> FakeSink:
    return FakeSink()


@pytest.fixture
def saves() -> Saves:
    return Saves()


@pytest.fixture
def commits(sink: FakeSink, saves: Saves) -> CommitProtocol:
    return CommitProtocol(sink, saves, AckLedger())


def held(commits: CommitProtocol, offset: int, topic: str = "t", partition: int = 0) -> Hold:
    """A record read and kept by one stage."""
    hold = commits.ledger.receive(topic, partition, offset, Event(f"{topic}[{partition}]@{offset}"))
    commits.ledger.accepted(hold, 1)
    return hold


def names(events: list[Any]) -> list[str]:
    return [e.name for e in events]


def publish(commits: CommitProtocol, lines: list[str], holds: list[Hold],
            states: list[tuple[int, str, dict[str, Any]]] | None = None, outputs: int = 1) -> list[FakeFuture]:
    futures = [FakeFuture() for _ in range(outputs)]
    ticket = asyncio.run(commits.write(lines))
    commits.published(ticket, futures, holds, states)  # type: ignore[arg-type]
    return futures


def test_outputs_published_but_not_durable_commit_nothing(commits: CommitProtocol, sink: FakeSink,
                                                          saves: Saves) -> None:
    h = held(commits, 0)
    futures = publish(commits, ["a", "b"], [h], [(0, "flows:0", {"w": 1})])
    assert commits.release() == [] and saves.calls == []  # nothing acknowledged, nothing stored
    futures[0].resolve()
    assert commits.release() == [] and saves.calls == []  # Kafka has it; the store does not yet
    sink.stored = 1
    assert commits.release() == [] and saves.calls == []  # half the lines stored is not enough
    assert len(commits.pending) == 1


def test_durable_outputs_save_the_states_then_commit(commits: CommitProtocol, sink: FakeSink, saves: Saves) -> None:
    h = held(commits, 0)
    futures = publish(commits, ["a"], [h], [(0, "flows:0", {"w": 1}), (0, "links:0", {"w": 2})])
    futures[0].resolve()
    sink.stored = 1
    assert commits.release() == []  # durable: the state saves start, the record is still held
    assert saves.calls == [(0, "flows:0", {"w": 1}), (0, "links:0", {"w": 2})]
    saves.futures[0].resolve()
    assert commits.release() == []  # one save acknowledged of two
    saves.futures[1].resolve()
    assert names(commits.release()) == ["t[0]@0"]
    assert len(saves.calls) == 2  # saved once, not again on every release
    assert not commits.pending and commits.ledger.held() == 0


def test_a_finalization_without_lines_or_states_commits_once_its_sends_are_acknowledged(
        commits: CommitProtocol, saves: Saves) -> None:
    h = held(commits, 0)
    futures = publish(commits, [], [h], outputs=2)
    assert commits.pending[0].ticket == 0
    futures[0].resolve()
    assert commits.release() == []
    futures[1].resolve()
    assert names(commits.release()) == ["t[0]@0"] and saves.calls == []


def test_a_failed_sink_commits_nothing(commits: CommitProtocol, sink: FakeSink, saves: Saves) -> None:
    h = held(commits, 0)
    futures = publish(commits, ["a"], [h], [(0, "flows:0", {})])
    futures[0].resolve()
    sink.stored = 1
    sink.failed = SinkFailed("batch rejected")
    with pytest.raises(SinkFailed):
        commits.release()
    assert saves.calls == [] and commits.ledger.held() == 1 and len(commits.pending) == 1


def test_a_failed_sink_while_waiting_out_backpressure_raises(commits: CommitProtocol, sink: FakeSink) -> None:
    sink.full, sink.failed = 1, SinkFailed("retries exhausted")
    with pytest.raises(SinkFailed):
        asyncio.run(commits.write(["a"]))
    assert sink.lines == []


def test_a_failed_send_or_state_save_commits_nothing(commits: CommitProtocol, sink: FakeSink, saves: Saves) -> None:
    h = held(commits, 0)
    futures = publish(commits, ["a"], [h], [(0, "flows:0", {})])
    sink.stored = 1
    futures[0].resolve(ConnectionError("broker gone"))
    with pytest.raises(RuntimeError, match="output send failed"):
        commits.release()
    assert saves.calls == [] and commits.ledger.held() == 1

    other = CommitProtocol(sink, saves, AckLedger())
    h2 = held(other, 0)
    futures = publish(other, ["b"], [h2], [(0, "flows:0", {})])
    futures[0].resolve()
    sink.stored = len(sink.lines)
    assert other.release() == []
    saves.futures[-1].resolve(ConnectionError("changelog send failed"))
    with pytest.raises(RuntimeError, match="saving stage state failed"):
        other.release()
    assert other.ledger.held() == 1


def test_finalizations_release_in_publish_order(commits: CommitProtocol, sink: FakeSink, saves: Saves) -> None:
    """A later finalization that is durable first waits for the earlier one, and records of one
    partition are acked in offset order even when their windows finish out of order."""
    h0, h1, h2 = held(commits, 0), held(commits, 1), held(commits, 0, partition=1)
    first = publish(commits, ["a"], [h1], [(0, "links:0", {"n": 1})])  # offset 1's window first
    second = publish(commits, ["b"], [h0, h2], [(0, "links:0", {"n": 2})])
    second[0].resolve()
    sink.stored = 2  # the store has both; the first's Kafka send is still in flight
    assert commits.release() == [] and saves.calls == []
    first[0].resolve()
    assert commits.release() == []
    assert saves.calls == [(0, "links:0", {"n": 1})]  # only the head's state: order is kept
    saves.resolve_all()
    # The first is released (offset 1 of t[0]), but offset 0 is still held by the second.
    assert commits.release() == []
    assert saves.calls[-1] == (0, "links:0", {"n": 2})
    saves.resolve_all()
    assert names(commits.release()) == ["t[0]@0", "t[0]@1", "t[1]@0"]
    assert not commits.pending


def test_a_record_held_by_two_stages_waits_for_both(commits: CommitProtocol, sink: FakeSink) -> None:
    hold = commits.ledger.receive("t", 0, 0, Event("t[0]@0"))
    commits.ledger.accepted(hold, 2)  # e.g. a counter batch kept by the flows and the links stage
    publish(commits, [], [hold], outputs=0)
    assert commits.release() == []
    publish(commits, [], [hold], outputs=0)
    assert names(commits.release()) == ["t[0]@0"]


def test_backpressure_waits_and_offers_the_same_lines_again(sink: FakeSink, saves: Saves) -> None:
    waits: list[float] = []

    async def sleep(s: float) -> None:
        waits.append(s)

    commits = CommitProtocol(sink, saves, AckLedger(), backpressure_wait_s=0.25, sleep=sleep)
    sink.full = 3
    ticket = asyncio.run(commits.write(["a", "b"]))
    assert waits == [0.25, 0.25, 0.25]
    assert sink.lines == ["a", "b"] and ticket == 2  # accepted once, nothing dropped or doubled
