"""Whether the worker's Kafka client still holds a connection to a broker (for the window clock, stall_clock.py).

The clock stands still while the worker is cut off from Kafka. Unacknowledged outputs show it when the worker was
publishing at the cut; when every output had been acknowledged and the records of the next windows were still on
their way, only the client's connections tell a broker that is gone from sources that went quiet.
"""

from __future__ import annotations

from typing import Any


def connected(client: Any) -> bool | None:
    """Whether an aiokafka client holds at least one open broker connection; None when it cannot be told (no
    client yet, or its connection table changed while read: the consumer runs in a thread of its own)."""
    conns = getattr(client, "_conns", None)
    if conns is None:
        return None
    try:
        return any(c.connected() for c in list(conns.values()))
    except RuntimeError:
        return None
