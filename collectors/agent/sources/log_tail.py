"""Follows append-only log files (NCCL_DEBUG_FILE) like ``tail -F``: rotation, truncation, partial lines."""

from __future__ import annotations

import glob
import os
from pathlib import Path


class LogTail:
    """New complete lines of one file since the last read.

    A line still being written (no trailing newline yet) is held back until it is complete. A
    file that was replaced (new inode) or truncated is read again from its start. A missing file
    yields nothing until it appears.
    """

    def __init__(self, path: Path, max_bytes: int = 16 << 20) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self._inode: tuple[int, int] | None = None
        self._offset = 0
        self._partial = b""

    def read_lines(self) -> list[str]:
        """Complete lines appended since the previous call (decoded as UTF-8, invalid bytes replaced)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return []
        ident = (st.st_dev, st.st_ino)
        if ident != self._inode or st.st_size < self._offset:
            self._inode, self._offset, self._partial = ident, 0, b""
        if st.st_size == self._offset:
            return []
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read(self.max_bytes)
        except OSError:
            return []
        self._offset += len(data)
        data = self._partial + data
        end = data.rfind(b"\n")
        if end < 0:
            self._partial = data
            return []
        self._partial = data[end + 1:]
        return data[:end].decode("utf-8", "replace").split("\n")


class GlobTail:
    """``LogTail`` over every file matching a glob (e.g. ``/var/log/nccl/nccl.%h.%p`` -> ``nccl.*``),
    picking up files that appear later."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._tails: dict[str, LogTail] = {}

    def read_lines(self) -> list[str]:
        for name in sorted(glob.glob(self.pattern)):
            if name not in self._tails:
                self._tails[name] = LogTail(Path(name))
        out: list[str] = []
        for t in self._tails.values():
            out.extend(t.read_lines())
        return out
