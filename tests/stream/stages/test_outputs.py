"""The registry of outputs (pure): its rows are exactly the topic plan's output topics, ``Emitted``'s lists and the
processor's write ACLs; a row that contradicts its contract is refused; the docs' measurement table is its own."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import get_type_hints

import pytest

from flowtracer.plumbing import kafka_acls
from flowtracer.schemas import topics
from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.sinks.line_protocol import link_load_line
from flowtracer.stream.sinks.measurements import LINK_LOAD, markdown_table
from flowtracer.stream.stages.emitted import Emitted
from flowtracer.stream.stages.outputs import KEYED, MEASUREMENTS, OUTPUTS, WRITTEN, Output

DOCS = Path(__file__).resolve().parents[3] / "docs"
PLUMBING = {"attributions", "group_fims", "tokens", "windows"}
"""Emitted's fields that are not outputs: the internal topics' batches and the commit bookkeeping."""


def test_the_registry_topics_are_the_topic_plans_output_topics() -> None:
    assert sorted(o.topic.name for o in OUTPUTS) == sorted(t.name for t in topics.OUTPUT_TOPICS)


def test_emitted_holds_one_list_per_processor_output_of_its_message() -> None:
    hints = get_type_hints(Emitted)
    lists = {f.name: hints[f.name] for f in fields(Emitted) if f.name not in PLUMBING}
    assert lists == {o.kind: list[o.message] for o in OUTPUTS if o.by == "processor"}


def test_the_processor_may_write_exactly_its_outputs() -> None:
    assert set(kafka_acls.PROCESSOR_WRITES) == {o.topic for o in OUTPUTS if o.by == "processor"}


def test_derived_lists() -> None:
    kinds = [o.kind for o in OUTPUTS]
    assert len(set(kinds)) == len(kinds)
    assert [o.kind for o in KEYED] == [k for k in kinds if k not in ("incidents", "dead_letters")]
    assert [o.kind for o in WRITTEN] == [k for k in kinds if k not in ("ecmp_groups", "trace_requests", "incidents",
                                                                         "dead_letters")]
    assert list(MEASUREMENTS) == [o.measurement.name for o in OUTPUTS if o.measurement]


def test_rows_that_contradict_their_contract_are_refused() -> None:
    ok = ("link_loads", analytics_pb2.LinkLoad, topics.LINK_LOADS, "link", LINK_LOAD, link_load_line)
    Output(*ok)
    with pytest.raises(ValueError, match="carries LinkLoad, not PathLoad"):
        Output("x", analytics_pb2.PathLoad, topics.LINK_LOADS, "path_id")
    with pytest.raises(ValueError, match="no key field 'switch'"):
        Output("x", analytics_pb2.LinkLoad, topics.LINK_LOADS, "switch")
    with pytest.raises(ValueError, match="needs its encoder"):
        Output("x", analytics_pb2.LinkLoad, topics.LINK_LOADS, "link", LINK_LOAD)
    with pytest.raises(ValueError, match="made from LinkLoad, not FimSample"):
        Output("x", analytics_pb2.FimSample, topics.FIM, "group", LINK_LOAD, link_load_line)


def test_docs_stream_md_shows_the_current_measurements() -> None:
    """The table is generated: paste ``markdown_table(MEASUREMENTS.values())`` into docs/stream.md after a change."""
    assert markdown_table(MEASUREMENTS.values()) in (DOCS / "stream.md").read_text()
