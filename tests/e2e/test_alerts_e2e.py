"""The alert rules against a running pipeline: a real Prometheus scrapes every stage, a real Alertmanager receives
what fires (issue #33). Three faults, one after the other, each alert waited for on the Alertmanager's
``/api/v2/alerts`` until it fires and again until it has resolved:

- a stalled switch stream: spine02's gNMI server keeps its sessions but sends nothing for ``SILENT_S``
  (workload fault ``gnmi_silent``, then ``gnmi_resume``): ``FlowtracerGnmiTargetSilent`` and, once the collector
  gave the stream up, ``FlowtracerGnmiTargetDown`` for spine02;
- an open incident: the diagnosis (``flowtracer diagnose``) names that silence ``switch_silent_or_rebooted``:
  ``FlowtracerIncidentOpen`` for that kind;
- a broker outage: every stage reaches the broker through a proxy that is cut (as in tests/e2e/test_faults_e2e.py),
  until ``FlowtracerKafkaStalled`` fires for the collector and the agent, then restored.

Prometheus scrapes and evaluates every second (its own configuration, testbed/prometheus.py). The rules are the
shipped file with one change in the test's copy: every ``for:`` is ``FOR_S`` seconds, so that an alert with
``for: 1m`` fires within the fault; the shipped durations are tested in promtool's virtual time
(deploy/prometheus/flowtracer-alerts.test.yml). Expressions and thresholds are the shipped ones.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from waiting import wait_for

from flowtracer.demo.local_pipeline import LocalPipeline, PipelineOptions, Stage
from flowtracer.embedded.managed_process import free_port
from flowtracer.embedded.tansu import TansuBroker
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.testbed.alertmanager import Alert, Alertmanager
from flowtracer.testbed.prometheus import Prometheus
from flowtracer.testbed.tcp_proxy import TcpProxy

pytestmark = pytest.mark.slow

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "flowtracer-alerts.yml"
FOR_S = 2  # every rule's for: in the test's copy, s
SILENT = "spine02"
SILENT_AT_S, SILENT_S = 25, 60  # the stalled stream: from the simulator's start, s; how long
WAIT_S = 180  # the longest an alert may take to fire or resolve on a loaded machine, s
STAGES = ("collector", "agent", "processor", "diagnose")


def shortened_rules(path: Path) -> Path:
    """The shipped rules with every ``for:`` set to ``FOR_S`` seconds, written to ``path``."""
    doc = yaml.safe_load(RULES.read_text())
    for group in doc["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = f"{FOR_S}s"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _workload(path: Path) -> Path:
    path.write_text(yaml.safe_dump({
        "jobs": [{"name": "ring", "ops": [{"collective": "allreduce", "algorithm": "ring"}]}],
        "faults": [{"at": f"{SILENT_AT_S}s", "gnmi_silent": SILENT},
                   {"at": f"{SILENT_AT_S + SILENT_S}s", "gnmi_resume": SILENT}]}))
    return path


@dataclass
class Run:
    pipeline: LocalPipeline
    proxy: TcpProxy
    prometheus: Prometheus
    alertmanager: Alertmanager
    diagnose: Stage

    def alive(self) -> None:
        """Raise naming any stage (or the diagnosis) that died."""
        self.pipeline.check()
        if not self.diagnose.alive():
            raise AssertionError(f"flowtracer diagnose exited with {self.diagnose.proc.returncode}; "
                                 f"see {self.diagnose.log_path}:\n{self.diagnose.tail()}")

    def alerts(self, name: str, **labels: str) -> list[Alert]:
        self.alive()
        return self.alertmanager.alerts(alertname=name, **labels)

    def until_firing(self, name: str, **labels: str) -> Alert:
        wait_for(lambda: bool(self.alerts(name, **labels)), WAIT_S, f"{name} {labels} to fire")
        (alert,) = self.alerts(name, **labels)
        return alert

    def until_resolved(self, name: str, **labels: str) -> None:
        wait_for(lambda: not self.alerts(name, **labels), WAIT_S, f"{name} {labels} to resolve")


def _start_diagnose(pipeline: LocalPipeline, port: int) -> Stage:
    """``flowtracer diagnose`` over the pipeline's output topics, its metrics on ``port``."""
    log_path = pipeline.run_dir / "diagnose.log"
    log_file = log_path.open("wb")
    args = ("diagnose", "--topology", pipeline.ready["topology"], "--kafka", pipeline.bootstrap, "--hop", "1",
            "--metrics-port", str(port))
    proc = subprocess.Popen([sys.executable, "-m", "flowtracer", *args], stdout=log_file, stderr=log_file,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    return Stage("diagnose", proc, log_path, log_file, args)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    tmp = tmp_path_factory.mktemp("alerts")
    topo = tmp / "fabric8.yaml"
    topo.write_text(generate(FabricSpec(hosts=8, leaves=2, spines=2, name="ft8")).to_yaml())
    ports = {stage: free_port() for stage in STAGES}
    options = PipelineOptions(topology=topo, workload=str(_workload(tmp / "silent.yaml")), partitions=4,
                              collector_args=("--metrics-port", str(ports["collector"])),
                              agent_args=("--metrics-port", str(ports["agent"])),
                              processor_args=("--metrics-port", str(ports["processor"])))
    jobs = {f"flowtracer-{stage}": [f"127.0.0.1:{port}"] for stage, port in ports.items()}
    tansu_port = free_port()
    with TcpProxy(tansu_port) as proxy, Alertmanager(log_dir=tmp) as am, \
            Prometheus(jobs, [shortened_rules(tmp / "rules.yml")], alertmanager=am.address, log_dir=tmp) as prom:
        broker = TansuBroker(tansu_port, advertise=proxy.address, log_dir=tmp)
        with LocalPipeline(options, tmp / "run", broker=broker) as pipeline:
            diagnose = _start_diagnose(pipeline, ports["diagnose"])
            try:
                yield Run(pipeline, proxy, prom, am, diagnose)
            finally:
                diagnose.stop()


def _scrapes_up(run: Run) -> bool:
    run.alive()
    health = run.prometheus.targets_health()
    return len(health) == len(STAGES) and set(health.values()) == {"up"}


def test_every_stage_is_scraped(run: Run) -> None:
    """A stage slower to start than ``FOR_S`` (the processor's Faust worker) fires FlowtracerScrapeFailing until
    its /metrics answers; once all four answer, nothing of it is left."""
    wait_for(lambda: _scrapes_up(run), WAIT_S, "Prometheus to scrape all four stages")
    run.until_resolved("FlowtracerScrapeFailing")


def test_a_stalled_switch_stream_and_its_incident_fire_and_resolve(run: Run) -> None:
    silent = run.until_firing("FlowtracerGnmiTargetSilent", target=SILENT)
    assert silent.labels["job"] == "flowtracer-collector" and silent.labels["severity"] == "warning"
    assert silent.annotations["summary"].startswith(f"no gNMI message from {SILENT} for ")
    # the collector's watchdog ends the stalled stream; the silent server takes the new one and never syncs it
    down = run.until_firing("FlowtracerGnmiTargetDown", target=SILENT)
    assert down.annotations["summary"].startswith(f"switch {SILENT} is not streaming")
    incident = run.until_firing("FlowtracerIncidentOpen", kind="switch_silent_or_rebooted")
    assert "switch_silent_or_rebooted incident(s) open" in incident.annotations["summary"]
    # only the silent switch: every other switch streams on
    assert {a.labels["target"] for a in run.alerts("FlowtracerGnmiTargetSilent")} == {SILENT}
    run.until_resolved("FlowtracerGnmiTargetSilent", target=SILENT)
    run.until_resolved("FlowtracerGnmiTargetDown", target=SILENT)
    run.until_resolved("FlowtracerIncidentOpen", kind="switch_silent_or_rebooted")


def test_a_broker_outage_fires_and_resolves(run: Run) -> None:
    wait_for(lambda: not run.alerts("FlowtracerKafkaStalled"), WAIT_S, "no Kafka stall before the outage")
    run.proxy.cut()
    try:
        stalled = {stage: run.until_firing("FlowtracerKafkaStalled", job=f"flowtracer-{stage}")
                   for stage in ("collector", "agent")}
    finally:
        run.proxy.restore()
    for alert in stalled.values():
        assert alert.labels["severity"] == "critical"
        assert "broker unreachable" in alert.annotations["summary"]
    run.until_resolved("FlowtracerKafkaStalled")
    assert not run.alerts("FlowtracerKafkaDropping"), "nothing is dropped in a short outage"
