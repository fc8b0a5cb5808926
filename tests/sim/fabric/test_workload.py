"""Workload files and presets: what a network engineer writes, and the errors they get."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.sim.fabric.collectives import Algorithm, Collective
from flowtracer.sim.fabric.engine import Engine
from flowtracer.sim.fabric.workload import (
    PRESETS,
    WorkloadError,
    load_workload,
    parse_duration,
    parse_size,
    preset,
    validate_workload,
)

SAMPLE = Path(__file__).resolve().parents[3] / "sim" / "workload.sample.yaml"


@pytest.mark.parametrize(("text", "value"), [("1GiB", 2**30), ("256MiB", 256 * 2**20), ("64MB", 64_000_000),
                                             ("64M", 64_000_000), ("4096", 4096), (4096, 4096), ("1.5KiB", 1536)])
def test_sizes(text: object, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize(("text", "value"), [("50ms", 0.05), ("2s", 2.0), ("100us", 1e-4), (3, 3.0), ("1.5m", 90.0)])
def test_durations(text: object, value: float) -> None:
    assert parse_duration(text) == pytest.approx(value)


def test_sample_workload_loads_and_runs() -> None:
    wl = load_workload(SAMPLE)
    assert [j.name for j in wl.jobs] == ["llm-train", "pipeline"]
    assert wl.jobs[0].ops[1].collective is Collective.ALLTOALL and wl.jobs[0].ops[1].count == 2
    topo = generate(FabricSpec(hosts=4, leaves=2, spines=2))
    e = Engine(topo, wl, start_ns=1_700_000_000 * 10**9)
    e.advance(2)
    assert sum(len(h.qps) for h in e.host_states.values()) > 0


def test_presets_take_job_and_op_options() -> None:
    wl = preset("tree-allreduce", size="64MiB", channels=4, qps_per_connection=2, compute_gap="10ms", hosts=3,
                background_flows=2, background_rate="5G", seed=9)
    (job,) = wl.jobs
    assert (job.channels, job.qps_per_connection, job.compute_gap, job.hosts) == (4, 2, 0.01, 3)
    assert job.ops[0].algorithm is Algorithm.TREE and job.ops[0].size == 64 * 2**20
    assert wl.seed == 9 and wl.background[0].flows == 2 and wl.background[0].rate == 5_000_000_000
    assert set(PRESETS) == {"ring-allreduce", "tree-allreduce", "allgather", "reducescatter", "alltoall", "pipeline"}


@pytest.mark.parametrize(("data", "message"), [
    ({"jobs": [{"opz": []}]}, "t.yaml: jobs[0].opz: unknown field 'opz'"),
    ({"jobs": [{"ops": [{"collective": "allgather", "algorithm": "tree"}]}]},
     "t.yaml: jobs[0].ops[0]: algorithm 'tree' exists only for allreduce"),
    ({"jobs": [{"ops": [{"collective": "allreduce", "size": "lots"}]}]},
     "t.yaml: jobs[0].ops[0].size: 'lots' is not a size (examples: 1GiB, 256MiB, 64MB, 4096)"),
    ({"jobs": [{"ops": []}]}, "t.yaml: jobs[0].ops: a job needs at least one op"),
    ({"faults": [{"at": "1s"}]}, "t.yaml: faults[0]: give exactly one of link_down, link_up, degrade, restore, reboot"),
    ({"faults": [{"link_down": "leaf01:Ethernet1"}]}, "t.yaml: faults[0].at: missing required field 'at'"),
    ({"faults": [{"at": 1, "gnmi_silent": "spine01", "agent_stop": "host01"}]},
     "t.yaml: faults[0]: give exactly one of"),
    ([1, 2], "t.yaml: expected a mapping with 'jobs'"),
])
def test_bad_workloads_name_the_place(data: object, message: str) -> None:
    with pytest.raises(WorkloadError) as err:
        validate_workload(data, "t.yaml")
    assert str(err.value).startswith(message)


def test_bad_files_and_hosts(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="no such file"):
        load_workload(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("jobs: [\n")
    with pytest.raises(WorkloadError, match=r"bad.yaml: syntax error"):
        load_workload(bad)
    topo = generate(FabricSpec(hosts=2, leaves=1, spines=1))
    with pytest.raises(WorkloadError, match=r"jobs\[0\].hosts: unknown host 'nope'"):
        Engine(topo, validate_workload({"jobs": [{"hosts": ["host01", "nope"]}]}, "t"), start_ns=0)
    with pytest.raises(WorkloadError, match=r"jobs\[0\].nics_per_node: 2 asked for, a host of the job has 1"):
        Engine(topo, validate_workload({"jobs": [{"nics_per_node": 2}]}, "t"), start_ns=0)
    with pytest.raises(WorkloadError, match=r"jobs\[0\].hosts: 5 hosts asked for, the topology has 2"):
        Engine(topo, validate_workload({"jobs": [{"hosts": 5}]}, "t"), start_ns=0)


def test_reporting_faults_are_checked_against_the_fabric() -> None:
    topo = generate(FabricSpec(hosts=2, leaves=1, spines=1))
    wl = validate_workload({"faults": [{"at": "1s", "gnmi_silent": "leaf01"}, {"at": 2, "gnmi_resume": "leaf01"},
                                       {"at": 1, "agent_stop": "host02"}, {"at": "2s", "agent_resume": "host02"}]},
                           "t")
    assert [(f.kind, f.target, f.at) for f in wl.faults] == [
        ("gnmi_silent", "leaf01", 1.0), ("gnmi_resume", "leaf01", 2.0), ("agent_stop", "host02", 1.0),
        ("agent_resume", "host02", 2.0)]
    Engine(topo, wl, start_ns=0)  # names the fabric has: accepted
    for data, message in (({"at": 1, "gnmi_silent": "host01"}, r"faults\[0\].gnmi_silent: no switch named 'host01'"),
                          ({"at": 1, "agent_stop": "leaf01"}, r"faults\[0\].agent_stop: no host named 'leaf01'"),
                          ({"at": 1, "agent_resume": "host01:mlx5_0"}, r"agent_resume: no host named 'host01:mlx5_0'")):
        with pytest.raises(WorkloadError, match=message):
            Engine(topo, validate_workload({"faults": [data]}, "t"), start_ns=0)
