"""Follows append-only log files (NCCL_DEBUG_FILE) like ``tail -F``: rotation, truncation, partial lines.

Bounded: a line still being written is held back up to ``max_line_bytes`` (64 KiB); a longer one is
dropped up to its newline and counted (:meth:`LogTail.take_dropped`; the agent reports it as a
malformed record). ``GlobTail`` forgets the files that are gone and follows at most ``max_files``.
"""

from __future__ import annotations

import glob
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 64 << 10
"""Longest line held back while it is being written; a longer one is dropped and counted."""
MAX_FILES = 1024
"""Files a ``GlobTail`` follows at once."""


class LogTail:
    """New complete lines of one file since the last read.

    A line still being written (no trailing newline yet) is held back until it is complete (up to
    ``max_line_bytes``: a longer line is dropped up to its newline, counted in ``dropped``). A
    file that was replaced (new inode) or truncated is read again from its start. A missing file
    yields nothing until it appears.
    """

    def __init__(self, path: Path, max_bytes: int = 16 << 20, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.max_line_bytes = max_line_bytes
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
        try:
            st = os.stat(self.path)
        except OSError:
            return []
        ident = (st.st_dev, st.st_ino)
        if ident != self._inode or st.st_size < self._offset:
            self._inode, self._offset, self._partial, self._skipping = ident, 0, b"", False
        if st.st_size == self._offset:
            return []
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read(self.max_bytes)
        except OSError:
            return []
        self._offset += len(data)
        if self._skipping:
            nl = data.find(b"\n")
            if nl < 0:
                return []
            data, self._skipping = data[nl + 1:], False
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
        lines = data[:end].split(b"\n")
        long = [i for i, line in enumerate(lines) if len(line) > self.max_line_bytes]
        if long:  # complete, but as long as one never held back: the same rule
            self.dropped += len(long)
            lines = [line for line in lines if len(line) <= self.max_line_bytes]
        return [line.decode("utf-8", "replace") for line in lines]


class GlobTail:
    """``LogTail`` over every file matching a glob (e.g. ``/var/log/nccl/nccl.%h.%p`` -> ``nccl.*``),
    picking up files that appear later and forgetting the ones that are gone (deleted or renamed
    away). At most ``max_files`` are followed (the first by name); ``skipped_files`` says how many
    matching files the last read left out."""

    def __init__(self, pattern: str, max_files: int = MAX_FILES, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.pattern = pattern
        self.max_files = max_files
        self.max_line_bytes = max_line_bytes
        self._tails: dict[str, LogTail] = {}
        self.skipped_files = 0
        self._dropped = 0  # lines dropped by tails since the previous take_dropped

    def read_lines(self) -> list[str]:
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
                self._tails[name] = LogTail(Path(name), max_line_bytes=self.max_line_bytes)
        out: list[str] = []
        for t in self._tails.values():
            out.extend(t.read_lines())
        return out

    def take_dropped(self) -> int:
        """Over-long lines dropped since the previous call, over every file."""
        n = self._dropped + sum(t.take_dropped() for t in self._tails.values())
        self._dropped = 0
        return n
