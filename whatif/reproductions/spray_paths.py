"""Per-packet path choice of the spraying family (pure): which spine a source sends its next packet through.

One ``PathChooser`` per flow (source), over the spines that reach the flow's destination leaf
(``members``, topology-aware: a spine whose uplink or downlink is withdrawn is not a member). Kinds:

- ``random``: a uniformly random live member per packet (random packet spraying).
- ``round-robin``: members in a fixed order, cycling; each source starts at its own offset
  (plain round robin; sources with the same offset move in lockstep).
- ``prr``: pseudo-random round robin: every round is a new random permutation of the members, each
  member once per round (PRIME's sequence, without congestion feedback).
- ``prime``: ``prr`` with congestion-aware weights: each congestion signal (an ECN mark's severity in
  [0, 1], a loss counting 1) adds to the member's penalty, the penalty decays exponentially with
  ``decay_slots``, the member's weight is ``max(floor, exp(-alpha * penalty))``; a round gives each
  member ``weight / max weight`` of a slot (credit carried over), in a fresh permutation.

Time is in slots (one packet's serialization time at line rate, see ``spray_sim``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

KINDS: tuple[str, ...] = ("random", "round-robin", "prr", "prime")


@dataclass(frozen=True)
class ChooserConfig:
    """Parameters of the congestion-aware weights (only ``prime`` reads them)."""

    #: How strongly a unit of penalty lowers the weight (weight = exp(-alpha * penalty)).
    alpha: float = 0.3
    #: e-folding time of a signal's penalty, slots.
    decay_slots: float = 200.0
    #: Lowest weight: a penalised member still gets some packets, so it is probed and can recover.
    floor: float = 0.05


class PathChooser:
    """The path choice of one source for one flow; ``next`` gives a member (spine index)."""

    def __init__(self, kind: str, members: list[int], rng: np.random.Generator, start: int = 0,
                 config: ChooserConfig | None = None) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown spraying kind {kind!r}; known: {', '.join(KINDS)}")
        self.kind = kind
        self.members = list(members)
        self.rng = rng
        self.config = config or ChooserConfig()
        self.pos = start
        self.penalty = {m: 0.0 for m in self.members}
        self.stamp = {m: 0 for m in self.members}
        self.credit = {m: 0.0 for m in self.members}
        self.round: list[int] = []

    def withdraw(self, member: int) -> None:
        """Routing withdrew this member (its link failed): no packet goes there any more."""
        if member in self.members:
            self.members.remove(member)
            self.round = [m for m in self.round if m != member]

    def weight(self, member: int, now: int) -> float:
        """The member's current weight in [floor, 1] (1 without penalty)."""
        p = self.penalty[member] * math.exp(-(now - self.stamp[member]) / self.config.decay_slots)
        return max(self.config.floor, math.exp(-self.config.alpha * p))

    def signal(self, member: int, severity: float, now: int) -> None:
        """A congestion signal of ``severity`` (0..1) about ``member`` reached the source at slot ``now``."""
        if member not in self.penalty or severity <= 0.0:
            return
        decayed = self.penalty[member] * math.exp(-(now - self.stamp[member]) / self.config.decay_slots)
        self.penalty[member] = decayed + severity
        self.stamp[member] = now

    def next(self, now: int) -> int:
        """The member for the next packet; -1 when none is left."""
        if not self.members:
            return -1
        if self.kind == "random":
            return self.members[int(self.rng.integers(len(self.members)))]
        if self.kind == "round-robin":
            m = self.members[self.pos % len(self.members)]
            self.pos += 1
            return m
        while True:
            if not self.round:
                self.round = self._new_round(now)
            m = self.round.pop()
            if self.kind == "prr" or self.credit[m] >= 1.0 - 1e-9:
                if self.kind == "prime":
                    self.credit[m] -= 1.0
                return m

    def _new_round(self, now: int) -> list[int]:
        order = [self.members[i] for i in self.rng.permutation(len(self.members))]
        if self.kind == "prime":
            w = {m: self.weight(m, now) for m in self.members}
            top = max(w.values())
            for m in self.members:
                # Credit is capped at one slot: a member idle for rounds does not get a burst later.
                self.credit[m] = min(1.0, self.credit[m] + w[m] / top)
        return order
