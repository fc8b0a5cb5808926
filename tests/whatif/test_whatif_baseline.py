"""Done-when: the ECMP baseline replay matches the FIM the stream processor measured on the same recording.

One short run of the real pipeline (sim -> collect/agent -> Tansu -> process, every stage a
subprocess) on the FlowTracer-like 16-host fabric with NCCL ring all-reduce traffic; the recording is
exported from Kafka with ``flowtracer export`` and replayed under ECMP with the topology's hash. The
processor's rolling window is shortened to 4 s, and the run lasts until the processor has published enough
fabric samples (about 15 s on an idle machine; longer only when the machine is overloaded).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from flowtracer.cmd_export import export
from flowtracer.demo.local_pipeline import LocalPipeline, PipelineOptions
from flowtracer.fabric.routing import Fabric
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.whatif.fabric import ReplayFabric
from flowtracer.whatif.record import read_export, windows
from flowtracer.whatif.replay import Traffic, processor_fim, replay, rolling_windows
from flowtracer.whatif.routes import demands
from flowtracer.whatif.strategies import parse_strategy, route_all

pytestmark = pytest.mark.slow

S = 1_000_000_000
ROLLING = 4
#: Fabric samples to wait for: a few warm-up windows (counter baselines), the first rolling window, 4 more.
SAMPLES = ROLLING + 7
MAX_WAIT_S = 60


def _fabric_samples(lp: Path) -> int:
    """Measured-basis fabric FIM points the processor has written to its line-protocol file so far."""
    try:
        lines = lp.read_text().splitlines()
    except OSError:
        return 0
    return sum(1 for x in lines if x.startswith("fim,") and "group=fabric" in x and "basis=measured" in x)


def test_ecmp_replay_matches_the_processors_measured_fim(tmp_path: Path) -> None:
    topo = generate(FabricSpec(hosts=16, leaves=4, spines=2, name="ft16"))
    topo_file = tmp_path / "ft16.yaml"
    topo_file.write_text(topo.to_yaml())
    lp = tmp_path / "processor.lp"
    options = PipelineOptions(topology=topo_file, partitions=4, log_level="warning", line_protocol_file=lp,
                              processor_args=("--rolling-window", str(ROLLING)))
    out = tmp_path / "recording.jsonl"
    with LocalPipeline(options, tmp_path / "run") as pipeline:
        deadline = time.monotonic() + MAX_WAIT_S
        while _fabric_samples(lp) < SAMPLES and time.monotonic() < deadline:
            pipeline.wait(1.0)
        pipeline.stop_stages()
        r = CliRunner().invoke(export, ["--kafka", pipeline.bootstrap, "-o", str(out), "--idle", "2"],
                               catch_exceptions=False)
        assert r.exit_code == 0, r.output
    rec = read_export(out)
    fabric = Fabric(topo)
    wins, lost = windows(rec, fabric)
    assert lost.flows == 0
    flow_ends = {w.end_ns for w in wins}
    uplinks = [m.id for g in fabric.ecmp_groups.values() for m in g.members]
    valid: dict[int, set[str]] = {}
    for ll in rec.link_loads:
        if ll.measured_valid:
            valid.setdefault(ll.window_end_ns, set()).add(ll.link)
    rf = ReplayFabric(fabric)
    checked = 0
    for end in sorted(flow_ends):
        hops = [end - i * S for i in range(ROLLING)]
        if not all(h in flow_ends and set(uplinks) <= valid.get(h, set()) for h in hops):
            continue  # the processor's rolling window reaches into warm-up (untrusted counters) or past the end
        sample = processor_fim(rec, end, "fabric", analytics_pb2.LOAD_BASIS_MEASURED)
        if sample is None:
            continue
        covered = rolling_windows(wins, end, ROLLING * S)
        result = replay(Traffic.of(covered), route_all(parse_strategy("ecmp"), demands(covered), rf), rf, "ecmp",
                        with_time=False)
        assert result.fim == pytest.approx(sample.fim, abs=0.02), end
        for gid, g_fim in result.group_fim.items():
            group = processor_fim(rec, end, gid, analytics_pb2.LOAD_BASIS_MEASURED)
            assert group is not None and g_fim == pytest.approx(group.fim, abs=0.02), (gid, end)
        checked += 1
    assert checked >= 3, f"only {checked} complete rolling windows in the recording"
