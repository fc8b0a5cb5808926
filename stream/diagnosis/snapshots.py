"""The newest snapshot of each incident id read back from ``flowtracer.incidents.v1``, bounded (pure).

Both readers of the incidents topic keep one: the dashboard's incident list (``dashboard/incident_feed.py``) and a
restarted diagnosis taking over open incidents (``resume.py``). Ids come from whatever the topic holds, so anyone
who can write to it could make a reader remember any number of them (50,000 forged ids were all kept): at most
``limit`` ids are kept (:data:`MAX_INCIDENTS`). Past it the least worth keeping go first, closed before open, then
the oldest newest-snapshot (by window end), an eighth of the limit at a time so that a flood costs one sort per
``limit // 8`` records; each id let go is counted in ``dropped``. The bound keeps memory and time, not the list
honest: who may write the topic is the broker's ACLs' business (docs/operations.md, Security).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from flowtracer.schemas.v1 import analytics_pb2

MAX_INCIDENTS = 4096
"""Incident ids a reader keeps at the most (a fabric has a few open at a time, a bad day a few hundred)."""


@dataclass
class NewestSnapshots:
    """Newest snapshot (by ``window_end_ns``) per incident id, at most ``limit`` ids; ``dropped`` ids let go."""

    limit: int = MAX_INCIDENTS
    newest: dict[str, analytics_pb2.Incident] = field(default_factory=dict)
    dropped: int = 0

    def add(self, rec: analytics_pb2.Incident) -> None:
        """Keep ``rec`` if it is its id's newest snapshot; past ``limit`` ids, let the least worth keeping go."""
        have = self.newest.get(rec.id)
        if have is not None:
            if rec.window_end_ns >= have.window_end_ns:
                self.newest[rec.id] = rec
            return
        self.newest[rec.id] = rec
        if len(self.newest) > self.limit:
            self.shed(len(self.newest) - self.limit + max(1, self.limit // 8) - 1)

    def extend(self, records: Iterable[analytics_pb2.Incident]) -> NewestSnapshots:
        """:meth:`add` each record; returns self."""
        for rec in records:
            self.add(rec)
        return self

    def shed(self, n: int) -> None:
        """Let the ``n`` ids least worth keeping go: closed before open, then the oldest snapshot."""
        worst = sorted(self.newest.values(), key=lambda i: (i.state == "open", i.window_end_ns, i.id))[:n]
        for rec in worst:
            del self.newest[rec.id]
        self.dropped += len(worst)
