"""Per-switch hash modes in the topology file: defaults, overrides, the hash each mode gives, and errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowtracer.fabric.ecmp_hash import DEFAULT_FIELDS, HashField, HashMode
from flowtracer.fabric.topology import TopologyError, parse_topology

GOOD = (Path(__file__).parent / "tiny_topology.yaml").read_text()
LEAF2 = "{name: leaf2, role: leaf, gnmi: {address: 127.0.0.1, port: 50002}"


def test_default_mode_is_five_tuple_and_unchanged() -> None:
    topo = parse_topology(GOOD)
    assert all(topo.hash_mode(s.name) is HashMode.FIVE_TUPLE for s in topo.switches)
    assert topo.ecmp_hash("leaf1").fields == DEFAULT_FIELDS
    assert "hash_mode" not in topo.to_yaml()


def test_per_switch_mode_overrides_defaults_and_round_trips() -> None:
    text = GOOD.replace(LEAF2 + "}", LEAF2 + ", hash_mode: 5tuple+bth_dqp}").replace(
        "port_speed: 400G", "port_speed: 400G\n  hash_mode: spray")
    topo = parse_topology(text)
    assert topo.hash_mode("leaf2") is HashMode.FIVE_TUPLE_BTH_DQP
    assert topo.hash_mode("leaf1") is HashMode.SPRAY
    assert topo.ecmp_hash("leaf2").fields == (*DEFAULT_FIELDS, HashField.DST_QPN)
    assert parse_topology(topo.to_yaml()) == topo


@pytest.mark.parametrize(("old", "new", "expected"), [
    (LEAF2 + "}", LEAF2 + ", hash_mode: ecmp}",
     "t.yaml:6: switches[1]: switch leaf2: hash_mode 'ecmp' is not one of: 5tuple, 5tuple+bth_dqp, spray, adaptive"),
    ("port_speed: 400G", "port_speed: 400G\n  hash_mode: 5-tuple",
     "t.yaml:4: defaults.hash_mode: hash_mode '5-tuple' is not one of: 5tuple, 5tuple+bth_dqp, spray, adaptive"),
])
def test_bad_mode_names_switch_and_value(old: str, new: str, expected: str) -> None:
    with pytest.raises(TopologyError) as err:
        parse_topology(GOOD.replace(old, new), "t.yaml")
    assert str(err.value) == expected
