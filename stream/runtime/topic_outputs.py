"""Outputs through Faust's ``Topic.send``, behind the output producer's interface (``send`` queues, ``flush`` sends).

A stand-in for :class:`~flowtracer.stream.runtime.output_producer.OutputProducer`: the worker's publish path is
written against ``send``/``flush``, and this adapter gives it that over Faust's own producer. Each queued record is
sent by ``flush`` in the order queued, one ``Topic.send`` each (``faust/topics.py``: it returns the
``FutureMessage`` that resolves when the broker acknowledges the record), and its queued future follows it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any


class TopicOutputs:
    """Records queued per call to ``send`` and handed to Faust's topics by ``flush``.

    Args:
        topics: Faust topic by the name ``send`` is given.
    """

    def __init__(self, topics: Mapping[str, Any]) -> None:
        self.topics = topics
        self._queued: list[tuple[str, bytes | None, bytes, int | None, asyncio.Future[Any]]] = []

    def send(self, topic: str, key: bytes | None, value: bytes, partition: int | None = None) -> asyncio.Future[Any]:
        """Queue a record; its future resolves with the broker's acknowledgement once ``flush`` sent it."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queued.append((topic, key, value, partition, fut))
        return fut

    async def flush(self) -> None:
        """Send every queued record, in order."""
        queued, self._queued = self._queued, []
        for topic, key, value, partition, fut in queued:
            try:
                sent = await self.topics[topic].send(key=key, value=value, partition=partition)
            except Exception as exc:
                fut.set_exception(exc)
                raise
            sent.add_done_callback(lambda f, fut=fut: follow(f, fut))

    async def start(self) -> None:
        """Faust starts its producer itself."""

    async def stop(self) -> None:
        """Faust stops its producer itself."""


def follow(source: asyncio.Future[Any], target: asyncio.Future[Any]) -> None:
    """Give ``target`` the outcome of ``source``."""
    if target.done():
        return
    if source.cancelled():
        target.cancel()
    elif source.exception() is not None:
        target.set_exception(source.exception())  # type: ignore[arg-type]
    else:
        target.set_result(source.result())
