"""The diagnosis beyond the demo's fault (issue #37), through the whole pipeline on a 32-host, 8-leaf, 4-spine fabric.

Two runs, one per fault, each with the ring all-reduce and the simulator's RoCE congestion model on (PFC), the
collector reading the switches' congestion counters and a real processor (4 partitions). When the processor has
published the windows the assertions need, the stages stop and the output topics are read from the beginning and
diagnosed window by window by the same code ``flowtracer diagnose`` runs (assembly.WindowAssembler, then
incidents.Diagnoser). Ground truth (the fault's time, the job's hosts, the paused ports) is read only to judge.

- **NIC pause storm**: host13's NIC stops draining at 30 s. Its ring predecessor sits behind another leaf, so PFC
  pauses spread from leaf04's port over the spines to leaf03 and host12, and the ring hangs: every host stops
  sending while its agent keeps reporting. One incident, ``pause_storm`` with that NIC on top within 5 s, the paused
  links and stopped hosts as its consequences; nothing else but the collisions the fabric had before the fault.
- **A cable down for the rest of the run**: leaf01's uplink to spine01 at 30 s. Its cable is the top suspect
  within 2 s, its incident is open at the end, and every collision the processor publishes at the end is an open
  incident (the quiet period after the failure does not silence them for as long as the cable stays down).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka import KafkaConsumer

from flowtracer.demo.local_pipeline import LocalPipeline, PipelineOptions
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.sim.fabric.ground_truth import GroundTruth
from flowtracer.sim.fabric.workload import preset, validate_workload
from flowtracer.stream.diagnosis.assembly import TOPICS, WindowAssembler
from flowtracer.stream.diagnosis.incidents import Diagnoser, Incident, State
from flowtracer.stream.diagnosis.localize import IncidentKind
from flowtracer.stream.diagnosis.window import FabricModel, cable_of

pytestmark = pytest.mark.slow

S = 1_000_000_000
SPEC = FabricSpec(hosts=32, leaves=8, spines=4, name="f32")
FAULT_AT_S = 30  # late enough that a loaded machine's pipeline measures windows before it (a port down from the
# start is no news to the diagnosis; under a load of 12 on 2 cores the first window came after 15 s)
BEFORE_WINDOWS = 5  # windows the diagnosis must have seen before the fault for the run to say anything
STALLED = "host13:mlx5_0"
CABLE_END = "leaf01:Ethernet5"
MAX_WAIT_S = 240  # a loaded machine is slower, never a reason to fail


@dataclass
class Run:
    gt: GroundTruth
    fault_ns: int
    incidents: dict[str, Incident]
    last_window_ns: int
    #: (group, shared link) -> window ends the processor published a Collision for it in
    collisions: dict[tuple[str, str], list[int]]
    model: FabricModel


def _run(tmp: Path, fault: dict[str, str], until_s: int) -> Run:
    topo = generate(SPEC)
    (tmp / "topo.yaml").write_text(topo.to_yaml())
    wl = preset("ring-allreduce").model_dump(mode="json", exclude={"congestion"})
    wl |= {"seed": 1, "congestion": {"pfc": True}, "faults": [{"at": FAULT_AT_S, **fault}]}
    validate_workload(wl, "diagnosis e2e")
    (tmp / "workload.json").write_text(json.dumps(wl))
    options = PipelineOptions(topology=tmp / "topo.yaml", workload=str(tmp / "workload.json"), partitions=4,
                              switch_congestion=True)
    with LocalPipeline(options, tmp / "run") as pipeline:
        _wait_for_window(pipeline, pipeline.ready["start_ns"] + until_s * S)
        pipeline.stop_stages()
        records = _read_outputs(pipeline.bootstrap)
        gt = GroundTruth.load(pipeline.ready["ground_truth"])
    model = FabricModel(Fabric(topo))
    assembler = WindowAssembler(S, 10 * S)
    collisions: dict[tuple[str, str], list[int]] = {}
    for topic, value in records:
        assembler.add(topic, value, 0)
        if topic == topics.COLLISIONS.name:
            c = analytics_pb2.Collision.FromString(value)
            collisions.setdefault((c.group, c.link), []).append(c.window_end_ns)
    diagnoser = Diagnoser(model)
    incidents: dict[str, Incident] = {}
    last = 0
    first = 0
    for view, _how in assembler.complete(0, final=True):
        for inc in diagnoser.window(view):
            incidents[inc.id] = inc
        first, last = first or view.end_ns, view.end_ns
    fault_ns = gt.events[0]["t_ns"]
    assert 0 < first <= fault_ns - BEFORE_WINDOWS * S, (
        f"the pipeline's first window ended {(first - gt.start_ns) / S:g} s into the run, the fault came at "
        f"{FAULT_AT_S} s: nothing to diagnose against (machine too slow for this run)")
    return Run(gt, fault_ns, incidents, last, collisions, model)


def _wait_for_window(pipeline: LocalPipeline, end_ns: int) -> None:
    """Until the processor published link loads of the window ending at ``end_ns`` (ns). Not the fabric FIM: a hung
    ring leaves no ECMP group with bytes, and then the fabric stage publishes none."""
    consumer = KafkaConsumer(topics.LINK_LOADS.name, bootstrap_servers=pipeline.bootstrap,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    deadline = time.monotonic() + MAX_WAIT_S
    try:
        while True:
            pipeline.check()
            assert time.monotonic() < deadline, f"no window up to {end_ns} after {MAX_WAIT_S} s"
            for recs in consumer.poll(timeout_ms=1000).values():
                if any(analytics_pb2.LinkLoad.FromString(r.value).window_end_ns >= end_ns for r in recs):
                    return
    finally:
        consumer.close()


def _read_outputs(bootstrap: str) -> list[tuple[str, bytes]]:
    consumer = KafkaConsumer(*TOPICS, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=3000, enable_auto_commit=False)
    try:
        return [(m.topic, m.value) for m in consumer]
    finally:
        consumer.close()


def _opened(run: Run) -> list[Incident]:
    return sorted((i for i in run.incidents.values() if i.state is not None), key=lambda i: i.start_ns)


def _known_collision_groups(run: Run) -> set[str]:
    return {g for (g, _), ends in run.collisions.items() if min(ends) <= run.fault_ns}


@pytest.fixture(scope="module")
def storm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    yield _run(tmp_path_factory.mktemp("storm"), {"nic_stall": STALLED}, FAULT_AT_S + 12)


@pytest.fixture(scope="module")
def cable_down(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    yield _run(tmp_path_factory.mktemp("down"), {"link_down": CABLE_END}, FAULT_AT_S + 25)


def test_a_nic_pause_storm_is_one_incident_with_the_nic_on_top(storm: Run) -> None:
    known = _known_collision_groups(storm)
    opened = _opened(storm)
    others = [i for i in opened if i.kind != IncidentKind.PAUSE_STORM]
    # nothing but the fabric's known collisions: no agent_missing for hosts that only stopped sending, no degraded
    # link for a paused cable
    assert all(i.kind == IncidentKind.PERSISTENT_IMBALANCE and i.top.removeprefix("group:") in known
               for i in others), [(i.kind, i.top) for i in others]
    [inc] = [i for i in opened if i.kind == IncidentKind.PAUSE_STORM]
    assert inc.top == f"nic:{STALLED}", inc.ranked()
    assert inc.detected_ns - storm.fault_ns <= 5 * S, (inc.detected_ns - storm.fault_ns) / S
    assert inc.state is State.OPEN and inc.last_seen_ns == storm.last_window_ns


def test_the_storms_consequences_are_the_paused_links_and_the_hung_job(storm: Run) -> None:
    [inc] = [i for i in _opened(storm) if i.kind == IncidentKind.PAUSE_STORM]
    # every paused switch port is one the simulator says was paused by the storm (or is the stalled NIC's port)
    truth = {port for rec in storm.gt.congestion for port, t in rec["causes"].items()
             if t["cause"] in ("pause", "nic_stall")}
    switches = storm.model.switches
    paused_ports = {lk.split(">")[0] for lk in inc.paused_links if lk.split(":")[0] in switches}
    assert len(paused_ports) >= 3 and paused_ports <= truth, (sorted(paused_ports), sorted(truth))
    assert any(lk.startswith("spine") for lk in inc.paused_links), sorted(inc.paused_links)  # it crossed the spines
    # the hung ring: every host of the job that sends to the stalled NIC stopped, and the job is named
    flows = storm.gt.flows.values()
    job = {f.job for f in flows if f.dst_nic == STALLED}
    hosts = {f.src_nic.split(":")[0] for f in flows if f.job in job}
    assert inc.stopped_hosts == hosts, sorted(hosts ^ inc.stopped_hosts)
    assert inc.jobs and inc.collectives, (inc.jobs, inc.collectives)


def test_a_cable_down_is_on_top_within_2_s_and_stays_open(cable_down: Run) -> None:
    cable = cable_of(cable_down.model.link_from_port[CABLE_END])
    failed = [i for i in _opened(cable_down) if i.kind == IncidentKind.FAILED_LINK]
    [inc] = failed
    assert inc.top == cable and inc.detected_ns - cable_down.fault_ns <= 2 * S, (inc.ranked()[:3],
                                                                                 inc.detected_ns - cable_down.fault_ns)
    assert inc.state is State.OPEN and inc.last_seen_ns == cable_down.last_window_ns


def test_every_collision_at_the_end_is_an_open_incident(cable_down: Run) -> None:
    last = cable_down.last_window_ns
    at_end = {g for (g, _), ends in cable_down.collisions.items() if last in ends}
    assert at_end, "the scenario's collision went away: nothing to check"
    open_groups = {c.removeprefix("group:") for i in cable_down.incidents.values()
                   if i.state is State.OPEN and i.kind == IncidentKind.PERSISTENT_IMBALANCE for c in i.suspects}
    assert at_end <= open_groups, (sorted(at_end), sorted(open_groups))
