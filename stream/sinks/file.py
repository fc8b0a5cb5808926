"""The ``file`` sink: line protocol appended to a local file that ``influx write --file`` loads.

This is the demo's output when no InfluxDB runs: one point per line, ns timestamps (``influx
write``'s default precision), in the order written::

    influx write --bucket flowtracer --file flowtracer.lp

Durability: :meth:`FileSink.durable` flushes and (by default) fsyncs before it answers True, so
fsyncs are paid once per commit, not per write. A crash can leave a torn last line; it was never
durable, so the next :class:`FileSink` on the same path cuts it off (the processor replays those
points) and ``influx write`` never sees half a line.

Bounded: once the file holds ``max_bytes`` (1 GiB by default), it is rotated like logrotate does,
at a durable boundary: everything written is flushed (and fsynced), ``path`` becomes ``path.1``
(``path.1`` becomes ``path.2`` ...), and writing goes on in a fresh ``path``. At most ``keep``
rotated files are kept; the oldest is deleted and counted (``deleted_files``, with its size in
``deleted_bytes``), so the disk holds at most about ``(keep + 1) x max_bytes``. Load rotated files
before they age out (``influx write --file path.1``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from flowtracer.stream.sinks.base import Rejected, SinkFailed, check_lines

log = logging.getLogger(__name__)

_TAIL_CHUNK = 64 * 1024  # bytes read at a time when looking for the last complete line


class FileSinkConfig(BaseModel):
    """Config of the ``file`` sink."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: Path
    """The line-protocol file; created with its parent directories, appended to if it exists."""
    fsync: bool = True
    """Durable = on disk (fsync). False: durable once handed to the OS (survives a processor
    crash, not a power loss) and much cheaper on slow disks."""
    max_bytes: int = Field(1 << 30, ge=1)
    """Size at which the file is rotated (bytes); one write larger than this still goes in whole."""
    keep: int = Field(3, ge=0)
    """Rotated files kept (``path.1`` newest ... ``path.<keep>``); 0: the full file is deleted."""


def _cut_torn_tail(fd: int, size: int) -> int:
    """Size of the file when cut after its last newline (0 when it has none)."""
    end = size
    while end > 0:
        start = max(0, end - _TAIL_CHUNK)
        chunk = os.pread(fd, end - start, start)
        nl = chunk.rfind(b"\n")
        if nl >= 0:
            return start + nl + 1
        end = start
    return 0


class FileSink:
    """Appends line protocol to :attr:`FileSinkConfig.path`; see the module docstring.

    Tickets count lines written through this instance. Writes go to a userspace buffer and are
    flushed (and fsynced) when :meth:`durable` is asked about lines not yet on disk, or at close.
    Local disks do not apply backpressure here; an I/O error (disk full) fails the sink.
    """

    name: ClassVar[str] = "file"
    Config: ClassVar[type[FileSinkConfig]] = FileSinkConfig

    def __init__(self, config: FileSinkConfig) -> None:
        self.config = config
        config.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = config.path.open("a+b")  # readable too, to find a torn tail
        size = self._file.seek(0, os.SEEK_END)
        keep = _cut_torn_tail(self._file.fileno(), size) if size else 0
        if keep != size:
            log.warning("%s: cut %d bytes of a torn last line (never durable; they are replayed)",
                        config.path, size - keep)
            self._file.truncate(keep)
        self._size = keep
        #: Rotations done, and rotated files (and their bytes) deleted because more than ``keep``.
        self.rotations = 0
        self.deleted_files = 0
        self.deleted_bytes = 0
        self._written = 0  # lines handed to the buffer
        self._synced = 0  # lines flushed (and fsynced)
        self._failure: str | None = None
        self._closed = False

    def write(self, lines: Sequence[str]) -> int:
        """Append *lines*; returns the ticket of the last one. Raises :class:`SinkFailed` on an
        I/O error or after close, ValueError for a line with a line break."""
        self.raise_if_failed()
        if self._closed:
            raise SinkFailed(f"file sink {self.config.path} is closed")
        if not lines:
            return self._written
        check_lines(lines)
        data = ("\n".join(lines) + "\n").encode()
        try:
            if self._size and self._size + len(data) > self.config.max_bytes:
                self._rotate()
            self._file.write(data)
        except OSError as e:
            self._fail(f"cannot write {self.config.path}: {e.strerror or e}")
            raise SinkFailed(self._failure) from None
        self._size += len(data)
        self._written += len(lines)
        return self._written

    def _rotate(self) -> None:
        """Make everything written durable, shift ``path`` to ``path.1`` (and so on, deleting the
        oldest beyond ``keep``) and reopen an empty ``path``. Raises OSError."""
        self._file.flush()
        if self.config.fsync:
            os.fsync(self._file.fileno())
        self._file.close()
        self._synced = self._written  # what was written is on disk, in the rotated file
        path, keep = self.config.path, self.config.keep
        oldest = path.with_name(f"{path.name}.{keep}") if keep else path
        if oldest.exists():
            self.deleted_bytes += oldest.stat().st_size
            self.deleted_files += 1
            oldest.unlink()
            log.warning("file sink %s: deleted %s (more than keep=%d rotated files)", path, oldest, keep)
        for i in range(keep - 1, 0, -1):
            older = path.with_name(f"{path.name}.{i}")
            if older.exists():
                older.rename(path.with_name(f"{path.name}.{i + 1}"))
        if keep:
            path.rename(path.with_name(f"{path.name}.1"))
        self._file = path.open("a+b")
        self._size = 0
        self.rotations += 1

    def _sync(self) -> None:
        try:
            self._file.flush()
            if self.config.fsync:
                os.fsync(self._file.fileno())
        except OSError as e:
            self._fail(f"cannot flush {self.config.path}: {e.strerror or e}")
        else:
            self._synced = self._written

    def durable(self, ticket: int) -> bool:
        """Whether lines up to *ticket* are on disk; flushes and fsyncs when they might not be."""
        if ticket > self._synced and self._failure is None and not self._closed:
            self._sync()
        return ticket <= self._synced

    def raise_if_failed(self) -> None:
        if self._failure is not None:
            raise SinkFailed(self._failure)

    def take_rejected(self) -> list[Rejected]:
        """A local file refuses nothing line by line (a failure fails the sink)."""
        return []

    def _fail(self, why: str) -> None:
        if self._failure is None:
            self._failure = why
            log.error("file sink failed: %s", why)

    def close(self, timeout: float = 10.0) -> None:
        """Flush, fsync and close the file (*timeout* is not needed for a local file)."""
        if self._closed:
            return
        if self._failure is None:
            self._sync()
        self._closed = True
        try:
            self._file.close()  # nothing left in the buffer after a successful sync
        except OSError as e:
            self._fail(f"cannot close {self.config.path}: {e.strerror or e}")

    def __repr__(self) -> str:
        return f"FileSink(path={str(self.config.path)!r}, written={self._written}, durable={self._synced})"
