"""gNMI paths: XPath-like strings <-> ``gnmi.Path``, with origin and key wildcards (pure).

The string form is gnmic's: ``[origin:]/elem[key=value][key2=value2]/...``. An origin is read only where the
user wrote one, as gnmic accepts it: a name, a colon and then a ``/`` (``openconfig:/interfaces``,
``sonic-db:/COUNTERS_DB/localhost/...``). A YANG module prefix on an element
(``/openconfig-interfaces:interfaces/interface[name=*]``, ``oc-if:interface``) stays on the element, as the gNMI
path encoding carries it: an element is any UTF-8 string (openconfig/reference
``rpc/gnmi/gnmi-path-conventions.md``, "Constructing paths"), and an origin names a whole schema tree, which a
module namespace is not (``rpc/gnmi/gnmi-specification.md`` 2.7.2: "origin is distinct from namespace"). Turning
``openconfig-interfaces:`` into an origin, as pygnmi's parser does, sends an origin the switch does not serve.

Key values may hold ``/`` and ``=`` (``[name=Ethernet1/1]``; a value is split from its key at the first ``=``);
``\\]``, ``\\[`` and ``\\\\`` escape brackets and backslashes inside a value.
"""

from __future__ import annotations

import re

from pygnmi.spec.v080.gnmi_pb2 import Path

_ORIGIN = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*):(?=/)")
_KEY_NAME = re.compile(r"^[^\[\]=\s]+$")


def _elements(body: str, text: str) -> list[tuple[str, dict[str, str]]]:
    """``a/b[k=v]/c`` -> [(name, keys)], splitting on ``/`` outside brackets."""
    out: list[tuple[str, dict[str, str]]] = []
    name, keys = "", {}
    i, n = 0, len(body)
    while i < n:
        ch = body[i]
        if ch == "/":
            if name or keys:
                out.append((name, keys))
            elif out or i:  # an empty element between two slashes
                raise ValueError(f"path {text!r} has an empty element")
            name, keys = "", {}
            i += 1
        elif ch == "[":
            j, sel = i + 1, ""
            while j < n and body[j] != "]":
                if body[j] == "\\" and j + 1 < n:
                    j += 1
                elif body[j] == "[":
                    raise ValueError(f"unbalanced brackets in path {text!r}")
                sel += body[j]
                j += 1
            if j >= n:
                raise ValueError(f"unbalanced brackets in path {text!r}")
            key, eq, value = sel.partition("=")
            if not eq or not value or not _KEY_NAME.match(key):
                raise ValueError(f"bad key selector [{sel}] in path {text!r}: expected [name=value] or [name=*]")
            if not name:
                raise ValueError(f"key selector [{sel}] without an element name in path {text!r}")
            keys[key] = value
            i = j + 1
        elif ch == "]":
            raise ValueError(f"unbalanced brackets in path {text!r}")
        else:
            if keys:
                raise ValueError(f"path {text!r}: {ch!r} after a key selector (a '/' is missing)")
            name += ch
            i += 1
    if name or keys:
        out.append((name, keys))
    return out


def parse_path(text: str) -> Path:
    """Parse ``[origin:]/elem[key=value]/...`` into a ``gnmi.Path``; ValueError says what is wrong."""
    s = text.strip()
    if not s:
        raise ValueError("empty path")
    path = Path()
    m = _ORIGIN.match(s)
    if m:
        path.origin = m.group(1)
        s = s[m.end():]
    for name, keys in _elements(s, text):
        path.elem.add(name=name, key=keys)
    if not path.elem and not path.origin:
        raise ValueError(f"path {text!r} has no elements")
    return path


def format_path(path: Path, prefix: Path | None = None) -> str:
    """``origin:/a/b[k=v]`` text of ``prefix + path`` (for logs and error messages); a prefix target is shown as
    ``target=<name>`` before it."""
    elems = list(prefix.elem) if prefix is not None else []
    elems += list(path.elem)
    origin = path.origin or (prefix.origin if prefix is not None else "")
    parts = []
    for e in elems:
        keys = "".join(f"[{k}={_escape(v)}]" for k, v in sorted(e.key.items()))
        parts.append(f"{e.name}{keys}")
    body = "/" + "/".join(parts)
    text = f"{origin}:{body}" if origin else body
    target = prefix.target if prefix is not None else ""
    return f"target={target} {text}" if target else text


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("]", "\\]").replace("[", "\\[")
