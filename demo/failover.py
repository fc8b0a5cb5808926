"""The failover scenario: a recording processed by one worker, then by two of one app id, one of them SIGKILLed mid-run.

Traffic is recorded once through the real pipeline (``LocalPipeline``: sim, collectors, agents into Tansu). Every
output record is keyed by (topic, entity, window end, basis, resolver); a pair of workers must give every key the
single worker gave, with the same values (replays rewrite the same records, they never change them), from the time
every source streams. Used by tests/e2e/test_processor_scaleout.py (once) and bench/bench_failover.py (repeated).
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from flowtracer.demo.local_pipeline import Stage
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.runtime.app import state_changelog_topic
from flowtracer.stream.runtime.config import ProcessorConfig

OUTPUTS = {topics.LINK_LOADS.name: (analytics_pb2.LinkLoad, "link"),
           topics.PATH_LOADS.name: (analytics_pb2.PathLoad, "path_id"),
           topics.FIM.name: (analytics_pb2.FimSample, "group"),
           topics.COLLISIONS.name: (analytics_pb2.Collision, "group")}
"""The output topics compared: message type and the field naming its entity."""
PARTIAL_WINDOWS = 5
"""The recording's first windows hold partial instants (sources starting, baseline samples, an instant split over two
batches) whose outcome depends on the order topics are read in; from then on the output is a function of the records."""

Key = tuple[str, str, int, int, str]
"""topic, entity, window end (ns), basis, resolver"""
Outputs = dict[Key, set[bytes]]

FETCH_WAIT_MS = 20
"""The readers' fetch wait (ms): Tansu answers a fetch that found nothing only at the end of it, and the kill must
follow the first saved state closely."""


def output_key(topic: str, msg: Any) -> Key:
    _, field = OUTPUTS[topic]
    return topic, getattr(msg, field), msg.window_end_ns, getattr(msg, "basis", 0), msg.resolver


def output_reader(bootstrap: str) -> KafkaConsumer:
    """A consumer of every partition of the compared output topics, from the beginning; manually assigned (no group
    join to wait for), it keeps its position between runs."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=FETCH_WAIT_MS)
    tps = [TopicPartition(t, p) for t in OUTPUTS for p in consumer.partitions_for_topic(t)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    return consumer


def drain(consumer: KafkaConsumer, quiet_s: float, until: float, into: Outputs | None = None,
          poll_ms: int = 500) -> Outputs:
    """Read outputs (into ``into``, if given) until nothing new came for ``quiet_s`` or the monotonic deadline, each
    poll waiting at most ``poll_ms``."""
    got: Outputs = defaultdict(set) if into is None else into
    last_new = time.monotonic()
    while time.monotonic() - last_new < quiet_s and time.monotonic() < until:
        for records in consumer.poll(timeout_ms=poll_ms).values():
            for m in records:
                cls, _ = OUTPUTS[m.topic]
                got.setdefault(output_key(m.topic, cls.FromString(m.value)), set()).add(m.value)
                last_new = time.monotonic()
    return got


def fabric_windows(got: Outputs, resolver: str) -> int:
    """How many fabric FIM windows of ``resolver`` are in ``got``."""
    return sum(1 for k in got if k[0] == topics.FIM.name and k[1] == "fabric" and k[4] == resolver)


def owned(worker: Stage) -> set[int]:
    """Partitions the worker has created stages for (its log says so)."""
    return {int(p) for p in re.findall(r"(?:flows|links) stage of partition (\d+)", worker.log_path.read_text())}


def resolver_of(worker: Stage) -> str:
    return worker.args[list(worker.args).index("--resolver") + 1]


@dataclass(frozen=True)
class Kill:
    """A worker SIGKILLed: when (wall clock, s), the partitions it owned, and the fabric windows output by then."""

    victim: Stage
    at_s: float
    owned: frozenset[int]
    windows_done: int


def kill_first_to_save(bootstrap: str, apps: dict[str, list[Stage]], got: Outputs, outputs: KafkaConsumer,
                       until: float) -> dict[str, Kill]:
    """SIGKILL, per app id, the first worker owning a partition whose stage state is in the app's changelog (it has
    published a window there: the survivor must continue from that state), collecting outputs into ``got``
    meanwhile. Raises AssertionError when none saved state by the monotonic deadline ``until``."""
    changelog = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=FETCH_WAIT_MS)
    app_of = {state_changelog_topic(ProcessorConfig.model_construct(app_id=a)): a for a in apps}
    saved: dict[str, set[int]] = defaultdict(set)
    killed: dict[str, Kill] = {}
    try:
        while time.monotonic() < until and len(killed) < len(apps):
            # Each turn is short: the workers go through the recording in about a second, and a kill that comes
            # after their last window tests nothing (the caller checks it came mid-run).
            drain(outputs, quiet_s=0.02, until=time.monotonic() + 0.05, into=got, poll_ms=20)
            parts = {t: changelog.partitions_for_topic(t) for t in app_of}
            if not changelog.assignment() and all(parts.values()):
                tps = [TopicPartition(t, p) for t, ps in parts.items() for p in ps]
                changelog.assign(tps)
                changelog.seek_to_beginning(*tps)
            for tp, records in changelog.poll(timeout_ms=20).items():
                saved[app_of[tp.topic]] |= {r.partition for r in records}
            for app, workers in apps.items():
                victim = next((w for w in workers if owned(w) & saved[app]), None)
                if app not in killed and victim is not None:
                    mine = frozenset(owned(victim))
                    victim.proc.kill()  # no clean shutdown: un-acked records must be replayed by the survivor
                    killed[app] = Kill(victim, time.time(), mine, fabric_windows(got, resolver_of(victim)))
    finally:
        changelog.close()
    if len(killed) < len(apps):
        raise AssertionError(f"no worker saved stage state in time: saved {dict(saved)}, "
                             f"owned {[owned(w) for ws in apps.values() for w in ws]}")
    return killed


