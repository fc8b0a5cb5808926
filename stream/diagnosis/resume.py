"""Incidents a restarted diagnosis takes over: the open ones its predecessor published (pure).

The diagnosis keeps its state in memory. Without this, a restarted ``flowtracer diagnose`` would open a running
fault again under a new id (its start is the first window the new process saw) and never publish the end of the
old one: the operator would see the old incident open for ever and a duplicate beside it. So on start the service
reads ``flowtracer.incidents.v1`` (compacted: the newest snapshot per incident id) and hands the incidents whose
newest snapshot is open to :meth:`~flowtracer.stream.diagnosis.incidents.Diagnoser.adopt`: a hypothesis of the
same kind naming one of their suspects continues them under their id; one not seen again closes after the usual
``clear_windows``, with its newest snapshot's window as its last sighting (a snapshot is published for every
window while an incident is open, so that is at most ``clear_windows`` late). The snapshots are kept newest per
id and bounded (``snapshots.py``): at most ``MAX_INCIDENTS`` incidents are taken over.
"""

from __future__ import annotations

from collections.abc import Iterable

from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.diagnosis.incidents import Incident, State
from flowtracer.stream.diagnosis.snapshots import NewestSnapshots


def open_incidents(records: Iterable[analytics_pb2.Incident] | NewestSnapshots) -> list[Incident]:
    """The incidents whose newest snapshot is open, as the tracker keeps them (oldest first)."""
    board = records if isinstance(records, NewestSnapshots) else NewestSnapshots().extend(records)
    out = []
    for rec in board.newest.values():
        if rec.state != str(State.OPEN):
            continue
        out.append(Incident(
            rec.id, rec.kind, rec.start_ns, detected_ns=rec.detected_ns, last_seen_ns=rec.window_end_ns,
            windows=rec.windows, state=State.OPEN, suspects={s.component: s.score for s in rec.suspects},
            evidence={s.component: tuple(s.evidence) for s in rec.suspects}, flows=set(rec.flows),
            hosts=set(rec.hosts), jobs=set(rec.jobs), collectives=set(rec.collectives)))
    return sorted(out, key=lambda i: (i.start_ns, i.id))
