"""The pipeline over Kafka TLS + SASL/SCRAM-SHA-512: every stage a real `flowtracer` subprocess told
`--kafka-config` (SASL_SSL, a throw-away CA, the password in a file), through the chain

    client -TLS-> stunnel4 -> SASL proxy (testbed/sasl_proxy.py) -> Tansu

with Tansu advertising only the TLS address, so no client can fall back to a plaintext or unauthenticated
port after the bootstrap. The broker-side SASL is the test bed's proxy: the shipped Tansu cannot hold a
SCRAM user (docs/operations.md, Security). One pipeline run covers TLS and SASL together.
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
from flowtracer.embedded.tansu import TansuBroker, free_port
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.plumbing.kafka_security import kafka_python_kwargs, load_kafka_security
from flowtracer.testbed.sasl_proxy import SaslProxy
from flowtracer.testbed.stunnel import TlsProxy

USER = "flowtracer"
PASSWORD = "scram-e2e-Passw0rd"  # only ever in a file (password_file) and in the proxy's salted credentials
WRONG = "wrong-Passw0rd-e2e"


@dataclass
class TlsBroker:
    broker: TansuBroker
    proxy: TlsProxy
    sasl: SaslProxy
    kafka_config: Path  # SASL_SSL, SCRAM-SHA-512, the right CA and password
    other_ca_config: Path  # SASL_SSL trusting a CA that did not sign the broker
    wrong_password_config: Path  # SASL_SSL, the right CA, a wrong password


def _sasl_ssl(tmp: Path, name: str, ca_file: Path, password: str) -> Path:
    secret = tmp / f"{name}.password"
    secret.write_text(password + "\n")
    secret.chmod(0o600)
    path = tmp / f"{name}.yaml"
    path.write_text(f"security_protocol: SASL_SSL\nca_file: {ca_file}\nsasl_mechanism: SCRAM-SHA-512\n"
                    f"username: {USER}\npassword_file: {secret}\n")
    return path


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBroker]:
    tmp = tmp_path_factory.mktemp("kafka-tls")
    ca_file, ca_key, ca_cert = make_ca(tmp, "kafka-ca")
    other_ca, _, _ = make_ca(tmp, "other-ca")
    cert, key = make_server_cert(tmp, ca_key, ca_cert, name="broker.test")
    good = _sasl_ssl(tmp, "kafka-sasl-ssl", ca_file, PASSWORD)
    tansu_port = free_port()
    with SaslProxy(tansu_port, {USER: PASSWORD}, mechanisms=["SCRAM-SHA-512"]) as sasl, \
            TlsProxy(sasl.port, cert, key) as proxy:
        sec = load_kafka_security(good, env={})
        with TansuBroker(tansu_port, advertise=proxy.address, client_config=kafka_python_kwargs(sec),
                         log_dir=tmp) as broker:
            yield TlsBroker(broker, proxy, sasl, good, _sasl_ssl(tmp, "kafka-other-ca", other_ca, PASSWORD),
                            _sasl_ssl(tmp, "kafka-wrong-password", ca_file, WRONG))


def test_pipeline_runs_over_tls_and_sasl_scram(tls_broker: TlsBroker, tmp_path: Path) -> None:
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
        assert PASSWORD not in log, f"{stage.name} logged the Kafka password"
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
    # ... and logged in with SCRAM-SHA-512: each stage, by the client id it gives Kafka.
    # (kafka-python: topic creation, collector, agent, status reader, export; aiokafka under Faust: processor)
    logins = [s.client_id or "" for s in tls_broker.sasl.sessions if s.user == USER and s.mechanism == "SCRAM-SHA-512"]
    for stage in ("flowtracer-admin", "flowtracer-collect-", "flowtracer-agent-", "faust-", "flowtracer-demo-status",
                  "flowtracer-whatif"):
        assert any(c.startswith(stage) for c in logins), f"no SCRAM login by {stage}*: {sorted(set(logins))}"
    assert not tls_broker.sasl.refusals, tls_broker.sasl.refusals


@pytest.mark.parametrize(("config", "expected"), [
    ("other_ca_config", ("CERTIFICATE_VERIFY_FAILED",)),
    ("wrong_password_config", ("SASL login refused for SASL_SSL (SCRAM-SHA-512 as flowtracer)", "invalid credentials")),
])
@pytest.mark.parametrize("command", [["-m", "flowtracer", "export", "--flows-only"],
                                     [str(Path(__file__).parents[2] / "deploy" / "create_topics.py")]])
def test_what_retrying_never_heals_is_refused_in_one_line(tls_broker: TlsBroker, command: list[str], config: str,
                                                          expected: tuple[str, ...]) -> None:
    """A broker certificate from another CA, a wrong password: one line, exit 2, no password anywhere."""
    proc = subprocess.run([sys.executable, *command, "--kafka", tls_broker.broker.bootstrap,
                           "--kafka-config", str(getattr(tls_broker, config))],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert all(e in lines[0] for e in expected), lines[0]
    assert WRONG not in proc.stderr + proc.stdout and PASSWORD not in proc.stderr + proc.stdout
