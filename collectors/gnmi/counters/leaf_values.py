"""gNMI typed values as the numbers the collector keeps: counters and timestamps as uint64 (RFC 7951 sends them
as decimal strings), oper-status as ``OperStatus``, port speeds in bit/s, device timestamps in ns since the epoch.
Pure; a value that is not what its leaf holds raises ``DecodeError`` naming it."""

from __future__ import annotations

import json
import re
from typing import Any

from pygnmi.spec.v080.gnmi_pb2 import TypedValue

from flowtracer.schemas.v1.counters_pb2 import OperStatus


class DecodeError(ValueError):
    """One update could not be decoded."""


def typed_scalar(tv: TypedValue) -> Any:
    """The Python value of a TypedValue; JSON values are parsed (objects stay dicts)."""
    kind = tv.WhichOneof("value")
    if kind == "uint_val":
        return tv.uint_val
    if kind in ("json_ietf_val", "json_val"):
        raw = tv.json_ietf_val if kind == "json_ietf_val" else tv.json_val
        try:
            return json.loads(raw)
        except ValueError as e:
            raise DecodeError(f"bad JSON value: {e}") from None
    if kind is None:
        raise DecodeError("empty value")
    if kind == "decimal_val":
        d = tv.decimal_val
        return d.digits / 10**d.precision
    if kind in ("leaflist_val", "any_val", "proto_bytes"):
        raise DecodeError(f"unsupported value type {kind}")
    return getattr(tv, kind)


def is_decimal(text: str, max_digits: int) -> bool:
    """Whether *text* is 1 to *max_digits* ASCII digits. ``str.isdigit`` alone accepts ``"²"`` and 5,000-digit
    strings, both of which make ``int()`` raise."""
    return 0 < len(text) <= max_digits and text.isascii() and text.isdigit()


def as_uint(v: Any) -> int:
    """A counter or timestamp leaf as int: RFC 7951 sends uint64 as a decimal string."""
    if isinstance(v, bool):
        raise DecodeError(f"expected an unsigned integer, got {v!r}")
    if isinstance(v, int):
        n = v
    elif (isinstance(v, str) and is_decimal(v, 20)) or (isinstance(v, float) and v.is_integer()):
        n = int(v)
    else:
        raise DecodeError(f"expected an unsigned integer, got {v!r}")
    if n < 0 or n >= 2**64:
        raise DecodeError(f"{n} is not a uint64")
    return n


def as_oper_status(v: Any) -> int:
    """An oper-status leaf (``UP``, ``openconfig-interfaces:DOWN``, ``lower-layer-down``) as OperStatus."""
    name = str(v).rsplit(":", 1)[-1].upper().replace("-", "_")
    try:
        return OperStatus.Value(f"OPER_STATUS_{name}")
    except ValueError:
        raise DecodeError(f"unknown oper-status {v!r}") from None


_SPEED = re.compile(r"SPEED_([0-9]{1,6})(MB|GB|TB)$")
_SPEED_UNIT = {"MB": 10**6, "GB": 10**9, "TB": 10**12}


def as_port_speed(v: Any) -> int:
    """openconfig-if-ethernet ETHERNET_SPEED identity (SPEED_400GB) or a number -> bit/s."""
    if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
        return v
    if isinstance(v, str) and is_decimal(v, 20):
        return int(v)
    m = _SPEED.search(str(v))
    if not m:
        raise DecodeError(f"unknown port speed {v!r}")
    return int(m.group(1)) * _SPEED_UNIT[m.group(2)]


def normalize_timestamp(ts: int) -> int:
    """Device timestamp -> ns since the epoch; devices that send s, ms or us are scaled up."""
    if ts <= 0:
        return 0
    if ts < 10**11:  # seconds until the year 5138
        return ts * 10**9
    if ts < 10**14:
        return ts * 10**6
    if ts < 10**17:
        return ts * 10**3
    return ts


def as_timeticks(v: Any) -> int:
    """A timeticks64 leaf (ns, or s/ms/us by magnitude) as ns since the epoch."""
    return normalize_timestamp(as_uint(v))
