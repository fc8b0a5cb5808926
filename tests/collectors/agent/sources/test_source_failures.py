"""The agent survives a failure in any one source part for a window: the part is missing for that
window (counted per part, exported), the other parts and hosts go on, and each cause is logged once.

A real LinuxSource over the fixture sysfs tree, a script standing in for the rdma tool and an NCCL
log file; one read at a time is made to raise (what a parser bug or a RecursionError would do)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from flowtracer.collectors.agent.agent import Agent
from flowtracer.collectors.agent.config import AgentConfig
from flowtracer.collectors.agent.sources import registry
from flowtracer.collectors.agent.sources.registry import LinuxSource
from flowtracer.collectors.self_metrics import SelfMetrics
from flowtracer.schemas.v1 import flows_pb2 as pb

S = 1_000_000_000
T0 = 1_767_225_600 * S


class ListSink:
    def __init__(self) -> None:
        self.batches: list[pb.FlowBatch] = []

    def send(self, topic: str, key: bytes, value: bytes | None, partition: int | None = None) -> None:
        assert value is not None
        self.batches.append(pb.FlowBatch.FromString(value))

    def flush(self, timeout: float | None = None) -> bool:
        return True

    def close(self, timeout: float = 10.0) -> None:
        pass


def _rdma_script(tmp_path: Path, fixtures: Path) -> Path:
    rdma = fixtures / "rdma"
    script = tmp_path / "rdma"
    script.write_text(f"""#!/bin/sh
case "$2" in
  resource) cat {rdma / 'res_qp.json'} ;;
  statistic) cat {rdma / 'stat_qp.json'} ;;
esac
""")
    script.chmod(0o755)
    return script


class Faults:
    """Which parts raise in the current window."""

    def __init__(self) -> None:
        self.parts: set[str] = set()

    def wrap(self, part: str, fn: Any) -> Any:
        def maybe_raise(*a: Any, **kw: Any) -> Any:
            if part in self.parts:
                raise RecursionError(f"{part}: maximum recursion depth exceeded")
            return fn(*a, **kw)
        return maybe_raise


def test_one_failing_part_costs_that_part_of_one_window(
        fixtures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="flowtracer")
    log = tmp_path / "nccl.log"
    log.write_text((fixtures / "nccl" / "node01.log").read_text())
    cfg = AgentConfig(source="linux", host="node01", sysfs_root=fixtures / "sysfs" / "class" / "infiniband",
                      rdma_command=[str(_rdma_script(tmp_path, fixtures))], nccl_log=str(log), agent_id="t")
    faults = Faults()
    monkeypatch.setattr(registry, "parse_stat_qp", faults.wrap("rdma_stat", registry.parse_stat_qp))
    monkeypatch.setattr(registry, "parse_res_qp", faults.wrap("rdma_qp", registry.parse_res_qp))
    src = LinuxSource(cfg)
    assert src._nccl is not None
    monkeypatch.setattr(src._nccl, "read_chunks", faults.wrap("nccl_log", src._nccl.read_chunks))
    sink, metrics = ListSink(), SelfMetrics()
    agent = Agent(cfg, src, sink, metrics=metrics)

    def window(k: int, *failing: str) -> list[pb.FlowBatch]:
        faults.parts = set(failing)
        n = len(sink.batches)
        agent.window(T0 + k * S)
        return sink.batches[n:]

    window(0)  # baseline
    assert len(window(1)) == 1
    # per-QP counters and the NCCL log fail: the window is still sent, with its ports and QP flows
    got = window(2, "rdma_stat", "nccl_log")
    assert len(got) == 1 and got[0].ports and got[0].window_start_ns == T0 + S
    got = window(3, "rdma_stat")  # the same cause again: counted, not logged again
    assert len(got) == 1
    # the QP view fails: no window for the host; the next one spans the gap
    assert window(4, "rdma_qp") == []
    got = window(5)
    assert len(got) == 1 and (got[0].window_start_ns, got[0].window_end_ns) == (T0 + 3 * S, T0 + 5 * S)

    assert agent.stats.source_failures == {"rdma_stat": 2, "nccl_log": 1, "rdma_qp": 1}
    for part, n in agent.stats.source_failures.items():
        assert metrics.registry.get_sample_value("flowtracer_agent_source_failures_total", {"part": part}) == n
    logged = [r.getMessage() for r in caplog.records if "further failures of this cause" in r.getMessage()]
    assert len(logged) == 3 and sum("rdma_stat" in m for m in logged) == 1, logged


class RaisingSource:
    """A source whose whole sample() raises in the windows listed in ``bad``."""

    def __init__(self, inner: LinuxSource, bad: set[int]) -> None:
        self.inner, self.bad, self.calls = inner, bad, 0

    def hosts(self) -> list[str]:
        return self.inner.hosts()

    def now_ns(self) -> int:
        return self.inner.now_ns()

    def wait_until(self, t_ns: int, stop: threading.Event) -> bool:
        return True

    def sample(self, at_ns: int) -> list[Any]:
        self.calls += 1
        if self.calls in self.bad:
            raise ValueError("a bug in the source")
        return self.inner.sample(at_ns)

    def close(self) -> None:
        pass


def test_a_source_whose_sample_raises_costs_one_window_and_the_agent_runs_on(
        fixtures: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="flowtracer")
    cfg = AgentConfig(source="linux", host="node01", sysfs_root=fixtures / "sysfs" / "class" / "infiniband",
                      sysfs_only=True, agent_id="t", interval="50ms", max_windows=4)
    src = RaisingSource(LinuxSource(cfg), bad={3, 4})
    sink = ListSink()
    stats = Agent(cfg, src, sink).run(threading.Event())  # would raise out of run() before
    assert stats.windows == 4 and len(sink.batches) == 4 and src.calls == 7
    assert stats.source_failures == {"sample": 2}
    assert caplog.text.count("reading sample failed") == 1


def test_a_host_whose_pipeline_raises_costs_that_window_and_the_agent_runs_on(
        fixtures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Behind the parsers' own guards: a bug in a host's pipeline (prepare or window) costs that host's window,
    counted per part; the next window spans the gap."""
    from flowtracer.collectors.agent.host_pipeline import HostPipeline

    cfg = AgentConfig(source="linux", host="node01", sysfs_root=fixtures / "sysfs" / "class" / "infiniband",
                      rdma_command=[str(_rdma_script(tmp_path, fixtures))], agent_id="t")
    faults = Faults()
    monkeypatch.setattr(HostPipeline, "prepare", faults.wrap("prepare", HostPipeline.prepare))
    monkeypatch.setattr(HostPipeline, "window_encoded", faults.wrap("window", HostPipeline.window_encoded))
    sink = ListSink()
    agent = Agent(cfg, LinuxSource(cfg), sink)
    for k, failing in enumerate(((), (), ("prepare",), ("window",), ())):
        faults.parts = set(failing)
        agent.window(T0 + k * S)
    assert [(b.window_start_ns, b.window_end_ns) for b in sink.batches] == [(T0, T0 + S), (T0 + S, T0 + 4 * S)]
    assert agent.stats.source_failures == {"prepare": 1, "window": 1}