@dataclass(frozen=True)
class Comparison:
    """How a pair's outputs differ from the single worker's, over the steady windows (keys sorted)."""

    missing: list[Key]  # the single worker's, never output by the pair
    extra: list[Key]  # output by the pair only, in windows the single worker output
    changed: list[Key]  # output by both, with other values

    @property
    def identical(self) -> bool:
        return not (self.missing or self.extra or self.changed)

    def windows_lost(self) -> list[int]:
        """Window ends (ns) with an output missing or changed."""
        return sorted({k[2] for k in (*self.missing, *self.changed)})


def steady(one: Outputs) -> Outputs:
    """The single worker's outputs from the time every source streams (``PARTIAL_WINDOWS``)."""
    ends = sorted({k[2] for k in one})
    first = ends[min(PARTIAL_WINDOWS, len(ends) - 1)] if ends else 0
    return {k: v for k, v in one.items() if k[2] >= first}


def compare(one: Outputs, two: Outputs, resolvers: set[str] | None = None) -> Comparison:
    """The pair's outputs ``two`` against the single worker's steady outputs ``one`` (of ``resolvers``, if given)."""
    ref = {k: v for k, v in steady(one).items() if resolvers is None or k[4] in resolvers}
    ends = {k[2] for k in ref}
    pair = {k: v for k, v in two.items() if k[2] in ends and (resolvers is None or k[4] in resolvers)}
    return Comparison(missing=sorted(set(ref) - set(pair)), extra=sorted(set(pair) - set(ref)),
                      changed=sorted(k for k in ref if k in pair and pair[k] != ref[k]))


def takeover_s(survivor_log: str, partitions: frozenset[int], killed_at_s: float) -> float | None:
    """Seconds from the kill to the survivor's stage of the last of ``partitions`` (its log's local-time stamps,
    whole milliseconds); None when the survivor never took one of them over."""
    firsts: dict[int, float] = {}
    line = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO .*?(?:flows|links) stage of partition (\d+): "
    for stamp, p in re.findall(line, survivor_log):
        at = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
        if at >= killed_at_s - 0.001 and int(p) in partitions:
            firsts.setdefault(int(p), at)
    if not partitions or set(firsts) != set(partitions):
        return None
    return max(firsts.values()) - killed_at_s
