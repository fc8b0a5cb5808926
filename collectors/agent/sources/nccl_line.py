"""One captured NCCL log line -> its parts: launcher prefixes, NCCL's own prefix, timestamp and message.

NCCL writes ``[timestamp] host:pid:tid [cudaDev] NCCL INFO message`` (``src/debug.cc``: the timestamp only with
NCCL_DEBUG_TIMESTAMP_LEVELS/_FORMAT, default format ``[%F %T] ``, written with ``localtime_r``: local time of the
host). What launches the processes often puts its own prefix before that; those seen in real logs
(tests/fixtures/real/nccl/SOURCES.md) are taken off, innermost last, any number of them:

* ``host: `` (pdsh, clush), ``[1,0]<stdout>:`` (Open MPI ``--tag-output``), ``[155] `` (MPICH/Intel MPI
  ``-prepend-rank``, Horovod), `` 0: `` (Slurm ``srun -l``);
* ``(RayTrainWorker pid=83500, ip=10.0.0.1) `` and the older ``(pid=21065) `` (Ray forwards worker output),
  nested when Ray runs inside another Ray-managed process (vLLM);
* ``2024-06-16T22:23:01.844Z `` (``kubectl logs --timestamps``);
* a decimal column between ``[cudaDev]`` and ``NCCL INFO`` (RCCL builds that time-stamp INFO lines).

Text before the NCCL prefix that is none of these is kept as ``NcclLine.unknown_prefix``: the line is still used
(nothing is lost) and its prefix shape is counted (``nccl_shapes``). Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_INFO = "NCCL INFO "
_HEAD_CHARS = 400
"""Longest ``host:pid:tid [dev] [column] `` before ``NCCL INFO`` looked for, characters (a host name is at most 255)."""
_NCCL = re.compile(r"(?P<host>[^\s:\[\]()|]{1,255}):(?P<pid>\d{1,20}):(?P<tid>\d{1,20}) \[(?P<dev>-?\d{1,20})\] "
                   r"(?:\d{1,20}\.\d{1,20} )?NCCL INFO ", re.ASCII)
_LAUNCHERS = (
    ("stamp", re.compile(r"\[(?P<stamp>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?)\] ?")),
    ("rank", re.compile(r"\[\d+\] ")),  # -prepend-rank; before "stamp other" so [155] is no timestamp
    ("stamp", re.compile(r"\[(?P<stamp>[^\]\[]{1,64})\] ")),  # a custom NCCL_DEBUG_TIMESTAMP_FORMAT
    ("openmpi", re.compile(r"\[\d+,\d+\]<(?:stdout|stderr)>: ?")),
    ("ray", re.compile(r"\((?:[\w.-]+ )?pid=\d+(?:, ip=[0-9A-Fa-f.:]+)?\) ")),
    ("srun", re.compile(r" *\d+: ")),
    ("kubectl", re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d) ")),
    ("pdsh", re.compile(r"[\w.-]+: ")),
)
FOLD_SLACK_NS = 60_000_000_000
"""How far a log's stamps may go back (threads' lines interleaved) before a repeated wall time is read as the
second pass through a fall-back hour, ns."""
_ISO = re.compile(r"^(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)(?:[.,](\d{1,9}))?$")


@dataclass(frozen=True, slots=True)
class NcclLine:
    """An ``NCCL INFO`` line taken apart. ``pid`` and ``dev`` are the digits as written (bounds are the reader's)."""

    host: str
    pid: str
    dev: str
    msg: str
    #: NCCL's ``[timestamp]`` text, None without one.
    stamp: str | None
    #: The launchers whose prefixes were taken off, outermost first ("ray", "srun", ...).
    launchers: tuple[str, ...]
    #: Text before the NCCL prefix that is no known launcher prefix ("" when all was known).
    unknown_prefix: str


def split_line(line: str) -> NcclLine | None:
    """The parts of one log line, None when it holds no ``host:pid:tid [dev] NCCL INFO`` prefix."""
    m = _head(line)
    if m is None:
        return None
    msg = line[m.end():]
    if not m.start():  # no launcher prefix, no NCCL stamp
        return NcclLine(m.group("host"), m.group("pid"), m.group("dev"), msg, None, (), "")
    head = line[:m.start()]
    launchers: list[str] = []
    stamp: str | None = None
    pos = 0
    while pos < len(head):
        for name, rx in _LAUNCHERS:
            lm = rx.match(head, pos)
            if lm is not None and lm.end() > pos:
                launchers.append(name)
                if name == "stamp":
                    stamp = lm.group("stamp")
                pos = lm.end()
                break
        else:
            break
    return NcclLine(m.group("host"), m.group("pid"), m.group("dev"), msg, stamp, tuple(launchers), head[pos:])


def _head(line: str) -> re.Match[str] | None:
    """NCCL's ``host:pid:tid [dev] NCCL INFO `` prefix in ``line``, the first that matches, None without one.

    Found from each ``NCCL INFO`` backwards over at most ``_HEAD_CHARS``, not by searching the whole line: a regex
    search of an unbounded host name from every position costs the square of the line's length, and a captured log
    mixes in whatever the job prints (a 64 KiB progress bar took seconds a line)."""
    at = line.find(_INFO)
    while at >= 0:
        end = at + len(_INFO)
        lo = max(0, at - _HEAD_CHARS)
        m = next((c for c in _NCCL.finditer(line, lo, end) if c.end() == end), None)
        if m is not None:
            return m
        at = line.find(_INFO, end)
    return None


def nccl_zone(name: str | None) -> tzinfo | None:
    """The time zone ``name`` (IANA, e.g. "Europe/Zurich", or "UTC") NCCL's stamps are read in; None for None (this
    process's local zone). ValueError naming it when this system has no such zone."""
    if name is None:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as e:
        raise ValueError(f"no time zone {name!r} on this system (an IANA name such as Europe/Zurich, or UTC)") from e


def timestamp_ns(text: str | None, cache: dict[str, int], zone: tzinfo | None = None, after_ns: int = 0) -> int:
    """ns since the epoch of NCCL's ``YYYY-MM-DD HH:MM:SS[.frac]`` timestamp, 0 when ``text`` is None or another
    format. NCCL writes local time of its host (``localtime_r`` in ``src/debug.cc``): ``zone`` is that host's zone,
    None = this process's local zone (with its daylight-saving rules). ``cache`` holds the seconds already converted
    (lines of one second share them); it must not be shared between zones.

    A wall time the fall-back hour shows twice is read as its first instant unless that would go back more than
    ``FOLD_SLACK_NS`` before ``after_ns`` (the newest stamp read before, 0 = none) and the second would not: a log's
    second pass through that hour (``fold=1``, PEP 495). Such times are not cached: both passes share the text."""
    if not text:
        return 0
    m = _ISO.match(text)
    if m is None:
        return 0
    sec = cache.get(m.group(1))
    if sec is None:
        try:
            wall = datetime.fromisoformat(m.group(1))
            if zone is not None:
                wall = wall.replace(tzinfo=zone)
            sec, second = int(wall.timestamp()), int(wall.replace(fold=1).timestamp())
        except (ValueError, OverflowError, OSError):  # month 13, a year the platform cannot convert
            return 0
        if sec < 0:  # before 1970: no NCCL wrote it, and ns since the epoch must not go negative
            return 0
        if second != sec:
            floor = after_ns - FOLD_SLACK_NS
            if after_ns and sec * 1_000_000_000 < floor <= second * 1_000_000_000:
                sec = second
        else:
            if len(cache) > 4096:
                cache.clear()
            cache[m.group(1)] = sec
    frac = m.group(2) or ""
    return sec * 1_000_000_000 + int(frac.ljust(9, "0")) if frac else sec * 1_000_000_000
