"""faust_driver.deliver: a record's delivery runs without a task when it need not wait, and under Faust's wait_first
when it must: a rebalance (the flow suspended) still abandons a delivery stuck on a full stream buffer."""

from __future__ import annotations

import asyncio
from typing import Any

from mode import Service

from flowtracer.stream.runtime.faust_driver import deliver


class Consumer(Service):
    """What ``deliver`` needs of Faust's consumer: ``suspend_flow`` and mode's ``wait_first``."""

    def __init__(self) -> None:
        super().__init__()
        self.suspend_flow = asyncio.Event()


async def tasks_during(coro: Any) -> int:
    before = len(asyncio.all_tasks())
    seen = before
    task = asyncio.ensure_future(coro)
    while not task.done():
        seen = max(seen, len(asyncio.all_tasks()))
        await asyncio.sleep(0)
    task.result()
    return seen - before - 1


def test_a_delivery_that_need_not_wait_runs_at_once_without_a_task() -> None:
    async def main() -> None:
        consumer, got = Consumer(), []

        async def put(x: int) -> None:
            got.append(x)

        await deliver(consumer, put(1))
        assert got == [1]
        assert await tasks_during(deliver(consumer, put(2))) == 0 and got == [1, 2]

    asyncio.run(main())


def test_a_delivery_that_waits_finishes_with_what_it_waited_for() -> None:
    async def main() -> None:
        consumer, room, got = Consumer(), asyncio.get_running_loop().create_future(), []

        async def put(x: int) -> None:
            got.append(await room)  # a full stream buffer: waits for room
            got.append(x)

        task = asyncio.ensure_future(deliver(consumer, put(1)))
        await asyncio.sleep(0.01)
        assert not task.done() and got == []
        room.set_result("room")
        await task
        assert got == ["room", 1]

    asyncio.run(main())


def test_a_rebalance_abandons_a_stuck_delivery_and_cancels_what_it_waited_for() -> None:
    async def main() -> None:
        consumer, room, got = Consumer(), asyncio.get_running_loop().create_future(), []

        async def put(x: int) -> None:
            try:
                await room
            except asyncio.CancelledError:
                got.append("cancelled")
                raise
            got.append(x)

        task = asyncio.ensure_future(deliver(consumer, put(1)))
        await asyncio.sleep(0.01)
        consumer.suspend_flow.set()
        await asyncio.wait_for(task, 5)
        await asyncio.sleep(0)
        assert got == ["cancelled"] and room.cancelled()

    asyncio.run(main())


def test_while_the_flow_is_suspended_a_delivery_goes_faust_s_way() -> None:
    async def main() -> None:
        consumer, got = Consumer(), []
        consumer.suspend_flow.set()

        async def put(x: int) -> None:
            await asyncio.sleep(10)  # flow control holds it
            got.append(x)

        await asyncio.wait_for(deliver(consumer, put(1)), 5)
        assert got == []

    asyncio.run(main())
