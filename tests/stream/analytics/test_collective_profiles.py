"""The agents' collective profiles through the Processor: a FlowBatch's ``collectives`` come out as
CollectiveProfile records of the processor's window and as ``collective_profile`` lines."""

from __future__ import annotations

from pathlib import Path

from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas import topics
from flowtracer.schemas.topics import partition_for
from flowtracer.schemas.v1 import flows_pb2
from flowtracer.stream.analytics.collective_profiles import collective_profiles
from flowtracer.stream.resolvers.registry import RESOLVERS
from flowtracer.stream.runtime.config import ProcessorConfig
from flowtracer.stream.runtime.processor import Processor
from flowtracer.stream.runtime.worker import emitted_lines
from flowtracer.stream.stages.emitted import Emitted

S = 1_000_000_000
P = 2
END = 1_900_000_000 * S


def _profile(**kw: object) -> flows_pb2.CollectiveProfile:
    fields: dict[str, object] = {
        "schema_version": 1, "window_start_ns": END - S + 7, "window_end_ns": END + 7, "host": "host01",
        "job_id": "ring", "comm_id": "0xabc", "operation": "AllReduce", "datatype": 9, "datatype_bytes": 2,
        "count": 1024, "call_bytes": 2048, "calls": 5, "nranks": 8, "ranks": [0, 1]}
    return flows_pb2.CollectiveProfile(**(fields | kw))  # type: ignore[arg-type]


def test_profiles_take_the_processors_window_and_the_batchs_host() -> None:
    fb = flows_pb2.FlowBatch(schema_version=1, host="host01", leaf="leaf01", collectives=[_profile(), _profile(host="")])
    a, b = collective_profiles(fb, END - S, END)
    assert (a.window_start_ns, a.window_end_ns, a.calls, list(a.ranks)) == (END - S, END, 5, [0, 1])
    assert b.host == "host01" and fb.collectives[0].window_end_ns == END + 7  # a copy: the batch is untouched


def test_a_flow_batchs_profiles_are_published_with_the_window(tmp_path: Path) -> None:
    fabric = Fabric(generate(FabricSpec(hosts=4, leaves=2, spines=2, name="coll4")))
    topo = tmp_path / "fabric.yaml"
    topo.write_text(fabric.topology.to_yaml())
    proc = Processor(ProcessorConfig(topology=topo, kafka="127.0.0.1:9", partitions=P, data_dir=tmp_path), fabric,
                     RESOLVERS["hash"])
    for host in ("host01", "host02", "host03", "host04"):
        nic = fabric.nics[f"{host}:mlx5_0"]
        fb = flows_pb2.FlowBatch(schema_version=1, host=host, leaf=nic.leaf, window_start_ns=END - S,
                                 window_end_ns=END, received_ns=END)
        if host == "host01":
            fb.collectives.append(_profile(first_call_ns=END - S // 2, last_call_ns=END - S // 4, timed_calls=4,
                                           timed_ns=S // 100, algo_bw_bytes_per_s=819200.0,
                                           bus_bw_bytes_per_s=1433600.0))
        proc.accept(topics.FLOWS.name, partition_for(nic.leaf, P), fb.SerializeToString(), object(), END + S // 10)
    out = Emitted()
    out.extend(proc.finalize(END + 60 * S))  # no counters come: the window is due after its grace
    [p] = out.collective_profiles
    assert (p.host, p.job_id, p.operation, p.calls, p.window_end_ns) == ("host01", "ring", "AllReduce", 5, END)
    [line] = [t for t in emitted_lines(out) if t.startswith("collective_profile,")]
    assert line == (
        "collective_profile,comm=0xabc,count=1024,datatype=9,host=host01,job=ring,operation=AllReduce calls=5i,"
        f"call_bytes=2048i,bytes=10240i,datatype_bytes=2i,nranks=8i,ranks=\"0,1\",first_call_ns={END - S // 2}i,"
        f"last_call_ns={END - S // 4}i,timed_calls=4i,timed_ns={S // 100}i,algo_bw_bytes_per_s=819200.0,"
        f"bus_bw_bytes_per_s=1433600.0 {END}")
