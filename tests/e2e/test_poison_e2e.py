"""Poisoned records injected mid-run into the whole pipeline (sim -> collectors/agent -> Tansu -> ``flowtracer
process``) end with every stage alive (issue 29): a FlowBatch whose two flows of 2^63 + 1 bytes once made the
processor die in ``FlowsStage.finalize``, and one whose collective profile of 2^63 call bytes made the encoder raise,
are dead-lettered with the field named; an NCCL line with a count of 2^64 appended to a host's log costs the agent
one malformed line; the fabric's windows go on being finalized (link loads with measured bytes)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka import KafkaProducer
from kafka_records import topic_records

from flowtracer.demo.local_pipeline import LocalPipeline, PipelineOptions
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2, flows_pb2

pytestmark = pytest.mark.slow

S = 1_000_000_000
POISON = 2**63 + 1
COLL = ("{host}:4242:4242 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x1 recvbuff 0x2 count 18446744073709551616 "
        "datatype 7 op 0 root 0 comm 0x55 [nranks=8] stream 0x9\n")


def test_poisoned_records_mid_run_are_dead_lettered_and_every_stage_stays_up(tmp_path: Path) -> None:
    topo = generate(FabricSpec(hosts=8, leaves=2, spines=2, name="ft8"))
    (tmp_path / "fabric8.yaml").write_text(topo.to_yaml())
    fabric = Fabric(topo)
    options = PipelineOptions(topology=tmp_path / "fabric8.yaml", partitions=2, resolvers=("hash",))
    with LocalPipeline(options, tmp_path / "run") as pipeline:
        pipeline.wait(12)
        now = time.time_ns()
        end = -(-now // S) * S + S  # the next window but one: the real agent's batch for it is not sent yet
        a, b = fabric.nics["host01:mlx5_0"], fabric.nics["host02:mlx5_0"]
        dst = fabric.nics["host05:mlx5_0"]
        flows = [flows_pb2.Flow(rdma_device="mlx5_0", port=1, lqpn=q, rqpn=q + 1, src_ip=a.nic.ip, dst_ip=dst.nic.ip,
                                udp_src_port=50000 + q, udp_dst_port=4791, tx_bytes=POISON) for q in (0x100, 0x101)]
        poisoned_flows = flows_pb2.FlowBatch(schema_version=1, host="host01", leaf=a.leaf, window_start_ns=end - S,
                                             window_end_ns=end, received_ns=now, flows=flows)
        profile = flows_pb2.CollectiveProfile(schema_version=1, job_id="job7", comm_id="0xc0ffee",
                                              operation="AllReduce", datatype=7, datatype_bytes=4, count=2**61,
                                              call_bytes=2**63, calls=1, nranks=8, ranks=[0])
        poisoned_profile = flows_pb2.FlowBatch(schema_version=1, host="host02", leaf=b.leaf, window_start_ns=end - S,
                                               window_end_ns=end, received_ns=now, collectives=[profile])
        producer = KafkaProducer(bootstrap_servers=pipeline.bootstrap, enable_idempotence=False)
        for batch in (poisoned_flows, poisoned_profile):
            producer.send(topics.FLOWS.name, key=topics.key(batch.leaf), value=batch.SerializeToString())
        producer.flush()
        producer.close()
        views = pipeline.ready["host_view_dirs"]
        for host in ("host01", "host02"):  # the agent follows each simulated host's NCCL_DEBUG_FILE
            with (Path(views[host]) / "nccl.log").open("a") as f:
                f.write(COLL.format(host=host))
        pipeline.wait(12)  # raises if any stage (processor, agent, collector) exited
        pipeline.stop_stages()
        got = topic_records(pipeline.bootstrap, topics.DEAD_LETTER.name, topics.LINK_LOADS.name, topics.FLOWS.name)
    letters = [analytics_pb2.DeadLetter.FromString(v) for v in got[topics.DEAD_LETTER.name]]
    # nothing the healthy sources sent was refused (a next hop's octets_forwarded once was: a bound named by suffix)
    assert all(d.topic == topics.FLOWS.name for d in letters), {(d.topic, d.reason[:300]) for d in letters}
    reasons = [d.reason for d in letters if d.topic == topics.FLOWS.name]
    assert any("host host01" in r and "flows[0].tx_bytes" in r for r in reasons), reasons
    assert any("host host02" in r and "collectives[0].call_bytes" in r for r in reasons), reasons
    assert len(reasons) == 2, reasons
    loads = [analytics_pb2.LinkLoad.FromString(v) for v in got[topics.LINK_LOADS.name]]
    after = {ll.window_end_ns for ll in loads if ll.window_end_ns > end + 2 * S and ll.measured_valid}
    assert len(after) >= 5, (end, sorted({ll.window_end_ns for ll in loads})[-5:])  # the fabric's windows go on
    batches = [flows_pb2.FlowBatch.FromString(v) for v in got[topics.FLOWS.name]]
    counted = {b.host for b in batches if b.agent_id and b.window_end_ns > now and b.malformed_records}
    assert counted == {"host01", "host02"}, counted  # the agent counted each host's poisoned NCCL line, and went on  # the fabric's windows go on after the poisoned one
