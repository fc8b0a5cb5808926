"""The demo supervisor's :class:`Observed` keeps a bounded span of windows however long the run (issue 27): after
many times the kept span, its per-window maps hold the kept span, no more, and the newest windows are intact."""

from __future__ import annotations

from flowtracer.demo.status import PRUNE_EVERY_NS, Observed
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2

S = 1_000_000_000
T0 = 1_800_000_000 * S
LINKS = ("leaf01:e5>spine01:e1", "leaf01:e6>spine02:e1", "h1:n>leaf01:e1")
SWITCHES = frozenset({"leaf01", "spine01", "spine02"})


def feed(obs: Observed, end: int) -> None:
    """One window's outputs: a fabric FIM sample, three link loads, two path loads."""
    obs.add(topics.FIM.name, analytics_pb2.FimSample(window_end_ns=end, group="fabric", fim=0.5,
                                                     basis=analytics_pb2.LOAD_BASIS_MEASURED).SerializeToString(),
            end // 1_000_000 + 1500)
    for link in LINKS:
        src, dst = link.split(">")
        obs.add(topics.LINK_LOADS.name, analytics_pb2.LinkLoad(
            window_end_ns=end, link=link, src_node=src.split(":")[0], dst_node=dst.split(":")[0], measured_bytes=100,
            measured_valid=True, attributed_bytes=100).SerializeToString(), end // 1_000_000 + 1500)
    for path in ("p1", "p2"):
        obs.add(topics.PATH_LOADS.name, analytics_pb2.PathLoad(window_end_ns=end, path_id=path, bytes=10,
                                                               traced_bytes=10, confidence=1.0).SerializeToString(),
                end // 1_000_000 + 1500)


def sizes(obs: Observed) -> tuple[int, ...]:
    return (len(obs.fabric_fim), len(obs.link_loads), len(obs.path_loads), len(obs.link_bytes), len(obs.switches),
            len(obs.fabric_bytes), len(obs.latency_ends) // len(LINKS))


def test_per_window_detail_is_bounded_after_many_kept_spans() -> None:
    keep_windows = 120
    obs = Observed(switch_names=SWITCHES, keep_ns=keep_windows * S)
    bound = keep_windows + PRUNE_EVERY_NS // S + 1  # the kept span, plus up to one prune period not yet dropped
    peak = 0
    for i in range(1, 10 * keep_windows + 1):  # ten kept spans, pruned many times over
        feed(obs, T0 + i * S)
        peak = max(peak, *sizes(obs))
    assert peak <= bound, f"per-window maps reached {peak} windows, bound {bound}"
    newest = T0 + 10 * keep_windows * S
    assert obs.pruned_before_ns > T0 + 8 * keep_windows * S  # pruned recently, not once at the start
    assert min(obs.link_loads) >= newest - keep_windows * S - PRUNE_EVERY_NS
    assert obs.path_loads[newest] == {"p1": (10, 10, 1.0), "p2": (10, 10, 1.0)}
    assert obs.fabric_bytes[newest] == 200  # the two switch-to-switch links
    assert obs.latency_stats()["samples"] == len(obs.latency_ends) > 0
    assert obs.latency_stats()["p50_s"] == 1.5


def test_short_runs_keep_every_window() -> None:
    obs = Observed(switch_names=SWITCHES)  # the default: an hour of windows
    for i in range(1, 301):
        feed(obs, T0 + i * S)
    assert obs.pruned_before_ns == 0 and sizes(obs) == (300,) * 7
