"""Congestion causes through the whole pipeline, against the simulator's ground truth (congestion.jsonl ``causes``).

One short run of the 16-host demo fabric with the congestion model on and two of its scenarios at once
(sim/fabric/congestion_scenarios.py): the ``pause_storm`` (the ring all-reduce plus two line-rate flows; host05's
NIC stops draining at 2 s and PFC pauses spread upstream) and the ``incast`` flows (six senders to host16). The
collectors publish the switches' congestion counters (``gnmi.congestion``), the processor (4 partitions, so the
pause chain crosses partitions) writes CongestionCause records. Every record of a fully measured window is
compared with what the simulator says caused that port's congestion in that window: the incast port must be
incast (not a collision), and every paused port must name the NIC at the storm's origin and the chain of ports
the ground truth's ``from`` walks down to it. Nothing about the expected ports or NICs is written here.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from congestion_truth import GT_CAUSE
from kafka import KafkaConsumer

from flowtracer.demo.local_pipeline import LocalPipeline, PipelineOptions
from flowtracer.fabric.routing import Fabric
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.sim.fabric.congestion_scenarios import scenario
from flowtracer.sim.fabric.ground_truth import GroundTruth
from flowtracer.sim.fabric.workload import validate_workload

pytestmark = pytest.mark.slow

S = 1_000_000_000
WINDOWS = 9  # windows with causes to wait for (the first come at the stall, some of them before WARMUP_HOPS)
WARMUP_HOPS = 5  # stages starting, baseline samples, the first (grace-released) windows
MAX_WAIT_S = 90  # a loaded machine is slower, never a reason to fail
STALL_AT_S = 2.0


@dataclass
class Run:
    gt: GroundTruth
    causes: list[analytics_pb2.CongestionCause]
    #: (window end, switch egress port) -> its link, for the ports whose PFC and ECN the processor measured in
    #: the window (a switch whose congestion subscription is still at its baseline sample is not judged).
    measured: dict[tuple[int, str], str]
    switches: frozenset[str]
    lines: list[str]
    first_end: int
    last_end: int


def _workload(path: Path) -> Path:
    """The pause storm's workload with the incast's flows added (both scenarios in one run)."""
    storm = scenario("pause_storm", stall_at=STALL_AT_S).workload.model_dump(mode="json")
    storm["flows"] = storm["flows"] + scenario("incast").workload.model_dump(mode="json")["flows"]
    validate_workload(storm, "congestion cause e2e")
    path.write_text(json.dumps(storm))
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    tmp = tmp_path_factory.mktemp("cause")
    topo = tmp / "fabric16.yaml"
    topo.write_text(scenario("incast").topology.to_yaml())
    collector = tmp / "collector.yaml"
    collector.write_text(json.dumps({"gnmi": {"congestion": True}}))  # JSON is YAML
    lp = tmp / "points.lp"
    options = PipelineOptions(topology=topo, workload=str(_workload(tmp / "workload.json")), partitions=4,
                              collector_args=("--config", str(collector)), line_protocol_file=lp)
    pipeline = LocalPipeline(options, tmp / "run")
    with pipeline:
        _wait_for_windows(pipeline, lp)
        pipeline.stop_stages()
        causes, measured, fabric_ends = _consume(pipeline.bootstrap)
    gt = GroundTruth.load(pipeline.ready["ground_truth"])
    lines = [ln for ln in lp.read_text().splitlines() if ln.startswith("congestion_cause,")] if lp.exists() else []
    switches = Fabric(scenario("incast").topology).switch_names
    yield Run(gt, causes, measured, switches, lines, gt.start_ns + WARMUP_HOPS * S, min(gt.tick_ends[-1], max(fabric_ends, default=0)))


def _wait_for_windows(pipeline: LocalPipeline, lp: Path) -> None:
    """Run until the processor has written causes for WINDOWS windows (it reads nothing else to decide)."""
    ends: set[str] = set()
    offset = 0
    deadline = time.monotonic() + MAX_WAIT_S
    while len(ends) < WINDOWS:
        assert time.monotonic() < deadline, f"only {len(ends)} windows with congestion causes after {MAX_WAIT_S} s"
        pipeline.wait(1.0)
        if lp.exists():
            with lp.open("rb") as f:
                f.seek(offset)
                chunk = f.read()
            complete = chunk[:chunk.rfind(b"\n") + 1]
            offset += len(complete)
            ends |= {ln.rsplit(" ", 1)[1] for ln in complete.decode().splitlines() if ln.startswith("congestion_cause,")}


def _consume(bootstrap: str) -> tuple[list[analytics_pb2.CongestionCause], dict[tuple[int, str], str], list[int]]:
    causes, measured, fabric_ends = [], {}, []
    consumer = KafkaConsumer(topics.CONGESTION_CAUSE.name, topics.LINK_CONGESTION.name, topics.FIM.name,
                             bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=2000,
                             enable_auto_commit=False)
    for m in consumer:
        if m.topic == topics.CONGESTION_CAUSE.name:
            causes.append(analytics_pb2.CongestionCause.FromString(m.value))
        elif m.topic == topics.LINK_CONGESTION.name:
            lc = analytics_pb2.LinkCongestion.FromString(m.value)
            if lc.pfc_valid and lc.ecn_valid:  # only a switch egress port has both
                measured[(lc.window_end_ns, f"{lc.src_node}:{lc.src_port}")] = lc.link
        else:
            f = analytics_pb2.FimSample.FromString(m.value)
            if f.group == "fabric":
                fabric_ends.append(f.window_end_ns)
    consumer.close()
    return causes, measured, fabric_ends


def _chain(causes: dict[str, dict[str, str]], port: str) -> tuple[list[str], str]:
    """The ground truth's walk from a paused port down ``from`` to the origin: (ports, origin NIC or port)."""
    ports = [port]
    while causes.get(ports[-1], {}).get("cause") == "pause" and len(ports) <= len(causes):
        ports.append(causes[ports[-1]]["from"])
    last = causes.get(ports[-1], {})
    return ports, last["from"] if last.get("cause") == "nic_stall" else ports[-1]


