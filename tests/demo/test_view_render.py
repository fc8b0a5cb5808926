"""Drawing the view (no servers): the screen fits 120x40 with every section and marks the newest items; the
compact lines say only what changed."""

from __future__ import annotations

import io
from dataclasses import replace

from rich.console import Console
from test_view_state import T0, incident, observed

from flowtracer.demo.status import Observed
from flowtracer.demo.view_render import Reported, change_lines, screen, sparkline
from flowtracer.demo.view_state import ViewState, first_seen, view_state
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2

S = 1_000_000_000


def text_of(state: ViewState, seen: dict[str, int], width: int = 120) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=width, force_terminal=False, color_system=None).print(screen(state, seen))
    return out.getvalue().splitlines()


def busy() -> Observed:
    """Ten collisions and ten open incidents: more than the screen lists."""
    obs = observed()
    for k in range(10):
        obs.add(topics.COLLISIONS.name, _collision_on(k), 0)
        obs.add(topics.INCIDENTS.name, incident(f"i{k}", "open", T0 + k * S), 0)
    return obs


def _collision_on(k: int) -> bytes:
    return analytics_pb2.Collision(schema_version=1, window_end_ns=T0 + 5 * S, switch=f"leaf{k:02d}",
                                   group=f"leaf{k:02d}:spine01|spine02", link=f"leaf{k:02d}:Ethernet5>spine01:E{k}",
                                   idle_link=f"leaf{k:02d}:Ethernet6>spine02:E{k}", link_utilization=0.5 + k / 100,
                                   ).SerializeToString()


def test_sparkline_scales_0_to_1_onto_eight_blocks_and_keeps_the_newest() -> None:
    assert sparkline([0.0, 0.5, 1.0, 2.0, -1.0]) == "▁▅██▁"
    assert sparkline([i / 100 for i in range(100)], width=10) == sparkline([i / 100 for i in range(90, 100)])
    assert len(sparkline([0.3] * 200)) == 60


def test_the_screen_fits_120x40_with_every_section_and_marks_what_is_new() -> None:
    v = view_state(busy(), "flowtracer demo: 16 hosts", "12s/60s", now_ns=T0 + 7 * S,
                   stages=[("sim", True), ("collect", True)])
    old = {k: T0 - 60 * S for k in first_seen({}, v)}
    old["i9"] = T0 + 6 * S  # the newest incident: first seen a second ago
    lines = text_of(v, old)
    assert len(lines) <= 40 and max(len(line) for line in lines) <= 120, lines
    text = "\n".join(lines)
    assert "fabric FIM   measured 0.500 ▲  attributed 0.250" in text
    assert "  ▂▂▃▄▅  last 5 windows, min 0.100 max 0.500" in text  # the sparkline of 0.1 .. 0.5
    assert "collisions   11 now, 11 seen" in text and "... and 8 more" in text
    assert "incidents    10 open, 0 closed" in text and "... and 7 more" in text
    assert "health       lag 2.0s, windows 5, switches reporting 1, dead letters 0, 2 stages up" in text
    marked = [line for line in lines if line.startswith("★ ") and "new in the last" not in line]
    assert len(marked) == 1 and "degraded_link" in marked[0] and "top suspect cable:leaf03" in marked[0], lines


def test_before_the_first_window_the_screen_says_it_waits() -> None:
    v = view_state(Observed(), "t", "1s", now_ns=T0)
    text = "\n".join(text_of(v, {}))
    assert "waiting for the first rolling window" in text and "collisions   0 now, 0 seen" in text
    assert "lag –" in text


def test_compact_lines_report_changes_only() -> None:
    obs = observed()
    obs.add(topics.INCIDENTS.name, incident("a", "open", T0 + S), 0)
    v = view_state(obs, "t", "5s", now_ns=T0 + 6 * S, stages=[("sim", True)])
    lines, rep = change_lines(Reported(), v)
    assert [line.split(" ", 2)[1] for line in lines] == ["fabric", "+", "+"], lines
    assert "collision leaf01:spine01|spine02: 2 flows on" in lines[1] and "HARMFUL" in lines[1]
    assert "incident degraded_link since" in lines[2] and "top suspect cable:leaf03" in lines[2]
    assert change_lines(rep, v)[0] == []  # nothing changed, nothing said
    assert change_lines(rep, replace(v, fim_measured=0.55))[0] == []  # a window's noise
    [moved], rep2 = change_lines(rep, replace(v, fim_measured=0.65))
    assert moved == "[5s] fabric FIM measured 0.650 attributed 0.250 (was 0.500)"
    gone, _ = change_lines(rep2, replace(v, fim_measured=0.65, collisions=(), incidents=()))
    assert gone == [f"[5s] - collision cleared leaf01:spine01|spine02 on {v.collisions[0].link}",
                    "[5s] - incident closed a"]
    [health], _ = change_lines(rep, replace(v, health=replace(v.health, stages=(("sim", False),))))
    assert health.startswith("[5s] health: ") and "STOPPED: sim" in health
