"""The agent's side of the NCCL reader: lines it does not understand are exported by shape
(``flowtracer_agent_nccl_unknown_lines_total``), and the zone setting reaches the reader. A real LinuxSource over the
fixture sysfs tree and an rdma stand-in, and the real NCCL logs of tests/fixtures/real/nccl."""

from __future__ import annotations

from pathlib import Path
from zoneinfo import ZoneInfo

from test_nccl_restart import Rdma
from test_source_failures import T0, ListSink, S

from flowtracer.collectors.agent.agent import Agent
from flowtracer.collectors.agent.config import AgentConfig
from flowtracer.collectors.agent.sources.registry import LinuxSource
from flowtracer.collectors.self_metrics import SelfMetrics

REAL = Path(__file__).parents[2] / "fixtures" / "real" / "nccl"
SHAPE = "line|node#:# [#] NCCL INFO this prefix lost its thread id"
UNKNOWN = "node01:4242 [0] NCCL INFO this prefix lost its thread id\n"


def test_unknown_lines_are_exported_by_shape_and_the_zone_reaches_the_reader(fixtures: Path, tmp_path: Path) -> None:
    log = tmp_path / "nccl.log"
    log.write_text((REAL / "heldout" / "deepep-106_glued-lines.log").read_text() + UNKNOWN)
    rdma = Rdma(fixtures, tmp_path)
    cfg = AgentConfig(source="linux", host="node01", sysfs_root=fixtures / "sysfs" / "class" / "infiniband",
                      rdma_command=[str(rdma.script)], nccl_log=str(log), agent_id="t",
                      nccl_log_timezone="Asia/Kolkata")
    metrics = SelfMetrics()
    agent = Agent(cfg, LinuxSource(cfg), ListSink(), metrics=metrics)
    assert [p.nccl.zone for p in agent.pipelines.values()] == [ZoneInfo("Asia/Kolkata")]

    def exported(shape: str) -> float | None:
        return metrics.registry.get_sample_value("flowtracer_agent_nccl_unknown_lines_total", {"shape": shape})

    agent.window(T0)
    assert exported(SHAPE) == 1 and exported("glued|NCCL records glued into one line") == 2
    with log.open("a") as f:
        f.write(UNKNOWN * 3)
    rdma.traffic()
    agent.window(T0 + S)
    assert exported(SHAPE) == 4  # counted once per line, across windows