def _port(link: str) -> str:
    return link.split(">")[0]


def _scored(r: Run) -> dict[int, dict[str, analytics_pb2.CongestionCause]]:
    """Window end -> link -> record, for the fully measured windows the processor finalized."""
    out: dict[int, dict[str, analytics_pb2.CongestionCause]] = {}
    for c in r.causes:
        if r.first_end <= c.window_end_ns <= r.last_end:
            out.setdefault(c.window_end_ns, {})[c.link] = c  # a replayed window says the same
    return out


def test_every_congested_port_gets_the_ground_truths_cause_and_the_storm_its_origin(run: Run) -> None:
    scored = _scored(run)
    assert len(scored) >= WINDOWS - 4, sorted(scored)  # windows lost only at the start and the end
    pause_checked = incast_checked = whole = 0
    for end, records in sorted(scored.items()):
        truth = run.gt.congestion_in(end - S, end).causes
        by_port = {_port(lid): c for lid, c in records.items() if (end, _port(lid)) in run.measured}
        judged = {p: t for p, t in truth.items() if (end, p) in run.measured}
        assert set(by_port) == set(judged), (end, sorted(by_port), sorted(judged))
        for port, t in judged.items():
            c = by_port[port]
            ports, origin = _chain(truth, port)
            if not all((end, p) in run.measured for p in ports):  # the pause comes from a switch not yet measured
                assert c.cause in (GT_CAUSE[t["cause"]], "unknown"), (end, port, t, c.evidence)
                continue
            assert c.cause == GT_CAUSE[t["cause"]], (end, port, t, c.evidence)
            if c.cause == "pause_spread":
                assert (c.origin, [_port(lid) for lid in c.spread_links]) == (origin, ports), (end, port, c.evidence)
                pause_checked += 1
            elif c.cause == "incast":
                assert c.origin == t["from"] and c.sources >= 2, (end, port, c.evidence)
                incast_checked += 1
        if judged != truth:
            continue
        whole += 1
        # Host uplinks (no egress queue, so no ground-truth cause) paused by their leaf: the same storm.
        stalled = {t["from"] for t in truth.values() if t["cause"] == "nic_stall"}
        for c in records.values():
            if c.src_node not in run.switches:
                assert c.cause == "pause_spread" and c.origin in stalled, (end, c.link, c.evidence)
                assert _chain(truth, _port(c.spread_links[1])) == ([_port(x) for x in c.spread_links[1:]], c.origin)
    # Most windows are judged whole (every port with a ground-truth cause measured), and in each the storm's tree
    # has several switch ports and the incast one.
    assert whole >= len(scored) - 2 and pause_checked >= 5 * whole and incast_checked >= whole, (
        whole, pause_checked, incast_checked)


def test_the_incast_port_is_never_a_collision_and_the_storm_reaches_the_senders(run: Run) -> None:
    scored = _scored(run)
    stalled = {t["from"] for rec in run.gt.congestion for t in rec["causes"].values() if t["cause"] == "nic_stall"}
    assert len(stalled) == 1
    incast_ports = {p for rec in run.gt.congestion for p, t in rec["causes"].items() if t["cause"] == "incast"}
    for records in scored.values():
        for c in records.values():
            if _port(c.link) in incast_ports:
                assert c.cause != "collision", c.evidence
    last = scored[max(scored)]
    senders = {c.src_node for c in last.values() if c.src_node not in run.switches}
    assert len(senders) >= 2 and all(c.origin in stalled for c in last.values() if c.cause == "pause_spread")


def test_the_causes_reach_the_store_as_lines(run: Run) -> None:
    last = max(_scored(run))
    mine = [ln for ln in run.lines if ln.endswith(f" {last}")]
    assert {re.search(r",link=([^,]+)", ln).group(1) for ln in mine} == set(_scored(run)[last])  # type: ignore[union-attr]
    assert any("cause=pause_spread" in ln and "spread_links=" in ln for ln in mine)
    assert any("cause=incast" in ln for ln in mine)
