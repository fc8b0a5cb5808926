"""Drawing a :class:`ViewState`: the screen a terminal redraws in place, and the compact lines of what changed.

Pure. :func:`screen` returns a ``rich`` renderable of a few lines per section (fabric FIM with a sparkline, the top
collisions, open incidents with their top suspect, health) that fits a 120x40 terminal; items that appeared within
:data:`NEW_NS` are marked. :func:`change_lines` is for a log or a pipe: given what was last reported, the lines
of what changed since (a FIM move of :data:`FIM_STEP` or more, a collision or incident appearing or going, the
health turning), so a quiet fabric prints nothing.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from rich.console import Group
from rich.text import Text

from flowtracer.demo.view_state import CollisionRow, Health, IncidentRow, ViewState

S = 1_000_000_000
NEW_NS = 10 * S
"""An item first seen this recently (wall clock ns) is marked new."""
TOP = 3
"""Collisions and incidents shown on the screen; the rest are counted."""
SPARK = "▁▂▃▄▅▆▇█"
FIM_STEP = 0.1
"""The change of the measured fabric FIM (0..1) that a compact line reports: smaller moves are a window's noise."""
STALL_S = 15.0
"""The lag (s) past which the compact lines say the outputs stalled: the first FIM needs ~15 s, a window 1 s."""


def sparkline(values: Sequence[float], width: int = 60, top: float = 1.0) -> str:
    """The newest ``width`` values (0..``top``) as block characters, oldest first."""
    out = []
    for v in list(values)[-width:]:
        k = round(max(0.0, min(v, top)) / top * (len(SPARK) - 1)) if top > 0 else 0
        out.append(SPARK[k])
    return "".join(out)


def _clock(ns: int) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ns / S)) if ns else "–"


def _pct(v: float) -> str:
    return f"{v:.0%}"


def _fim(v: float | None) -> str:
    return "–" if v is None else f"{v:.3f}"


def collision_text(c: CollisionRow) -> str:
    """One line for a collision (the screen and the compact lines say the same)."""
    return (f"{c.group}: {c.flows} flows on {c.link} {_pct(c.utilization)}" + (" HARMFUL" if c.harmful else "")
            + f" while {c.idle_link} idles {_pct(c.idle_utilization)}"
            + (f" [{', '.join(c.sample_flows)}]" if c.sample_flows else ""))


def incident_text(i: IncidentRow) -> str:
    """One line for an open incident: kind, since when, top suspect and score, jobs, flows and hosts."""
    jobs = f"jobs {','.join(i.jobs[:3])}{'...' if len(i.jobs) > 3 else ''}; " if i.jobs else ""
    return (f"{i.kind} since {_clock(i.start_ns)}: top suspect {i.suspect or '–'} ({i.score:.2f}); "
            f"{jobs}{i.flows} flows, {i.hosts} hosts")


def health_text(h: Health) -> str:
    """The health line: lag, windows, switches, dead letters, and the demo's stages."""
    parts = [f"lag {'–' if h.lag_s is None else f'{h.lag_s:.1f}s'}", f"windows {h.windows}",
             f"switches reporting {h.switches}", f"dead letters {h.dead_letters}"]
    if h.undecodable:
        parts.append(f"undecodable {h.undecodable}")
    if h.stages:
        parts.append(f"STOPPED: {', '.join(h.down)}" if h.down else f"{len(h.stages)} stages up")
    if h.behind:
        parts.append("catching up")
    if h.error:
        parts.append(h.error)
    return ", ".join(parts)


def _line(mark: str, text: str, style: str = "") -> Text:
    t = Text(mark, style="bold yellow")
    t.append(text, style=style)
    t.no_wrap = True
    t.overflow = "ellipsis"
    return t


def _trend(history: Sequence[float]) -> str:
    if len(history) < 2 or abs(history[-1] - history[-2]) < 0.005:
        return " "
    return "▲" if history[-1] > history[-2] else "▼"


