"""Every container limit holds its stage's Kafka buffer: limit >= 1.1 x (base + 1.05 x max_buffer_bytes
+ max_in_flight x 32 KiB), with the base per stage read from docs/operations.md ("Memory limits and the
Kafka buffer", where it is measured). A limit below that turns a long broker outage into an OOM kill
that loses the buffer uncounted."""

from __future__ import annotations

import inspect
import re

import pytest
import yaml
from deploy_helpers import DEPLOY, DOCS

from flowtracer.collectors.agent.config import AgentConfig
from flowtracer.collectors.gnmi.config import Kafka
from flowtracer.collectors.kafka_sink import KafkaSink

MiB = 2**20
BUFFER_COST = 1.05  # RSS per buffered byte, measured (docs/operations.md)
MARGIN = 1.1  # allocator fragmentation, page cache (docs/operations.md)
IN_FLIGHT_RECORD = 32 * 1024  # bytes per record inside kafka-python (a 64-port CounterBatch, ~28 KB)
_SINK = inspect.signature(KafkaSink).parameters


def documented_base() -> dict[str, int]:
    """Stage -> base bytes, from the table in docs/operations.md."""
    text = (DOCS / "operations.md").read_text()
    section = text.split("### Memory limits and the Kafka buffer", 1)[1].split("\n### ", 1)[0]
    return {m[1]: int(m[2]) * MiB for m in re.finditer(r"^\| (\w+) \| (\d+) MiB \|", section, re.M)}


def k8s_bytes(q: str) -> int:
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi|K|M|G)?", str(q))
    assert m, f"memory quantity {q!r}"
    return int(m[1]) * {None: 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "K": 10**3, "M": 10**6, "G": 10**9}[m[2]]


def compose_bytes(q: str) -> int:
    m = re.fullmatch(r"(\d+)([bkmg]?)", str(q).lower())
    assert m, f"mem_limit {q!r}"
    return int(m[1]) * {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30}[m[2]]


def budget(stage: str, max_buffer_bytes: int, max_buffer: int) -> int:
    in_flight = min(_SINK["max_in_flight"].default, max_buffer)
    return int(MARGIN * (documented_base()[stage] + BUFFER_COST * max_buffer_bytes + in_flight * IN_FLIGHT_RECORD))


def agent_buffer() -> tuple[int, int]:
    """(max_buffer_bytes, max_buffer) of the agent: it sets the record count, the sink's default the bytes."""
    fields = AgentConfig.model_fields
    assert "max_buffer_bytes" not in fields, "the agent now sets its own byte bound: read it here"
    return _SINK["max_buffer_bytes"].default, fields["max_buffer"].default


def _k8s_limit(file: str, container: str) -> int:
    for doc in yaml.safe_load_all((DEPLOY / "k8s" / file).read_text()):
        for c in (doc or {}).get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            if c["name"] == container:
                return k8s_bytes(c["resources"]["limits"]["memory"])
    raise AssertionError(f"no container {container} in deploy/k8s/{file}")


def _kafka(collector_yaml: str) -> Kafka:
    """The Kafka section of a collector YAML, validated by the collector's own model (the other
    sections name files only the containers have)."""
    return Kafka.model_validate((yaml.safe_load(collector_yaml) or {}).get("kafka") or {})


def _k8s_collector_kafka() -> Kafka:
    for doc in yaml.safe_load_all((DEPLOY / "k8s" / "config.yaml").read_text()):
        if doc and doc.get("kind") == "ConfigMap" and "collector.yaml" in doc.get("data", {}):
            return _kafka(doc["data"]["collector.yaml"])
    raise AssertionError("no collector.yaml in deploy/k8s/config.yaml")


def test_the_documented_bases_are_there() -> None:
    assert set(documented_base()) == {"collector", "agent"}


def test_k8s_collector_limit_holds_its_buffer() -> None:
    k = _k8s_collector_kafka()
    need = budget("collector", k.max_buffer_bytes, k.max_buffer)
    assert _k8s_limit("collector.yaml", "collector") >= need, f"collector limit below {need / MiB:.0f} MiB"


def test_k8s_agent_limit_holds_its_buffer() -> None:
    need = budget("agent", *agent_buffer())
    assert _k8s_limit("agent.yaml", "agent") >= need, f"agent limit below {need / MiB:.0f} MiB"


@pytest.mark.parametrize("service", ["collector", "agent"])
def test_compose_limits_hold_their_buffer(service: str) -> None:
    svc = yaml.safe_load((DEPLOY / "compose" / "compose.yaml").read_text())["services"][service]
    assert "mem_limit" in svc, f"compose service {service} has no mem_limit"
    if service == "collector":
        k = _kafka((DEPLOY / "compose" / "collector.yaml").read_text())
        need = budget("collector", k.max_buffer_bytes, k.max_buffer)
    else:
        need = budget("agent", *agent_buffer())
    assert compose_bytes(svc["mem_limit"]) >= need, f"{service} mem_limit below {need / MiB:.0f} MiB"


def test_the_old_limits_would_fail() -> None:
    """The check has teeth: the limits before issue 16 (512 Mi collector, 384 Mi agent) fail it with
    the default buffers."""
    k = Kafka()
    assert k8s_bytes("512Mi") < budget("collector", k.max_buffer_bytes, k.max_buffer)
    assert k8s_bytes("384Mi") < budget("agent", *agent_buffer())
