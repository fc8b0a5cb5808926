"""The agents' collective profiles (FlowBatch ``collectives``) as the processor's output records.

The agents aggregate NCCL's COLL lines per host, job, communicator, operation and size (docs/agent.md,
Collective profiles); the processor passes each on unchanged but for the window, which becomes its own (the
window the batch was finalized in), so every output of one window carries one window end. Pure.
"""

from __future__ import annotations

from flowtracer.schemas.v1 import flows_pb2


def collective_profiles(batch: flows_pb2.FlowBatch, window_start_ns: int,
                        window_end_ns: int) -> list[flows_pb2.CollectiveProfile]:
    """The batch's CollectiveProfiles, in its order, stamped with the processor's window [start, end) (ns)."""
    out = []
    for p in batch.collectives:
        m = flows_pb2.CollectiveProfile()
        m.CopyFrom(p)
        m.window_start_ns, m.window_end_ns = window_start_ns, window_end_ns
        if not m.host:
            m.host = batch.host
        out.append(m)
    return out
