"""The retention and compaction rule of the object sweeper on hand-made batches (no servers).

Each case names the naive rule it rules out; the property test replays random logs with sweeps in between and
checks that a reader from the start always sees exactly the latest value of every key.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from flowtracer.embedded.log_retention import (
    DEFAULT_DELETE_RETENTION_MS,
    KeyedRecord,
    RetentionPolicy,
    StoredBatch,
    policies_from_plan,
    policy_from_configs,
    removable,
)
from flowtracer.plumbing.topic_admin import ClusterPolicy, plan
from flowtracer.schemas.topics import CHANGELOG_TOPICS, EXCHANGE_TOPICS, INPUT_TOPICS, changelog_name

NOW = 1_000_000.0
"""The sweep's clock, Unix s."""
COMPACT = RetentionPolicy(compact=True, delete_retention_ms=10_000)
"""Tombstones older than 10 s may go; no compaction lag."""


def rec(key: str | None, value: str | None = "v") -> KeyedRecord:
    """A record of ``key``; ``value=None`` makes it a tombstone."""
    return KeyedRecord(None if key is None else key.encode(), value is None)


def batch(offset: int, age_s: float, *records: KeyedRecord) -> StoredBatch:
    return StoredBatch(offset, NOW - age_s, records)


# -- delete policy (retention.ms) -----------------------------------------------------------------------------------

def test_batches_older_than_retention_go_from_the_start_and_never_the_newest() -> None:
    policy = RetentionPolicy(retention_ms=2_000)
    batches = [StoredBatch(0, NOW - 9), StoredBatch(10, NOW - 3), StoredBatch(20, NOW - 1), StoredBatch(30, NOW)]
    assert removable(batches, policy, NOW) == [0, 10]
    # the newest goes neither, however old: Tansu says offset 0 for a partition without batches
    assert removable([StoredBatch(0, NOW - 9), StoredBatch(5, NOW - 8)], policy, NOW) == [0]
    assert removable([StoredBatch(0, NOW - 9)], policy, NOW) == []


def test_retention_stops_at_the_first_young_batch() -> None:
    """Like Kafka, which deletes segments from the log start only: an old batch behind a young one stays."""
    policy = RetentionPolicy(retention_ms=2_000)
    batches = [StoredBatch(0, NOW - 9), StoredBatch(10, NOW - 1), StoredBatch(20, NOW - 9), StoredBatch(30, NOW)]
    assert removable(batches, policy, NOW) == [0]


def test_exactly_retention_old_stays() -> None:
    assert removable([StoredBatch(0, NOW - 2), StoredBatch(1, NOW)], RetentionPolicy(retention_ms=2_000), NOW) == []


def test_a_policy_without_retention_deletes_nothing() -> None:
    batches = [StoredBatch(0, NOW - 1e9), StoredBatch(1, NOW)]
    assert removable(batches, RetentionPolicy(), NOW) == []


# -- compact policy -------------------------------------------------------------------------------------------------

def test_a_batch_goes_when_every_record_is_superseded() -> None:
    batches = [batch(0, 60, rec("a"), rec("b")), batch(2, 50, rec("a")), batch(3, 40, rec("b")), batch(4, 0, rec("x"))]
    assert removable(batches, COMPACT, NOW) == [0]
    # one live record keeps its batch whole (a naive per-record rule would delete half of a batch object)
    batches = [batch(0, 60, rec("a"), rec("b")), batch(2, 50, rec("a")), batch(3, 0, rec("x"))]
    assert removable(batches, COMPACT, NOW) == []


def test_a_record_superseded_later_in_its_own_batch_is_dead() -> None:
    """a=1 is superseded by a=2 in the same batch; a rule looking only at later batches would keep batch 0."""
    batches = [batch(0, 60, rec("a"), rec("a")), batch(2, 50, rec("a")), batch(3, 0, rec("x"))]
    assert removable(batches, COMPACT, NOW) == [0]
    batches = [batch(0, 60, rec("a"), rec("a", None)), batch(2, 0, rec("x"))]  # put then delete, long ago
    assert removable(batches, COMPACT, NOW) == [0]


