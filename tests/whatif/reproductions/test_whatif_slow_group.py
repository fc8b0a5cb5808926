"""Heterogeneous jobs in the what-if tool: the iteration time from the agents' opCounts, the slow-group model, the
FIM with every node fast, and ``flowtracer whatif --node-group`` on a recording."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from ring_batches import S, ring_batches

from flowtracer.cmd_whatif import whatif
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.whatif.iterations import HostSample, host_sample, job_iteration_s, progress
from flowtracer.whatif.record import Recording, windows, write_export
from flowtracer.whatif.reproductions.slow_group import (
    NodeGroup,
    NodeGroupError,
    fim_effect,
    job_report,
    parse_node_group,
    scale_job,
    slow_group_effect,
)

TOPO = generate(FabricSpec(hosts=8, leaves=2, spines=2, name="f8"))
HOSTS = [h.name for h in TOPO.hosts]
SLOW = NodeGroup("slow", ("host07", "host08"), 200e9)
G = 1e9
#: A ring iteration with the slow group: 50 ms of compute plus 2 GB per NIC at 200G.
BYTES = 2e9
T_SLOW = 0.05 + BYTES * 8 / 200e9


def test_iteration_time_is_span_over_ops_and_bytes_follow_it() -> None:
    samples = [host_sample(b) for b in ring_batches(TOPO, HOSTS, T_SLOW, BYTES, 30)]
    prog = progress(samples)
    assert set(prog) == set(HOSTS)
    p = prog["host01"]
    # 29 s between the first and last window; opCount known to +-1 op of ~220.
    assert p.seconds == 29 and p.ops == pytest.approx(29 / T_SLOW, abs=1)
    assert p.iteration_s == pytest.approx(T_SLOW, rel=0.01)
    assert p.bytes_per_iteration == pytest.approx(BYTES, rel=0.01)
    assert p.tx_bps == pytest.approx(BYTES * 8 / T_SLOW, rel=1e-6)
    assert job_iteration_s(list(prog.values())) == pytest.approx(T_SLOW, rel=0.01)
    # A span without windows of the job, and ops counted per iteration.
    assert progress(samples, from_ns=40 * S) == {}
    two = progress([host_sample(b) for b in ring_batches(TOPO, HOSTS, T_SLOW, BYTES, 30, ops_per_iteration=2)], 2)
    assert two["host01"].iteration_s == pytest.approx(T_SLOW, rel=0.01)


def test_the_busiest_communicator_and_a_host_on_two_leaves() -> None:
    # Two batches of one window (a host with NICs on two leaves) merge: bytes add up, opCounts take the highest.
    samples = [HostSample("h", S, 10, {"a": 5, "b": 1}), HostSample("h", S, 7, {"a": 6}),
               HostSample("h", 3 * S, 30, {"a": 16, "b": 100}), HostSample("h", 2 * S, 20, {"a": 11})]
    p = progress(samples)["h"]
    assert (p.comm_id, p.ops, p.seconds) == ("b", 99, 2.0)  # b advanced most (its ends: 1 s and 3 s)
    assert p.bytes_per_iteration == pytest.approx(50 / 99)  # the windows after the first: 20 + 30 bytes


def test_model_splits_the_iteration_and_speeds_every_node_up() -> None:
    e = slow_group_effect(T_SLOW, BYTES, HOSTS, [SLOW], 400e9)
    assert (e.comm_s, e.compute_s) == pytest.approx((0.08, 0.05))
    assert e.all_fast_iteration_s == pytest.approx(0.05 + 0.04) and e.slowdown == pytest.approx(0.13 / 0.09)
    assert (e.nic_bottleneck, e.compute_bottleneck) == ("slow", "")
    gpus = NodeGroup("old", ("host01",), None, 2.0)
    e = slow_group_effect(0.1 + 0.04, BYTES, HOSTS, [gpus], 400e9)
    assert (e.all_fast_compute_s, e.all_fast_iteration_s, e.compute_bottleneck) == pytest.approx((0.05, 0.09, "old"))
    # A group outside the job changes nothing.
    assert slow_group_effect(0.09, BYTES, HOSTS[:6], [SLOW], 400e9).slowdown == pytest.approx(1.0)
    with pytest.raises(ValueError):
        slow_group_effect(0.0, BYTES, HOSTS, [SLOW], 400e9)


def test_fim_with_every_node_fast_moves_only_when_other_traffic_shares_the_groups() -> None:
    fabric = Fabric(TOPO)
    wins, _ = windows(Recording(flow_batches=ring_batches(TOPO, HOSTS, T_SLOW, BYTES, 5)), fabric)
    ring_alone = fim_effect(wins, fabric, {"0xc0ffee"}, 1.5)
    assert ring_alone[0] == pytest.approx(ring_alone[1])  # the FIM is scale-invariant
    # A steady flow of another job shares the leaf uplinks: scaling the ring changes the balance.
    other = ring_batches(TOPO, ["host01", "host05"], T_SLOW, 20e9, 5, comm_id="0xbeef", channels=1)
    mixed, _ = windows(Recording(flow_batches=ring_batches(TOPO, HOSTS, T_SLOW, BYTES, 5) + other), fabric)
    as_is, fast = fim_effect(mixed, fabric, {"0xc0ffee"}, 1.5)
    assert as_is != pytest.approx(fast)
    scaled = scale_job(mixed, {"0xc0ffee"}, 1.5)
    for w0, w1 in zip(mixed, scaled, strict=True):
        for f0, f1 in zip(w0.flows, w1.flows, strict=True):
            assert f1 == replace(f0, bytes=round(f0.bytes * (1.5 if f0.comm_id == "0xc0ffee" else 1)))


def test_job_report_names_the_slow_group() -> None:
    fabric = Fabric(TOPO)
    batches = ring_batches(TOPO, HOSTS, T_SLOW, BYTES, 20)
    wins, _ = windows(Recording(flow_batches=batches), fabric)
    rep = job_report([host_sample(b) for b in batches], wins, fabric, [SLOW])
    assert rep["hosts"] == HOSTS and rep["hosts_measured"] == 8 and rep["line_rate_bps"] == 400e9
    slow, rest = rep["groups"]
    assert (slow["name"], slow["slow"], slow["hosts"]) == ("slow", True, ["host07", "host08"])
    assert (rest["name"], rest["slow"], len(rest["hosts"])) == ("rest", False, 6)
    # Every host moves the same bytes (a ring): the slow group's NICs are twice as busy at their own rate.
    assert slow["nic_busy"] == pytest.approx(2 * rest["nic_busy"], abs=2e-3)
    assert slow["nic_busy"] == pytest.approx(0.08 / T_SLOW, abs=2e-3)
    assert rep["model"]["all_fast_iteration_s"] == pytest.approx(0.09, rel=0.01)
    assert rep["model"]["nic_bottleneck"] == "slow"
    assert rep["fim"]["replay_as_recorded"] == pytest.approx(rep["fim"]["replay_all_fast"])


@pytest.mark.parametrize(("text", "group"), [
    ("host07,host08:200G", NodeGroup("host07,host08", ("host07", "host08"), 200e9)),
    ("host01::x1.5", NodeGroup("host01", ("host01",), None, 1.5)),
    ("host01:100G:x2", NodeGroup("host01", ("host01",), 100e9, 2.0)),
])
def test_node_group_text(text: str, group: NodeGroup) -> None:
    assert parse_node_group(text) == group


@pytest.mark.parametrize("text", [":200G", "host01:fast", "host01:200G:2", "host01:200G:x0", "a:b:c:d"])
def test_bad_node_group_is_one_line(text: str) -> None:
    with pytest.raises(NodeGroupError, match="--node-group"):
        parse_node_group(text)


@pytest.fixture
def recording(tmp_path: Path) -> tuple[Path, Path]:
    topo, rec = tmp_path / "f8.yaml", tmp_path / "rec.jsonl"
    topo.write_text(TOPO.to_yaml())
    with rec.open("w") as fh:
        write_export(Recording(flow_batches=ring_batches(TOPO, HOSTS, T_SLOW, BYTES, 20), source="test"), fh)
    return topo, rec


def test_cli_reports_the_slow_group(recording: tuple[Path, Path]) -> None:
    topo, rec = recording
    args = ["--topology", str(topo), "--input", str(rec), "--node-group", "host07,host08:200G"]
    r = CliRunner().invoke(whatif, args, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    # Windows end 1..20 s into the job: 19 s from the first to the last, opCount floor(20 / T) - floor(1 / T) = 146.
    measured = 19 / 146
    per_iteration = BYTES / T_SLOW * 19 / 146
    all_fast = measured - per_iteration * 8 / 200e9 + per_iteration * 8 / 400e9
    assert f"iteration {measured * 1e3:.1f} ms measured" in r.output
    assert "SLOW group host07, host08 (2): NIC 200G" in r.output
    assert f"all nodes fast (what-if model): iteration {all_fast * 1e3:.1f} ms" in r.output
    assert f"{measured / all_fast:.2f}x as long" in r.output
    r = CliRunner().invoke(whatif, [*args, "--json"], catch_exceptions=False)
    doc = json.loads(r.output)["node_groups"]
    assert doc["iteration_s"] == pytest.approx(T_SLOW, rel=0.01) and doc["groups"][0]["slow"]


@pytest.mark.parametrize(("group", "message"), [
    ("host99:200G", "--node-group host99: the topology has no host 'host99'"),
    ("host07:200G:y", "--node-group 'host07:200G:y': 'y' is not a compute scale"),
])
def test_cli_bad_node_group(recording: tuple[Path, Path], group: str, message: str) -> None:
    topo, rec = recording
    r = CliRunner().invoke(whatif, ["--topology", str(topo), "--input", str(rec), "--node-group", group])
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output
