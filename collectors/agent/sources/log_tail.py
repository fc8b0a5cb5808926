"""Follows append-only log files (NCCL_DEBUG_FILE) like ``tail -F``: rotation, truncation, partial lines.

Bounded: a line still being written is held back up to ``max_line_bytes`` (64 KiB); a longer one is
dropped up to its newline and counted (:meth:`LogTail.take_dropped`; the agent reports it as a
malformed record). ``GlobTail`` forgets the files that are gone and follows at most ``max_files``.

Reads come as chunks (:class:`LogChunk`) that say which file and line they start at (so a bad line is reported as
``file:line``) and whether they are *history*: with ``catch_up``, what a file already held when the agent first
read it. History is read for the state it describes (NCCL communicators and QP connections made before the agent
started, which NCCL logs only once) but is not news: its COLL calls are not this window's calls. So an agent
that restarts resumes its events at the end of every log, never re-counting old calls, and a line that once
upset it is at most parsed again as history, where every number is bounded and each line guarded (nccl_log.py).
"""

from __future__ import annotations

import glob
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 64 << 10
"""Longest line held back while it is being written; a longer one is dropped and counted."""
MAX_FILES = 1024
"""Files a ``GlobTail`` follows at once."""


@dataclass(slots=True)
class LogChunk:
    """Consecutive complete lines of one file: ``lines[i]`` is line ``first_line + i`` of ``path`` (1-based; lines
    dropped as over-long are counted in the numbering). ``history``: lines the file held before the agent first
    read it (``LogTail.catch_up``)."""

    path: str
    first_line: int
    lines: list[str] = field(default_factory=list)
    history: bool = False


class LogTail:
    """New complete lines of one file since the last read.

    A line still being written (no trailing newline yet) is held back until it is complete (up to
    ``max_line_bytes``: a longer line is dropped up to its newline, counted in ``dropped``). A
    file that was replaced (new inode) or truncated is read again from its start. A missing file
    yields nothing until it appears.
    """

    def __init__(self, path: Path, max_bytes: int = 16 << 20, max_line_bytes: int = MAX_LINE_BYTES,
                 catch_up: bool = False) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.max_line_bytes = max_line_bytes
        #: Whether what the file holds at the first read is history (``LogChunk.history``).
        self.catch_up = catch_up
        self._history_end = -1  # byte offset up to which complete lines are history; set at the first read
        self._line = 0  # lines of the current file consumed (returned or dropped)
        self._inode: tuple[int, int] | None = None
        self._offset = 0
        self._partial = b""
        self._skipping = False  # inside a dropped over-long line, until its newline
        #: Over-long lines dropped (cumulative).
        self.dropped = 0
        self._taken = 0

    def take_dropped(self) -> int:
        """Lines dropped since the previous call."""
        n, self._taken = self.dropped - self._taken, self.dropped
        return n

    def read_lines(self) -> list[str]:
        """Complete lines appended since the previous call (decoded as UTF-8, invalid bytes replaced)."""
        return [line for c in self.read_chunks() for line in c.lines]

    def read_chunks(self) -> list[LogChunk]:
        """``read_lines`` as chunks with their file and line numbers: a history chunk first, if any, then the
        rest (none when nothing was appended)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return []
        if self._history_end < 0:  # the first read: what the file holds now is history when catching up
            self._history_end = st.st_size if self.catch_up else 0
        ident = (st.st_dev, st.st_ino)
        if ident != self._inode or st.st_size < self._offset:
            if self._inode is not None:  # replaced or truncated since: what it holds now is new
                self._history_end = 0
            self._inode, self._offset, self._partial, self._skipping, self._line = ident, 0, b"", False, 0
        if st.st_size == self._offset:
            return []
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read(self.max_bytes)
        except OSError:
            return []
        start = self._offset - len(self._partial)  # byte offset of the first line in ``data`` below
        self._offset += len(data)
        if self._skipping:
            nl = data.find(b"\n")
            if nl < 0:
                return []
            data, self._skipping = data[nl + 1:], False
            self._line += 1
            start = self._offset - len(data)
        data = self._partial + data
        end = data.rfind(b"\n")
        self._partial = data[end + 1:]
        if len(self._partial) > self.max_line_bytes:
            self.dropped += 1
            if self.dropped <= 3:
                log.warning("%s: a line longer than %d bytes; dropped and counted as malformed", self.path,
                            self.max_line_bytes)
            self._partial, self._skipping = b"", True
        if end < 0:
            return []
        old, new = LogChunk(str(self.path), 0, history=True), LogChunk(str(self.path), 0)
        for raw in data[:end].split(b"\n"):
            self._line += 1
            start += len(raw) + 1
            if len(raw) > self.max_line_bytes:  # complete, but as long as one never held back: the same rule
                self.dropped += 1
                continue
            chunk = old if start <= self._history_end else new
            if not chunk.first_line:
                chunk.first_line = self._line
            chunk.lines.append(raw.decode("utf-8", "replace"))
        return [c for c in (old, new) if c.lines]


class GlobTail:
    """``LogTail`` over every file matching a glob (e.g. ``/var/log/nccl/nccl.%h.%p`` -> ``nccl.*``),
    picking up files that appear later and forgetting the ones that are gone (deleted or renamed
    away). At most ``max_files`` are followed (the first by name); ``skipped_files`` says how many
    matching files the last read left out."""

    def __init__(self, pattern: str, max_files: int = MAX_FILES, max_line_bytes: int = MAX_LINE_BYTES,
                 catch_up: bool = False) -> None:
        self.pattern = pattern
        self.max_files = max_files
        self.max_line_bytes = max_line_bytes
        #: The files matching at the first read are caught up on (``LogTail.catch_up``); later ones are new.
        self.catch_up = catch_up
        self._first = True
        self._tails: dict[str, LogTail] = {}
        self.skipped_files = 0
        self._dropped = 0  # lines dropped by tails since the previous take_dropped

    def read_lines(self) -> list[str]:
        """Complete lines appended to any matching file since the previous call."""
        return [line for c in self.read_chunks() for line in c.lines]

    def read_chunks(self) -> list[LogChunk]:
        """The new lines of every matching file, as chunks (``LogTail.read_chunks``)."""
        names = sorted(glob.glob(self.pattern))
        skipped = max(0, len(names) - self.max_files)
        if skipped and not self.skipped_files:
            log.warning("%s: %d files match; following the first %d by name", self.pattern, len(names), self.max_files)
        self.skipped_files = skipped
        live = set(names[:self.max_files])
        for name in [n for n in self._tails if n not in live]:
            self._dropped += self._tails.pop(name).take_dropped()
        for name in names[:self.max_files]:
            if name not in self._tails:
                self._tails[name] = LogTail(Path(name), max_line_bytes=self.max_line_bytes,
                                            catch_up=self.catch_up and self._first)
        self._first = False
        out: list[LogChunk] = []
        for t in self._tails.values():
            out.extend(t.read_chunks())
        return out

    def take_dropped(self) -> int:
        """Over-long lines dropped since the previous call, over every file."""
        n = self._dropped + sum(t.take_dropped() for t in self._tails.values())
        self._dropped = 0
        return n
