"""An agent restarted over the same NCCL log resumes at its end: the calls the log already held are not counted
again, a bad line in it is neither counted nor fatal again, and the QPs of the communicators it describes are still
tagged (NCCL logs a connection only once). A real LinuxSource over the fixture sysfs tree and rdma output."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from test_source_failures import T0, ListSink, S

from flowtracer.collectors.agent.agent import Agent
from flowtracer.collectors.agent.config import AgentConfig
from flowtracer.collectors.agent.sources.registry import LinuxSource
from flowtracer.schemas.v1 import flows_pb2 as pb

COLL = ("node01:4242:4242 [0] NCCL INFO AllReduce: opCount 20 sendbuff 0x7f3a40000000 recvbuff 0x7f3a40000000 "
        "count {count} datatype 7 op 0 root 0 comm 0x55d0c2a0e3b0 [nranks=16] stream 0x55d0c1f2a9d0\n")


class Rdma:
    """A script standing in for the rdma tool; ``traffic()`` makes every QP of the fixture send 1 MB more."""

    def __init__(self, fixtures: Path, tmp_path: Path) -> None:
        self.stat = json.loads((fixtures / "rdma" / "stat_qp.json").read_text())
        self.stat_file = tmp_path / "stat_qp.json"
        self.script = tmp_path / "rdma"
        self.script.write_text(f"""#!/bin/sh
case "$2" in
  resource) cat {fixtures / "rdma" / "res_qp.json"} ;;
  statistic) cat {self.stat_file} ;;
esac
""")
        self.script.chmod(0o755)
        self.traffic()

    def traffic(self) -> None:
        for q in self.stat:
            if "rdma_tx_bytes" in q:
                q["rdma_tx_bytes"] += 1_000_000
                q["rdma_tx_packets"] += 250
        self.stat_file.write_text(json.dumps(self.stat))


class Run:
    """One agent process over the log: ``window(k)`` is its window ending at T0 + k s."""

    def __init__(self, cfg: AgentConfig) -> None:
        self.sink = ListSink()
        self.agent = Agent(cfg, LinuxSource(cfg), self.sink)

    def window(self, k: int) -> list[pb.FlowBatch]:
        n = len(self.sink.batches)
        self.agent.window(T0 + k * S)
        return self.sink.batches[n:]


def test_a_restarted_agent_resumes_at_the_end_of_the_log_and_keeps_its_tags(
        fixtures: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="flowtracer")
    log = tmp_path / "nccl.log"
    log.write_text((fixtures / "nccl" / "node01.log").read_text())
    held = len(log.read_text().splitlines())
    rdma = Rdma(fixtures, tmp_path)
    cfg = AgentConfig(source="linux", host="node01", sysfs_root=fixtures / "sysfs" / "class" / "infiniband",
                      rdma_command=[str(rdma.script)], nccl_log=str(log), agent_id="t")
    first = Run(cfg)
    first.window(0)  # baseline; the log's calls so far are history: not this agent's windows
    with log.open("a") as f:
        f.write(COLL.format(count=2**64) + COLL.format(count=4096))  # a poison line, then a good call
    rdma.traffic()
    [batch] = first.window(1)
    malformed = batch.malformed_records  # the fixture's rdma output has malformed records of its own, and the poison
    assert [(c.count, c.calls) for c in batch.collectives] == [(4096, 1)]
    tagged = {f.lqpn for f in batch.flows if f.nccl.comm_id}
    assert tagged  # the communicators and QPs the log described before the agent started
    assert any(f"{log}:{held + 1}: NCCL log line skipped" in r.getMessage() for r in caplog.records)

    restarted = Run(cfg)  # the same log, poison line and all
    assert restarted.window(0) == []
    rdma.traffic()
    [batch] = restarted.window(1)
    assert batch.malformed_records == malformed - 1  # the poison line is not counted again ...
    assert not batch.collectives  # ... and no call is replayed as news
    assert {f.lqpn for f in batch.flows if f.nccl.comm_id} == tagged
    with log.open("a") as f:
        f.write(COLL.format(count=8192))
    rdma.traffic()
    [batch] = restarted.window(2)
    assert [(c.count, c.calls) for c in batch.collectives] == [(8192, 1)]
