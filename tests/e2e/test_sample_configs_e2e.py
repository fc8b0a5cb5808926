"""Each component starts from its sample under deploy/config/ alone, told only where the test bed is.

A private Tansu broker and a simulated fabric (real gNMI servers, host views) stand in for a deployment. Each
component runs as ``flowtracer <command> -c deploy/config/<component>.yaml`` with no flag: the places that
differ from the sample's defaults (the broker's address, the bound topology, Tansu's quirks, a free metrics
port) come from ``FLOWTRACER_<COMPONENT>_*`` variables, which is how an operator overrides a shipped file.
They form one pipeline, so each one coming up is seen where its work lands: the processor counts the collector's
counters and the agent's flows, and diagnose counts the processor's outputs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from waiting import wait_for

from flowtracer.demo.local_pipeline import Stage
from flowtracer.embedded.managed_process import free_port
from flowtracer.embedded.tansu import TansuBroker
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.plumbing.topic_admin import ensure_topics
from flowtracer.schemas import topics

SAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "config"
G = 1_000_000_000


def scraped(port: int, name: str, topic: str) -> float:
    """The value of sample *name* with label topic=*topic* on 127.0.0.1:*port*/metrics; 0 while nothing answers."""
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    except OSError:
        return 0.0
    return sum(s.value for family in text_string_to_metric_families(text) for s in family.samples
               if s.name == name and s.labels.get("topic") == topic)


def spawn(name: str, args: list[str], env: dict[str, str], log_dir: Path, stdout: int | None = None) -> Stage:
    """``flowtracer <args>`` with only the test's FLOWTRACER_* variables (none of the runner's leak in); its log
    in *log_dir* (stdout too unless *stdout* says otherwise)."""
    log_path = log_dir / f"{name}.log"
    log_file = open(log_path, "wb")  # noqa: SIM115 - closed by Stage.stop
    base = {k: v for k, v in os.environ.items() if not k.startswith("FLOWTRACER_")}
    proc = subprocess.Popen([sys.executable, "-m", "flowtracer", *args], env={**base, **env},
                            stdout=log_file if stdout is None else stdout, stderr=log_file,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    return Stage(name, proc, log_path, log_file, tuple(args))


@pytest.fixture
def testbed(tmp_path: Path) -> Iterator[tuple[TansuBroker, dict[str, object]]]:
    """A private broker with the topic plan at the sample's partition count, and a running simulated fabric;
    yields (broker, the simulator's ready JSON)."""
    topo = generate(FabricSpec(hosts=4, nics_per_host=1, leaves=2, spines=2, link_speed_bps=100 * G,
                               host_speed_bps=100 * G))
    (tmp_path / "fabric.yaml").write_text(topo.to_yaml())
    with TansuBroker(log_dir=tmp_path / "tansu") as broker:
        ensure_topics(broker.bootstrap, 8)  # the samples' partitions; Tansu would auto-create 4
        # The simulator prints one JSON line on stdout when its gNMI servers listen and host views exist.
        sim = spawn("sim", ["sim", "--topology", str(tmp_path / "fabric.yaml"), "--gnmi-ports", "free",
                            "--out", str(tmp_path / "sim")], {}, tmp_path, stdout=subprocess.PIPE)
        try:
            assert sim.proc.stdout is not None
            line = sim.proc.stdout.readline()
            assert line, sim.tail()
            ready = json.loads(line)
            (tmp_path / "ready.json").write_text(json.dumps(ready))
            yield broker, ready
        finally:
            sim.stop()


def test_every_component_comes_up_from_its_sample_alone(testbed: tuple[TansuBroker, dict[str, object]],
                                                        tmp_path: Path) -> None:
    broker, ready = testbed
    topology = str(ready["topology"])
    process_port, diagnose_port = free_port(), free_port()
    env = {
        "processor": {"FLOWTRACER_PROCESSOR_TOPOLOGY": topology, "FLOWTRACER_PROCESSOR_KAFKA": broker.bootstrap,
                      "FLOWTRACER_PROCESSOR_TANSU": "true", "FLOWTRACER_PROCESSOR_DATA_DIR": str(tmp_path / "faust"),
                      "FLOWTRACER_PROCESSOR_METRICS_PORT": str(process_port)},
        "collector": {"FLOWTRACER_COLLECTOR_TOPOLOGY": topology,
                      "FLOWTRACER_COLLECTOR_KAFKA__BOOTSTRAP": broker.bootstrap,
                      "FLOWTRACER_COLLECTOR_KAFKA__IDEMPOTENCE": "false"},
        "agent": {"FLOWTRACER_AGENT_SOURCE": "sim", "FLOWTRACER_AGENT_SIM_ENDPOINTS": str(tmp_path / "ready.json"),
                  "FLOWTRACER_AGENT_TOPOLOGY": topology, "FLOWTRACER_AGENT_KAFKA": broker.bootstrap,
                  "FLOWTRACER_AGENT_KAFKA_IDEMPOTENCE": "false"},
        "diagnose": {"FLOWTRACER_DIAGNOSE_TOPOLOGY": topology, "FLOWTRACER_DIAGNOSE_KAFKA": broker.bootstrap,
                     "FLOWTRACER_DIAGNOSE_METRICS_PORT": str(diagnose_port)},
    }
    commands = {"processor": "process", "collector": "collect", "agent": "agent", "diagnose": "diagnose"}
    started: list[Stage] = []
    try:
        for name in ("processor", "diagnose", "collector", "agent"):
            started.append(spawn(name, [commands[name], "--config", str(SAMPLES / f"{name}.yaml")], env[name],
                                 tmp_path))

        def seen(port: int, metric: str, topic: str) -> bool:
            dead = [c for c in started if not c.alive()]
            assert not dead, f"{dead[0].name} exited with {dead[0].proc.returncode}:\n{dead[0].tail(40)}"
            return scraped(port, metric, topic) > 0

        for topic in (topics.COUNTERS, topics.FLOWS):
            wait_for(lambda t=topic: seen(process_port, "flowtracer_processor_records_total", t.name), 180,
                     f"the processor to read {topic.name} (from the collector / agent samples)")
        wait_for(lambda: seen(diagnose_port, "flowtracer_diagnose_records_total", topics.FIM.name), 180,
                 "diagnose to read the processor's fabric FIM")
    finally:
        for c in reversed(started):
            c.stop()
    for c in started:
        log = c.log_path.read_text(errors="replace")
        assert "Traceback" not in log, f"{c.name}:\n{log[-3000:]}"
