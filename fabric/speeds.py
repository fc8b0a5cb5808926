"""Link speeds as people write them ("400G", "25G", "800Gbps") and as the model keeps them (bit/s)."""

from __future__ import annotations

import re

_UNITS = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_SPEED = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:b(?:it)?(?:ps|/s)?)?\s*$", re.IGNORECASE)


def parse_speed(value: object) -> int:
    """Speed in bit/s from an int (bit/s) or a string such as "400G", "100Gbps", "25 G"."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a speed")
    if isinstance(value, int):
        if value <= 0:
            raise ValueError(f"speed must be positive, got {value}")
        return value
    if isinstance(value, str):
        m = _SPEED.match(value)
        if m:
            bps = int(float(m.group(1)) * _UNITS[m.group(2).upper()])
            if bps > 0:
                return bps
    raise ValueError(f"{value!r} is not a speed (examples: 400G, 100Gbps, 25000000000)")


def format_speed(bps: int) -> str:
    """The shortest exact form: 400000000000 -> "400G", 2500000000 -> "2500M"."""
    for unit in ("T", "G", "M", "K"):
        if bps % _UNITS[unit] == 0:
            return f"{bps // _UNITS[unit]}{unit}"
    return str(bps)
