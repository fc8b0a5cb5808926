"""Reader for ``ethtool -S <netdev>``: the NIC's statistics, and the per-priority PFC counters among them.

``ethtool -S`` prints one ``name: value`` per line under a ``NIC statistics:`` header; values are decimal
integers. The mlx5 driver's PFC counters (mlx5e ``en_stats``) are, per priority ``p`` 0-7 it has PFC on::

    rx_prio<p>_pause             pause frames received
    tx_prio<p>_pause             pause frames sent
    rx_prio<p>_pause_duration    time paused by the peer, microseconds
    tx_prio<p>_pause_duration    time this port paused the peer, microseconds

Other drivers name them otherwise (docs/congestion-counters.md); only the mlx5 names are read here. Reading
``ethtool -S`` needs no privilege. The parser never raises: a line that is not ``name: unsigned integer`` is
skipped and counted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from flowtracer.collectors.agent.sources.program import run_program

#: NicPfc fields in order, and the mlx5 ``ethtool -S`` name of each (``{p}`` = the priority).
PFC_STATS: tuple[tuple[str, str], ...] = (
    ("rx_pause", "rx_prio{p}_pause"),
    ("tx_pause", "tx_prio{p}_pause"),
    ("rx_pause_duration_us", "rx_prio{p}_pause_duration"),
    ("tx_pause_duration_us", "tx_prio{p}_pause_duration"),
)
_PFC_NAME = re.compile(r"^(rx|tx)_prio([0-7])_pause(_duration)?$")
_INDEX = {("rx", False): 0, ("tx", False): 1, ("rx", True): 2, ("tx", True): 3}


def parse_ethtool_stats(text: str) -> tuple[dict[str, int], int]:
    """``ethtool -S`` output -> ({statistic name: value}, lines skipped as malformed)."""
    out: dict[str, int] = {}
    malformed = 0
    for line in text.splitlines():
        s = line.strip()
        if not s or s.endswith("statistics:"):
            continue  # blank, or the header ("NIC statistics:")
        name, sep, value = s.partition(":")
        name, value = name.strip(), value.strip()
        if not sep or not name or not (0 < len(value) <= 20 and value.isascii() and value.isdigit()):
            malformed += 1
            continue
        n = int(value)
        if n >= 2**64:
            malformed += 1
            continue
        out[name] = n
    return out, malformed


def pfc_stats(stats: dict[str, int]) -> dict[int, dict[int, int]]:
    """The PFC counters among ``stats``: priority -> {index into PFC_STATS: value}; priorities without any, absent."""
    out: dict[int, dict[int, int]] = {}
    for name, v in stats.items():
        m = _PFC_NAME.match(name)
        if m:
            out.setdefault(int(m.group(2)), {})[_INDEX[(m.group(1), m.group(3) is not None)]] = v
    return out


def read_ethtool_stats(netdev: str, command: Sequence[str] = ("ethtool",), timeout_s: float = 2.0) -> str:
    """Run ``command -S netdev`` and return its output; ``program.ProgramError`` when it cannot run, times out or
    fails (the agent's part guard counts it and goes on without PFC counters)."""
    return run_program([*command, "-S", netdev], timeout_s).decode("utf-8", "replace")
