"""What can still be read from ``rdma`` output that is not one valid JSON document (pure).

Two shapes reach the agent in the field:

* **Damaged JSON.** iproute2's ``rdma -j -dd resource show qp`` closed each QP's JSON object before printing its
  driver details (``newline_indent`` closed the object), so the ``"drv_*"`` pairs landed outside any object and
  the closing brackets no longer matched: invalid JSON, fixed by iproute2 commit a903854b ("rdma: do not mix
  newline and json object", January 2024, iproute2 6.8). A process killed mid-print, or a doc's ``...``, leaves
  the same kind of damage. Each entry iproute2 prints starts with ``{"ifindex"`` (``print_link`` /
  ``print_dev``), so every such start is decoded on its own: a complete object is *salvaged*, one that does not
  decode is *lost*. The whole document is never dropped for the damage of a part.
* **Text.** ``rdma resource show qp`` without ``-j`` prints one line per QP, ``link mlx5_0/1 lqpn 9 pdn 4 rqpn 0
  type RC state INIT rq-psn 0 sq-psn 0 path-mig-state MIGRATED pid 548 comm ibv_rc_pingpong`` (iproute2 commit
  96f59e7f's message; kernel QPs' ``comm`` in brackets, ``-`` for a port not yet bound): read as the same keys.
  A line in neither shape is lost, and counted.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

_ENTRY_START = re.compile(r'\{\s*"ifindex"')
_TEXT_LINE = re.compile(r"^(link|dev)\s")


class Salvaged(NamedTuple):
    """Entries read from a document that was not valid JSON, and how many entry starts could not be read."""

    entries: list[dict[str, Any]]
    lost: int


def _number(v: str) -> int | str:
    return int(v) if v.isascii() and v.isdigit() and len(v) <= 20 else v


def text_entries(text: str) -> Salvaged | None:
    """The entries of ``rdma``'s text output (``link DEV/PORT key value ...`` per line), None when ``text`` is not
    in that shape (its first non-empty line does not start with ``link`` or ``dev``)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines or not _TEXT_LINE.match(lines[0]):
        return None
    out: list[dict[str, Any]] = []
    lost = 0
    for line in lines:
        tok = line.split()
        if len(tok) < 2 or tok[0] not in ("link", "dev") or len(tok) % 2:
            lost += 1
            continue
        dev, _, port = tok[1].partition("/")
        entry: dict[str, Any] = {"ifname": dev}
        if tok[0] == "link":
            entry["port"] = 0 if port in ("", "-") else _number(port)
        for k, v in zip(tok[2::2], tok[3::2], strict=True):
            entry[k] = v[1:-1] if k == "comm" and v.startswith("[") and v.endswith("]") else _number(v)
        out.append(entry)
    return Salvaged(out, lost)


def json_entries(text: str) -> Salvaged:
    """Every complete ``{"ifindex": ...}`` object of a damaged ``rdma -j`` document; ``lost`` counts the starts
    that do not decode (and is 1 when there is no entry start at all: nothing of the document was readable)."""
    dec = json.JSONDecoder()
    out: list[dict[str, Any]] = []
    lost = 0
    pos = 0
    while (m := _ENTRY_START.search(text, pos)) is not None:
        try:
            obj, end = dec.raw_decode(text, m.start())
        except (ValueError, RecursionError):
            lost += 1
            pos = m.end()
            continue
        out.append(obj)
        pos = end
    if not out and not lost:
        lost = 1
    return Salvaged(out, lost)


def salvage(raw: str | bytes) -> Salvaged:
    """Entries of ``rdma`` output that ``json.loads`` rejected: its text form, or the complete objects of damaged
    JSON."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    found = text_entries(text)
    return found if found is not None else json_entries(text)
