"""Contract rules for everything on Kafka: versioned, documented, and never renumbered.

fields.lock records (message, field, number, type) of every field ever published. A field may be
added (append it to the lock), never renumbered or retyped; a removed field must be reserved by
number and name in its .proto.
"""

from __future__ import annotations

import re
from pathlib import Path

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from flowtracer.schemas import topics
from flowtracer.schemas.v1 import (
    analytics_pb2,
    common_pb2,
    counters_pb2,
    flows_pb2,
    internal_pb2,
    peers_pb2,
    traces_pb2,
)

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "schemas" / "v1" / "fields.lock"
MODULES = (common_pb2, counters_pb2, flows_pb2, analytics_pb2, internal_pb2, peers_pb2, traces_pb2)


def _messages() -> dict[str, Descriptor]:
    out: dict[str, Descriptor] = {}
    for mod in MODULES:
        for d in mod.DESCRIPTOR.message_types_by_name.values():
            out[d.full_name] = d
    return out


def _type_name(f: FieldDescriptor) -> str:
    if f.message_type is not None:
        base = f.message_type.full_name
    elif f.enum_type is not None:
        base = f.enum_type.full_name
    else:
        base = {v: k for k, v in FieldDescriptor.__dict__.items() if k.startswith("TYPE_")}[f.type].lower()[5:]
    return ("repeated " if f.is_repeated else "") + base


def _current() -> set[tuple[str, str, int, str]]:
    return {(m, f.name, f.number, _type_name(f)) for m, d in _messages().items() for f in d.fields}


def _reserved() -> dict[str, tuple[set[int], set[str]]]:
    out: dict[str, tuple[set[int], set[str]]] = {}
    for mod in MODULES:
        from google.protobuf import descriptor_pb2

        fd = descriptor_pb2.FileDescriptorProto()
        mod.DESCRIPTOR.CopyToProto(fd)
        for m in fd.message_type:
            nums = {n for r in m.reserved_range for n in range(r.start, r.end)}
            out[f"{fd.package}.{m.name}"] = (nums, set(m.reserved_name))
    return out


def test_no_field_renumbered_retyped_or_removed_unreserved() -> None:
    locked = set()
    for line in LOCK.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            m, name, num, typ = line.split("\t")
            locked.add((m, name, int(num), typ))
    current = _current()
    reserved = _reserved()
    for m, name, num, typ in sorted(locked - current):
        same_slot = [c for c in current if c[0] == m and (c[1] == name or c[2] == num)]
        assert not same_slot, f"{m}.{name} = {num} ({typ}) was changed to {same_slot}: add a new field instead"
        nums, names = reserved.get(m, (set(), set()))
        assert num in nums and name in names, f"{m}.{name} = {num} was removed: reserve {num} and {name!r}"
    new = sorted(current - locked)
    assert not new, "new fields: append them to schemas/v1/fields.lock:\n" + "\n".join("\t".join(map(str, n)) for n in new)


def test_every_top_level_record_carries_schema_version() -> None:
    for name in ("CounterBatch", "FlowBatch", "LinkLoad", "PathLoad", "FimSample", "Collision", "LinkCongestion",
                 "NicCongestionSample", "CongestionCause", "DeadLetter", "QpEnds", "PathTrace"):
        d = _messages()[f"flowtracer.v1.{name}"]
        assert d.fields_by_name["schema_version"].number == 1, name


def test_every_field_and_topic_is_documented() -> None:
    doc = (ROOT / "docs" / "schemas.md").read_text()
    for t in (*topics.INPUT_TOPICS, *topics.OUTPUT_TOPICS, *topics.EXCHANGE_TOPICS):
        assert f"`{t.name}`" in doc, f"topic {t.name} missing from docs/schemas.md"
    for t in topics.INTERNAL_TOPICS:
        assert f"`<app-id>.{t.name}`" in doc, f"internal topic {t.name} missing from docs/schemas.md"
    for t in topics.CHANGELOG_TOPICS:
        assert f"`{topics.changelog_name('<app-id>', t)}`" in doc, f"changelog {t.name} missing from docs/schemas.md"
    for full, d in _messages().items():
        section = re.search(rf"^### {d.name}\b(.*?)(?=^### |\Z)", doc, re.S | re.M)
        assert section, f"message {full} has no '### {d.name}' section in docs/schemas.md"
        for f in d.fields:
            assert f"`{f.name}`" in section.group(1), f"{d.name}.{f.name} is not documented in docs/schemas.md"


def test_every_proto_field_has_a_comment() -> None:
    # A field line must be preceded by a // comment line, or share a comment with the fields just above it.
    for proto in sorted((ROOT / "schemas" / "v1").glob("*.proto")):
        lines = proto.read_text().splitlines()
        for i, line in enumerate(lines):
            if re.match(r"\s+(repeated\s+)?[\w.]+\s+\w+\s*=\s*\d+;", line) and "enum" not in line:
                j = i - 1
                while j >= 0 and re.match(r"\s+(repeated\s+)?[\w.]+\s+\w+\s*=\s*\d+;", lines[j]):
                    j -= 1
                assert j >= 0 and (lines[j].strip().startswith("//") or lines[j].strip().endswith("{")), \
                    f"{proto.name}:{i + 1}: field without a comment: {line.strip()}"


def test_the_partitioning_rule_is_kafkas_murmur2() -> None:
    """The contract's own murmur2 equals kafka-python's (the Java client's) on keys of every length class."""
    import random

    from kafka.partitioner.default import murmur2 as clients

    rng = random.Random(34)
    keys = [b"", b"a", b"ab", b"abc", b"leaf01", b"\xff" * 7] + [rng.randbytes(rng.randrange(64)) for _ in range(500)]
    assert [topics.murmur2(k) for k in keys] == [clients(k) for k in keys]
