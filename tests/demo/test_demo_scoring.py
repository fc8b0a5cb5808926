"""demo/scoring.py on a ground truth built in memory (the real GroundTruth class) and output records folded by the
real Observed: the definitions of docs/demo.md, number by number."""

from __future__ import annotations

from flowtracer.demo.scoring import flow_section, link_section, path_section
from flowtracer.demo.status import Observed
from flowtracer.schemas import topics
from flowtracer.schemas.openconfig import INTERFACE_COUNTERS
from flowtracer.schemas.v1 import analytics_pb2, common_pb2
from flowtracer.sim.fabric.ground_truth import FlowInfo, GroundTruth

S = 1_000_000_000
T0 = 1_800_000_000 * S
UP1, UP2 = "leaf01:e5>spine01:e1", "leaf01:e6>spine02:e1"
DOWN1, DOWN2 = "spine01:e2>leaf02:e5", "spine02:e2>leaf02:e5"
P1 = ("h1:n>leaf01:e1", UP1, DOWN1, "leaf02:e1>h2:n")
P2 = ("h1:n>leaf01:e1", UP2, DOWN2, "leaf02:e1>h2:n")


def _flow(fid: int) -> FlowInfo:
    return FlowInfo(fid, fid, "data", "j", "ring", "h1", "n", "h2", "n", "10.0.0.1", "10.0.0.2", 49152 + fid, 4791,
                    fid, fid, 1, "c", "cid", 0, 0, 1, T0)


def _counters(t_ns: int, up1: int, up2: int) -> dict[str, object]:
    def iface(out_octets: int) -> list[int]:
        return [1, *[out_octets if c == "out-octets" else 0 for c in INTERFACE_COUNTERS]]

    sw = {"boot_epoch": 0, "available": True, "last_clear_ns": 0, "next_hops": {}, "groups": {},
          "interfaces": {"e5": iface(up1), "e6": iface(up2)}}
    return {"t_ns": t_ns, "switches": {"leaf01": sw}}


def _ground_truth(windows: int) -> GroundTruth:
    """Two flows of 100 bytes per 1 s tick: flow 1 on P1, flow 2 on P2; leaf01's uplinks count 100 each."""
    ticks = [{"start_ns": T0 + i * S, "end_ns": T0 + (i + 1) * S, "flows": [[1, 1, 100, 1, 90], [2, 2, 100, 1, 90]],
              "links": [], "groups": {}} for i in range(windows)]
    counters = [_counters(T0 + i * S, 100 * i, 100 * i) for i in range(windows + 1)]
    return GroundTruth({"tick_ns": S, "start_ns": T0}, {1: _flow(1), 2: _flow(2)}, {1: P1, 2: P2}, ticks, counters, [])


def _path_load(end: int, path: tuple[str, ...], b: int, traced: int, conf: float) -> bytes:
    return analytics_pb2.PathLoad(window_end_ns=end, path_id="|".join(path), links=path, bytes=b, traced_bytes=traced,
                                  confidence=conf, resolver="trace").SerializeToString()


def _link_load(end: int, link: str, measured: int, attributed: int) -> bytes:
    src, dst = link.split(">")
    return analytics_pb2.LinkLoad(window_end_ns=end, link=link, src_node=src.split(":")[0], dst_node=dst.split(":")[0],
                                  measured_bytes=measured, measured_valid=True, attributed_bytes=attributed,
                                  unexplained_bytes=measured - attributed, resolver="hash").SerializeToString()


