"""Real gNMI dumps (tests/fixtures/real/gnmi/, cited in its SOURCES.md) -> the ``gnmi.Notification`` messages the
switch sent, whatever tool printed them.

Each tool prints a notification its own way; the file's suffix says which, and the reading undoes only that
printing (typed values as the tool shows them: a JSON object is JSON_IETF, text is a string, a whole number is a
uint, true/false a bool):

* ``.get.textproto``: protobuf text of a GetResponse (gnmi_get's ``== getResponse:`` block);
* ``.gnmic-get.json`` / ``.gnmic-sub.json``: gnmic's default format, JSON objects with ``prefix``,
  ``updates[].Path`` and ``updates[].values`` (one value per update), one after another or in a list;
* ``.gnmic-event.json``: gnmic's event format (``values`` by key-less path, keys as ``<elem>_<key>`` tags);
* ``.pygnmi-get.json``: pygnmi's ``get()`` dict (``notification[].update[].path / val``);
* ``.pygnmi-sub.txt``: pygnmi's ``telemetryParser`` dicts, one Python literal per line.

A file of another suffix raises: a new kind of dump is never skipped silently.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from google.protobuf import text_format
from pygnmi.spec.v080.gnmi_pb2 import GetResponse, Notification, TypedValue

from flowtracer.collectors.gnmi.counters.paths import parse_path

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real" / "gnmi"
SUFFIXES = (".get.textproto", ".gnmic-get.json", ".gnmic-sub.json", ".gnmic-event.json", ".pygnmi-get.json",
            ".pygnmi-sub.txt")


def typed(v: Any) -> TypedValue:
    """A value as the tool printed it, back in the TypedValue it stands for."""
    if isinstance(v, dict | list):
        return TypedValue(json_ietf_val=json.dumps(v).encode())
    if isinstance(v, bool):
        return TypedValue(bool_val=v)
    if isinstance(v, int):
        return TypedValue(uint_val=v) if v >= 0 else TypedValue(int_val=v)
    if isinstance(v, float):
        return TypedValue(double_val=v)
    return TypedValue(string_val=str(v))


def _json_values(text: str) -> list[Any]:
    """Every JSON value in ``text``, one after another (gnmic prints one object per response); a character
    no value starts at is skipped (the Arista page's stray ``[``)."""
    dec, out, i = json.JSONDecoder(), [], 0
    while i < len(text):
        if text[i] in "[{":
            try:
                v, i = dec.raw_decode(text, i)
            except ValueError:
                i += 1
                continue
            out += v if isinstance(v, list) else [v]
        else:
            i += 1
    return out


def _gnmic(obj: dict[str, Any]) -> Notification:
    n = Notification(timestamp=int(obj.get("timestamp", 0)))
    if obj.get("prefix"):
        n.prefix.CopyFrom(parse_path(obj["prefix"]))
    for u in obj.get("updates", []):
        (value,) = u["values"].values()
        n.update.add(path=parse_path(u["Path"]), val=typed(value))
    return n


def _event(ev: dict[str, Any]) -> Notification:
    n = Notification(timestamp=int(ev["timestamp"]))
    keys = {k: v for k, v in ev.get("tags", {}).items() if k not in ("source", "subscription-name")}
    for text, value in ev["values"].items():
        path = parse_path(text)
        for tag, kv in keys.items():
            elem, _, key = tag.rpartition("_")
            for e in path.elem:
                if e.name == elem:
                    e.key[key] = kv
        n.update.add(path=path, val=typed(value))
    return n


def notifications(file: Path) -> list[Notification]:
    """The notifications of one dump; ValueError for a suffix this reader does not know."""
    name, text = file.name, file.read_text(encoding="utf-8")
    if name.endswith(".get.textproto"):
        return list(text_format.Parse(text, GetResponse()).notification)
    if name.endswith((".gnmic-get.json", ".gnmic-sub.json")):
        return [_gnmic(o) for o in _json_values(text)]
    if name.endswith(".gnmic-event.json"):
        return [_event(e) for e in _json_values(text)]
    if name.endswith(".pygnmi-get.json"):
        out = []
        for n in json.loads(text)["notification"]:
            note = Notification(timestamp=int(n.get("timestamp", 0)))
            for u in n["update"]:
                note.update.add(path=parse_path(u["path"]), val=typed(u["val"]))
            out.append(note)
        return out
    if name.endswith(".pygnmi-sub.txt"):
        out = []
        for line in text.splitlines():
            d = ast.literal_eval(line)
            if "update" in d:
                u = d["update"]
                note = Notification(timestamp=int(u.get("timestamp", 0)))
                for x in u["update"]:
                    note.update.add(path=parse_path(x["path"]), val=typed(x["val"]))
                out.append(note)
        return out
    raise ValueError(f"{file}: no reader for this kind of dump (known: {', '.join(SUFFIXES)})")
