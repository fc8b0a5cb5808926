"""Path shapes: what kind of data an unread update is, bounded in number."""

from __future__ import annotations

from flowtracer.collectors.gnmi.counters.paths import parse_path
from flowtracer.collectors.gnmi.counters.shapes import MAX_SHAPES, MORE, merge_shapes, path_shape, shapes_text


def test_shape_hides_instances_not_kinds() -> None:
    prefix = parse_path("/COUNTERS")
    prefix.target = "COUNTERS_DB"
    assert path_shape(prefix, parse_path("Ethernet12/SAI_PORT_STAT_PFC_7_RX_PKTS")) == \
        "target=COUNTERS_DB /COUNTERS/Ethernet*/SAI_PORT_STAT_PFC_*_RX_PKTS"
    assert path_shape(None, parse_path("eos_native:/Smash/counters/ethIntf[name=Ethernet1/1]/x")) == \
        "eos_native:/Smash/counters/ethIntf[name=*]/x"


def test_merge_names_new_shapes_and_stays_bounded() -> None:
    seen: dict[str, int] = {}
    assert merge_shapes(seen, {"/a": 2, "/b": 1}) == ["/a", "/b"]
    assert merge_shapes(seen, {"/a": 1}) == [] and seen == {"/a": 3, "/b": 1}
    many = {f"/x{i}": 1 for i in range(3 * MAX_SHAPES)}
    merge_shapes(seen, many)
    assert len(seen) == MAX_SHAPES + 1 and sum(seen.values()) == 4 + 3 * MAX_SHAPES and seen[MORE] > 0
    assert merge_shapes(seen, {"/y": 1}) == []  # full: counted under MORE, not named again and again
    assert shapes_text(["a", "b", "c", "d", "e", "f", "g"]) == "a, b, c, d, e and 2 more"
