"""The pipeline over Kafka TLS: every stage a real `flowtracer` subprocess told `--kafka-config` (SSL, a
throw-away CA), the broker Tansu behind Debian's stunnel4 terminating TLS and advertising only the
TLS address, so no client can fall back to the plaintext port after the bootstrap.

SASL has no end-to-end test here: the embedded Tansu cannot hold SCRAM users (docs/operations.md,
Security); tests/schemas/test_kafka_security.py pins the settings each library receives.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tls_certs import make_ca, make_server_cert

from flowtracer.demo.local_pipeline import LocalPipeline, PipelineOptions
from flowtracer.demo.status import OutputWatcher
from flowtracer.schemas.kafka_security import KafkaSecurity, kafka_python_kwargs
from flowtracer.schemas.topology_generate import FabricSpec, generate
from flowtracer.testbed.stunnel import TlsProxy
from flowtracer.testbed.tansu import TansuBroker, free_port


@dataclass
class TlsBroker:
    broker: TansuBroker
    proxy: TlsProxy
    kafka_config: Path  # SSL with the right CA
    other_ca_config: Path  # SSL trusting a CA that did not sign the broker


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBroker]:
    tmp = tmp_path_factory.mktemp("kafka-tls")
    ca_file, ca_key, ca_cert = make_ca(tmp, "kafka-ca")
    other_ca, _, _ = make_ca(tmp, "other-ca")
    cert, key = make_server_cert(tmp, ca_key, ca_cert, name="broker.test")
    good, bad = tmp / "kafka-tls.yaml", tmp / "kafka-other-ca.yaml"
    good.write_text(f"security_protocol: SSL\nca_file: {ca_file}\n")
    bad.write_text(f"security_protocol: SSL\nca_file: {other_ca}\n")
    tansu_port = free_port()
    with TlsProxy(tansu_port, cert, key) as proxy:
        sec = KafkaSecurity(security_protocol="SSL", ca_file=ca_file)
        with TansuBroker(tansu_port, advertise=proxy.address, client_config=kafka_python_kwargs(sec),
                         log_dir=tmp) as broker:
            yield TlsBroker(broker, proxy, good, bad)


def test_pipeline_runs_over_tls(tls_broker: TlsBroker, tmp_path: Path) -> None:
    topo = tmp_path / "fabric4.yaml"
    topo.write_text(generate(FabricSpec(hosts=4, leaves=2, spines=2, name="tls4")).to_yaml())
    options = PipelineOptions(topology=topo, partitions=2, kafka_config=tls_broker.kafka_config)
    pipeline = LocalPipeline(options, tmp_path / "run", broker=tls_broker.broker)
    pipeline.start()
    # The demo's status reader follows the outputs over TLS too.
    watcher = OutputWatcher(tls_broker.broker.bootstrap, client_config=tls_broker.broker.client_config)
    watcher.start()
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            pipeline.check()
            with watcher.lock:
                obs = watcher.observed
                busy = any(m > 0 for links in obs.link_loads.values() for m, _, _ in links.values())
                if busy and obs.path_loads:
                    break
            time.sleep(0.5)
    finally:
        watcher.stop()
        pipeline.stop_stages()
    assert watcher.error is None, watcher.error
    # Counters (collector) and flows (agent) went in over TLS and the processor's outputs came out of it.
    assert busy, f"no link load with traffic in {watcher.observed.records} output records"
    assert watcher.observed.path_loads, "no path load (flows from the agent)"
    for stage in pipeline.stages:
        log = stage.log_path.read_text(errors="replace")
        assert "Traceback" not in log, f"{stage.name}:\n{log[-3000:]}"
    # The what-if reader (`flowtracer export`) reads the recorded flows over TLS.
    out = tmp_path / "recording.jsonl"
    proc = subprocess.run([sys.executable, "-m", "flowtracer", "export", "--kafka", tls_broker.broker.bootstrap,
                           "--kafka-config", str(tls_broker.kafka_config), "--flows-only", "--idle", "2",
                           "-o", str(out)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "flowtracer.flows.v1" in out.read_text(), proc.stderr
    # Every client came through the TLS proxy: the broker advertises nothing else.
    assert tls_broker.proxy.log_path is not None
    assert tls_broker.proxy.log_path.read_text(errors="replace").count("accepted connection") >= 3


@pytest.mark.parametrize("command", [["-m", "flowtracer", "export", "--flows-only"],
                                     [str(Path(__file__).parents[2] / "deploy" / "create_topics.py")]])
def test_a_broker_certificate_from_another_ca_is_refused_in_one_line(tls_broker: TlsBroker,
                                                                     command: list[str]) -> None:
    proc = subprocess.run([sys.executable, *command, "--kafka", tls_broker.broker.bootstrap,
                           "--kafka-config", str(tls_broker.other_ca_config)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "CERTIFICATE_VERIFY_FAILED" in lines[0] or "certificate verify failed" in lines[0], lines[0]
