"""The value formats of platform profiles (``platform_profiles``): how a platform writes a state leaf that it
does not write as OpenConfig, and the conversions both ways: ``to_platform`` (the simulator writes) and
``from_platform`` (the collector reads back the canonical value). Pure."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

FORMATS: dict[str, str] = {
    "": "as OpenConfig",
    "lower": "an enumeration in lower case (`up`, `down`)",
    "speed-short": "a port speed as `400G`, `100G`, `25G`",
    "mbps": "a port speed as a decimal number of Mb/s (`400000`)",
    "date-and-time": "a time as RFC 3339 text (`2026-01-01T00:00:00.000000000Z`)",
    "subinterface": "a subinterface name (`ethernet-1/1.0`) where OpenConfig names the interface",
}
"""Value formats of state leaves (counters are always unsigned integers, as a number or decimal text)."""


_SHORT_SPEED = re.compile(r"^([0-9]{1,6})(M|G|T)$")
_UNIT = {"M": 10**6, "G": 10**9, "T": 10**12}


def to_platform(fmt: str, value: Any) -> Any:
    """A canonical value written as ``fmt`` says (simulator side): ``lower`` str; speeds from bit/s;
    ``date-and-time`` from ns since the epoch."""
    if fmt == "lower":
        return str(value).lower()
    if fmt == "speed-short":
        bps = int(value)
        for unit in ("T", "G", "M"):
            if bps % _UNIT[unit] == 0 and bps >= _UNIT[unit]:
                return f"{bps // _UNIT[unit]}{unit}"
        return str(bps)
    if fmt == "mbps":
        return str(int(value) // 10**6)
    if fmt == "subinterface":
        return f"{value}.0"
    if fmt == "date-and-time":
        ns = int(value)
        base = datetime.fromtimestamp(ns // 10**9, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        return f"{base}.{ns % 10**9:09d}Z"
    return value


def from_platform(fmt: str, value: Any) -> Any:
    """A platform value back in the canonical form the decoder reads (collector side); ValueError if it is not
    in ``fmt``: ``lower`` -> upper-case text, speeds -> bit/s, ``date-and-time`` -> ns since the epoch."""
    if fmt == "lower":
        return str(value).upper()
    if fmt == "speed-short":
        m = _SHORT_SPEED.match(str(value).strip())
        if not m:
            raise ValueError(f"{value!r} is not a speed such as 400G")
        return int(m.group(1)) * _UNIT[m.group(2)]
    if fmt == "mbps":
        text = str(value).strip()
        if not (text.isascii() and text.isdigit() and len(text) <= 12):
            raise ValueError(f"{value!r} is not a number of Mb/s")
        return int(text) * 10**6
    if fmt == "date-and-time":
        return _rfc3339_ns(str(value))
    if fmt == "subinterface":
        return str(value).rsplit(".", 1)[0]
    return value


_RFC3339 = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$")


def _rfc3339_ns(text: str) -> int:
    m = _RFC3339.match(text.strip())
    if not m:
        raise ValueError(f"{text!r} is not an RFC 3339 date-and-time")
    tz = "+00:00" if m.group(3) == "Z" else m.group(3)
    try:
        seconds = datetime.fromisoformat(m.group(1) + tz).timestamp()
    except ValueError as e:
        raise ValueError(f"{text!r}: {e}") from None
    return int(seconds) * 10**9 + int((m.group(2) or "0").ljust(9, "0"))
