"""Located YAML config files: read one, parse it once, and say ``file:line: place: problem``.

Every YAML file a user writes (topology, collector config) is read and checked the same way:
:func:`read_text` reads it (``no such file`` / ``cannot read``), :func:`parse_yaml` parses it in
one pass (libyaml's ``CSafeLoader`` when PyYAML has it) and keeps the node tree as a
:class:`LineIndex`, and :func:`format_validation_errors` turns a pydantic ``ValidationError`` into
one line per error naming the file, the line, the field and the problem. Each caller keeps its own exception
class: the functions here raise the ``error`` type they are given.

Files are written by people and sometimes by attackers, so :func:`parse_yaml` bounds what a document may
cost before anything is built from it: its size (``MAX_BYTES``), its nesting (``MAX_DEPTH``: a deeply nested
document would otherwise overflow the C composer's stack and kill the process) and the nodes it expands to
through aliases (``MAX_NODES``: a few KB of nested aliases expand to billions of nodes when validated), all
checked on the event stream, which the parser produces without recursion; and it rejects a key given twice in
one mapping (YAML keeps the last silently, so a second ``hosts:`` block would drop the first).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MAX_BYTES = 16 * 1024 * 1024
"""Largest YAML file accepted (bytes of text): a 4,096-host topology is about 1 MB."""
MAX_DEPTH = 64
"""Deepest nesting of mappings and sequences accepted (a topology needs 5)."""
MAX_NODES = 2_000_000
"""Most nodes a document may expand to, counting every use of an alias in full."""

ErrorType = Callable[[str], Exception]
"""What the functions here raise: called with the one-line message (e.g. ``TopologyError``)."""


def read_text(path: Path, error: ErrorType) -> str:
    """The UTF-8 text of *path*; raises *error* ``"<path>: no such file"`` or
    ``"<path>: cannot read: <why>"``."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise error(f"{path}: cannot read: {e}") from None


def parse_yaml(text: str, source: str, error: ErrorType, *, column: bool = True) -> tuple[Any, LineIndex]:
    """Parse one YAML document: (data, its line index); data is None for an empty document.

    A syntax error raises *error* ``"<source>:<line>[:<column>]: YAML syntax error: <problem>"``
    (the column only when *column*); any other YAML error ``"<source>: YAML error: <error>"``.
    """
    if len(text) > MAX_BYTES:
        raise error(f"{source}: {len(text)} characters is too large for a YAML file (the limit is {MAX_BYTES})")
    try:
        check_bounds(text, source, error)
        # One pass: the node tree gives line numbers, the data is constructed from it.
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
            check_duplicate_keys(node, source, error)
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        where = source
        if mark:
            where = f"{source}:{mark.line + 1}:{mark.column + 1}" if column else f"{source}:{mark.line + 1}"
        raise error(f"{where}: YAML syntax error: {e.problem}") from None
    except yaml.YAMLError as e:
        raise error(f"{source}: YAML error: {e}") from None
    return data, LineIndex(node)


def check_bounds(text: str, source: str, error: ErrorType) -> None:
    """Raise *error* when the document nests deeper than ``MAX_DEPTH`` or expands (aliases counted in full)
    to more than ``MAX_NODES`` nodes; reads only the event stream (no recursion, nothing built)."""
    sizes: list[int] = []  # expanded node count of each open collection
    anchored: dict[str, int] = {}  # anchor -> expanded node count of its node
    anchors: list[str | None] = []
    total = 0
    loader = _Loader(text)
    try:
        while (event := loader.get_event()) is not None:
            size = 0
            if isinstance(event, yaml.CollectionStartEvent):
                sizes.append(1)
                anchors.append(event.anchor)
                if len(sizes) > MAX_DEPTH:
                    raise error(f"{source}:{event.start_mark.line + 1}: nested deeper than {MAX_DEPTH} levels")
                continue
            if isinstance(event, yaml.CollectionEndEvent):
                size, anchor = sizes.pop(), anchors.pop()
                if anchor is not None:
                    anchored[anchor] = size
            elif isinstance(event, yaml.ScalarEvent):
                size = 1
                if event.anchor is not None:
                    anchored[event.anchor] = 1
            elif isinstance(event, yaml.AliasEvent):
                size = anchored.get(event.anchor, 1)
            else:
                continue
            if sizes:
                sizes[-1] += size
            else:
                total += size
            if total + sum(sizes) > MAX_NODES or size > MAX_NODES:
                raise error(f"{source}:{event.start_mark.line + 1}: expands to more than {MAX_NODES:,} nodes "
                            "(YAML aliases); write the values out")
    finally:
        loader.dispose()