def screen(state: ViewState, seen: Mapping[str, int]) -> Group:
    """The whole view, about 15 lines. ``seen``: when each item first appeared (:func:`first_seen`); the newest are
    marked with a star."""

    def mark(key: str) -> str:
        return "★ " if state.now_ns - seen.get(key, 0) < NEW_NS else "  "

    lines = [_line("", f"{state.title}   {state.clock}", "bold")]
    if state.fim_measured is None:
        lines.append(_line("", "fabric FIM   waiting for the first rolling window (~15 s after start)"))
    else:
        lines.append(_line("", f"fabric FIM   measured {_fim(state.fim_measured)} {_trend(state.fim_history)}  "
                               f"attributed {_fim(state.fim_attributed)}   window ending {_clock(state.window_end_ns)}",
                           "bold"))
        hist = state.fim_history
        lines.append(_line("", f"  {sparkline(hist)}  last {len(hist)} windows, min {min(hist, default=0):.3f} "
                               f"max {max(hist, default=0):.3f}", "cyan"))
    more = len(state.collisions) - TOP
    lines.append(_line("", f"collisions   {len(state.collisions)} now, {state.collisions_seen} seen", "bold"))
    for c in state.collisions[:TOP]:
        lines.append(_line(mark(c.key), collision_text(c), "red" if c.harmful else ""))
    if more > 0:
        lines.append(_line("  ", f"... and {more} more"))
    stale = f", {state.incidents_stale} stale" if state.incidents_stale else ""
    lines.append(_line("", f"incidents    {len(state.incidents)} open, {state.incidents_closed} closed{stale}", "bold"))
    for i in state.incidents[:TOP]:
        lines.append(_line(mark(i.id), incident_text(i), "magenta"))
    if len(state.incidents) > TOP:
        lines.append(_line("  ", f"... and {len(state.incidents) - TOP} more"))
    h = state.health
    bad = bool(h.down or h.error or h.dead_letters)
    lines.append(_line("", f"health       {health_text(h)}", "bold red" if bad else "green"))
    if state.iteration_ms is not None:
        lines.append(_line("", f"job iteration {state.iteration_ms:.1f} ms over the last 10 s "
                               "(agents: NCCL opCount per window)"))
    lines.append(_line("", "★ new in the last 10 s; Ctrl-C stops", "dim"))
    return Group(*lines)


@dataclass
class Reported:
    """What the compact lines said last: the FIM, the collisions (key -> harmful), the incidents (id -> top
    suspect) and the health's gist."""

    fim: float | None = None
    collisions: dict[str, bool] = field(default_factory=dict)
    incidents: dict[str, str] = field(default_factory=dict)
    health: tuple[object, ...] = ()


def _health_gist(h: Health) -> tuple[object, ...]:
    stalled = h.lag_s is not None and h.lag_s > STALL_S
    return (h.down, h.dead_letters > 0, stalled, h.error)


def change_lines(last: Reported, state: ViewState) -> tuple[list[str], Reported]:
    """The compact lines of what changed since ``last``, and what is reported now."""
    out: list[str] = []
    at = f"[{state.clock}]"
    fim = last.fim
    m = state.fim_measured
    if m is not None and (fim is None or abs(m - fim) >= FIM_STEP):
        out.append(f"{at} fabric FIM measured {_fim(m)} attributed {_fim(state.fim_attributed)}"
                   + ("" if fim is None else f" (was {fim:.3f})"))
        fim = m
    now_c = {c.key: c for c in state.collisions}
    for c in state.collisions:
        if c.key not in last.collisions:
            out.append(f"{at} + collision {collision_text(c)}")
        elif c.harmful and not last.collisions[c.key]:
            out.append(f"{at} ! collision now harmful {c.group} on {c.link}")
    for key in sorted(last.collisions.keys() - now_c.keys()):
        group, _, link = key.rpartition("|")  # a group's name has "|" in it, a link's none
        out.append(f"{at} - collision cleared {group} on {link}")
    now_i = {i.id: i for i in state.incidents}
    for i in reversed(state.incidents):  # oldest first
        if i.id not in last.incidents:
            out.append(f"{at} + incident {incident_text(i)}")
        elif i.suspect != last.incidents[i.id]:
            out.append(f"{at} ~ incident {i.kind}: top suspect now {i.suspect} ({i.score:.2f})")
    for iid in sorted(last.incidents.keys() - now_i.keys()):
        out.append(f"{at} - incident closed {iid}")
    gist = _health_gist(state.health)
    if gist != last.health and (last.health or any(gist)):
        out.append(f"{at} health: {health_text(state.health)}")
    now = replace(last, fim=fim, collisions={k: c.harmful or last.collisions.get(k, False) for k, c in now_c.items()},
                  incidents={k: i.suspect for k, i in now_i.items()}, health=gist)
    return out, now
