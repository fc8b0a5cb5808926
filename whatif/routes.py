"""What a routing strategy works on and gives (pure): each flow's demand over the replayed range
(``FlowDemand``) and where its bytes go (``Route``: sub-flows, each a share over weighted paths)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flowtracer.whatif.record import RecordedFlow, Window

Paths = tuple[tuple[tuple[str, ...], float], ...]


@dataclass(frozen=True)
class FlowDemand:
    """One flow over the replayed range: its identity (last window's record), bytes and first window end (ns)."""

    flow: RecordedFlow
    bytes: int
    first_end_ns: int


def demands(windows: Sequence[Window]) -> list[FlowDemand]:
    """Every flow of the windows with its total bytes, in flow id order."""
    total: dict[str, int] = {}
    first: dict[str, int] = {}
    last: dict[str, RecordedFlow] = {}
    for w in windows:
        for f in w.flows:
            total[f.flow_id] = total.get(f.flow_id, 0) + f.bytes
            first.setdefault(f.flow_id, w.end_ns)
            last[f.flow_id] = f
    return [FlowDemand(last[k], total[k], first[k]) for k in sorted(total)]


@dataclass(frozen=True)
class SubFlow:
    """A share of a flow's bytes (one QP) and the paths it takes with weights summing to 1 (() = unreachable)."""

    share: float
    paths: Paths
    udp_src_port: int
    dst_qpn: int


@dataclass(frozen=True)
class Route:
    """Where one flow goes; ``plan`` says what to configure for it, when the strategy needs configuration."""

    subflows: tuple[SubFlow, ...]
    plan: Mapping[str, Any] | None = None

    @property
    def reachable(self) -> bool:
        return all(s.paths for s in self.subflows)