def test_path_scores_follow_the_definitions() -> None:
    gt = _ground_truth(4)
    obs = Observed(switch_names=frozenset({"leaf01", "spine01", "spine02", "leaf02"}))
    for i in range(1, 5):
        end = T0 + i * S
        if i == 1:  # before the warm-up: not scored, however wrong
            obs.add(topics.PATH_LOADS.name, _path_load(end, P1, 999, 0, 1.0), 0)
        elif i == 2:  # both flows on P1: 100 bytes right, 100 on a wrong path
            obs.add(topics.PATH_LOADS.name, _path_load(end, P1, 200, 0, 0.5), 0)
        else:
            obs.add(topics.PATH_LOADS.name, _path_load(end, P1, 100, 100, 1.0), 0)
            obs.add(topics.PATH_LOADS.name, _path_load(end, P2, 100, 100, 1.0), 0)
    p = path_section(obs, gt, hop_s=1.0, warmup_s=2.0)
    assert p["windows_scored"] == 3 and p["truth_bytes"] == 600 and p["placed_bytes"] == 600
    assert p["path_overlap"] == round(500 / 600, 4)
    assert p["path_load_error"] == round(200 / 600, 4) and p["path_load_error_worst_window"] == 1.0
    assert p["traced_share"] == round(400 / 600, 4) and p["confidence"] == round((200 * 0.5 + 400) / 600, 4)


def test_link_scores_use_the_switch_counters_and_only_switch_links_for_unexplained() -> None:
    gt = _ground_truth(3)
    obs = Observed(switch_names=frozenset({"leaf01", "spine01", "spine02"}))
    end = T0 + 3 * S
    obs.add(topics.LINK_LOADS.name, _link_load(end, UP1, 100, 200), 0)  # a model that put both flows on UP1
    obs.add(topics.LINK_LOADS.name, _link_load(end, UP2, 90, 0), 0)  # a measurement 10 bytes short
    obs.add(topics.LINK_LOADS.name, _link_load(end, "h1:n>leaf01:e1", 200, 0), 0)  # host link: no switch counts tx
    lk = link_section(obs, gt, hop_s=1.0, warmup_s=0.0)
    assert lk["link_windows"] == 2 and lk["exact"] == 1 and lk["error"] == round(10 / 200, 4)
    assert lk["unexplained_share"] == round((100 + 90) / 190, 4)


def _flow_path(end: int, fid: int, path: tuple[str, ...], change: int) -> bytes:
    return analytics_pb2.FlowPath(
        schema_version=1, window_start_ns=end - S, window_end_ns=end, flow_id=f"h1:n/{fid}/1",
        key=common_pb2.FlowKey(src_ip="10.0.0.1", dst_ip="10.0.0.2", udp_src_port=49152 + fid),
        links=path, change=change, method="hash").SerializeToString()


def test_flow_scores_hold_each_flows_published_path_until_the_next_record() -> None:
    gt = _ground_truth(4)
    obs = Observed(switch_names=frozenset({"leaf01", "spine01", "spine02", "leaf02"}))
    for i in range(1, 5):
        obs.add(topics.PATH_LOADS.name, _path_load(T0 + i * S, P1, 100, 0, 1.0), 0)  # the windows the processor closed
    # flow 1: published once, right, before the scored windows (no record in them: the path holds);
    # flow 2: published on P1 (wrong) until window 3 moves it to P2 (its true path)
    obs.add(topics.FLOW_PATHS.name, _flow_path(T0 + S, 1, P1, analytics_pb2.FLOW_PATH_CHANGE_FIRST), 0)
    obs.add(topics.FLOW_PATHS.name, _flow_path(T0 + S, 2, P1, analytics_pb2.FLOW_PATH_CHANGE_FIRST), 0)
    obs.add(topics.FLOW_PATHS.name, _flow_path(T0 + 3 * S, 2, P2, analytics_pb2.FLOW_PATH_CHANGE_PATH), 0)
    f = flow_section(obs, gt, hop_s=1.0, warmup_s=2.0)
    assert (f["windows_scored"], f["flows_scored"]) == (3, 2)
    assert f["flow_true_path_share"] == round(500 / 600, 4)
    assert f["lowest_flow_share"] == round(2 / 3, 4) and f["flows_below"] == 1
    assert [w["udp_src_port"] for w in f["worst_flows"]] == [49154]
    # a flow never published counts wholly wrong
    empty = Observed(switch_names=obs.switch_names)
    empty.add(topics.PATH_LOADS.name, _path_load(T0 + 3 * S, P1, 100, 0, 1.0), 0)
    assert flow_section(empty, gt, hop_s=1.0, warmup_s=2.0)["flow_true_path_share"] == 0.0
