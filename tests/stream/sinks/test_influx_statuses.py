"""InfluxSink against a real HTTP server that answers ``/api/v2/write`` with a chosen status.

A status that replaying cannot change (400, 401, 403, 404, 413, 422) rejects the batch: it is
handed back by ``take_rejected`` (the processor dead-letters it) and writing continues; 429 and
503 are retried (429 after its Retry-After) and the batch lands once the server recovers, nothing
lost, nothing rejected. Then the commit protocol over the same sink and server: the refused lines
become DeadLetter records, one per window, and the input behind them is acked only once those are
acknowledged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from waiting import wait_for

from flowtracer.stream.runtime.ack_ledger import AckLedger
from flowtracer.stream.runtime.commit import CommitProtocol
from flowtracer.stream.runtime.dead_letters import rejected_dead_letters
from flowtracer.stream.sinks.base import Rejected
from flowtracer.stream.sinks.influx import REJECT_STATUSES, InfluxConfig, InfluxSink
from flowtracer.testbed.write_server import WriteServer

T0 = 1_704_067_200_000_000_000
S = 1_000_000_000


@pytest.fixture
def server() -> Iterator[WriteServer]:
    with WriteServer() as s:
        yield s


@pytest.fixture
def sink(server: WriteServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[InfluxSink]:
    monkeypatch.setenv("FLOWTRACER_INFLUX_TOKEN", "t")
    # Batches are cut by count (2 lines): influxdb-client also closes a batch after flush_interval, and on a busy
    # machine 20 ms passed between the two lines of one write (a batch of 1 got the next batch's scripted answer).
    # A lone line still leaves within 1 s.
    sink = InfluxSink(InfluxConfig(url=server.url, org="o", bucket="b", batch_size=2, flush_interval="1s",
                                   retry_interval="50ms", max_retry_delay="200ms", max_retries=20, timeout="2s"))
    yield sink
    sink.close(timeout=0.5)


def points(window: int, *values: int) -> list[str]:
    return [f"m,host=h{v} v={v}i {T0 + window * S}" for v in values]


def durable(sink: InfluxSink, ticket: int) -> bool:
    sink.raise_if_failed()
    return sink.durable(ticket)


@pytest.mark.parametrize("status", sorted(REJECT_STATUSES))
def test_a_status_replay_cannot_fix_rejects_the_batch_and_writing_continues(
        status: int, server: WriteServer, sink: InfluxSink) -> None:
    server.answer(204, status)
    first = sink.write(points(0, 1, 2))
    wait_for(lambda: durable(sink, first), 10, "the first batch")
    sink.write(points(1, 3, 4))  # refused
    last = sink.write(points(2, 5, 6))
    wait_for(lambda: sink.stats()["batches_ok"] == 2, 10, "the batch after the refused one")
    assert not sink.durable(last)  # held until the refused lines are taken
    [rejected] = sink.take_rejected()
    assert rejected == Rejected(points(1, 3, 4), rejected.reason, status)
    assert rejected.reason == (f"InfluxDB at {server.url} refused 2 points: HTTP {status}: "
                               '{"code":"invalid","message":"scripted refusal"}')
    assert sink.durable(last)
    sink.raise_if_failed()
    assert server.stored == points(0, 1, 2) + points(2, 5, 6)
    assert (sink.stats()["retries"], sink.stats()["rejected"], sink.stats()["failed"]) == (0, 2, 0)
    assert len(server.requests) == 3  # never retried


@pytest.mark.parametrize(("status", "headers", "min_gap_s"), [
    (429, {"Retry-After": "1"}, 0.9),  # the server's Retry-After, not the 50 ms backoff
    (503, {}, 0.0),
])
def test_throttling_and_server_errors_are_retried_until_the_server_recovers(
        status: int, headers: dict[str, str], min_gap_s: float, server: WriteServer, sink: InfluxSink) -> None:
    server.answer(status, status, **headers)
    ticket = sink.write(points(0, 1, 2))
    wait_for(lambda: durable(sink, ticket), 15, "the batch once the server recovers")
    assert server.stored == points(0, 1, 2)
    assert sink.take_rejected() == []
    assert sink.stats()["retries"] == 2 and sink.stats()["rejected"] == 0
    gaps = [b - a for a, b in zip(server.requests, server.requests[1:], strict=False)]
    assert len(gaps) == 2 and min(gaps) >= min_gap_s


class Sent:
    """The dead-letter topic: records the DeadLetters and gives a future per send, resolved by the test."""

    def __init__(self) -> None:
        self.letters: list[Any] = []
        self.futures: list[asyncio.Future[None]] = []

    async def __call__(self, rejected: Rejected) -> list[Any]:
        out = []
        for dl in rejected_dead_letters(rejected, "influx", "w1", 7):
            self.letters.append(dl)
            self.futures.append(asyncio.get_running_loop().create_future())
            out.append(self.futures[-1])
        return out


def test_refused_points_are_dead_lettered_per_window_before_the_input_is_acked(
        server: WriteServer, sink: InfluxSink) -> None:
    async def run() -> None:
        sent = Sent()
        commits = CommitProtocol(sink, lambda p, k, v: None, AckLedger(), dead_letter=sent)  # type: ignore[arg-type]
        holds = [commits.ledger.receive("counters", 0, offset, f"record {offset}") for offset in range(3)]
        for h in holds:
            commits.ledger.accepted(h, 1)
        server.answer(401)  # e.g. a revoked token, for one batch (two windows) only
        commits.published(await commits.write(points(0, 1) + points(1, 2)), [], [holds[0]])
        commits.published(await commits.write(points(2, 3, 4)), [], holds[1:])
        await asyncio.to_thread(wait_for, lambda: sink.stats()["batches_ok"] == 1, 10, "the later batch")
        assert commits.release() == []  # the refused lines are not taken yet: nothing is committed past them
        assert await commits.drain_rejected() == 2
        assert [(dl.window_end_ns, dl.value, dl.http_status, dl.sink, dl.topic) for dl in sent.letters] == [
            (T0, points(0, 1)[0].encode(), 401, "influx", ""), (T0 + S, points(1, 2)[0].encode(), 401, "influx", "")]
        assert "HTTP 401" in sent.letters[0].reason
        assert commits.release() == []  # dead letters not acknowledged yet
        for f in sent.futures:
            f.set_result(None)
        assert commits.release() == ["record 0", "record 1", "record 2"]
        assert commits.rejected_points == 2 and server.stored == points(2, 3, 4)

    asyncio.run(run())


def test_a_dead_letter_that_fails_commits_nothing(server: WriteServer, sink: InfluxSink) -> None:
    async def run() -> None:
        sent = Sent()
        commits = CommitProtocol(sink, lambda p, k, v: None, AckLedger(), dead_letter=sent)  # type: ignore[arg-type]
        hold = commits.ledger.receive("counters", 0, 0, "record 0")
        commits.ledger.accepted(hold, 1)
        server.answer(400)
        commits.published(await commits.write(points(0, 1)), [], [hold])
        await asyncio.to_thread(wait_for, lambda: sink.stats()["batches_rejected"] == 1, 10, "the refusal")
        await commits.drain_rejected()
        sent.futures[0].set_exception(OSError("broker gone"))
        with pytest.raises(RuntimeError, match="dead letter of rejected sink lines failed: broker gone"):
            commits.release()

    asyncio.run(run())
