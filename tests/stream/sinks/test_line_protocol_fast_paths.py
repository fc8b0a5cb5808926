"""The line-protocol fast paths (cached tag prefixes) give exactly the lines the checked encoders give,
and still refuse bad messages."""

from __future__ import annotations

import math

import pytest

from flowtracer.schemas.v1 import analytics_pb2
from flowtracer.stream.sinks import line_protocol as ip
from flowtracer.stream.stages.outputs import to_lines


def path_load(**kw: object) -> analytics_pb2.PathLoad:
    base: dict[str, object] = dict(
        schema_version=1, window_end_ns=2_000_000_000, path_id="h1:m>l1:p1|l1:p9>s1:p1|s1:p2>l9:p1|l9:p3>h9:m",
        links=["h1:m>l1:p1", "l1:p9>s1:p1", "s1:p2>l9:p1", "l9:p3>h9:m"], src_host="h1", src_nic="m",
        dst_host="h9", dst_nic="m", bytes=123, flow_count=2, resolver="hash", confidence=0.5)
    base.update(kw)
    return analytics_pb2.PathLoad(**base)  # type: ignore[arg-type]


def link_load(**kw: object) -> analytics_pb2.LinkLoad:
    base: dict[str, object] = dict(
        schema_version=1, window_end_ns=2_000_000_000, link="l1:p9>s1:p1", src_node="l1", dst_node="s1",
        resolver="hash", measured_valid=True, measured_bytes=10, attributed_bytes=7, unexplained_bytes=3,
        utilization=0.25, flow_count=4)
    base.update(kw)
    return analytics_pb2.LinkLoad(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("msg", [
    path_load(), path_load(links=[]), path_load(src_nic="h1:m", src_host=""), path_load(confidence=1e-05),
    path_load(links=["h1:m>l9:p1", "l9:p3>h9:m"], path_id="same"), path_load(src_host="h 1,x=y"),
])
def test_path_load_fast_line_equals_checked(msg: analytics_pb2.PathLoad) -> None:
    for _ in range(2):  # cold and cached prefix
        assert ip.path_load_line(msg) == ip._path_load_line_checked(msg)


@pytest.mark.parametrize("msg", [
    link_load(), link_load(measured_valid=False), link_load(utilization=0.0), link_load(unexplained_bytes=-5),
    link_load(attributed_bytes=0, flow_count=0),
])
def test_link_load_fast_line_equals_checked(msg: analytics_pb2.LinkLoad) -> None:
    for _ in range(2):
        assert ip.link_load_line(msg) == ip._link_load_line_checked(msg)


@pytest.mark.parametrize("msg", [
    link_load(schema_version=2), link_load(resolver=""), link_load(utilization=math.inf),
    link_load(measured_bytes=2**63), link_load(window_end_ns=0),
    path_load(schema_version=2), path_load(resolver=""), path_load(confidence=math.nan), path_load(bytes=2**63),
])
def test_fast_lines_still_refuse_bad_messages(msg: object) -> None:
    with pytest.raises(ip.PointError):
        to_lines([msg])
