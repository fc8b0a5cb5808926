"""Which record-batch objects of a partition retention and compaction may delete: Kafka's rules, pure.

Tansu's ``s3`` engine keeps every produced record batch as one object and never deletes one (retention,
DeleteRecords and compaction are not implemented; docs/operations.md, "The embedded broker's memory").
The object sweeper (``object_sweeper.py``) lists a partition's batch objects and deletes what
:func:`removable` names. The unit is the batch object, as Kafka's is the segment: a batch goes whole or
stays whole. Deleting one leaves a gap in the offsets, which Tansu's fetch skips like Kafka's after
retention or compaction.

* ``delete`` (``retention.ms``): from the oldest batch on, each whose write time is older than
  ``now - retention`` goes; the first younger one stops it (Kafka deletes from the log start only).
* ``compact`` (``cleanup.policy=compact``): a batch goes when every record in it is dead. A record is
  dead when a later record (in a later batch, or later in the same one) has its key, or when it is a
  tombstone (value None) that is its key's latest record, older than ``delete.retention.ms``, and no
  earlier batch that stays still holds a record of its key (removing the tombstone would bring that
  older value back to a reader from the start). Batches younger than ``min.compaction.lag.ms`` stay.
  A record without a key stays (Kafka refuses them in a compacted topic).
* ``compact,delete``: a batch goes when either rule says so.

Whatever the policy, the newest batch of a partition stays: Tansu answers ListOffsets from the batch
objects it lists and says offset 0 for a partition that has none.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

DEFAULT_DELETE_RETENTION_MS = 86_400_000
"""Kafka's default ``delete.retention.ms`` (one day): how long a tombstone outlives what it deleted."""
DEFAULT_MIN_COMPACTION_LAG_MS = 0
"""Kafka's default ``min.compaction.lag.ms``."""


@dataclass(frozen=True)
class RetentionPolicy:
    """One topic's retention settings, in Kafka's topic-config terms (ms)."""

    retention_ms: int | None = None
    """``retention.ms`` of the delete policy; None: the topic does not delete by time (Kafka's -1, or compact only)."""
    compact: bool = False
    """``cleanup.policy`` includes ``compact``."""
    delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS
    """``delete.retention.ms``: a tombstone younger than this stays."""
    min_compaction_lag_ms: int = DEFAULT_MIN_COMPACTION_LAG_MS
    """``min.compaction.lag.ms``: compaction leaves batches younger than this alone."""

    @property
    def frees(self) -> bool:
        """Whether the policy can delete anything at all."""
        return self.compact or self.retention_ms is not None


class KeyedRecord(NamedTuple):
    """What compaction needs of one record: its key (None: none) and whether it is a tombstone."""

    key: bytes | None
    tombstone: bool


@dataclass(frozen=True)
class StoredBatch:
    """One record-batch object of a partition."""

    offset: int
    """Base offset (the object's name)."""
    written_s: float
    """Latest time it can have been written, Unix s (its LastModified rounded up: ages are never overestimated)."""
    records: tuple[KeyedRecord, ...] | None = None
    """Its records in order; None when not read (a delete-only topic) or unreadable: compaction then leaves
    the whole partition alone, since an unknown batch may hold a key that a tombstone still has to hide."""


class PlannedTopic(Protocol):
    """A topic of the topic plan (``flowtracer.plumbing.topic_admin.TopicPlan``): its name and configs."""

    @property
    def name(self) -> str: ...

    @property
    def configs(self) -> Mapping[str, str]: ...


def policy_from_configs(configs: Mapping[str, str], default_retention_ms: int | None = None) -> RetentionPolicy:
    """The policy Kafka would apply to a topic created with ``configs``.

    ``default_retention_ms``: the broker-wide retention (Kafka's ``log.retention.ms``) for a delete-policy
    topic without ``retention.ms``; None keeps those for ever. A negative ``retention.ms`` keeps for ever.
    """
    cleanup = {p.strip() for p in configs.get("cleanup.policy", "delete").split(",")}
    retention: int | None = None
    if "delete" in cleanup:
        retention = int(configs["retention.ms"]) if "retention.ms" in configs else default_retention_ms
        retention = None if retention is None or retention < 0 else retention
    return RetentionPolicy(
        retention_ms=retention,
        compact="compact" in cleanup,
        delete_retention_ms=int(configs.get("delete.retention.ms", DEFAULT_DELETE_RETENTION_MS)),
        min_compaction_lag_ms=int(configs.get("min.compaction.lag.ms", DEFAULT_MIN_COMPACTION_LAG_MS)),
    )


def policies_from_plan(topics: Iterable[PlannedTopic],
                       default_retention_ms: int | None = None) -> dict[str, RetentionPolicy]:
    """Topic name -> policy for every planned topic whose policy can free something (the sweeper's mapping).

    Topics that keep everything are left out: the sweeper leaves them alone (and says so once).
    """
    out = {t.name: policy_from_configs(t.configs, default_retention_ms) for t in topics}
    return {name: p for name, p in out.items() if p.frees}


def removable(batches: Sequence[StoredBatch], policy: RetentionPolicy, now_s: float) -> list[int]:
    """Base offsets of the ``batches`` (one partition's, every one it has) that ``policy`` deletes at ``now_s``
    (Unix s), oldest first. Never the newest batch."""
    ordered = sorted(batches, key=lambda b: b.offset)
    if len(ordered) < 2:
        return []
    gone: set[int] = set()
    if policy.retention_ms is not None:
        for b in ordered[:-1]:
            if now_s - b.written_s <= policy.retention_ms / 1000:
                break
            gone.add(b.offset)
    if policy.compact and all(b.records is not None for b in ordered):
        gone |= compacted(ordered, policy, now_s, gone)
    return sorted(gone)


def compacted(ordered: Sequence[StoredBatch], policy: RetentionPolicy, now_s: float,
              gone: Collection[int] = ()) -> set[int]:
    """Base offsets of the batches whose records are all dead (module docstring); ``ordered`` by offset,
    every batch read; ``gone``: batches deleted anyway (by retention), which hold no key any more."""
    latest: dict[bytes, tuple[int, int]] = {}  # key -> (batch index, record index) of its latest record
    for i, b in enumerate(ordered):
        for j, r in enumerate(b.records or ()):
            if r.key is not None:
                latest[r.key] = (i, j)
    held: set[bytes] = set()  # keys that an earlier batch which stays still holds
    out: set[int] = set()
    for i, b in enumerate(ordered):
        if b.offset in gone:
            continue
        records = b.records or ()
        age_s = now_s - b.written_s
        settled = i < len(ordered) - 1 and age_s >= policy.min_compaction_lag_ms / 1000
        if settled and all(
            r.key is not None and (
                latest[r.key] != (i, j)  # superseded
                or (r.tombstone and age_s > policy.delete_retention_ms / 1000 and r.key not in held)
            )
            for j, r in enumerate(records)
        ):
            out.add(b.offset)
        else:
            held.update(r.key for r in records if r.key is not None)
    return out
