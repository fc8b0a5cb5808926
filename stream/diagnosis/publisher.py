"""Where incidents go: ``flowtracer.incidents.v1`` (key = incident id) and the ``incident`` point of the store.

Used by ``flowtracer diagnose`` and the demo. A failure to send is counted and logged once, never raised: the
diagnosis goes on, and the next window's snapshot of the same incident carries its whole state again.
"""

from __future__ import annotations

import logging
from typing import Any

from flowtracer.schemas import topics
from flowtracer.stream.diagnosis.incidents import Incident
from flowtracer.stream.diagnosis.records import incident_record
from flowtracer.stream.sinks.base import Sink
from flowtracer.stream.sinks.line_protocol import incident_line

log = logging.getLogger(__name__)


class IncidentPublisher:
    """Sends each incident snapshot to ``flowtracer.incidents.v1`` and its ``incident`` point to ``sink``
    (InfluxDB, a line-protocol file, or None). Call it with a window's incidents and the window's end (ns)."""

    def __init__(self, bootstrap: str, sink: Sink | None = None, client_config: dict[str, Any] | None = None,
                 client_id: str = "flowtracer-diagnose") -> None:
        from kafka import KafkaProducer

        # acks=all without idempotence: the embedded Tansu broker has no idempotent producers; a resent snapshot
        # is harmless (a reader keeps the newest per key)
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, client_id=client_id, acks="all",
                                      enable_idempotence=False, **(client_config or {}))
        self.sink = sink
        self.sent = 0
        self.lines = 0
        self.errors = 0

    def __call__(self, incidents: list[Incident], window_end_ns: int) -> None:
        for inc in incidents:
            rec = incident_record(inc, window_end_ns)
            try:
                self.producer.send(topics.INCIDENTS.name, key=topics.key(inc.id), value=rec.SerializeToString())
                self.sent += 1
                if self.sink is not None:
                    self.sink.write([incident_line(rec)])
                    self.lines += 1
            except Exception as e:  # the broker or the store: counted, the diagnosis goes on
                if not self.errors:
                    log.warning("cannot publish incidents: %s", e)
                self.errors += 1

    def close(self) -> None:
        """Deliver what is buffered (up to 10 s) and close the producer and the sink."""
        try:
            self.producer.flush(10)
            self.producer.close(5)
            if self.sink is not None:
                self.sink.close()
        except Exception as e:  # closing must not turn a clean stop into a traceback
            log.warning("closing the incident outputs: %s", e)
