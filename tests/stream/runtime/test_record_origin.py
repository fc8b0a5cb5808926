"""The processor refuses an agent's record not signed by the host it names (stream/runtime/record_origin.py),
through ``Processor.accept`` as Kafka would deliver the records: dead-lettered (BadRecord) and counted."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas import topics
from flowtracer.schemas.record_identity import host_key, sign
from flowtracer.schemas.v1 import counters_pb2, flows_pb2, traces_pb2
from flowtracer.stream.resolvers.registry import RESOLVERS
from flowtracer.stream.runtime.config import ProcessorConfig
from flowtracer.stream.runtime.inputs import BadRecord
from flowtracer.stream.runtime.processor import Processor

S = 1_000_000_000
END = 1_900_000_000 * S
NOW = END + S // 10
MASTER = b"\x42" * 32
FLOWS, TRACES = topics.FLOWS.name, topics.PATH_TRACES.name


@pytest.fixture
def proc(tmp_path: Path) -> Processor:
    fabric = Fabric(generate(FabricSpec(hosts=4, leaves=2, spines=2, name="id4")))
    topo = tmp_path / "fabric.yaml"
    topo.write_text(fabric.topology.to_yaml())
    p = Processor(ProcessorConfig(topology=topo, kafka="127.0.0.1:9", partitions=2, data_dir=tmp_path), fabric,
                  RESOLVERS["trace"])
    p.require_host_signatures(MASTER)
    return p


def batch(host: str) -> bytes:
    return flows_pb2.FlowBatch(schema_version=1, host=host, leaf="leaf01", agent_id="a", window_start_ns=END - S,
                               window_end_ns=END, received_ns=END).SerializeToString()


def refused(proc: Processor, topic: str) -> float:
    return proc.metrics.registry.get_sample_value("flowtracer_processor_identity_refused_total", {"topic": topic}) or 0


def test_own_batches_pass_and_forged_ones_are_refused_and_counted(proc: Processor) -> None:
    key01 = host_key(MASTER, "host01")
    own = batch("host01")
    proc.accept(FLOWS, 0, own, object(), NOW, b"leaf01", headers=sign(key01, "host01", FLOWS, b"leaf01", own))
    forged = batch("host02")
    cases = {
        "names host 'host02' but was signed by host 'host01'": sign(key01, "host01", FLOWS, b"leaf01", forged),
        "signature of host 'host02' does not match": sign(key01, "host02", FLOWS, b"leaf01", forged),
        "unsigned record": None,
    }
    for reason, headers in cases.items():
        with pytest.raises(BadRecord, match=reason):
            proc.accept(FLOWS, 0, forged, object(), NOW, b"leaf01", headers=headers)
    assert refused(proc, FLOWS) == 3


def test_path_traces_and_their_tombstones_must_come_from_the_sending_host(proc: Processor) -> None:
    key = host_key(MASTER, "host01")
    fid = b"host02:mlx5_0/7/1"
    trace = traces_pb2.PathTrace(schema_version=1, flow_id=fid.decode(), host="host02", src_nic="host02:mlx5_0",
                                 finished_ns=END).SerializeToString()
    with pytest.raises(BadRecord, match="PathTrace names host 'host02' but was signed by host 'host01'"):
        proc.accept(TRACES, 0, trace, object(), NOW, fid, headers=sign(key, "host01", TRACES, fid, trace))
    with pytest.raises(BadRecord, match="PathTrace names host 'host02'"):  # a tombstone: the flow id's host
        proc.accept(TRACES, 0, None, object(), NOW, fid, headers=sign(key, "host01", TRACES, fid, None))
    own = b"host01:mlx5_0/7/1"
    proc.accept(TRACES, 0, None, object(), NOW, own, headers=sign(key, "host01", TRACES, own, None))
    assert refused(proc, TRACES) == 2


def test_switch_records_are_left_to_the_brokers_acls(proc: Processor) -> None:
    cb = counters_pb2.CounterBatch(schema_version=1, switch="leaf01", timestamp_ns=END, received_ns=END,
                                   collector_id="c", session=1, sequence=1).SerializeToString()
    proc.accept(topics.COUNTERS.name, 0, cb, object(), NOW, b"leaf01")  # unsigned, accepted
    assert refused(proc, topics.COUNTERS.name) == 0