def check_duplicate_keys(root: yaml.Node | None, source: str, error: ErrorType) -> None:
    """Raise *error* ``source:line: duplicate key 'k' (first at line n)`` for a key given twice in a mapping.

    Walks the node tree without recursion and visits each node once (aliases share nodes)."""
    stack = [root] if root is not None else []
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[str, int] = {}
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode):
                    line = k.start_mark.line + 1
                    if k.value in first:
                        raise error(f"{source}:{line}: duplicate key {k.value!r} (first at line {first[k.value]})")
                    first[k.value] = line
                stack.append(v)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)


class LineIndex:
    """Maps a location (keys and list indexes, as pydantic gives them) to its line in the YAML."""

    def __init__(self, root: yaml.Node | None) -> None:
        self.root = root

    def where(self, source: str, loc: tuple[Any, ...]) -> str:
        """``source:line`` of the deepest node of *loc* that exists in the YAML, else ``source``."""
        node, line = self.root, None
        for part in loc:
            if node is None:
                break
            line = node.start_mark.line + 1
            nxt = None
            if isinstance(node, yaml.MappingNode):
                for k, v in node.value:
                    if k.value == str(part):
                        nxt = v
                        line = k.start_mark.line + 1
                        break
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                nxt = node.value[part]
                line = nxt.start_mark.line + 1
            node = nxt
        return f"{source}:{line}" if line else source


def fmt_loc(loc: Iterable[Any]) -> str:
    """``("links", 2, "a")`` -> ``links[2].a``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def located(source: str, loc: tuple[Any, ...], problem: str, lines: LineIndex | None = None,
            *, root: str = "") -> str:
    """``source[:line]: place: problem``; *root* names the place when *loc* is empty."""
    where = lines.where(source, loc) if lines is not None else source
    return f"{where}: {fmt_loc(loc) or root}: {problem}"


def describe_error(err: Mapping[str, Any], *, enum_choices: bool = True) -> tuple[tuple[Any, ...], str]:
    """(location, problem) of one pydantic error (an item of ``ValidationError.errors()``).

    Wording: an unknown key is ``unknown field 'x'``, a missing one ``missing required field 'x'``,
    a bad enum value ``'v' is not one of: a, b`` (only with *enum_choices*; else pydantic's
    ``Input should be ...``); other messages are pydantic's without its ``Value error, `` prefix.
    """
    loc = tuple(err["loc"])
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = f"unknown field {loc[-1]!r}"
    elif err["type"] == "missing":
        msg = f"missing required field {loc[-1]!r}"
    elif enum_choices and err["type"] == "enum":
        msg = f"{err['input']!r} is not one of: {err['ctx']['expected']}"
    return loc, msg


def format_validation_errors(e: ValidationError, source: str, lines: LineIndex | None = None, *,
                             enum_choices: bool = True, root: str = "") -> list[str]:
    """Every error of *e*, each as ``source[:line]: place: problem`` (see :func:`located`, :func:`describe_error`)."""
    out = []
    for err in e.errors():
        loc, msg = describe_error(err, enum_choices=enum_choices)
        out.append(located(source, loc, msg, lines, root=root))
    return out


def format_validation_error(e: ValidationError, source: str, lines: LineIndex | None = None, *,
                            enum_choices: bool = True, root: str = "") -> str:
    """The first error of *e* as ``source[:line]: place: problem`` (see :func:`format_validation_errors`)."""
    return format_validation_errors(e, source, lines, enum_choices=enum_choices, root=root)[0]