def test_a_tombstone_stays_while_an_earlier_batch_that_stays_holds_its_key() -> None:
    """The resurrection case. Batch 0 stays for b's value, and still holds a=1; batch 1 deletes a. Removing the
    tombstone would give a reader from the start a=1 again. A rule that removes every old latest tombstone fails."""
    batches = [batch(0, 60, rec("a"), rec("b")), batch(2, 50, rec("a", None)), batch(3, 0, rec("c"))]
    assert removable(batches, COMPACT, NOW) == []
    # once b is superseded, batch 0 goes, and with it the reason to keep the tombstone: both go in one sweep
    batches.insert(2, batch(3, 40, rec("b")))
    batches[-1] = batch(4, 0, rec("c"))
    assert removable(batches, COMPACT, NOW) == [0, 2]


def test_a_tombstone_stays_for_delete_retention() -> None:
    """Readers that saw the value must get to see the delete: the tombstone is kept ``delete.retention.ms``."""
    batches = [batch(0, 60, rec("a")), batch(1, 9, rec("a", None)), batch(2, 0, rec("x"))]
    assert removable(batches, COMPACT, NOW) == [0]
    batches = [batch(0, 60, rec("a")), batch(1, 11, rec("a", None)), batch(2, 0, rec("x"))]
    assert removable(batches, COMPACT, NOW) == [0, 1]


def test_an_old_tombstone_that_is_not_latest_is_simply_superseded() -> None:
    batches = [batch(0, 60, rec("a", None)), batch(1, 1, rec("a")), batch(2, 0, rec("x"))]
    assert removable(batches, COMPACT, NOW) == [0]


def test_batches_younger_than_the_compaction_lag_stay() -> None:
    policy = RetentionPolicy(compact=True, min_compaction_lag_ms=5_000)
    batches = [batch(0, 6, rec("a")), batch(1, 4, rec("a")), batch(2, 3, rec("a")), batch(3, 0, rec("a"))]
    assert removable(batches, policy, NOW) == [0]


def test_the_newest_batch_stays_even_when_dead() -> None:
    batches = [batch(0, 60, rec("a")), batch(1, 50, rec("a", None))]
    assert removable(batches, COMPACT, NOW) == [0]


def test_records_without_a_key_stay() -> None:
    batches = [batch(0, 60, rec(None)), batch(1, 60, rec("a"), rec(None)), batch(2, 50, rec("a")), batch(3, 0)]
    assert removable(batches, COMPACT, NOW) == []


def test_an_unread_batch_stops_compaction_of_its_partition() -> None:
    """An unreadable batch may hold a key that a later tombstone has to hide: on doubt, compaction deletes
    nothing in that partition; retention, which needs no record, still does."""
    unread = StoredBatch(0, NOW - 60, None)
    batches = [unread, batch(1, 50, rec("a", None)), batch(2, 40, rec("b")), batch(3, 30, rec("b")), batch(4, 0)]
    assert removable(batches, COMPACT, NOW) == []
    both = RetentionPolicy(retention_ms=55_000, compact=True, delete_retention_ms=10_000)
    assert removable(batches, both, NOW) == [0]


# -- compact,delete -------------------------------------------------------------------------------------------------

def test_compact_and_delete_remove_what_either_removes() -> None:
    policy = RetentionPolicy(retention_ms=45_000, compact=True, delete_retention_ms=10_000)
    batches = [batch(0, 60, rec("a")), batch(1, 50, rec("b")), batch(2, 40, rec("c")), batch(3, 30, rec("c")),
               batch(4, 0, rec("x"))]
    assert removable(batches, policy, NOW) == [0, 1, 2]


def test_retention_frees_the_tombstone_that_a_deleted_batch_held_back() -> None:
    """Batch 0 goes by retention; it no longer holds a=1, so the tombstone for a may go too."""
    policy = RetentionPolicy(retention_ms=55_000, compact=True, delete_retention_ms=10_000)
    batches = [batch(0, 60, rec("a"), rec("b")), batch(1, 50, rec("a", None)), batch(2, 0, rec("x"))]
    assert removable(batches, policy, NOW) == [0, 1]


