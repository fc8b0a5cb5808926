"""The *shape* of a gNMI path: what kind of data it is, without which instance (pure).

An update the decoder does not read is counted by its shape, so a kind of data no test has seen (a vendor's
native tree, a SONiC table flowtracer does not map) is named in a log line and a metric instead of vanishing
into one "ignored" number. A shape is the origin, the prefix target, the element names with digit runs as ``*``
and every key value as ``*``: ``/state/port[port-id=*]/statistics/in-octets``, ``target=COUNTERS_DB
/COUNTERS/Ethernet*``. The number of distinct shapes kept is bounded (``MAX_SHAPES``); the rest are counted as
one ``(more shapes)``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from pygnmi.spec.v080.gnmi_pb2 import Path

from flowtracer.collectors.bounded_counts import count_bounded

_DIGITS = re.compile(r"[0-9]+")
MAX_SHAPES = 64
"""Distinct shapes kept in one count; beyond, one ``(more shapes)`` entry counts the rest."""
MORE = "(more shapes)"


def shape_text(origin: str, target: str, elems: Sequence[tuple[str, Mapping[str, str]]]) -> str:
    """The shape of a path given as (element name, keys) pairs."""
    parts = [_DIGITS.sub("*", name) + "".join(f"[{k}=*]" for k in sorted(keys)) for name, keys in elems]
    body = "/" + "/".join(parts)
    text = f"{origin}:{body}" if origin else body
    return f"target={target} {text}" if target else text


def path_shape(prefix: Path | None, path: Path) -> str:
    """The shape of ``prefix + path`` (``target=COUNTERS_DB /COUNTERS/Ethernet*``)."""
    origin = path.origin or (prefix.origin if prefix is not None else "")
    target = prefix.target if prefix is not None else ""
    elems = [(e.name, dict(e.key)) for p in (prefix, path) if p is not None for e in p.elem]
    return shape_text(origin, target, elems)


def names_shape(names: Sequence[str]) -> str:
    """The shape of a path known by its element names only (keys are not part of a shape)."""
    return shape_text("", "", [(n, {}) for n in names])


def count_shape(counts: dict[str, int], shape: str, n: int = 1) -> None:
    """Add ``n`` to ``counts[shape]``, at most ``MAX_SHAPES`` distinct shapes (then ``MORE``)."""
    count_bounded(counts, shape, n, MAX_SHAPES, MORE)


def merge_shapes(seen: dict[str, int], shapes: dict[str, int]) -> list[str]:
    """Add ``shapes``' counts to ``seen`` (bounded as ``count_shape``); the shapes ``seen`` did not hold yet (none
    once it holds ``MAX_SHAPES``: the rest go to ``MORE`` unnamed)."""
    new = [] if len(seen) >= MAX_SHAPES else [shape for shape in shapes if shape not in seen]
    for shape, n in shapes.items():
        count_shape(seen, shape, n)
    return new


def shapes_text(shapes: list[str], shown: int = 5) -> str:
    """``a, b, c and 4 more``: a log line's list of shapes."""
    return ", ".join(shapes[:shown]) + (f" and {len(shapes) - shown} more" if len(shapes) > shown else "")
