"""Golden cases of when a window closes (stream/stages/window_policy.py): one folder per behaviour in cases/.

Each ``inputs.jsonl`` is replayed through a stage's tracker built as the stage builds it (``stage_tracker``) and the
worker's window clock (``StallClock``), checked as the app checks: after every event and on its timer. The releases
(and late records) must be ``expected.jsonl``, line for line. ``FLOWTRACER_UPDATE_CASES=1`` writes ``expected.jsonl``
instead (then read it: it is the rule's answer, not necessarily the right one). cases/README.md has the format.

Along the way every promise of ``WindowTracker.next_due_ns`` is held to what the rule did: between events, a
window is released exactly from the first timer check at or after the promised clock.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from flowtracer.stream.runtime.stall_clock import StallClock
from flowtracer.stream.stages.window_policy import MAX_WINDOWS
from flowtracer.stream.stages.window_tracker import stage_tracker

S = 1_000_000_000
CASES = Path(__file__).parent / "cases"
CONFIG_KEYS = {"stage", "hop_s", "grace_s", "required", "max_windows", "restored", "tick_s"}
EVENT_KEYS = {"at", "add", "window", "unread", "upstream", "unacked_since", "unreachable", "why"}


def ns(seconds: float) -> int:
    return round(seconds * S)


def seconds(t_ns: int) -> float:
    return t_ns / S


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    out = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{i}: not JSON: {e}") from None
    return out


def replay(case: Path) -> list[dict[str, Any]]:
    """The releases and late records of ``case``'s inputs, as ``expected.jsonl`` lines."""
    first, *events = read_jsonl(case / "inputs.jsonl")
    cfg = first.get("tracker")
    if not isinstance(cfg, dict) or set(cfg) - CONFIG_KEYS or "stage" not in cfg:
        raise ValueError(f"{case}/inputs.jsonl:1: want {{\"tracker\": {{\"stage\": ..., ...}}}} with keys from "
                         f"{sorted(CONFIG_KEYS)}, not {first}")
    hop = ns(cfg.get("hop_s", 1))
    grace = ns(cfg.get("grace_s", 3))
    tracker = stage_tracker(cfg["stage"], hop, grace, frozenset(cfg.get("required", ())), case.name,
                            max_windows=cfg.get("max_windows", MAX_WINDOWS))
    tracker.released_up_to = cfg.get("restored", 0) * hop
    tick = ns(cfg.get("tick_s", min(0.5, hop / S / 2)))  # the app's timer (stream/runtime/app.py)
    clock = StallClock(grace)  # as the app builds it: the processor's grace
    unread: frozenset[str] = frozenset()
    upstream: dict[str, int] = {}
    unacked: int | None = None
    unreachable = False
    out: list[dict[str, Any]] = []
    promised: int | None = None  # next_due_ns after the last check, if no event came since

    def window_clock(wall: int) -> int:
        return clock.now(wall, unacked, bool(clock.lag_ns) and bool(tracker.behind()), unreachable)

    def check(wall: int, after_event: bool) -> None:
        nonlocal promised
        now = window_clock(wall)
        released = tracker.check(now, unread, upstream)
        if not after_event:  # nothing changed but the clock: the promise says whether a window goes
            assert bool(released) == (promised is not None and promised <= now), \
                f"{case.name}: next_due_ns promised {promised}, the check at clock {now} released {released}"
        for r in released:
            tracker.pop(r.end_ns)
            line: dict[str, Any] = {"at": seconds(wall)}
            if now != wall:
                line["clock"] = seconds(now)
            out.append({**line, "window": r.end_ns // hop, "rule": r.rule, "missing": sorted(r.missing)})
        promised = tracker.next_due_ns()
        if released:  # popped: that may free the next window, so check again now (as the next event or tick would)
            assert promised == (now if tracker.holding() else None)
            check(wall, after_event=True)

    last = ns(events[0]["at"]) if events else 0
    for i, ev in enumerate(events, 2):
        if set(ev) - EVENT_KEYS or "at" not in ev or ("add" in ev) != ("window" in ev):
            raise ValueError(f"{case}/inputs.jsonl:{i}: want \"at\" and keys from {sorted(EVENT_KEYS)} "
                             f"(\"add\" with \"window\"), not {ev}")
        at = ns(ev["at"])
        if at < last:
            raise ValueError(f"{case}/inputs.jsonl:{i}: at {ev['at']} is before the previous event")
        for t in range((last // tick + 1) * tick, at, tick):  # the timer's checks in between
            check(t, after_event=False)
        last = at
        if "unread" in ev:
            unread = frozenset(ev["unread"])
        if "upstream" in ev:
            upstream = {src: w * hop for src, w in ev["upstream"].items()}
        if "unacked_since" in ev:
            unacked = None if ev["unacked_since"] is None else ns(ev["unacked_since"])
        if "unreachable" in ev:
            unreachable = bool(ev["unreachable"])
        sources = ev.get("add", [])
        for src in [sources] if isinstance(sources, str) else sources:
            clock.received(at)
            if not tracker.add(ev["window"] * hop, src, src, src, window_clock(at), identity=src):
                out.append({"at": seconds(at), "late": src, "window": ev["window"]})
        check(at, after_event=True)
    return out


@pytest.mark.parametrize("case", sorted(p.name for p in CASES.iterdir() if (p / "inputs.jsonl").exists()))
def test_case(case: str) -> None:
    got = replay(CASES / case)
    expected = CASES / case / "expected.jsonl"
    if os.environ.get("FLOWTRACER_UPDATE_CASES"):
        expected.write_text("".join(json.dumps(line) + "\n" for line in got))
    assert got == read_jsonl(expected)


def test_every_case_folder_has_both_files() -> None:
    folders = [p for p in CASES.iterdir() if p.is_dir()]
    assert folders
    assert [p.name for p in folders if not {"inputs.jsonl", "expected.jsonl"} <= {f.name for f in p.iterdir()}] == []
