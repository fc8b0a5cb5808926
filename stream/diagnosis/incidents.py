"""Incidents: hypotheses that persist, with a start, an end and hysteresis.

A hypothesis (``localize``) is a (kind, top component) pair of one window. An incident opens when its
pair was seen in at least ``open_windows`` of the last ``open_within`` windows (10 of 12 for a persistent
imbalance), and closes when it was
not seen for ``clear_windows`` windows; a signal that flaps faster than that stays one incident. A
hypothesis whose top component is already a suspect of an incident of the same kind updates that
incident (the ranking may swap two suspects from one window to the next without a new incident).

An incident stays open while its fault lasts: a window that shows one of the symptoms that made it (its kind's
``SUSTAINING`` symptoms on the same subject) counts as a sighting even when the window's cover did not pick it
again (a withdrawn next hop whose flows moved away long ago and whose link is still dead), or when the quiet
period after a failure held that symptom back (a collision that goes on while a cable near it fails). A pause
storm's incident also lists its consequences: the links it paused, the hosts whose traffic stopped, and their
jobs' collectives (the last ones seen running: a hung collective has no calls).

:class:`Diagnoser` strings the three steps together: symptoms, localization, incidents. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from flowtracer.stream.diagnosis.localize import Hypothesis, IncidentKind, RiskModel
from flowtracer.stream.diagnosis.symptoms import Kind, Symptom, SymptomDetector, Thresholds
from flowtracer.stream.diagnosis.window import FabricModel, WindowView, cable_of

SUSTAINING: dict[str, frozenset[Kind]] = {
    IncidentKind.FAILED_LINK: frozenset({Kind.LINK_DOWN, Kind.LINK_DEAD}),
    IncidentKind.DEGRADED_LINK: frozenset({Kind.CAPACITY_LOSS}),
    IncidentKind.PERSISTENT_IMBALANCE: frozenset({Kind.COLLISION, Kind.FIM_HIGH}),
    IncidentKind.PAUSE_STORM: frozenset({Kind.PAUSED}),
    IncidentKind.CONGESTION_HOTSPOT: frozenset({Kind.HOTSPOT}),
    IncidentKind.SWITCH_SILENT: frozenset({Kind.SWITCH_SILENT}),
    IncidentKind.HASH_MISCONFIGURATION: frozenset({Kind.UNEXPLAINED}),
    IncidentKind.AGENT_MISSING: frozenset({Kind.AGENT_MISSING}),
}
"""Per incident kind, the symptom kinds whose presence on a subject the incident was built from keeps it seen."""


class State(StrEnum):
    OPEN = "open"  # reported, still seen
    CLOSED = "closed"  # not seen for clear_windows windows; end_ns is set


@dataclass
class Incident:
    """One incident. Times are window ends, ns: ``start_ns`` of the first window showing it,
    ``detected_ns`` of the window it opened in, ``end_ns`` of the last window showing it (set when closed).
    ``suspects``: component -> accumulated score over the windows; ``evidence``: newest lines per suspect."""

    id: str
    kind: str
    start_ns: int
    detected_ns: int = 0
    end_ns: int = 0
    last_seen_ns: int = 0
    windows: int = 0
    state: State | None = None
    suspects: dict[str, float] = field(default_factory=dict)
    evidence: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: sending>receiving NIC of every path crossing the top suspect, their hosts, and their flows' job ids
    flows: set[str] = field(default_factory=set)
    hosts: set[str] = field(default_factory=set)
    jobs: set[str] = field(default_factory=set)
    #: "<job>/<comm_id>/<operation>" of those jobs' collectives with calls in a window the incident showed in
    collectives: set[str] = field(default_factory=set)
    seen: list[int] = field(default_factory=list)
    #: pause storms: the links paused from its origin, and the hosts whose traffic stopped with it
    paused_links: set[str] = field(default_factory=set)
    stopped_hosts: set[str] = field(default_factory=set)
    #: (symptom kind, subject) of its SUSTAINING symptoms: one of them in a window is a sighting
    subjects: set[tuple[str, str]] = field(default_factory=set)

    def ranked(self) -> list[tuple[str, float]]:
        """Suspects, best first."""
        return sorted(self.suspects.items(), key=lambda kv: (-kv[1], kv[0]))

    @property
    def top(self) -> str:
        return self.ranked()[0][0]


@dataclass(frozen=True)
class Hysteresis:
    """When incidents open and close, in windows (module docstring)."""

    open_windows: int = 2
    open_within: int = 3
    clear_windows: int = 10
    #: kinds that must last longer before they are reported: (open_windows, open_within). An imbalance is a
    #: condition, not a failure: Apstra's probe asks for the threshold to hold for a duration.
    slower: tuple[tuple[str, int, int], ...] = (("persistent_imbalance", 10, 12),)

    def opening(self, kind: str) -> tuple[int, int]:
        """(windows seen, within the last windows) that open an incident of ``kind``."""
        return next(((n, w) for k, n, w in self.slower if k == kind), (self.open_windows, self.open_within))


@dataclass
class IncidentTracker:
    """Folds each window's hypotheses into incidents (module docstring)."""

    model: FabricModel
    hysteresis: Hysteresis = field(default_factory=Hysteresis)
    live: list[Incident] = field(default_factory=list)
    #: job id -> its collectives with calls in the newest window that had any
    last_collectives: dict[str, set[str]] = field(default_factory=dict)

    def adopt(self, incidents: list[Incident]) -> None:
        """Take over open incidents a previous diagnosis published (resume.py): they continue under their ids."""
        have = {inc.id for inc in self.live}
        self.live.extend(inc for inc in incidents if inc.id not in have)

    def update(self, view: WindowView, hypotheses: list[Hypothesis],
               symptoms: Sequence[Symptom] = ()) -> list[Incident]:
        """Incidents open after this window, and those that closed with it. ``symptoms``: every symptom of the
        window, those the quiet period held back included (they sustain open incidents, module docstring)."""
        h = self.hysteresis
        self.last_collectives.update(view.collectives)
        for hyp in hypotheses:
            inc = self._match(hyp)
            if inc is None:
                inc = Incident(f"{hyp.kind}/{hyp.component}/{view.end_ns}", hyp.kind, view.end_ns)
                self.live.append(inc)
            self._sighted(inc, view.end_ns)
            for s in hyp.suspects:
                inc.suspects[s.component] = inc.suspects.get(s.component, 0.0) + s.score
                inc.evidence[s.component] = s.evidence
            keep = SUSTAINING.get(hyp.kind, frozenset())
            inc.subjects.update((s.kind, s.subject) for s in hyp.symptoms if s.kind in keep)
            self._affected(inc, view, hyp)
        now = {(s.kind, s.subject) for s in symptoms}
        for inc in self.live:
            if inc.state is State.OPEN and inc.last_seen_ns < view.end_ns and inc.subjects & now:
                self._sighted(inc, view.end_ns)
        out = []
        keep = []
        for inc in self.live:
            need, within = h.opening(inc.kind)
            recent = [t for t in inc.seen if t > view.end_ns - within * view.hop_ns]
            if inc.state is None and len(recent) >= need:
                inc.state, inc.detected_ns = State.OPEN, view.end_ns
            gone = (view.end_ns - inc.last_seen_ns) // view.hop_ns
            if inc.state is State.OPEN and gone >= h.clear_windows:
                inc.state, inc.end_ns = State.CLOSED, inc.last_seen_ns
                out.append(inc)
                continue
            if inc.state is None and gone >= within:
                continue  # never opened: forgotten
            inc.seen = inc.seen[-within:]
            keep.append(inc)
            if inc.state is State.OPEN:
                out.append(inc)
        self.live = keep
        return out

    @staticmethod
    def _sighted(inc: Incident, end_ns: int) -> None:
        # Windows come in order; one at or before the last sighting is a record read again (a restarted
        # service re-reads a little of its topics, resume.py) or a second hypothesis of this window: once.
        if end_ns > inc.last_seen_ns:
            inc.seen.append(end_ns)
            inc.windows += 1
            inc.last_seen_ns = end_ns

    def _match(self, hyp: Hypothesis) -> Incident | None:
        for inc in self.live:
            if inc.kind == hyp.kind and (inc.top == hyp.component or hyp.component in inc.suspects):
                return inc
        return None

    def _affected(self, inc: Incident, view: WindowView, hyp: Hypothesis) -> None:
        if hyp.kind == IncidentKind.PAUSE_STORM:  # its consequences: paused links, stopped hosts, hung jobs
            inc.paused_links.update(s.subject for s in hyp.symptoms if s.kind is Kind.PAUSED)
            for s in hyp.symptoms:
                if s.kind is Kind.TRAFFIC_STOPPED:
                    inc.stopped_hosts.add(s.subject)
                    inc.hosts.add(s.subject)
                    inc.jobs.update(s.jobs)
                    for job in s.jobs:
                        inc.collectives.update(self.last_collectives.get(job, ()))
        top = inc.top
        typ, _, name = top.partition(":")
        links: set[str] = set()
        if typ == "cable":
            links = {lk for lk in self.model.fabric.links if cable_of(lk) == top}
        elif typ == "port":
            links = {name}
        elif typ == "switch":
            links = set(self.model.switch_links.get(name, ()))
        elif typ == "group":
            links = set(self.model.groups.get(name, ("", ()))[1])
        elif typ == "hash":
            links = {m for sw, ms in self.model.groups.values() if sw == name for m in ms}
        elif typ == "agent":
            inc.hosts.add(name)
        links |= inc.paused_links
        for p in view.paths:
            if p.bytes > 0 and links.intersection(p.links):
                inc.flows.add(f"{p.src_nic}>{p.dst_nic}")
                inc.hosts.update(x for x in (p.src_host, p.dst_host) if x)
                inc.jobs.update(p.jobs)
                for job in p.jobs:  # the job's collectives that ran while its flows crossed the suspect
                    inc.collectives.update(view.collectives.get(job, ()))


@dataclass
class Diagnoser:
    """Symptoms -> localization -> incidents, one window at a time (in order)."""

    model: FabricModel
    thresholds: Thresholds = field(default_factory=Thresholds)
    hysteresis: Hysteresis = field(default_factory=Hysteresis)

    def __post_init__(self) -> None:
        self.detector = SymptomDetector(self.model, self.thresholds)
        self.risk = RiskModel(self.model)
        self.tracker = IncidentTracker(self.model, self.hysteresis)
        self.last_symptoms: list[Symptom] = []
        self.last_hypotheses: list[Hypothesis] = []

    def adopt(self, incidents: list[Incident]) -> None:
        """Continue a previous diagnosis' open incidents (``IncidentTracker.adopt``)."""
        self.tracker.adopt(incidents)

    def window(self, view: WindowView) -> list[Incident]:
        """Open incidents after ``view``, plus those it closed (state CLOSED)."""
        self.last_symptoms = self.detector.detect(view)
        self.last_hypotheses = self.risk.localize(self.last_symptoms)
        return self.tracker.update(view, self.last_hypotheses, self.last_symptoms + self.detector.held)
