"""Read a ``Recording`` from Kafka: the flow topic and the processor's link, path and FIM topics (I/O).

Every partition of the four topics is read from its earliest retained offset until the broker has
had nothing more for ``idle_s`` seconds, keeping the records whose window end lies in the asked
range. Reading to the idle timeout rather than to the end offsets is deliberate: the embedded
Tansu broker answers ListOffsets(latest) wrongly, and the idle rule works on every broker. No
consumer group is joined and no offset is committed, so reading changes nothing for anyone.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from google.protobuf.message import DecodeError

from flowtracer.schemas import topics
from flowtracer.whatif.record import MESSAGES, Recording

log = logging.getLogger(__name__)


def read_kafka(bootstrap: str, from_ns: int | None = None, to_ns: int | None = None, idle_s: float = 3.0,
               include_outputs: bool = True, client_config: Mapping[str, Any] | None = None) -> Recording:
    """Records with window end in (from_ns, to_ns] from the broker at ``bootstrap`` (host:port[,...]).

    ``include_outputs`` False reads only the flow topic (the processor's outputs are needed only to
    compare with what it measured). Undecodable records and unknown schema versions are counted in
    ``Recording.skipped`` and logged, not fatal. Raises ``kafka.errors.KafkaError`` (a subclass of
    Exception) when the broker cannot be reached. ``client_config``: extra ``KafkaConsumer`` settings
    (TLS/SASL: ``schemas.kafka_security.kafka_python_kwargs``).
    """
    from kafka import KafkaConsumer  # kafka-python: imported here so that pure users need not load it

    wanted = [t for t in MESSAGES if include_outputs or t == topics.FLOWS.name]
    consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=round(idle_s * 1000),
                             client_id="flowtracer-whatif", **(client_config or {}))
    rec = Recording(source=f"kafka://{bootstrap}")
    try:
        existing = consumer.topics()
        names = [t for t in wanted if t in existing]
        missing = sorted(set(wanted) - set(names))
        if missing:
            log.warning("topics not on the broker (nothing recorded there): %s", ", ".join(missing))
        if not names:
            return rec
        consumer.subscribe(names)
        for m in consumer:
            cls = MESSAGES[m.topic]
            msg = cls()
            try:
                msg.ParseFromString(m.value or b"")
            except DecodeError as e:
                rec.skipped += 1
                log.warning("skipping %s[%d]@%d: cannot decode %s: %s", m.topic, m.partition, m.offset,
                            cls.__name__, e)
                continue
            if msg.schema_version != topics.SCHEMA_VERSION:  # type: ignore[attr-defined]
                rec.skipped += 1
                log.warning("skipping %s[%d]@%d: unknown schema_version %d", m.topic, m.partition, m.offset,
                            msg.schema_version)  # type: ignore[attr-defined]
                continue
            end = msg.window_end_ns  # type: ignore[attr-defined]
            if (from_ns is None or end > from_ns) and (to_ns is None or end <= to_ns):
                rec.add(m.topic, msg)
    finally:
        consumer.close()
    return rec