# -- property: a reader from the start sees exactly the latest value of every key --------------------------------

def latest_values(batches: Sequence[tuple[int, tuple[tuple[str, int | None], ...]]]) -> dict[str, int]:
    """What a reader from the start ends with: the value of each key's last record; a tombstone removes it."""
    out: dict[str, int] = {}
    for _, records in batches:
        for key, value in records:
            if value is None:
                out.pop(key, None)
            else:
                out[key] = value
    return out


record_st = st.tuples(st.sampled_from("abcde"), st.one_of(st.none(), st.integers(0, 9)))
step_st = st.tuples(st.lists(record_st, min_size=1, max_size=4), st.floats(0.0, 4.0), st.booleans())


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(step_st, min_size=1, max_size=40))
def test_compaction_never_changes_what_a_reader_from_the_start_sees(
        steps: list[tuple[list[tuple[str, int | None]], float, bool]]) -> None:
    """Batches are written ``dt`` s apart and swept now and then; after each sweep the kept batches read from the
    start give the same latest values as the whole log, and nothing whose delete is still pending comes back."""
    policy = RetentionPolicy(compact=True, delete_retention_ms=3_000, min_compaction_lag_ms=1_000)
    now = 0.0
    log: list[tuple[int, tuple[tuple[str, int | None], ...]]] = []  # everything written
    kept: dict[int, tuple[float, tuple[tuple[str, int | None], ...]]] = {}  # offset -> (written, records)
    offset = 0
    for records, dt, sweep in steps:
        now += dt
        kept[offset] = (now, tuple(records))
        log.append((offset, tuple(records)))
        offset += len(records)
        if sweep:
            stored = [StoredBatch(o, w, tuple(KeyedRecord(k.encode(), v is None) for k, v in rs))
                      for o, (w, rs) in kept.items()]
            for o in removable(stored, policy, now):
                del kept[o]
            assert max(kept) == log[-1][0], "the newest batch stays"
            assert latest_values(sorted((o, rs) for o, (_, rs) in kept.items())) == latest_values(log)


# -- the plan's configs ---------------------------------------------------------------------------------------------

def test_policy_from_configs_reads_kafka_topic_configs() -> None:
    assert policy_from_configs({}) == RetentionPolicy()
    assert policy_from_configs({}, default_retention_ms=5) == RetentionPolicy(retention_ms=5)
    assert policy_from_configs({"retention.ms": "-1"}, default_retention_ms=5) == RetentionPolicy()
    assert policy_from_configs({"cleanup.policy": "compact", "retention.ms": "7"}) == RetentionPolicy(compact=True)
    assert policy_from_configs({"cleanup.policy": "compact, delete", "retention.ms": "7",
                                "delete.retention.ms": "8", "min.compaction.lag.ms": "9"}) == RetentionPolicy(
        retention_ms=7, compact=True, delete_retention_ms=8, min_compaction_lag_ms=9)


def test_policies_from_the_topic_plan() -> None:
    """The one topic plan decides: with a cluster policy the inputs expire after its retention and the compacted
    topics are compacted (whatever their retention.ms); without one only the compacted topics free anything, and the others are left out."""
    cluster = ClusterPolicy(retention_input_ms=2_000)
    topics = plan(4, ["app"], cluster)
    policies = policies_from_plan(topics)
    for t in INPUT_TOPICS:  # a compacted one (path traces) keeps its retention.ms unused, as Kafka does
        assert policies[t.name] == RetentionPolicy(retention_ms=None if t.compacted else 2_000, compact=t.compacted)
    compacted = {t.name for t in topics if t.configs.get("cleanup.policy") == "compact"}
    assert compacted >= {t.name for t in EXCHANGE_TOPICS if t.compacted} | {
        changelog_name("app", t) for t in CHANGELOG_TOPICS}
    for name in compacted:
        assert policies[name] == RetentionPolicy(compact=True, delete_retention_ms=DEFAULT_DELETE_RETENTION_MS)
    assert policies_from_plan(plan(4, ["app"])) == {name: RetentionPolicy(compact=True) for name in compacted}
