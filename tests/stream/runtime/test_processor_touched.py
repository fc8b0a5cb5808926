"""``Processor.finalize(touched_only=True)``, what the app runs after every record: only the stages that buffered a
record since the last call, with the same outputs as finalizing every stage."""

from __future__ import annotations

from pathlib import Path

from flowtracer.schemas import topics
from flowtracer.schemas.fabric import Fabric
from flowtracer.schemas.topics import partition_for
from flowtracer.schemas.topology_generate import FabricSpec, generate
from flowtracer.schemas.v1 import common_pb2, counters_pb2, flows_pb2
from flowtracer.stream.resolvers.registry import RESOLVERS
from flowtracer.stream.runtime.config import ProcessorConfig
from flowtracer.stream.runtime.processor import Processor

S = 1_000_000_000
P = 2
END = 1_900_000_000 * S
NOW = END + S // 10


def _fed(tmp_path: Path) -> Processor:
    """A processor holding one window of idle counters and flows of every switch and NIC."""
    fabric = Fabric(generate(FabricSpec(hosts=4, leaves=2, spines=2, name="touched")))
    tmp_path.mkdir(exist_ok=True)
    topo = tmp_path / "fabric.yaml"
    topo.write_text(fabric.topology.to_yaml())
    proc = Processor(ProcessorConfig(topology=topo, kafka="127.0.0.1:9", partitions=P, data_dir=tmp_path), fabric,
                     RESOLVERS["hash"])
    zero = common_pb2.Counter(value=0, delta=0, status=common_pb2.DELTA_STATUS_OK)
    for sw in sorted(fabric.switch_names):
        cb = counters_pb2.CounterBatch(schema_version=1, switch=sw, timestamp_ns=END, received_ns=END, session=1)
        for port in sorted({lk.src_port for lk in fabric.out_links[sw]}):
            cb.interfaces.add(name=port, interval_ns=S, out_octets=zero, in_octets=zero)
        proc.accept(topics.COUNTERS.name, partition_for(sw, P), cb.SerializeToString(), None, NOW)
    for nic in sorted(fabric.nics.values(), key=lambda n: n.name):
        fb = flows_pb2.FlowBatch(schema_version=1, host=nic.host, leaf=nic.leaf, window_start_ns=END - S,
                                 window_end_ns=END, received_ns=END)
        proc.accept(topics.FLOWS.name, partition_for(nic.leaf, P), fb.SerializeToString(), None, NOW)
    return proc


def _window(tmp_path: Path, touched_only: bool) -> tuple[list[bytes], list[int]]:
    """The attributions one destination partition at a time, each followed by a finalize; the serialized
    outputs and the windows each finalize released."""
    proc = _fed(tmp_path)
    first = proc.finalize(NOW, touched_only)
    outputs, released = [m.SerializeToString() for m in first.link_loads], [first.windows]
    for dest in range(P):
        for d, ab in first.attributions:
            if d == dest:
                proc.accept(topics.ATTRIBUTIONS.name, d, ab.SerializeToString(), None, NOW)
        e = proc.finalize(NOW, touched_only)
        outputs += [m.SerializeToString() for m in e.link_loads]
        released.append(e.windows)
    return sorted(outputs), released


def test_only_the_touched_stages_are_finalized_and_the_outputs_are_the_same(tmp_path: Path) -> None:
    every, every_released = _window(tmp_path / "every", touched_only=False)
    touched, touched_released = _window(tmp_path / "touched", touched_only=True)
    assert touched == every and every  # the same link loads, and some
    # Each destination's attributions complete its links stage's window in the finalize right after them.
    assert touched_released == every_released and touched_released[1] >= 1 and touched_released[2] >= 1


def test_an_untouched_stage_waits_for_the_full_finalize(tmp_path: Path) -> None:
    proc = _fed(tmp_path)
    first = proc.finalize(NOW, touched_only=True)
    waiting = partition_for(min(proc.fabric.switch_names), P)  # its links stage holds that switch's counters
    for d, ab in first.attributions:
        if d != waiting:
            proc.accept(topics.ATTRIBUTIONS.name, d, ab.SerializeToString(), None, NOW)
    later = NOW + 100 * S  # past every grace: the waiting stage's window, without its attributions, is overdue
    assert proc.finalize(later, touched_only=True).windows == P - 1  # the other links stages only
    assert proc.finalize(later, touched_only=True).windows == 0  # nothing touched since
    assert proc.finalize(later).windows == 1  # the timer's full finalize waits the waiting stage's window out
