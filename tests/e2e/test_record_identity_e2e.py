"""A host cannot speak for another, through the SASL chain the test bed has (SASL proxy -> Tansu), with the
shipped per-stage write ACLs (plumbing/kafka_acls.py, one agent user per host) emulated by the proxy:

* an agent logs in as its own user (``flowtracer-agent-host01``) and sends, with the agent's own sink and
  signer (``KafkaSink`` + ``cmd_agent.record_signer``, host key from ``flowtracer-host-keys``' derivation),
  one FlowBatch for its host and forged ones for host02: signed with its own key, signed under host02's
  name with its own key, and unsigned;
* the same credentials cannot write a switch's counters at all: the "broker" refuses them (ACLs);
* a real ``flowtracer process`` worker, logged in as ``flowtracer-processor`` and given the master key, takes
  the agent's own batch and dead-letters every forged one with the reason, counted per topic.

Without the signature check the forged batches are accepted like the real one (the ACLs allow every agent
to write the flows topic: Kafka authorizes topics, not records).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import TopicAuthorizationFailedError
from waiting import wait_for

from flowtracer.cmd_agent import record_signer
from flowtracer.collectors.agent.config import AgentConfig
from flowtracer.collectors.kafka_sink import KafkaSink
from flowtracer.embedded.tansu import TansuBroker, free_port
from flowtracer.fabric.topology_generate import FabricSpec, generate
from flowtracer.plumbing.kafka_acls import TOPIC, WRITE, agent_users_per_host, may, plan
from flowtracer.plumbing.topic_admin import ensure_topics
from flowtracer.schemas import topics
from flowtracer.schemas.record_identity import host_key, sign
from flowtracer.schemas.v1 import analytics_pb2, counters_pb2, flows_pb2
from flowtracer.testbed.sasl_proxy import SaslProxy

MASTER = bytes.fromhex("6b" * 32)
USERS = {"flowtracer-admin": "admin-Passw0rd", "flowtracer-agent-host01": "agent01-Passw0rd",
         "flowtracer-processor": "processor-Passw0rd"}
APP_ID = "flowtracer-identity"
PARTITIONS = 2
S = 1_000_000_000


def _client(user: str) -> dict[str, str]:
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": user, "sasl_plain_password": USERS[user]}


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SaslProxy, TansuBroker]]:
    tmp = tmp_path_factory.mktemp("identity")
    tansu_port = free_port()
    acls = plan((APP_ID,), agent_users_per_host(["host01"]))

    def may_write(user: str, topic: str) -> bool:
        return user == "flowtracer-admin" or may(acls, user, WRITE, TOPIC, topic)

    with SaslProxy(tansu_port, USERS, mechanisms=["SCRAM-SHA-512"], may_write=may_write) as proxy, \
            TansuBroker(tansu_port, advertise=proxy.address, client_config=_client("flowtracer-admin"),
                        log_dir=tmp) as broker:
        ensure_topics(broker.bootstrap, PARTITIONS, app_id=APP_ID, client_config=_client("flowtracer-admin"))
        yield proxy, broker


def _batch(host: str, end_ns: int) -> bytes:
    return flows_pb2.FlowBatch(schema_version=1, host=host, leaf="leaf01", agent_id=f"{host}:1",
                               window_start_ns=end_ns - S, window_end_ns=end_ns, received_ns=end_ns).SerializeToString()


def _metrics(port: int) -> dict[str, float]:
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    except OSError:
        return {}
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^([a-z_]+(?:\{[^}]*\})?) (\S+)$", text, re.M)}


def test_a_forged_flow_batch_is_refused_and_the_agents_own_passes(chain: tuple[SaslProxy, TansuBroker],
                                                                   tmp_path: Path) -> None:
    proxy, broker = chain
    topo = tmp_path / "fabric.yaml"
    topo.write_text(generate(FabricSpec(hosts=4, leaves=2, spines=2, name="id4")).to_yaml())
    (tmp_path / "host01.key").write_text(host_key(MASTER, "host01").hex() + "\n")
    master_file = tmp_path / "master.key"
    master_file.write_text(MASTER.hex() + "\n")
    secret = tmp_path / "processor.password"
    secret.write_text(USERS["flowtracer-processor"] + "\n")
    kafka_config = tmp_path / "processor-kafka.yaml"
    kafka_config.write_text(f"security_protocol: SASL_PLAINTEXT\nsasl_mechanism: SCRAM-SHA-512\n"
                            f"username: flowtracer-processor\npassword_file: {secret}\n")

    # The agent of host01, with its own user and key: the sink and signer `flowtracer agent` uses.
    cfg = AgentConfig(host="host01", host_key_file=tmp_path / "host01.key", kafka=broker.bootstrap)
    sink = KafkaSink(broker.bootstrap, client_id="flowtracer-agent-host01", enable_idempotence=False,
                     producer_config=_client("flowtracer-agent-host01"), headers=record_signer(cfg))
    end = (time.time_ns() // S) * S
    sink.send(topics.FLOWS.name, b"leaf01", _batch("host01", end))
    sink.send(topics.FLOWS.name, b"leaf01", _batch("host02", end))  # signed by host01, names host02
    assert sink.flush(30)
    sink.close()
    # The same agent's credentials, hand-made headers: host02's name with host01's key, and none at all.
    forged = _batch("host02", end)
    raw = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False,
                        client_id="flowtracer-agent-host01-raw", **_client("flowtracer-agent-host01"))
    raw.send(topics.FLOWS.name, key=b"leaf01", value=forged,
             headers=sign(host_key(MASTER, "host01"), "host02", topics.FLOWS.name, b"leaf01", forged))
    raw.send(topics.FLOWS.name, key=b"leaf01", value=forged)
    raw.flush(30)
    counters = counters_pb2.CounterBatch(schema_version=1, switch="leaf01", timestamp_ns=end, received_ns=end,
                                         collector_id="forged", session=1, sequence=1)
    with pytest.raises(TopicAuthorizationFailedError):
        raw.send(topics.COUNTERS.name, key=b"leaf01", value=counters.SerializeToString()).get(timeout=30)
    raw.close()
    agent_logins = {s.client_id for s in proxy.sessions if s.user == "flowtracer-agent-host01"}
    assert {"flowtracer-agent-host01", "flowtracer-agent-host01-raw"} <= agent_logins
    assert proxy.denied == [("flowtracer-agent-host01", topics.COUNTERS.name)]

    port = free_port()
    log_path = tmp_path / "process.log"
    env = {**os.environ, "FLOWTRACER_HOST_KEY_MASTER_FILE": str(master_file)}
    with open(log_path, "wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "flowtracer", "process", "--topology", str(topo), "--kafka", broker.bootstrap,
             "--tansu", "--partitions", str(PARTITIONS), "--app-id", APP_ID, "--kafka-config", str(kafka_config),
             "--metrics-port", str(port)], stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True)
    flows_read = f'flowtracer_processor_records_total{{topic="{topics.FLOWS.name}"}}'
    try:
        wait_for(lambda: worker.poll() is not None or _metrics(port).get(flows_read, 0) >= 4, 90,
                 "the processor to read the four flow batches")
        assert worker.poll() is None, log_path.read_text(errors="replace")[-3000:]
        refused = f'flowtracer_processor_identity_refused_total{{topic="{topics.FLOWS.name}"}}'
        wait_for(lambda: _metrics(port).get(refused, 0) >= 3, 30, "three refusals counted")
        metrics = _metrics(port)
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(10)
    assert metrics[refused] == 3
    assert metrics["flowtracer_processor_dead_letters_total"] == 3  # the agent's own batch is not among them
    consumer = KafkaConsumer(topics.DEAD_LETTER.name, bootstrap_servers=broker.bootstrap,
                             auto_offset_reset="earliest", consumer_timeout_ms=4000, enable_auto_commit=False,
                             **_client("flowtracer-admin"))
    letters = [analytics_pb2.DeadLetter.FromString(m.value) for m in consumer]
    consumer.close()
    reasons = sorted(d.reason for d in letters)
    assert len(reasons) == 3, reasons
    assert any("names host 'host02' but was signed by host 'host01'" in r for r in reasons), reasons
    assert any("signature of host 'host02' does not match" in r for r in reasons), reasons
    assert any("unsigned record" in r for r in reasons), reasons
    assert all(flows_pb2.FlowBatch.FromString(d.value).host == "host02" for d in letters)
    log = log_path.read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]
    # The processor did its job under the same ACLs: it wrote the dead letters and its own topics.
    assert proxy.denied == [("flowtracer-agent-host01", topics.COUNTERS.name)]
    assert USERS["flowtracer-processor"] not in log and MASTER.hex() not in log
